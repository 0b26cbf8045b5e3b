"""`doppler eval` over graphs x seeds: the grid's rows against baselines run by hand, and the same rows on Ray."""

from __future__ import annotations

import json

import pytest

import doppler_gym as dg
from agents.distributed.eval_grid import parse_seeds
from doppler_gym import baselines
from doppler_gym.cli.main import main
from tests.doppler_gym.parallel.ray_fixture import RAY_ADDRESS, ray_local  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow  # baseline grids, also on Ray

GRID = ["eval", "random", "--param", "n_ops=12", "--param", "levels=4", "--param", "seed=1", "--devices", "2",
        "--graphs", "chainmm", "--seeds", "0..1", "--baselines", "critical_path,random,local_search",
        "--search-evals", "256"]


def _rows(out):
    return json.loads((out / "eval_grid.json").read_text())["rows"]


def _by_hand(label, graph, seed):
    topo, config = dg.Topology.uniform(2), dg.instances.default_config(graph)
    cp = baselines.critical_path(graph, topo, config, seed=seed)
    rnd = baselines.random_placement(graph, topo, config, seed=seed)
    ls = baselines.local_search(graph, topo, config, seed=seed, max_evals=256, seconds=None, starts=[cp, rnd])
    return {(label, seed, p.name): p for p in (cp, rnd, ls)}


def test_grid_rows_equal_baselines_run_by_hand(tmp_path, capsys):
    assert main([*GRID, "--out", str(tmp_path)]) == 0
    assert "makespan / lower bound" in capsys.readouterr().out
    rows = _rows(tmp_path)
    assert [(r["graph"], r["seed"]) for r in rows[::3]] == [("random", 0), ("random", 1), ("chainmm", 0),
                                                            ("chainmm", 1)]
    want = {}
    for label, g in (("random", dg.workloads.make("random", n_ops=12, levels=4, seed=1)),
                     ("chainmm", dg.workloads.make("chainmm"))):
        for seed in (0, 1):
            want.update(_by_hand(label, g, seed))
    assert len(rows) == len(want) == 12
    for r in rows:
        p = want[(r["graph"], r["seed"], r["baseline"])]
        assert r["makespan"] == p.makespan
        assert r["assignment"] == p.assignment.tolist()
        assert r["ratio_to_lower_bound"] >= 1 - 1e-12


def test_grid_on_ray_equals_local(tmp_path, ray_local):  # noqa: F811
    assert main([*GRID, "--out", str(tmp_path / "local")]) == 0
    assert main([*GRID, "--out", str(tmp_path / "ray"), "--ray", RAY_ADDRESS]) == 0
    a, b = _rows(tmp_path / "local"), _rows(tmp_path / "ray")
    drop = ("seconds",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in a] == \
           [{k: v for k, v in r.items() if k not in drop} for r in b]
    assert json.loads((tmp_path / "ray" / "eval_grid.json").read_text())["ray"] == RAY_ADDRESS


def test_seeds_and_errors(tmp_path, capsys):
    assert parse_seeds("0..2,7", 5) == [0, 1, 2, 7]
    assert parse_seeds(None, 5) == [5]
    with pytest.raises(ValueError, match="expected integers"):
        parse_seeds("a..b", 0)
    assert main([*GRID, "--seeds", "x", "--out", str(tmp_path)]) == 2
    assert "--seeds" in capsys.readouterr().err
    assert main([*GRID, "--search-evals", "0", "--out", str(tmp_path)]) == 2
    assert "--search-evals must be >= 1" in capsys.readouterr().err
