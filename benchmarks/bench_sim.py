"""How fast is ``doppler_gym.sim`` against the authors' SimPy simulator, and how does it scale?

Run from the repository root::

    python -m benchmarks.bench_sim            # full run (about a minute)
    python -m benchmarks.bench_sim --quick    # fewer repetitions (a few seconds)
    python -m benchmarks.bench_sim --smoke    # tiny counts, 1k ops at most; SimPy and simulate must agree

Part 1, the six DOPPLER paper graphs (D = 4, or 8 for the ``-8gpu`` graphs), measured back to back
on the same random assignments, in interleaved rounds (one SimPy call, then a slice of the single
calls, every few rounds a batch) so that a change in machine load hits both sides alike:

* SimPy: the reference oracle ``doppler_gym.sim.simpy_reference`` (the authors' event structure on
  the real ``simpy`` package), median time per call;
* ``dg.simulate(..., config=SimConfig.reference())``: median time of a single call, Python call
  overhead and ``Trace`` construction included;
* ``dg.simulate_batch``: total time for B assignments / B (median of several batches), all numba
  threads in use.

Targets: SimPy / single call >= 500x and SimPy / (batch time per assignment) >= 2000x.

Part 2, scaling: random local DAGs of 1k, 10k and 100k ops (each op takes about two predecessors
among the previous ``--window`` ops), 4 devices, random assignment, single calls in the general mode
(``SimConfig()``, uniform topology) and in the reference mode; ms per call and ns per (op + edge).
Target: <= 50 ns per (op + edge) at 100k ops.

Part 3, the floor, one thread: ``simulate_batch`` (the exact list kernel) against the same list
scheduling stripped of everything exactness needs (SimPy's tie order, the traces): ties broken
by queue position, so *not* the reference model (the last column: the share of assignments whose
makespan differs); it bounds what any exact kernel of this design can reach here, and the batch
ratio it would give with the same thread scaling ("thread gain": the exact batch on all numba
threads against one).

PASS/FAIL is printed per target; the exit status is always 0 (timings depend on the machine).
All numba kernels are compiled (warmed up) before anything is timed.
"""

from __future__ import annotations

import argparse
import functools
import gc
import time

import numba
import numpy as np

import doppler_gym as dg
from benchmarks import common
from doppler_gym.graph.io import PAPER_EXPERIMENTS, load_graph
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.simpy_reference import simpy_makespan
from doppler_gym.sim.threads import numba_threads

PAPER_GRAPHS = PAPER_EXPERIMENTS
TARGET_SINGLE = 500.0  # SimPy time / simulate time, per call
TARGET_BATCH = 2000.0  # SimPy time / simulate_batch time per assignment
TARGET_NS = 50.0  # ns per (op + edge) at 100k ops
REFERENCE = dg.SimConfig.reference()
GENERAL = dg.SimConfig()


def random_local_dag(n_ops: int, degree: int = 2, window: int = 64, seed: int = 0) -> DataflowGraph:
    """A random DAG of ``n_ops`` ops: op ``i > 0`` draws ``degree`` predecessors among ops ``i-window..i-1``.

    Duplicate draws collapse, so an op has 1..``degree`` inputs (about ``degree`` on average);
    op 0 is the only guaranteed source. Costs are paper-like integers: ``flops`` in [1e8, 1e11]
    and ``out_bytes = 4 * flops``. Edges are listed by producer, then consumer.
    """
    rng = np.random.default_rng(seed)
    dst = np.repeat(np.arange(1, n_ops, dtype=np.int64), degree)
    span = np.minimum(dst, window)
    src = dst - 1 - (rng.random(dst.size) * span).astype(np.int64)
    key = np.unique(src * n_ops + dst)
    flops = rng.integers(1, 1001, size=n_ops).astype(np.float64) * 1e8
    return DataflowGraph(
        src=key // n_ops, dst=key % n_ops, flops=flops, out_bytes=4.0 * flops, name=f"random-{n_ops}"
    )


def _call_times(fn, args_list) -> np.ndarray:
    """Wall time [s] of each ``fn(*args)`` over ``args_list``, each call timed on its own."""
    times = np.empty(len(args_list))
    gc.collect()
    gc.disable()
    try:
        for i, args in enumerate(args_list):
            t0 = time.perf_counter()
            fn(*args)
            times[i] = time.perf_counter() - t0
    finally:
        gc.enable()
    return times


def _median_call_time(fn, args_list) -> float:
    """Median wall time [s] of ``fn(*args)`` over ``args_list``, each call timed on its own."""
    return float(np.median(_call_times(fn, args_list)))


def _fmt_time(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:8.2f} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:8.2f} us"
    return f"{seconds * 1e9:8.1f} ns"


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def bench_paper(args: argparse.Namespace) -> None:
    print(
        f"\n== Paper graphs: SimPy port vs doppler_gym.sim reference mode "
        f"(SimPy median of {args.simpy_calls} calls, simulate median of {args.single_calls}, "
        f"simulate_batch B={args.batch} median of {args.batch_reps}) =="
    )
    header = (
        f"{'graph':<24}{'n':>5}{'E':>5}{'D':>3}  {'SimPy/call':>11}  {'simulate/call':>13}  "
        f"{'batch/asg':>11}  {'x single':>9}  {'x batch':>9}  {'>=500x':>6}  {'>=2000x':>7}"
    )
    print(header)
    print("-" * len(header))
    worst_single, worst_batch = np.inf, np.inf
    for name, n_devices in PAPER_GRAPHS:
        g = load_graph(name)
        rng = np.random.default_rng([args.seed, g.n_ops])
        batch = rng.integers(0, n_devices, size=(args.batch, g.n_ops)).astype(np.int64)
        rows = [batch[i] for i in range(min(args.single_calls, args.batch))]
        while len(rows) < args.single_calls:
            rows.extend(rows[: args.single_calls - len(rows)])
        # warm up this graph (numba dispatch, cached CSR views) before timing
        dg.simulate(g, batch[0], config=REFERENCE)
        dg.simulate_batch(g, batch[:8], config=REFERENCE)
        # Interleaved rounds, so that both sides see the same machine load: each round times one
        # SimPy call, a slice of the single calls and (every few rounds) one whole batch.
        single = functools.partial(dg.simulate, g, config=REFERENCE)
        per_round = -(-args.single_calls // args.simpy_calls)
        batch_every = max(1, args.simpy_calls // args.batch_reps)
        simpy_times, single_times, batch_times = [], [], []
        for r in range(args.simpy_calls):
            simpy_times.append(_median_call_time(simpy_makespan, [(g, rows[r])]))
            chunk = [(a,) for a in rows[r * per_round : (r + 1) * per_round]]
            single_times.extend(_call_times(single, chunk))
            if r % batch_every == 0 and len(batch_times) < args.batch_reps:
                t0 = time.perf_counter()
                dg.simulate_batch(g, batch, config=REFERENCE)
                batch_times.append((time.perf_counter() - t0) / args.batch)
        if args.smoke:
            for a in rows[: args.simpy_calls]:
                ours, theirs = dg.simulate(g, a, config=REFERENCE).makespan, simpy_makespan(g, a)
                common.check(ours == theirs, f"{name}: simulate {ours!r} != SimPy {theirs!r} on one assignment")
        t_simpy = float(np.median(simpy_times))
        t_single = float(np.median(single_times))
        t_batch = float(np.median(batch_times))
        r_single, r_batch = t_simpy / t_single, t_simpy / t_batch
        worst_single, worst_batch = min(worst_single, r_single), min(worst_batch, r_batch)
        print(
            f"{name:<24}{g.n_ops:>5}{g.n_edges:>5}{n_devices:>3}  {_fmt_time(t_simpy):>11}  "
            f"{_fmt_time(t_single):>13}  {_fmt_time(t_batch):>11}  {r_single:>8.0f}x  {r_batch:>8.0f}x  "
            f"{_verdict(r_single >= TARGET_SINGLE):>6}  {_verdict(r_batch >= TARGET_BATCH):>7}"
        )
    print(
        f"worst ratio: single call {worst_single:.0f}x (target >= {TARGET_SINGLE:.0f}x: "
        f"{_verdict(worst_single >= TARGET_SINGLE)}), batch {worst_batch:.0f}x "
        f"(target >= {TARGET_BATCH:.0f}x: {_verdict(worst_batch >= TARGET_BATCH)})"
    )


def bench_scaling(args: argparse.Namespace) -> None:
    sizes = (1_000,) if args.smoke else (1_000, 10_000, 100_000)
    reps = {1_000: args.scale_reps * 10, 10_000: args.scale_reps * 3, 100_000: args.scale_reps}
    n_devices = 4
    print(
        f"\n== Scaling: random local DAGs (about 2 inputs per op, window {args.window}), "
        f"{n_devices} devices, random assignment, single calls =="
    )
    header = (
        f"{'ops':>8}{'edges':>9}  {'mode':<10}{'calls':>6}  {'ms/call':>9}  "
        f"{'ns/(op+edge)':>12}  {'<=50ns':>6}"
    )
    print(header)
    print("-" * len(header))
    for n in sizes:
        g = random_local_dag(n, window=args.window, seed=args.seed)
        rng = np.random.default_rng([args.seed, n])
        assigns = [(rng.integers(0, n_devices, size=n).astype(np.int64),) for _ in range(reps[n])]
        for mode, config in (("general", GENERAL), ("reference", REFERENCE)):
            dg.simulate(g, assigns[0][0], config=config)  # warm up on this graph
            t = _median_call_time(functools.partial(dg.simulate, g, config=config), assigns)
            ns = common.finite_positive(t, f"simulate time at {n} ops ({mode})") * 1e9 / (g.n_ops + g.n_edges)
            verdict = _verdict(ns <= TARGET_NS) if n == 100_000 else ""
            print(
                f"{n:>8}{g.n_edges:>9}  {mode:<10}{reps[n]:>6}  {t * 1e3:>9.3f}  {ns:>12.1f}  {verdict:>6}"
            )


@numba.njit(cache=True)
def _floor_many(succ_ptr, succ_dst, in_degree, comp, comm, assignments, n_dev, makespans):
    """Makespans of list scheduling by ready time, ties by queue position (not SimPy's order).

    The ready ops wait in a sorted array as in the list kernel, without its heap fallback: meant
    for the paper graphs' small frontiers only.
    """
    n = comp.shape[0]
    ready = np.empty(n)
    missing = np.empty(n, np.int64)
    queue_time = np.empty(n)
    queue_op = np.empty(n, np.int64)
    free_at = np.empty(n_dev)
    for b in range(assignments.shape[0]):
        a = assignments[b]
        head = 0
        tail = 0
        for o in range(n):
            missing[o] = in_degree[o]
            ready[o] = 0.0
            if in_degree[o] == 0:
                queue_time[tail] = 0.0
                queue_op[tail] = o
                tail += 1
        free_at[:] = 0.0
        makespan = 0.0
        while head < tail:
            t = queue_time[head]
            w = queue_op[head]
            head += 1
            d = a[w]
            end = max(t, free_at[d]) + comp[w]
            free_at[d] = end
            makespan = max(makespan, end)
            for k in range(succ_ptr[w], succ_ptr[w + 1]):
                c = succ_dst[k]
                ready[c] = max(ready[c], end + (comm[w] if a[c] != d else 0.0))
                missing[c] -= 1
                if missing[c] == 0:
                    i = tail
                    while i > head and queue_time[i - 1] > ready[c]:
                        queue_time[i] = queue_time[i - 1]
                        queue_op[i] = queue_op[i - 1]
                        i -= 1
                    queue_time[i] = ready[c]
                    queue_op[i] = c
                    tail += 1
        makespans[b] = makespan


def bench_floor(args: argparse.Namespace) -> None:
    print(
        "\n== The floor, one thread: exact list kernel (simulate_batch) vs list scheduling without "
        "SimPy's tie order or traces (not the reference model) =="
    )
    header = (
        f"{'graph':<24}{'exact/asg':>11}  {'floor/asg':>11}  {'exact/floor':>11}  {'thread gain':>11}  "
        f"{'x batch at floor':>16}  {'floor differs':>13}"
    )
    print(header)
    print("-" * len(header))
    for name, n_devices in PAPER_GRAPHS:
        g = load_graph(name)
        rng = np.random.default_rng([args.seed, g.n_ops, 3])
        batch = rng.integers(0, n_devices, size=(args.batch, g.n_ops)).astype(np.int64)
        floor_args = (g.succ_ptr, g.succ, g.in_degree, g.flops, g.out_bytes)
        floor_out = np.empty(args.batch)
        _floor_many(*floor_args, batch[:8], n_devices, floor_out)
        exact_times, floor_times, simpy_times, parallel_times = [], [], [], []
        for _ in range(args.batch_reps):
            with numba_threads(1):
                t0 = time.perf_counter()
                exact = dg.simulate_batch(g, batch, config=REFERENCE)
                exact_times.append((time.perf_counter() - t0) / args.batch)
            t0 = time.perf_counter()
            dg.simulate_batch(g, batch, config=REFERENCE)
            parallel_times.append((time.perf_counter() - t0) / args.batch)
            t0 = time.perf_counter()
            _floor_many(*floor_args, batch, n_devices, floor_out)
            floor_times.append((time.perf_counter() - t0) / args.batch)
            simpy_times.append(_median_call_time(simpy_makespan, [(g, batch[0])]))
        t_exact, t_floor = float(np.median(exact_times)), float(np.median(floor_times))
        scaling = t_exact / float(np.median(parallel_times))  # what the threads gave the exact kernel
        at_floor = float(np.median(simpy_times)) / (t_floor / scaling)
        differs = float(np.mean(floor_out / REFERENCE.time_divisor != exact))
        common.check(bool(np.all(np.isfinite(floor_out) & (floor_out > 0))), f"{name}: a floor makespan is not > 0")
        print(
            f"{name:<24}{_fmt_time(t_exact):>11}  {_fmt_time(t_floor):>11}  {t_exact / t_floor:>10.2f}x  "
            f"{scaling:>10.2f}x  {at_floor:>15.0f}x  {differs:>12.0%}"
        )


def warm_up() -> None:
    """Compile every kernel used below (single and batch, both modes) on a tiny graph."""
    g = random_local_dag(50, seed=1)
    a = np.arange(g.n_ops, dtype=np.int64) % 4
    for config in (REFERENCE, GENERAL):
        dg.simulate(g, a, config=config)
        dg.simulate_batch(g, np.stack([a, a[::-1]]), config=config)


def main(argv: list[str] | None = None) -> None:
    parser = common.parser(__doc__, writes=False)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a few seconds)")
    parser.add_argument("--window", type=int, default=64, help="predecessor window of the random DAGs")
    args = parser.parse_args(argv)
    # calls timed: SimPy per graph, simulate per graph, batch size, batches, scaling unit of repetitions
    counts = (5, 300, 1000, 3, 3) if args.quick else (30, 3000, 2000, 7, 9)
    if args.smoke:
        counts = (2, 20, 40, 1, 1)
    args.simpy_calls, args.single_calls, args.batch, args.batch_reps, args.scale_reps = counts

    common.start("bench_sim", args)
    print(f"doppler-gym {dg.__version__} | numpy {np.__version__} | numba {numba.__version__}")
    t0 = time.perf_counter()
    warm_up()
    print(f"numba warm-up: {time.perf_counter() - t0:.1f} s")
    bench_paper(args)
    bench_scaling(args)
    bench_floor(args)


if __name__ == "__main__":
    main()
