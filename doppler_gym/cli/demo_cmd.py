"""``doppler demo``: placement baselines on a paper graph, using only the simulator.

Until the baselines and agents land, this is the project's main job: single device, round-robin,
random placements, a b-level greedy list scheduler and a best-of-N random search (batched through
:func:`~doppler_gym.simulate_batch`), compared with the lower bound and reference figures on the authors' simulator.
"""

from __future__ import annotations

import argparse
import heapq
import json
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from doppler_gym.cli import common
from doppler_gym.sim.bounds import makespan_lower_bound
from doppler_gym.graph.analysis import b_level
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.api import simulate, simulate_batch
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology

# Reference makespans (paper units, the authors' simulator, 4 devices), for context only. Best known
# placement: doppler_gym/data/paper/README.md; critical-path heuristic: the authors' CP code run over
# random tie-breaks (min ~78, mean ~84, measured in a study of their repository).
REFERENCE_MAKESPANS: dict[str, dict[str, str]] = {
    "paper/chainmm": {"best known placement": "1200.1"},
    "paper/ffnn": {"best known placement": "64.2", "critical-path heuristic": "~78-84"},
    "paper/llama-block": {"best known placement": "167.1"},
    "paper/llama-layer": {"best known placement": "156.6"},
}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo", help="placement baselines on a paper graph (simulator only)",
        description="Evaluate the placement baselines that exist today on one graph with the "
        "simulator; print a table, write the best placement's Gantt chart and summary.json.",
    )
    common.add_graph_argument(p, positional=False, default="paper/ffnn")
    common.add_topology_arguments(p)
    p.add_argument("--samples", type=int, default=20000, metavar="N", help="placements tried by the random search (default 20000)")
    p.add_argument("--out", default="out/demo", metavar="DIR", help="output folder (default out/demo)")
    common.add_sim_arguments(p)
    p.set_defaults(func=run)


# ---------------------------------------------------------------------- baselines (temporary)
def greedy_list_schedule(graph: DataflowGraph, topology: Topology, config: SimConfig) -> np.ndarray:
    """Greedy list scheduling: repeatedly take the ready op (all predecessors placed) with the
    highest b-level and put it on the device where it could start earliest.

    The estimate keeps one timeline per device (ops appended, no insertion) and charges a
    transfer from each predecessor on another device; ties go to the earlier finish, then the
    lower device id. Returns ``(n_ops,) int64`` devices. (Temporary: the baselines package
    replaces it.)
    """
    n, n_dev = graph.n_ops, topology.n_devices
    comp = common.op_times(graph, topology, config)  # (n, D)
    lat, per_unit = common.transfer_model(topology, config)  # (D, D)
    prio = b_level(graph, *common.mean_costs(graph, topology, config))
    pred_ptr, pred = graph.pred_ptr, graph.pred
    waiting = graph.in_degree.astype(np.int64).copy()
    ready = [(-prio[v], v) for v in range(n) if waiting[v] == 0]
    heapq.heapify(ready)
    free = np.zeros(n_dev)
    finish = np.zeros(n)
    assign = np.full(n, -1, dtype=np.int64)
    while ready:
        _, v = heapq.heappop(ready)
        preds = pred[pred_ptr[v] : pred_ptr[v + 1]]
        arrive = free.copy()
        for p in preds:
            t = finish[p] + lat[assign[p]] + graph.out_bytes[p] * per_unit[assign[p]]  # (D,) arrival on each device
            np.maximum(arrive, t, out=arrive)
        end = arrive + comp[v]
        d = int(np.lexsort((np.arange(n_dev), end, arrive))[0])
        assign[v], finish[v], free[d] = d, end[d], end[d]
        for s in graph.successors(v):
            waiting[s] -= 1
            if waiting[s] == 0:
                heapq.heappush(ready, (-prio[s], int(s)))
    return assign


def random_search(
    graph: DataflowGraph, topology: Topology, config: SimConfig, n_samples: int, seed: int,
    starts: list[np.ndarray], priorities: np.ndarray | None = None, rounds: int = 40, elite: int = 64,
) -> tuple[np.ndarray, float]:
    """Best of ``n_samples`` placements evaluated with :func:`simulate_batch`, in ``rounds`` batches.

    The first batch is ``starts`` (e.g. the heuristics' placements, so the search never reports a
    worse one) plus uniformly random placements; each later batch mutates placements drawn from
    the ``elite`` best so far, moving each op to a random device with probability ``k / n_ops``,
    ``k`` uniform in ``[1, 8]``. Deterministic for a given ``seed``. Returns
    ``(assignment, makespan)`` of the best one. (Temporary: the baselines package replaces it.)
    """
    rng = np.random.default_rng(seed)
    n, n_dev = graph.n_ops, topology.n_devices
    sizes = np.full(rounds, n_samples // rounds)
    sizes[0] += n_samples - sizes.sum()
    pool = np.empty((0, n), np.int64)
    scores = np.empty(0)
    for r, size in enumerate(sizes):
        if size <= 0:
            continue
        if r == 0:
            fixed = np.array(starts, dtype=np.int64).reshape(-1, n)[:size]
            batch = np.concatenate([fixed, rng.integers(0, n_dev, size=(size - len(fixed), n))])
        else:
            parents = pool[rng.integers(0, len(pool), size=size)]
            rate = rng.integers(1, 9, size=(size, 1)) / n
            mutate = rng.random((size, n)) < rate
            batch = np.where(mutate, rng.integers(0, n_dev, size=(size, n)), parents)
        ms = simulate_batch(graph, batch, topology=topology, priorities=priorities, config=config)
        pool, scores = np.concatenate([pool, batch]), np.concatenate([scores, ms])
        keep = np.argsort(scores, kind="stable")[:elite]
        pool, scores = pool[keep], scores[keep]
    return pool[0], float(scores[0])


# ---------------------------------------------------------------------- the job
def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    if args.samples < 1:
        raise ValueError(f"--samples must be >= 1, got {args.samples}")
    t0 = time.perf_counter()
    g = common.graph_from_args(args)
    topo = common.topology_from_args(args)
    config = common.config_from_args(args, g)
    prio = common.priorities_for(g, topo, config)
    unit, n, n_dev = config.time_unit, g.n_ops, topo.n_devices
    bound = makespan_lower_bound(g, topo, config)
    rng = np.random.default_rng(args.seed)
    console = Console(width=max(Console().width, 112), highlight=False)

    def run_one(a: np.ndarray) -> float:
        return simulate(g, a, topology=topo, priorities=prio, config=config).makespan

    rows: list[dict[str, object]] = []
    placements: dict[str, np.ndarray] = {}

    def add(name: str, makespan: float, assignment: np.ndarray | None, note: str = "") -> None:
        rows.append({"name": name, "makespan": makespan, "ratio_to_lower_bound": makespan / bound, "note": note})
        if assignment is not None:
            placements[name] = np.asarray(assignment, dtype=np.int64)

    # The first simulation compiles the Numba kernels when no cache exists yet (several seconds).
    status = console.status("simulating (the first run compiles the simulator, ~10 s)") if console.is_terminal else nullcontext()
    with status:
        single = np.zeros(n, dtype=np.int64)
        add("single device", run_one(single), single, "all ops on device 0")
        rr = np.arange(n, dtype=np.int64) % n_dev
        add("round-robin", run_one(rr), rr, "op i on device i mod D")
        rand = rng.integers(0, n_dev, size=(100, n))
        rand_ms = simulate_batch(g, rand, topology=topo, priorities=prio, config=config)
        add("random (one draw)", float(rand_ms[0]), rand[0], "uniform device per op")
        add("random (mean of 100)", float(rand_ms.mean()), None, f"std {rand_ms.std():.3g}")
        greedy = greedy_list_schedule(g, topo, config)
        add("greedy list (b-level)", run_one(greedy), greedy, "highest b-level op, earliest-start device")
        if hasattr(status, "update"):
            status.update(f"random search: {args.samples} placements")
        best_a, best_ms = random_search(g, topo, config, args.samples, args.seed, [rr, greedy, single], prio)
        add(f"random search (best of {args.samples})", best_ms, best_a, "random + mutations of the best")

    best = min((r for r in rows if r["name"] in placements), key=lambda r: r["makespan"])
    best_name = str(best["name"])
    best_trace = simulate(g, placements[best_name], topology=topo, priorities=prio, config=config)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from doppler_gym.sim.gantt import plot_gantt

    png = out / "gantt_best.png"
    plot_gantt(best_trace, g, png, title=f"{g.name} on {topo.name}: {best_name}", lower_bound=bound)

    table = Table(title=f"{g.name} ({n} ops, {g.n_edges} edges) on {topo.name} ({n_dev} devices), "
                  f"makespan in {common.unit_label(unit)}")
    table.add_column("placement")
    table.add_column("makespan", justify="right")
    table.add_column("/ lower bound", justify="right")
    table.add_column("note", style="dim")
    for r in rows:
        table.add_row(str(r["name"]), f"{r['makespan']:.4g}", f"{r['ratio_to_lower_bound']:.3f}", str(r["note"]))
    table.add_section()
    table.add_row("lower bound", f"{bound:.4g}", "1.000", "max(critical path, work / D)")
    context = REFERENCE_MAKESPANS.get(g.name) if (n_dev == 4 and config == SimConfig.reference()) else None
    for label, value in (context or {}).items():
        ratio = f"{float(value) / bound:.3f}" if value.replace(".", "").isdigit() else ""
        table.add_row(f"reference: {label}", value, ratio, "authors' simulator, 4 devices")
    console.print(table)

    summary = {
        "graph": g.name, "n_ops": n, "n_edges": g.n_edges, "topology": topo.name, "n_devices": n_dev,
        "config": {k: getattr(config, k) for k in config.__dataclass_fields__}, "time_unit": unit,
        "samples": args.samples, "seed": args.seed, "lower_bound": bound, "rows": rows,
        "reference": context or {},
        "best": {"name": best_name, "makespan": best_trace.makespan,
                 "assignment": placements[best_name].tolist(), "gantt": str(png)},
        "seconds": round(time.perf_counter() - t0, 3),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    console.print(f"best: {best_name}, makespan {common.fmt_time(best_trace.makespan, unit)} "
                  f"({best_trace.makespan / bound:.3f} x lower bound)")
    console.print(f"wrote {png} and {out / 'summary.json'} in {summary['seconds']:.1f} s")
    return 0
