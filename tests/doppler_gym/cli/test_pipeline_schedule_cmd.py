"""A pipeline workload runs as built in ``doppler simulate``/``whatif``, the envs and ``default_config``:
its stages' assignment, its schedule's priorities and ``queue_order="fixed"``, unless the user overrides them.

Hand values (unit costs: F = 1, fused B = 2, split B = W = 1, no communication): GPipe and 1F1B take
(F + B)(m + p - 1) = 3 (m + p - 1), a bubble of (p - 1) / m of the work (Huang et al. 2019; Narayanan et al.
2021); ZB-H1 3m + p - 1, a bubble of (p - 1) / (3m) (Qi et al. 2024); interleaved 1F1B with v chunks of
one unit each 3 v m + 3 (p - 1), a bubble of (p - 1) / (v m).
"""

from __future__ import annotations

import gc
import json
import weakref

import gymnasium as gym
import numpy as np
import pytest

import doppler_gym as dg
from tests.doppler_gym.cli.cli_helpers import run

P, M = 4, 8


def simulate_json(capsys, tmp_path, spec: str, *flags: str) -> dict:
    out = tmp_path / "r.json"
    code, _, err = run(capsys, "simulate", spec, "--json", str(out), *flags)
    assert code == 0, err
    return json.loads(out.read_text())


def unit(schedule: str, **extra: object) -> str:
    params = {"stages": P, "microbatches": M, "schedule": schedule, "unit_costs": "true", **extra}
    return "pipeline:" + ",".join(f"{k}={v}" for k, v in params.items())


@pytest.mark.parametrize(("schedule", "extra", "want"), [
    ("gpipe", {}, 3 * (M + P - 1)),
    ("1f1b", {}, 3 * (M + P - 1)),
    ("zb-h1", {}, 3 * M + P - 1),
    ("interleaved", {"chunks": 2}, 3 * 2 * M + 3 * (P - 1)),
])
def test_simulate_runs_the_schedule(capsys, tmp_path, schedule, extra, want):
    r = simulate_json(capsys, tmp_path, unit(schedule, **extra))
    assert r["makespan"] == want
    assert r["config"]["queue_order"] == "fixed" and r["config"]["cost_model"] == "raw"
    busy = np.array(r["device_busy"])
    v = extra.get("chunks", 1)
    formula = (P - 1) / (M * (3 if schedule == "zb-h1" else v))
    np.testing.assert_allclose((r["makespan"] - busy) / busy, formula, rtol=1e-12)
    w = dg.workloads.build("pipeline", stages=P, microbatches=M, schedule=schedule, unit_costs=True, **extra)
    assert r["assignment"] == w.assignment.tolist()


def test_gpipe_and_1f1b_differ(capsys, tmp_path):
    # Same bubble, so the same makespan with unit costs, but a different order: GPipe runs all forwards first
    gpipe = simulate_json(capsys, tmp_path, unit("gpipe"))
    one = simulate_json(capsys, tmp_path, unit("1f1b"))
    assert gpipe["start"] != one["start"]
    # and with the Llama layers' costs, activations and transfers: GPipe stashes m microbatches, 1F1B p
    small = "stages=4,microbatches=8,layers=4,seq=128,d_model=256,n_heads=4,ffn_hidden=512"
    gp = simulate_json(capsys, tmp_path, f"pipeline:{small},schedule=gpipe", "--memory", "track")
    ob = simulate_json(capsys, tmp_path, f"pipeline:{small},schedule=1f1b", "--memory", "track")
    assert gp["makespan"] != ob["makespan"]
    stash = 128 * 256 * (34 + 5 * 4 * 128 / 256)  # one layer per stage, one sequence
    persistent = np.array(gp["memory"]["persistent_bytes"])
    assert gp["memory"]["persistent_bytes"] == ob["memory"]["persistent_bytes"]
    assert np.all(np.array(gp["memory"]["peak_bytes"]) - persistent >= 8 * stash)
    assert np.array(ob["memory"]["peak_bytes"])[0] - persistent[0] < 5 * stash  # p = 4 stashes + boundaries


def test_user_overrides(capsys, tmp_path):
    spec = unit("1f1b")
    rr = simulate_json(capsys, tmp_path, spec, "--assignment", "round-robin")
    g = dg.instances.resolve_graph(spec)
    assert rr["assignment"] == (np.arange(g.n_ops) % 4).tolist()
    assert rr["config"]["queue_order"] == "fixed"  # the assignment replaced, the schedule's order kept
    fifo = simulate_json(capsys, tmp_path, spec, "--queue-order", "fifo")
    w = dg.workloads.build("pipeline", stages=P, microbatches=M, schedule="1f1b", unit_costs=True)
    want = dg.simulate(w.graph, w.assignment, topology=4, config=dg.SimConfig(cost_model="raw")).makespan
    assert fifo["config"]["queue_order"] == "fifo" and fifo["makespan"] == want
    code, out, err = run(capsys, "simulate", spec, "--devices", "2")
    assert code != 0 and "--devices 4" in err


def test_whatif_defaults_to_the_schedule(capsys, tmp_path):
    out = tmp_path / "w.json"
    code, text, err = run(capsys, "whatif", unit("zb-h1"), "--straggler", "device:0@0-infx0.5", "--json", str(out))
    assert code == 0, err
    r = json.loads(out.read_text())
    assert r["nominal_makespan"] == 3 * M + P - 1
    assert "the workload's own" in text
    w = dg.workloads.build("pipeline", stages=P, microbatches=M, schedule="zb-h1", unit_costs=True)
    assert r["assignment"] == w.assignment.tolist()


def test_default_config_is_the_workloads(tmp_path):
    g = dg.instances.resolve_graph(unit("1f1b"))
    assert dg.instances.default_config(g) == dg.SimConfig(cost_model="raw", queue_order="fixed")
    assert dg.instances.workload_of(g).assignment is not None
    plain = dg.workloads.make("ffnn", layers=2)  # not resolved from a spec: no workload recorded
    assert dg.instances.workload_of(plain) is None and dg.instances.default_config(plain) == dg.SimConfig()
    assert dg.instances.resolve_workload("paper/ffnn").assignment is None
    # the record does not keep the graph alive (an env resolving a new graph per episode must not leak)
    ref = weakref.ref(g)
    del g
    gc.collect()
    assert ref() is None


def test_env_runs_the_pipeline_config():
    # gym.make with a pipeline spec and no sim_config: raw costs and the fixed order of the SEL choices;
    # acting out 1F1B gives its hand value 3 (m + p - 1)
    p, m = 3, 6
    env = gym.make("Doppler-Sim-v0", graph=f"pipeline:stages={p},microbatches={m},schedule=1f1b,unit_costs=true",
                   topology=p)
    env.reset(seed=0)
    base = env.unwrapped
    w = dg.workloads.build("pipeline", stages=p, microbatches=m, schedule="1f1b", unit_costs=True)
    for op in np.argsort(w.priorities, kind="stable"):
        env.step(int(op))
        _, _, terminated, _, info = env.step(base.max_ops + int(w.assignment[op]))
    assert terminated and info["makespan"] == 3 * (m + p - 1)


@pytest.mark.parametrize(("schedule", "extra", "bubble"), [
    ("gpipe", "", (P - 1) / M), ("1f1b", "", (P - 1) / M), ("zb-h1", "", (P - 1) / (3 * M)),
    ("interleaved", ",chunks=2", (P - 1) / (2 * M)),
])
def test_default_llama_costs_follow_the_bubble_formulas(capsys, tmp_path, schedule, extra, bubble):
    # The default pipeline (Llama 7B layers, bf16, transfers over Topology.uniform(4)): makespan over the work
    # per device (the lower bound here) is 1 + bubble, up to the boundary transfers (16 MiB each, 0.2 %)
    r = simulate_json(capsys, tmp_path, f"pipeline:stages={P},microbatches={M},schedule={schedule}{extra}")
    assert r["makespan"] / r["lower_bound"] == pytest.approx(1 + bubble, rel=2e-3)
    assert r["makespan"] / r["lower_bound"] >= 1 + bubble
