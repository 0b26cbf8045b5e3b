"""``doppler eval GRAPH --graphs G ... --seeds S,... [--ray [ADDRESS]]``: the baselines over graphs x
seeds, one task per (graph, seed) cell (:func:`cell_rows`), locally or on a Ray cluster; prints one
row per cell and writes ``DIR/eval_grid.json``.

Nothing finished is lost: ``eval_grid.json`` is rewritten (atomically: a temporary file, then
``os.replace``) each time a cell finishes. A cell whose Ray task fails for good (its worker died
``RAY_MAX_RETRIES + 1`` times, or the task raised) is listed under ``failed`` in the file and on one
line each, the other cells go on, and the command then exits with one error line (status 2). Every
row carries its cell's ``cell_key`` (:func:`cell_key`: the graph's content, seed, topology, config and
options); a rerun into the same folder reuses the rows of each cell whose key it finds there and runs
only the others.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from doppler_gym.cli import common
from doppler_gym.envs.context import graph_digest, topology_key
from doppler_gym.parallel.grid import Cell, baseline_grid

GRID_FILE = "eval_grid.json"
RAY_MAX_RETRIES = 3  # retries of a cell whose Ray worker died (Ray's own default for a task)


def parse_seeds(text: str | None, default: int) -> list[int]:
    """``"0,1,5"`` or ``"0..3"`` (inclusive) -> seeds; ``None`` -> ``[default]``."""
    if text is None:
        return [int(default)]
    seeds: list[int] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        lo, sep, hi = item.partition("..")
        try:
            seeds += list(range(int(lo), int(hi) + 1)) if sep else [int(item)]
        except ValueError:
            raise ValueError(f"--seeds {text!r}: expected integers S,S,... or a range LO..HI (e.g. 0..4)") from None
    if not seeds or min(seeds) < 0:
        raise ValueError(f"--seeds {text!r}: give one or more integers >= 0 (e.g. 0,1,2 or 0..4)")
    return seeds


def grid_cells(args: argparse.Namespace) -> list[Cell]:
    """GRAPH (with ``--param``) and every ``--graphs`` name, each on the command's topology and its
    own default config (flags override), times the ``--seeds``."""
    topo = common.topology_from_args(args)
    graphs = [(args.graph, common.graph_from_args(args))]
    for name in args.graphs or []:
        graphs.append((name, common.graph_from_args(argparse.Namespace(graph=name, param=[]))))
    seeds = parse_seeds(args.seeds, args.seed)
    return [Cell(label, g, topo, common.config_from_args(args, g), s) for label, g in graphs for s in seeds]


def cell_rows(cell: Cell, names: Sequence[str], search_evals: int, cp_sat_seconds: float) -> list[dict]:
    """The rows of one cell, computed in this process (:func:`~doppler_gym.parallel.grid.baseline_grid`)."""
    return baseline_grid([cell], names, search_evals=search_evals, cp_sat_seconds=cp_sat_seconds)


def cell_key(cell: Cell, names: Sequence[str], search_evals: int, cp_sat_seconds: float) -> str:
    """A hex digest of everything that decides a cell's rows: its label, the graph's content, the seed,
    the topology, the sim config, the baselines and their budgets (``cp_sat_seconds`` only with cp_sat)."""
    what = [cell.label, graph_digest(cell.graph).hex(), cell.seed, repr(topology_key(cell.topology, cell.config)),
            repr(cell.config), sorted(names), int(search_evals), cp_sat_seconds if "cp_sat" in names else None]
    return hashlib.blake2b(json.dumps(what).encode(), digest_size=16).hexdigest()


def finished_cells(path: Path) -> dict[str, list[dict]]:
    """The rows of an earlier grid file by ``cell_key`` (``{}`` when there is none; rows without a key,
    from an older version, are not reused).

    Raises:
        ValueError: the file is not a grid result (says how to go on).
    """
    if not path.exists():
        return {}
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))["rows"]
        by_key: dict[str, list[dict]] = {}
        for row in rows:
            if "cell_key" in row:
                by_key.setdefault(row["cell_key"], []).append(row)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a `doppler eval` grid result ({type(exc).__name__}: {exc}); delete it "
                         "or choose another --out") from None
    return by_key


def write_atomically(path: Path, obj: Any) -> None:
    """``obj`` as JSON at ``path``: written to a temporary file beside it, then moved over it (``os.replace``),
    so a reader (or a rerun after a crash) sees the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _run_cell(task: Callable[[Cell], list[dict]], cell: Cell) -> list[dict]:
    return task(cell)


@functools.lru_cache(maxsize=4)
def _remote_cell(ray: Any) -> Any:
    """The Ray remote version of :func:`_run_cell` (made once per Ray module)."""
    return ray.remote(_run_cell)


def _failure(exc: BaseException) -> str:
    """One line for a failed Ray task: the task's own exception where it raised one, else Ray's error."""
    cause = getattr(exc, "cause", None)  # RayTaskError: the exception the task raised
    err = cause if isinstance(cause, BaseException) else exc
    return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"


def completed_cells(task: Callable[[Cell], list[dict]], todo: dict[int, Cell], ray_address: str | None,
                    max_retries: int) -> Iterator[tuple[int, list[dict] | None, str | None]]:
    """``(index, rows, None)`` for each cell of ``todo`` as it finishes, or ``(index, None, error)`` for a
    Ray task that failed for good; without ``ray_address`` the cells run here in order (and raise)."""
    if ray_address is None:
        for i, cell in todo.items():
            yield i, task(cell), None
        return
    from doppler_gym.parallel import connect

    ray = connect(ray_address)
    remote = _remote_cell(ray).options(num_cpus=1, max_retries=max_retries)
    task_ref = ray.put(task)
    pending = {remote.remote(task_ref, cell): i for i, cell in todo.items()}
    while pending:
        (ref,), _ = ray.wait(list(pending), num_returns=1)
        try:
            rows, error = ray.get(ref), None
        except ray.exceptions.RayError as exc:  # the worker died past its retries, or the task raised
            rows, error = None, _failure(exc)
        yield pending.pop(ref), rows, error


@dataclass
class GridRun:
    """The cells of a grid, their keys (:func:`cell_key`), and by cell index the rows of the finished
    cells and the errors of the failed ones."""

    cells: list[Cell]
    keys: list[str]
    done: dict[int, list[dict]] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)

    def finish(self, i: int, rows: list[dict]) -> None:
        """Cell ``i`` finished with ``rows`` (each row gets the cell's key)."""
        self.done[i] = [{**r, "cell_key": self.keys[i]} for r in rows]

    def reuse(self, earlier: dict[str, list[dict]]) -> int:
        """Take the rows of each cell whose key ``earlier`` (:func:`finished_cells`) holds; returns how many."""
        found = [i for i, key in enumerate(self.keys) if key in earlier]
        for i in found:
            self.finish(i, earlier[self.keys[i]])
        return len(found)

    def fail(self, i: int, error: str) -> None:
        """Cell ``i`` failed with ``error`` (one line)."""
        self.failed[i] = error

    def todo(self) -> dict[int, Cell]:
        """The cells neither finished nor failed, by index."""
        return {i: c for i, c in enumerate(self.cells) if i not in self.done and i not in self.failed}

    def rows(self) -> list[dict]:
        """The finished cells' rows, cells in grid order."""
        return [r for i in sorted(self.done) for r in self.done[i]]

    def failures(self) -> list[dict]:
        """``graph``, ``seed``, ``cell_key`` and ``error`` of each failed cell, in grid order."""
        return [{"graph": self.cells[i].label, "seed": self.cells[i].seed, "cell_key": self.keys[i],
                 "error": self.failed[i]} for i in sorted(self.failed)]


def run_grid(args: argparse.Namespace, chosen: list[str] | None = None) -> int:
    """Run the grid of ``args`` and print it (``chosen``: the baselines; default: ``--baselines`` or all
    but brute_force and cp_sat), reusing the finished cells of ``DIR/eval_grid.json`` and rewriting it
    as each cell finishes.

    Raises:
        ValueError: a cell failed (raised once every other cell ended and the file holds them all).
    """
    from rich.console import Console

    started = time.perf_counter()
    cells = grid_cells(args)
    names = _baselines(args, chosen)
    options = {"names": tuple(names), "search_evals": args.search_evals, "cp_sat_seconds": args.budget_seconds}
    grid = GridRun(cells, [cell_key(c, **options) for c in cells])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / GRID_FILE
    console = Console(width=max(Console().width, 120), highlight=False)
    if grid.reuse(finished_cells(path)):
        console.print(f"reusing {len(grid.done)} finished cell(s) of {path}; running the other "
                      f"{len(cells) - len(grid.done)}")

    def summary() -> dict[str, Any]:
        return {"cells": len(cells), "finished": len(grid.done), "baselines": names,
                "search_evals": args.search_evals, "ray": args.ray,
                "seconds": round(time.perf_counter() - started, 3), "rows": grid.rows(), "failed": grid.failures()}

    write_atomically(path, summary())
    task = functools.partial(cell_rows, **options)
    for i, rows, error in completed_cells(task, grid.todo(), args.ray, RAY_MAX_RETRIES):
        if error is None:
            grid.finish(i, rows)
        else:
            grid.fail(i, error)
            console.print(f"cell {cells[i].label} seed {cells[i].seed} failed: {error}", markup=False,
                          soft_wrap=True)  # one line, the error's brackets as they are
        write_atomically(path, summary())
    final = summary()
    write_atomically(path, final)
    _print_table(console, cells, final["rows"], names, args)
    console.print(f"wrote {path} in {final['seconds']:.1f} s")
    if grid.failed:
        raise ValueError(f"{len(grid.failed)} of {len(cells)} grid cells failed (listed above and under 'failed' in "
                         f"{path}, beside the {len(grid.done)} finished ones); rerun the same command to run only "
                         "the cells not finished")
    return 0


def _baselines(args: argparse.Namespace, chosen: list[str] | None) -> list[str]:
    """``chosen``, else ``--baselines``, else all but brute_force and cp_sat; in registry order."""
    from doppler_gym import baselines

    if chosen is None:
        if args.baselines:
            chosen = [t.strip().replace("-", "_") for t in args.baselines.split(",") if t.strip()]
            for name in chosen:
                baselines.get(name)  # a clear error for an unknown name
        else:
            chosen = [n for n in baselines.names() if n not in ("brute_force", "cp_sat")]
    return [n for n in baselines.names() if n in chosen]


def _print_table(console: Any, cells: list[Cell], rows: list[dict], names: list[str],
                 args: argparse.Namespace) -> None:
    """One row per finished cell (makespan / lower bound per baseline), then their mean."""
    from rich.table import Table

    where = "this process" if args.ray is None else f"Ray ({args.ray})"
    table = Table(title=f"{len(cells)} cells on {cells[0].topology.name}: makespan / lower bound "
                  f"(local_search {args.search_evals:,} evaluations; run in {where})")
    for label in ("graph", "ops", "seed", *names):
        table.add_column(label, justify="left" if label == "graph" else "right")
    by_cell: dict[tuple[str, int], dict[str, float]] = {}
    for r in rows:
        by_cell.setdefault((r["graph"], r["seed"]), {"n_ops": r["n_ops"]})[r["baseline"]] = r["ratio_to_lower_bound"]
    for (graph, seed), ratios in by_cell.items():
        table.add_row(graph, str(ratios["n_ops"]), str(seed), *(f"{ratios[n]:.3f}" for n in names))
    if by_cell:
        table.add_section()
        table.add_row("mean", "", "", *(f"{np.mean([c[n] for c in by_cell.values()]):.3f}" for n in names))
    console.print(table)
