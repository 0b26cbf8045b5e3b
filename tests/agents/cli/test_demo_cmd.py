"""``doppler demo``: training on the default paper graph, and ``--baselines-only``."""

from __future__ import annotations

import json

import pytest

import doppler_gym as dg
from tests.doppler_gym.cli.cli_helpers import error_line, png_size, run


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["demo", "--budget-seconds", "0"], "--budget-seconds must be > 0"),
        (["demo", "--budget-minutes", "-1"], "--budget-minutes must be > 0"),
    ],
)
def test_demo_errors_are_one_line(capsys, argv, needle):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert needle in error_line(err)


@pytest.mark.slow
def test_demo_trains_on_the_default_graph_and_compares_with_the_baselines(capsys, tmp_path):
    # A first short demo compiles the Numba kernels and warms torch: on cold caches imitation's first batch
    # takes about 10 s, far past its share of a small budget, and the RL stage would get no time at all.
    assert run(capsys, "demo", "--budget-minutes", "0.02", "--out", str(tmp_path / "warm-up"))[0] == 0
    out_dir = tmp_path / "demo"
    code, out, _ = run(capsys, "demo", "--budget-minutes", "0.1", "--out", str(out_dir))
    assert code == 0, out
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["graph"] == "paper/chainmm" and summary["n_devices"] == 4 and summary["time_unit"] == "paper"
    assert set(summary["stages"]) == {"il", "sim"} and all(s["episodes"] > 0 for s in summary["stages"].values())
    assert {"critical_path", "heft", "random", "local_search"} <= set(summary["baselines"])
    g = dg.load_graph("paper/chainmm")
    learned = dg.simulate(g, summary["assignment"], config=dg.SimConfig.reference()).makespan
    assert learned == summary["makespan"] >= summary["lower_bound"] - 1e-9
    width, height = png_size(out_dir / "gantt.png")
    assert width >= 800 and height >= 200
    assert "learned policy (greedy)" in out and "critical_path" in out and "lower bound" in out


def test_demo_baselines_only_runs_the_search_on_the_default_graph(capsys, tmp_path):
    out_dir = tmp_path / "demo"
    code, out, _ = run(capsys, "demo", "--baselines-only", "--budget-seconds", "2", "--out", str(out_dir))
    assert code == 0
    summary = json.loads((out_dir / "eval.json").read_text())
    rows = {r["name"]: r["makespan"] for r in summary["rows"]}
    assert summary["graph"] == "paper/chainmm" and summary["n_devices"] == 4 and summary["time_unit"] == "paper"
    assert {"round_robin", "critical_path", "heft", "metis", "local_search"} <= set(rows)
    assert all(m >= summary["lower_bound"] - 1e-9 for m in rows.values())
    assert rows["local_search"] <= min(rows["critical_path"], rows["heft"], rows["round_robin"])
    g = dg.load_graph("paper/chainmm")
    best = min(summary["rows"], key=lambda r: r["makespan"])
    assert dg.simulate(g, best["assignment"], config=dg.SimConfig.reference()).makespan == best["makespan"]
    width, height = png_size(out_dir / "gantt_best.png")
    assert width >= 800 and height >= 200
    assert "local_search" in out and "lower bound" in out
