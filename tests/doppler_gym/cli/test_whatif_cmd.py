"""``doppler whatif``: makespans with and without stragglers and each one's cost, against
:func:`doppler_gym.sim.whatif_analysis.whatif` called directly; straggler specs; one-line errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.cli.whatif_cmd import parse_straggler
from doppler_gym.sim.stragglers import Straggler, StragglerModel
from doppler_gym.sim.whatif_analysis import whatif
from tests.doppler_gym.cli.cli_helpers import error_line, run


def test_whatif_file_assignment_matches_the_library(capsys, tmp_path):
    g = dg.load_graph("paper/chainmm")
    a = np.arange(g.n_ops) % 4
    path = tmp_path / "a.json"
    path.write_text(json.dumps(a.tolist()))
    out_json = tmp_path / "w.json"
    code, out, err = run(capsys, "whatif", "paper/chainmm", "--assignment", str(path),
                         "--straggler", "device:1@0-infx0.5", "--straggler", "link:0>2@1.5-2.5x0.25",
                         "--json", str(out_json))
    assert code == 0, err
    s = (Straggler("device", 1, 0.0, math.inf, 0.5), Straggler("link", (0, 2), 1.5, 2.5, 0.25))
    expect = whatif(g, a, config=dg.SimConfig.reference(), stragglers=s)
    data = json.loads(out_json.read_text())
    assert data["makespan"] == expect.makespan and data["nominal_makespan"] == expect.nominal_makespan
    assert [x["cost"] for x in data["stragglers"]] == expect.cost.tolist()
    assert data["stragglers"][0]["end"] is None and data["stragglers"][1]["index"] == [0, 2]
    assert f"{expect.slowdown:.4f}x" in out and "device:1@0-infx0.5" in out and "link:0>2@1.5-2.5x0.25" in out
    assert expect.makespan > expect.nominal_makespan


def test_whatif_baseline_percent_times_and_random_model(capsys, tmp_path):
    out_json = tmp_path / "w.json"
    code, out, err = run(capsys, "whatif", "paper/ffnn", "--assignment", "round-robin", "--straggler",
                         "device:0@25%-75%x0.5", "--straggler", "random:device_rate=1,factor=0.3-0.6,seed=4",
                         "--method", "alone", "--json", str(out_json))
    assert code == 0, err
    g = dg.load_graph("paper/ffnn")
    a = np.arange(g.n_ops) % 4
    cfg = dg.SimConfig.reference()
    nominal = dg.simulate(g, a, config=cfg).makespan
    drawn = StragglerModel(device_rate=1.0, factor=(0.3, 0.6)).draw(4, 4, horizon=nominal)
    s = (Straggler("device", 0, 0.25 * nominal, 0.75 * nominal, 0.5),) + drawn
    expect = whatif(g, a, config=cfg, stragglers=s, method="alone")
    data = json.loads(out_json.read_text())
    assert data["method"] == "alone" and len(data["stragglers"]) == len(s)
    assert [x["cost"] for x in data["stragglers"]] == expect.cost.tolist()
    assert data["makespan"] == expect.makespan


def test_whatif_default_assignment_is_the_critical_path_baseline(capsys, tmp_path):
    out_json = tmp_path / "w.json"
    code, _, err = run(capsys, "whatif", "paper/chainmm", "--straggler", "device:3@0-1x0.1", "--json", str(out_json))
    assert code == 0, err
    g = dg.load_graph("paper/chainmm")
    cp = dg.baselines.run("critical_path", g, 4, dg.SimConfig.reference(), seed=0)
    assert json.loads(out_json.read_text())["assignment"] == np.asarray(cp.assignment).tolist()


def test_parse_straggler_forms():
    topo = dg.Topology.uniform(4)
    assert parse_straggler("device:2@1e-3-2.5x0.5", 10.0, topo) == (Straggler("device", 2, 1e-3, 2.5, 0.5),)
    assert parse_straggler("link:3>1@10%-infx0.5", 10.0, topo) == (Straggler("link", (3, 1), 1.0, math.inf, 0.5),)
    assert parse_straggler("link:3>1@10%-50%x0.25", 10.0, topo) == (Straggler("link", (3, 1), 1.0, 5.0, 0.25),)
    drawn = parse_straggler("random:device_rate=2,link_rate=0.5,duration=0.2-0.3,horizon=7,seed=9", 10.0, topo)
    assert drawn == StragglerModel(2.0, 0.5, (0.2, 0.3), horizon=7.0).draw(topo, 9)


@pytest.mark.parametrize("spec, needle", [
    ("device:1", "expected device:D@START-ENDxFACTOR"),
    ("gpu:1@0-1x0.5", "expected device:D@START-ENDxFACTOR"),
    ("device:a@0-1x0.5", "must be a device id"),
    ("device:1@0-1x1.5", "factor"),
    ("link:0>1@0-infx0", "finite end"),
    ("device:1@0-infx1e-300", "give a finite end or a factor >= 1e-06"),  # was an infinite makespan
    ("random:rate=1", "KEY=VALUE"),
    ("random:duration=a-b", "LOW-HIGH"),
    ("device:9@0-1x0.5", "device 9 is not in 0..3"),
])
def test_whatif_errors_are_one_line(capsys, spec, needle):
    code, _, err = run(capsys, "whatif", "paper/chainmm", "--assignment", "round-robin", "--straggler", spec)
    assert code == 2
    assert needle in error_line(err)


def test_whatif_needs_a_straggler_and_a_known_assignment(capsys):
    code, _, err = run(capsys, "whatif", "paper/chainmm")
    assert code == 2 and "at least one --straggler" in error_line(err)
    code, _, err = run(capsys, "whatif", "paper/chainmm", "--assignment", "nope", "--straggler", "device:0@0-1x0.5")
    assert code == 2 and "neither a baseline" in error_line(err)
