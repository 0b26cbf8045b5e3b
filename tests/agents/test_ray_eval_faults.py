"""`doppler eval --ray` when a cell's Ray worker dies past its retries (issue 35, item 3): the finished cells
are in eval_grid.json, the failed one is listed there and on one line, the command exits 2 with one error
line, and a rerun into the same folder runs only the cells not finished."""

from __future__ import annotations

import functools
import json
import os

import pytest

from agents.distributed import eval_grid
from doppler_gym.cli.main import main
from doppler_gym.parallel.grid import baseline_grid
from tests.doppler_gym.parallel.ray_fixture import RAY_ADDRESS, ray_local  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow  # a local Ray instance, and a worker killed on purpose

GRID = ["eval", "random", "--param", "n_ops=10", "--param", "levels=3", "--param", "seed=1", "--devices", "2",
        "--graphs", "chainmm", "--seeds", "0..1", "--baselines", "critical_path,random,local_search",
        "--search-evals", "64"]
CELLS = [("random", 0), ("random", 1), ("chainmm", 0), ("chainmm", 1)]
BAD = ("chainmm", 1)


def exit_in_worker(cell, names, search_evals, cp_sat_seconds, *, kill, driver_pid):
    """:func:`eval_grid.cell_rows`, except that the cell ``kill`` ends its Ray worker process (``os._exit``)."""
    if (cell.label, cell.seed) == kill:
        assert os.getpid() != driver_pid, "the cell to kill ran in the test process, not in a Ray worker"
        os._exit(1)
    return baseline_grid([cell], names, search_evals=search_evals, cp_sat_seconds=cp_sat_seconds)


def only(cell, names, search_evals, cp_sat_seconds, *, allowed):
    """:func:`eval_grid.cell_rows` for the cells ``allowed``; any other cell is an error (it ran again)."""
    if (cell.label, cell.seed) not in allowed:
        raise RuntimeError(f"cell {cell.label} seed {cell.seed} ran again")
    return baseline_grid([cell], names, search_evals=search_evals, cp_sat_seconds=cp_sat_seconds)


def _grid(out):
    return json.loads((out / eval_grid.GRID_FILE).read_text())


def _cells(rows):
    return list(dict.fromkeys((r["graph"], r["seed"]) for r in rows))


def _no_seconds(rows):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def test_a_dead_worker_keeps_the_finished_cells_and_a_rerun_runs_only_the_rest(tmp_path, capsys, monkeypatch,
                                                                                 ray_local):  # noqa: F811
    out = tmp_path / "grid"
    with monkeypatch.context() as m:
        m.setattr(eval_grid, "RAY_MAX_RETRIES", 0)
        m.setattr(eval_grid, "cell_rows", functools.partial(exit_in_worker, kill=BAD, driver_pid=os.getpid()))
        assert main([*GRID, "--out", str(out), "--ray", RAY_ADDRESS]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("doppler: error: 1 of 4 grid cells failed"), err
    assert "rerun the same command" in err[0]
    assert "cell chainmm seed 1 failed: WorkerCrashedError" in " ".join(captured.out.split())
    first = _grid(out)
    assert first["finished"] == 3 and first["cells"] == 4
    assert _cells(first["rows"]) == [c for c in CELLS if c != BAD]
    assert [(f["graph"], f["seed"]) for f in first["failed"]] == [BAD]
    assert first["failed"][0]["error"].startswith("WorkerCrashedError")
    assert not list(out.glob(".*.tmp")), "a temporary file was left behind"

    # the rerun: any cell but the failed one would raise (and fail the command), so 0 means only it ran
    with monkeypatch.context() as m:
        m.setattr(eval_grid, "cell_rows", functools.partial(only, allowed={BAD}))
        assert main([*GRID, "--out", str(out), "--ray", RAY_ADDRESS]) == 0
    assert "reusing 3 finished cell(s)" in " ".join(capsys.readouterr().out.split())
    second = _grid(out)
    assert second["finished"] == 4 and second["failed"] == []
    assert _cells(second["rows"]) == CELLS
    kept = [r for r in second["rows"] if (r["graph"], r["seed"]) != BAD]
    assert kept == first["rows"]  # reused as written, run times included

    assert main([*GRID, "--out", str(tmp_path / "fresh")]) == 0  # the same grid from scratch, in this process
    assert _no_seconds(second["rows"]) == _no_seconds(_grid(tmp_path / "fresh")["rows"])


def test_other_options_run_every_cell_again(tmp_path, capsys):
    out = tmp_path / "grid"
    assert main([*GRID, "--out", str(out)]) == 0
    keys = {r["cell_key"] for r in _grid(out)["rows"]}
    assert len(keys) == 4
    assert main([*GRID, "--search-evals", "32", "--out", str(out)]) == 0
    assert "reusing" not in capsys.readouterr().out
    rows = _grid(out)["rows"]
    assert _cells(rows) == CELLS and not keys & {r["cell_key"] for r in rows}
    assert main([*GRID, "--search-evals", "32", "--out", str(out)]) == 0  # the same options: all reused
    assert "reusing 4 finished cell(s)" in " ".join(capsys.readouterr().out.split())
    assert _grid(out)["rows"] == rows


def test_a_file_that_is_not_a_grid_result_is_one_error_line(tmp_path, capsys):
    (tmp_path / eval_grid.GRID_FILE).write_text("{not json", encoding="utf-8")
    assert main([*GRID, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a `doppler eval` grid result" in err[0] and "delete it" in err[0]
