"""``doppler place`` on a pipeline workload scores every placement under the workload's own config."""

from __future__ import annotations

import pytest

import doppler_gym as dg
from tests.doppler_gym.cli.cli_helpers import run

pytest.importorskip("torch", reason="the policy needs torch, from the agents extra: pip install -e '.[agents]'")


def test_place_uses_the_pipeline_config(capsys):
    # unit costs: raw time units (not seconds) and the fixed queue order; with no communication the best
    # placement of 2 stages x 4 microbatches reaches the work bound, (F + B) m p / 2 = 3 * 4 = 12 units
    spec = "pipeline:stages=2,microbatches=4,schedule=1f1b,unit_costs=true"
    code, out, err = run(capsys, "place", spec, "--devices", "2")
    assert code == 0, err
    assert "cost units" in out
    g = dg.instances.resolve_graph(spec)
    assert dg.instances.default_config(g) == dg.SimConfig(cost_model="raw", queue_order="fixed")
    makespan = float(out.split("makespan")[1].split()[0])
    assert makespan >= g.flops.sum() / 2 == 12.0
