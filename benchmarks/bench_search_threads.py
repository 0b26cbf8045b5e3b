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
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", default="paper/llama-layer")
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--evals", type=int, default=50_000, help="simulated neighbours per search")
    ap.add_argument("--batches", default="16,64,256", help="batch sizes, comma-separated")
    ap.add_argument("--beside", action="store_true", help="measure beside a copy of this script")
    ap.add_argument("--spincount", type=int, default=None,
                    help="GOMP_SPINCOUNT for both processes (default: the variable as set, else OpenMP's own)")
    args = ap.parse_args()
    if args.spincount is not None:
        os.environ["GOMP_SPINCOUNT"] = str(args.spincount)  # read when OpenMP loads, below

    import numba

    import doppler_gym as dg

    other = None
    if args.beside:
        cmd = [sys.executable, __file__, "--graph", args.graph, "--devices", str(args.devices),
               "--evals", str(args.evals), "--batches", args.batches]
        other = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    graph = dg.instances.resolve_graph(args.graph)
    topology = dg.instances.resolve_topology(args.devices)
    config = dg.instances.default_config(graph)
    dg.baselines.local_search(graph, topology, config, seconds=None, max_evals=1000)  # compile
    where = "beside a copy" if args.beside else "alone"
    where += f", GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', 'unset')}"
    print(f"| batch | threads | seconds ({args.evals} evaluations, {where}) |")
    print("|---:|---:|---:|")
    for threads in [*sorted({numba.config.NUMBA_NUM_THREADS, 1}, reverse=True), None]:
        for batch in (int(b) for b in args.batches.split(",")):
            started = time.perf_counter()
            p = dg.baselines.local_search(graph, topology, config, seconds=None, max_evals=args.evals,
                                          batch_size=batch, threads=threads)
            label = threads if threads is not None else (
                f"tuned (ended on {p.info['numba_threads']}, threads ran {p.info['numba_utilisation']:.0%})")
            print(f"| {batch} | {label} | {time.perf_counter() - started:.2f} |", flush=True)
    if other is not None:
        other.wait()


if __name__ == "__main__":
    main()
