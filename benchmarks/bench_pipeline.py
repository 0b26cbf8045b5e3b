"""Pipeline schedules: bubbles and activation memory against the papers, and a searched order under a cap.

Run from the repository root::

    python -m benchmarks.bench_pipeline                      # p=4, m=8, cap = 1F1B's peak
    python -m benchmarks.bench_pipeline --evals 4000 --seed 1
    python -m benchmarks.bench_pipeline --formulas           # bubble / work of each schedule vs its formula
    python -m benchmarks.bench_pipeline --smoke              # 20 evaluations, then the formula table

One table, a row per schedule (GPipe, 1F1B, 1F1B with split backward, interleaved 1F1B with v = 2, ZB-H1,
work-conserving FIFO, a searched order), p = 4 stages, m = 8 microbatches:

- *unit costs* (``unit_costs=True``: F = 1, fused B = 2, split B = W = 1, no communication): the makespan
  and the bubble / work of the busiest device next to its published formula (checked to 1e-9);
- *Llama layers* (``dg.workloads.build("pipeline", ...)``: 8 Llama layers of d_model 1024, 4 sequences of
  2048 tokens per microbatch, bf16, Adam state as persistent memory, activations per Korthikanti et al.
  2022 without recomputation, on ``Topology.uniform(4)`` with its memory capped at 1F1B's peak (with split
  backward, the same F/B order)): the makespan, the first stage's peak of stashed activations in stages'
  worth of microbatch stashes (simulated, and the papers' count, checked equal), the peak memory per device
  and whether it fits the cap. Every run is ``SimConfig(queue_order="fixed", memory="enforce")`` except the
  FIFO row (the 1F1B placement on the work-conserving runtime).

The searched order is a seeded hill climb over each device's order of its ops (moves: swap two neighbours,
or move an op up to 4 places later), started from 1F1B's (split backward) order: a candidate that
deadlocks is rejected, one that runs out of memory costs inf, and sideways moves are accepted.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

import doppler_gym as dg
from benchmarks import common
from doppler_gym.sim.memory import memory_profile

MODEL = dict(stages=4, microbatches=8, layers=8, micro_batch=4, seq=2048, d_model=1024, n_heads=8, ffn_hidden=2816)
SCHEDULES = (("GPipe", "gpipe", False, 1), ("1F1B", "1f1b", False, 1), ("1F1B, split backward", "1f1b", True, 1),
             ("interleaved 1F1B, v = 2", "interleaved", False, 2), ("ZB-H1", "zb-h1", True, 1))
"""(label, schedule, split backward, chunks v) of each row."""


def bubble_formula(schedule: str, p: int, m: int, v: int, split: bool = False) -> float:
    """Published bubble / work: (p-1)/m (GPipe, 1F1B), (p-1)/(vm) (interleaved), (p-1)/(3m) (ZB-H1, F = B = W);
    1F1B with a split backward, W right after its B: (p-1)(F + B) / (m (F + B + W)) = 2(p-1)/(3m) (only B is
    on the path back through the stages; Qi et al. 2024)."""
    if split and schedule != "zb-h1":
        return 2 * (p - 1) / (3 * m)
    return (p - 1) / (m * (v if schedule == "interleaved" else 3 if schedule == "zb-h1" else 1))


def stash_count(schedule: str, p: int, m: int, v: int) -> float:
    """The papers' peak of stashed activations on the first stage, in stages' worth of microbatch stashes:
    m (GPipe), p (1F1B, ZB-H1), p (1 + (p - 1) / (p v)) (interleaved, m > p; Narayanan et al. 2021)."""
    if schedule == "gpipe":
        return float(m)
    if schedule == "interleaved":
        return float(m if m == p else p * (1 + (p - 1) / (p * v)))
    return float(min(p, m))


def first_stage_stash(w: dg.workloads.Workload, tr: dg.Trace, v: int = 1) -> float:
    """The first device's peak of stash bytes in ``tr`` over one stage's stash for one microbatch (``v``
    chunks' worth; the same trace's memory profile with every other byte set to 0)."""
    stash = np.array(w.graph.kinds) == "forward"  # F's output is its stash
    only = dataclasses.replace(w.graph, out_bytes=np.where(stash, w.graph.out_bytes, 0.0), persistent_bytes=None)
    return float(memory_profile(only, tr).peak[0]) / (float(w.graph.out_bytes[stash][0]) * v)


def device_orders(w: dg.workloads.Workload) -> list[list[int]]:
    """Each device's ops in the schedule's order."""
    order = np.argsort(w.priorities, kind="stable")
    return [[int(o) for o in order if w.assignment[o] == d] for d in range(MODEL["stages"])]


def ranks(orders: list[list[int]], n: int) -> np.ndarray:
    out = np.empty(n)
    for ops in orders:
        out[ops] = np.arange(len(ops))
    return out


def evaluate(w, orders, topo, config) -> tuple[float, dg.Trace | None]:
    try:
        tr = dg.simulate(w.graph, w.assignment, topology=topo, priorities=ranks(orders, w.graph.n_ops), config=config)
    except ValueError:  # the order deadlocks
        return np.inf, None
    return (tr.makespan if tr.feasible else np.inf), tr


def search(w, topo, config, evals: int, seed: int) -> tuple[list[list[int]], float, int]:
    """Hill climb over per-device orders from ``w``'s; returns the best orders, their makespan, evals done."""
    rng = np.random.default_rng(seed)
    current = device_orders(w)
    cost, _ = evaluate(w, current, topo, config)
    best, best_cost = [list(o) for o in current], cost
    for _ in range(evals):
        cand = [list(o) for o in current]
        ops = cand[int(rng.integers(len(cand)))]
        i = int(rng.integers(len(ops) - 1))
        j = min(len(ops) - 1, i + (1 if rng.random() < 0.5 else int(rng.integers(1, 5))))
        ops.insert(j, ops.pop(i))
        c, _ = evaluate(w, cand, topo, config)
        if c <= cost:
            current, cost = cand, c
            if c < best_cost:
                best, best_cost = [list(o) for o in cand], c
    return best, best_cost, evals


def formula_table() -> None:
    """Unit costs, no communication: simulated bubble / work of each schedule next to its published formula."""
    print("| schedule | p | m | v | makespan | bubble / work (simulated) | formula |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for s, v, name in [("gpipe", 1, "(p-1)/m"), ("1f1b", 1, "(p-1)/m"), ("interleaved", 2, "(p-1)/(vm)"),
                       ("interleaved", 4, "(p-1)/(vm)"), ("zb-h1", 1, "(p-1)/(3m)")]:
        for p, m in [(4, 8), (8, 32)]:
            w = dg.workloads.build("pipeline", stages=p, microbatches=m, schedule=s, chunks=v, unit_costs=True)
            tr = dg.simulate(w.graph, w.assignment, topology=p, priorities=w.priorities, config=w.config)
            busy = tr.device_busy.max()
            formula = (p - 1) / (m * (v if s == "interleaved" else 3 if s == "zb-h1" else 1))
            common.check(abs((tr.makespan - busy) / busy - formula) < 1e-9,
                         f"{s} p={p} m={m} v={v}: bubble / work {(tr.makespan - busy) / busy} != formula {formula}")
            print(f"| {s} | {p} | {m} | {v} | {tr.makespan:g} | {(tr.makespan - busy) / busy:.6f} | "
                  f"{name} = {formula:.6f} |")


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, writes=False)
    ap.add_argument("--evals", type=int, default=2000, help="hill-climb evaluations (default 2000)")
    ap.add_argument("--formulas", action="store_true", help="print the bubble-formula table and stop")
    args = ap.parse_args(argv)
    if args.smoke:
        args.evals = 20
    common.start("bench_pipeline", args)
    if args.formulas:
        formula_table()
        return
    p, m = MODEL["stages"], MODEL["microbatches"]
    track = dg.SimConfig(queue_order="fixed", memory="track")
    ref = dg.workloads.build("pipeline", schedule="1f1b", split_backward=True, **MODEL)
    base = dg.simulate(ref.graph, ref.assignment, topology=dg.Topology.uniform(p), priorities=ref.priorities,
                       config=track)
    cap = float(base.memory.peak.max())
    topo = dg.Topology.uniform(p, memory=cap)
    enforce = dg.SimConfig(queue_order="fixed", memory="enforce")
    rows = []
    for label, schedule, split, v in SCHEDULES:
        u = dg.workloads.build("pipeline", stages=p, microbatches=m, schedule=schedule, chunks=v,
                               split_backward=split, unit_costs=True)
        ut = dg.simulate(u.graph, u.assignment, topology=p, priorities=u.priorities, config=u.config)
        busy = float(ut.device_busy.max())
        bubble, formula = (ut.makespan - busy) / busy, bubble_formula(schedule, p, m, v, split)
        common.check(abs(bubble - formula) < 1e-9, f"{label}: bubble / work {bubble} != formula {formula}")
        w = dg.workloads.build("pipeline", schedule=schedule, chunks=v, split_backward=split, **MODEL)
        tr = dg.simulate(w.graph, w.assignment, topology=topo, priorities=w.priorities, config=enforce)
        count, want = first_stage_stash(w, tr, v), stash_count(schedule, p, m, v)
        common.check(abs(count - want) < 1e-9, f"{label}: first-stage stash {count} != the papers' {want}")
        rows.append((label, f"{ut.makespan:g}", f"{bubble:.4f} = {formula:.4f}", tr.makespan,
                     f"{count:.3g} = {want:.3g}", tr.memory.peak, tr.feasible))
    fifo = dg.simulate(ref.graph, ref.assignment, topology=topo, config=dg.SimConfig(memory="enforce"))
    rows.append(("FIFO (work-conserving), 1F1B placement", "-", "-", fifo.makespan,
                 f"{first_stage_stash(ref, fifo):.3g}", fifo.memory.peak, fifo.feasible))
    t0 = time.perf_counter()
    orders, cost, evals = search(ref, topo, enforce, args.evals, args.seed)
    seconds = time.perf_counter() - t0
    _, tr = evaluate(ref, orders, topo, enforce)
    split_row = rows[2][3]
    common.check(tr is not None and tr.feasible and cost <= split_row,
                 f"the searched order ({cost}) is infeasible or worse than its start, 1F1B split ({split_row})")
    rows.append((f"searched order ({evals} evals, seed {args.seed}, {seconds:.0f} s)", "-", "-", tr.makespan,
                 f"{first_stage_stash(ref, tr):.3g}", tr.memory.peak, tr.feasible))
    print(f"p = {p}, m = {m}; cap = {cap / 2**30:.2f} GiB per device (1F1B's peak, split backward)\n")
    print("| schedule | unit costs: makespan | bubble / work = formula | Llama: makespan [ms] | first-stage stash "
          "[stages x microbatches] = papers' | peak memory per device [GiB] | fits the cap |")
    print("|---|---:|---:|---:|---:|---|---|")
    for label, unit_ms, bubble, makespan, count, peak, ok in rows:
        peaks = " / ".join(f"{x / 2**30:.2f}" for x in peak)
        fits = "yes" if ok else "no"
        print(f"| {label} | {unit_ms} | {bubble} | {makespan * 1e3:.2f} | {count} | {peaks} | {fits} |")
    w_moved = sum(1 for d, ops in enumerate(orders) for k, o in enumerate(ops) if device_orders(ref)[d][k] != o)
    print(f"\nsearched order: {w_moved} of {ref.graph.n_ops} positions differ from 1F1B's; per device:")
    for d, ops in enumerate(orders):
        print(f"  device {d}: " + " ".join(ref.graph.names[o].split("[")[0] + ref.graph.names[o].split(",")[1][:-1]
                                        for o in ops))
    if args.smoke:
        print()
        formula_table()


if __name__ == "__main__":
    main()
