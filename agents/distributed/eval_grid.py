"""``doppler eval GRAPH --graphs G ... --seeds S,... [--ray [ADDRESS]]``: the baselines over graphs x
seeds, one task per (graph, seed) cell (:func:`doppler_gym.parallel.grid.baseline_grid`), locally or
on a Ray cluster; prints one row per cell and writes ``DIR/eval_grid.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from doppler_gym.cli import common
from doppler_gym.parallel.grid import Cell, baseline_grid


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


def run_grid(args: argparse.Namespace, chosen: list[str] | None = None) -> int:
    """Run the grid of ``args`` and print it (``chosen``: the baselines; default: ``--baselines`` or all
    but brute_force and cp_sat)."""
    from rich.console import Console
    from rich.table import Table

    from doppler_gym import baselines

    started = time.perf_counter()
    cells = grid_cells(args)
    if chosen is None:
        if args.baselines:
            chosen = [t.strip().replace("-", "_") for t in args.baselines.split(",") if t.strip()]
            for name in chosen:
                baselines.get(name)  # a clear error for an unknown name
        else:
            chosen = [n for n in baselines.names() if n not in ("brute_force", "cp_sat")]
    rows = baseline_grid(cells, chosen, search_evals=args.search_evals, cp_sat_seconds=args.budget_seconds,
                         ray_address=args.ray)
    names = list(dict.fromkeys(r["baseline"] for r in rows))
    console = Console(width=max(Console().width, 120), highlight=False)
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
    table.add_section()
    table.add_row("mean", "", "", *(f"{np.mean([c[n] for c in by_cell.values()]):.3f}" for n in names))
    console.print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seconds = round(time.perf_counter() - started, 3)
    summary = {"cells": len(cells), "baselines": names, "search_evals": args.search_evals, "ray": args.ray,
               "seconds": seconds, "rows": rows}
    (out / "eval_grid.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    console.print(f"wrote {out / 'eval_grid.json'} in {seconds:.1f} s")
    return 0
