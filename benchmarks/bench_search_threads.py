"""Wall clock of a batched local search by batch size and Numba threads, alone or beside a copy.

The thread counts are every thread Numba has, one, and tuned between the two (``local_search(threads=None)``, the
default: :class:`~doppler_gym.sim.threads.ThreadTuner` measures both and keeps the faster).

Each ``simulate_batch`` call of :func:`~doppler_gym.baselines.local_search` is one Numba parallel
launch. On a CPU that another process keeps busy, the launch's threads wait for each other at every
call, which costs most at small batches (``docs/results/train_default.md``). ``--beside`` starts a
copy of this script (same options, without ``--beside``) and measures while it runs.
``--spincount N`` sets ``GOMP_SPINCOUNT`` (how long an idle OpenMP thread spins before it sleeps;
GNU OpenMP, the runtime of Numba's default threading layer on Linux) for both before Numba loads.

    python benchmarks/bench_search_threads.py                # alone
    python benchmarks/bench_search_threads.py --beside       # beside a copy of itself
    python benchmarks/bench_search_threads.py --beside --spincount 0
    python benchmarks/bench_search_threads.py --teacher --beside   # training's search teacher

``--teacher`` times ``doppler train``'s search teacher on one graph instead
(:func:`agents.training.teacher.search_placement` with the default recipe's evaluations, restarts
and batch size): on one Numba thread (a ``numba_threads(1)`` around it) and tuned (its default).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from contextlib import nullcontext


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", default="paper/llama-layer")
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--evals", type=int, default=50_000, help="simulated neighbours per search")
    ap.add_argument("--batches", default="16,64,256", help="batch sizes, comma-separated")
    ap.add_argument("--beside", action="store_true", help="measure beside a copy of this script")
    ap.add_argument("--spincount", type=int, default=None,
                    help="GOMP_SPINCOUNT for both processes (default: the variable as set, else OpenMP's own)")
    ap.add_argument("--teacher", action="store_true",
                    help="time the search teacher (one thread against tuned) instead of single searches")
    ap.add_argument("--seed", type=int, default=0, help="--teacher: the teacher's seed")
    args = ap.parse_args()
    if args.spincount is not None:
        os.environ["GOMP_SPINCOUNT"] = str(args.spincount)  # read when OpenMP loads, below

    import doppler_gym as dg

    other = None
    if args.beside:
        cmd = [sys.executable, __file__, "--graph", args.graph, "--devices", str(args.devices),
               "--evals", str(args.evals), "--batches", args.batches, "--seed", str(args.seed)]
        cmd += ["--teacher"] if args.teacher else []
        other = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    graph = dg.instances.resolve_graph(args.graph)
    topology = dg.instances.resolve_topology(args.devices)
    config = dg.instances.default_config(graph)
    dg.baselines.local_search(graph, topology, config, seconds=None, max_evals=1000)  # compile
    where = "beside a copy" if args.beside else "alone"
    where += f", GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', 'unset')}"
    if args.teacher:
        time_teacher(graph, topology, config, args.seed, where)
    else:
        time_searches(graph, topology, config, args.evals, [int(b) for b in args.batches.split(",")], where)
    if other is not None:
        other.wait()


def time_searches(graph, topology, config, evals: int, batches: list[int], where: str) -> None:
    """One table row per batch size and thread count: a search of ``evals`` neighbours."""
    import numba

    import doppler_gym as dg

    print(f"| batch | threads | seconds ({evals} evaluations, {where}) |")
    print("|---:|---:|---:|")
    for threads in [*sorted({numba.config.NUMBA_NUM_THREADS, 1}, reverse=True), None]:
        for batch in batches:
            started = time.perf_counter()
            p = dg.baselines.local_search(graph, topology, config, seconds=None, max_evals=evals,
                                          batch_size=batch, threads=threads)
            label = threads if threads is not None else (
                f"tuned (ended on {p.info['numba_threads']}, threads ran {p.info['numba_utilisation']:.0%})")
            print(f"| {batch} | {label} | {time.perf_counter() - started:.2f} |", flush=True)


def time_teacher(graph, topology, config, seed: int, where: str) -> None:
    """Two table rows: the default recipe's search teacher on one Numba thread, then tuned."""
    from agents.training.args import TEACHER_BATCH, TEACHER_EVALS, TEACHER_RESTARTS
    from agents.training.teacher import search_placement
    from doppler_gym.sim.threads import numba_threads

    evals, restarts, batch = TEACHER_EVALS["one"], TEACHER_RESTARTS["one"], TEACHER_BATCH["one"]
    print(f"| threads | seconds | makespan | evaluations (search teacher, seed {seed}, batch {batch}, {where}) |")
    print("|---|---:|---:|---:|")
    for label in ("1 (the old rule)", "tuned"):
        started = time.perf_counter()
        with numba_threads(1) if label.startswith("1") else nullcontext():
            found = search_placement(graph, topology, config, evals, seed, restarts, batch_size=batch)
        print(f"| {label} | {time.perf_counter() - started:.2f} | {found['makespan']:.4f} | {found['total_evals']} |",
              flush=True)


if __name__ == "__main__":
    main()
