"""``doppler eval``, run in-process through ``main([...])``."""

from __future__ import annotations

import json

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.cli.main import main


def png_ok(path) -> bool:
    return path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_eval_paper_graph_writes_json_and_png(capsys, tmp_path):
    out = tmp_path / "ev"
    code = main(["eval", "paper/chainmm", "--devices", "4",
                 "--baselines", "round_robin,heft,critical_path,local_search",
                 "--budget-seconds", "0.5", "--seed", "2", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    data = json.loads((out / "eval.json").read_text())
    assert [r["name"] for r in data["rows"]] == ["round_robin", "critical_path", "heft", "local_search"]
    g = dg.load_graph("paper/chainmm")
    assert data["lower_bound"] == pytest.approx(1200.07)
    for r in data["rows"]:
        ms = dg.simulate(g, np.array(r["assignment"]), dg.Topology.uniform(4), config=dg.SimConfig.reference()).makespan
        assert r["makespan"] == ms
        assert r["ratio_to_lower_bound"] == pytest.approx(ms / data["lower_bound"])
        assert r["ratio_to_critical_path"] == pytest.approx(ms / data["critical_path_makespan"])
    best = min(data["rows"], key=lambda r: r["makespan"])
    assert data["best"]["name"] == best["name"] == "local_search"
    assert png_ok(out / "gantt_best.png")
    assert "local_search" in text and "/ lower bound" in text


def test_eval_small_graph_runs_exact_methods_by_default(capsys, tmp_path):
    out = tmp_path / "small"
    code = main(["eval", "random", "--param", "n_ops=7", "--param", "levels=3", "--devices", "2",
                 "--budget-seconds", "0.3", "--out", str(out)])
    capsys.readouterr()
    assert code == 0
    rows = {r["name"]: r for r in json.loads((out / "eval.json").read_text())["rows"]}
    assert {"brute_force", "cp_sat", "local_search", "heft", "metis"} <= set(rows)
    assert rows["brute_force"]["makespan"] == min(r["makespan"] for r in rows.values())
    assert png_ok(out / "gantt_best.png")


def test_eval_large_graph_skips_exact_methods(capsys, tmp_path):
    code = main(["eval", "paper/ffnn", "--baselines", "round_robin", "--out", str(tmp_path)])
    capsys.readouterr()
    assert code == 0
    from agents.cli.eval_cmd import default_baselines

    g = dg.load_graph("paper/ffnn")
    names = default_baselines(g, dg.Topology.uniform(4), dg.SimConfig.reference())
    assert "brute_force" not in names and "cp_sat" not in names and "local_search" in names


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--baselines", "nope"], "unknown baseline 'nope'"),
        (["--baselines", ","], "--baselines is empty"),
        (["--baselines", "brute_force"], "use local_search or cp_sat"),
        (["--budget-seconds", "0"], "--budget-seconds must be > 0"),
    ],
)
def test_eval_errors_are_one_line(capsys, tmp_path, argv, needle):
    code = main(["eval", "paper/ffnn", "--out", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("doppler: error: ") and needle in lines[0]
