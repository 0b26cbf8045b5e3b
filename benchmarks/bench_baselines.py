"""The placement baselines on the DOPPLER paper graphs, reference simulator (paper units).

Run from the repository root::

    python -m benchmarks.bench_baselines            # full run (about five minutes)
    python -m benchmarks.bench_baselines --quick    # short budgets (under a minute)
    python -m benchmarks.bench_baselines --ray auto # Part 2's grid as Ray tasks on a cluster (same figures)
    python -m benchmarks.bench_baselines --smoke    # paper/chainmm only, short budgets

Needs the ``solvers`` extra (METIS, CP-SAT).

Part 1, one table per graph (the four 4-device graphs and the two 8-device ones): the makespan
of every baseline, its ratio to the lower bound ``max(critical path, work / D)`` and its run time.
``critical_path`` rows are seed 0; local search and CP-SAT get ``--search-seconds`` and
``--cp-sat-seconds``.

Part 2, the critical-path heuristic over ``--cp-seeds`` tie-break seeds, in three variants, next to
the reference figures in ``STUDY_CP``: the fixed time model;
the authors' time model with the correct node selection ("CP (env)"); the authors' code with its
node-selection bug (``paper_faithful=True``).

Part 3, the search target: wall time for ``local_search`` to reach chainmm's optimum 1200.07
(= the lower bound) on 4 devices, for several seeds. Target: <= 60 s each.

Timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import doppler_gym as dg
from benchmarks import common
from doppler_gym import baselines
from doppler_gym.baselines.critical_path import critical_path_schedule
from doppler_gym.graph.io import PAPER_EXPERIMENTS
from doppler_gym.parallel import map_tasks

REQUIRES = ("ortools", "pymetis")  # the solvers extra: CP-SAT and METIS

PAPER_GRAPHS = PAPER_EXPERIMENTS
REFERENCE = dg.SimConfig.reference()
# Reference figures of the critical-path heuristic: CP fixed mean, CP env min / mean.
STUDY_CP = {
    "paper/chainmm": (1840.1, 1600.04, 1705.1),
    "paper/ffnn": (84.34, 77.74, 83.98),
    "paper/llama-block": (247.91, 226.53, 245.44),
    "paper/llama-layer": (232.01, 219.29, 237.59),
    "paper/llama-block-8gpu": (337.02, 321.23, 333.42),
    "paper/llama-layer-8gpu": (273.16, 265.46, 277.53),
}
CHAINMM_OPTIMUM = 1200.07  # paper units, = total work / 4
SEARCH_TARGET = 60.0  # [s]


def bench_table(args: argparse.Namespace) -> None:
    print(f"\n== Part 1: baselines, reference simulator; local_search {args.search_seconds:g} s, "
          f"cp_sat {args.cp_sat_seconds:g} s ==")
    for name, d in args.graphs:
        g = dg.load_graph(name)
        bound = dg.makespan_lower_bound(g, d, REFERENCE)
        results = []
        for base in baselines.names():
            if base == "brute_force":
                continue
            opts: dict[str, object] = {}
            if base == "local_search":
                opts = {"seconds": args.search_seconds, "seed": 0, "starts": list(results)}
            elif base == "cp_sat":
                opts = {"time_limit": args.cp_sat_seconds}
            results.append(baselines.run(base, g, d, **opts))
            common.check(results[-1].makespan >= bound * (1 - 1e-9),
                         f"{name}: {base} makespan {results[-1].makespan} is below the lower bound {bound}")
        print(f"\n{name}: {g.n_ops} ops, {g.n_edges} edges, D = {d}, lower bound {bound:.2f}")
        print(f"  {'baseline':<15}{'makespan':>10}{'/ LB':>8}{'seconds':>9}  note")
        for p in results:
            print(f"  {p.name:<15}{p.makespan:>10.2f}{p.makespan / bound:>8.3f}{p.seconds:>9.2f}  {_note(p)}")


def _note(p: baselines.Placement) -> str:
    i = p.info
    if p.name == "local_search":
        return (
            f"{i['evals']:,} evals from {i['start']} ({i['start_makespan']:.2f}); "
            f"best after {i['seconds_to_best']:.1f} s"
        )
    if p.name == "cp_sat":
        return f"{i['status']}: schedule {i['objective']:.2f}, solver bound {i['bound']:.2f}"
    if "plan_makespan" in i:
        return f"plan {i['plan_makespan']:.2f}"
    return ""


def cp_cell(cell: tuple[str, int, int]) -> tuple[float, float, float]:
    """One (graph, devices, seed) cell of Part 2: the three variants' makespans (a task of the grid)."""
    name, d, s = cell
    g = dg.load_graph(name)
    topo = dg.Topology.uniform(d)
    a, _, _ = critical_path_schedule(g, topo, REFERENCE, rng=np.random.default_rng(s), time_model="faithful")
    return (baselines.critical_path(g, topo, seed=s).makespan, dg.simulate(g, a, topo, config=REFERENCE).makespan,
            baselines.critical_path(g, topo, seed=s, paper_faithful=True).makespan)


def bench_cp(args: argparse.Namespace) -> None:
    seeds = range(args.cp_seeds)
    where = "" if args.ray is None else f", cells as Ray tasks on {args.ray}"
    print(f"\n== Part 2: critical-path heuristic over {args.cp_seeds} seeds (study = reference figures{where}) ==")
    print(f"  {'graph':<24}{'fixed mean':>11}{'study':>9}   {'authors time model min/mean':>28}{'study':>17}"
          f"   {'paper_faithful min/mean':>24}")
    cells = [(name, d, s) for name, d in args.graphs for s in seeds]
    found = dict(zip(cells, map_tasks(cp_cell, cells, args.ray)))  # the same figures locally and on Ray
    for name, d in args.graphs:
        fixed, env, buggy = (list(v) for v in zip(*(found[(name, d, s)] for s in seeds)))
        sf, smin, smean = STUDY_CP[name]
        print(f"  {name:<24}{np.mean(fixed):>11.2f}{sf:>9.2f}   {np.min(env):>13.2f} / {np.mean(env):<12.2f}"
              f"{smin:>8.2f} / {smean:<8.2f}  {np.min(buggy):>11.2f} / {np.mean(buggy):<10.2f}")


def bench_search(args: argparse.Namespace) -> None:
    g = dg.load_graph("paper/chainmm")
    print(f"\n== Part 3: local_search to chainmm's optimum {CHAINMM_OPTIMUM} (4 devices), "
          f"limit {args.search_limit:g} s ==")
    print(f"  {'seed':>4}{'makespan':>10}{'seconds':>9}{'evals':>11}{'restarts':>9}  start          verdict")
    worst = 0.0
    for seed in range(args.search_seeds):
        p = baselines.local_search(g, 4, seed=args.seed + seed, seconds=args.search_limit)
        common.check(p.makespan >= CHAINMM_OPTIMUM - 0.01, f"chainmm: local_search {p.makespan} below the optimum")
        hit = p.info["stopped"] == "lower_bound"
        worst = max(worst, p.seconds if hit else np.inf)
        print(f"  {seed:>4}{p.makespan:>10.2f}{p.seconds:>9.2f}{p.info['evals']:>11,}{p.info['restarts']:>9}  "
              f"{p.info['start']:<15}{'PASS' if hit else 'FAIL'}")
    print(f"  slowest: {worst:.2f} s (limit {args.search_limit:g} s): "
          f"{'PASS' if worst <= args.search_limit else 'FAIL'}")


def main(argv: list[str] | None = None) -> None:
    parser = common.parser(__doc__, writes=False)
    parser.add_argument("--quick", action="store_true", help="short budgets and fewer seeds")
    parser.add_argument("--search-seconds", type=float, default=20.0, help="local_search budget per graph [s]")
    parser.add_argument("--cp-sat-seconds", type=float, default=10.0, help="CP-SAT time limit per graph [s]")
    parser.add_argument("--cp-seeds", type=int, default=20, help="tie-break seeds of the critical-path study")
    parser.add_argument("--search-seeds", type=int, default=5, help="seeds of the chainmm search run")
    parser.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                        help="run Part 2's (graph, seed) cells as Ray tasks (no ADDRESS: a local instance)")
    args = parser.parse_args(argv)
    args.graphs, args.search_limit = PAPER_GRAPHS, SEARCH_TARGET
    if args.quick:
        args.search_seconds, args.cp_sat_seconds, args.cp_seeds, args.search_seeds = 3.0, 5.0, 5, 2
    if args.smoke:
        args.search_seconds, args.cp_sat_seconds, args.cp_seeds, args.search_seeds = 0.2, 10.0, 2, 1
        args.graphs, args.search_limit = PAPER_GRAPHS[:1], 0.5
    common.start("bench_baselines", args)
    started = time.perf_counter()
    bench_table(args)
    bench_cp(args)
    bench_search(args)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
