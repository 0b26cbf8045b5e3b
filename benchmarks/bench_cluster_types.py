"""Type-aware scheduling on heterogeneous GPU clusters (``doppler_gym.cluster``, issue 36): Gavel's traces,
node order, and the engine's cost as the cluster and the trace grow.

Run from the repository root::

    python -m benchmarks.bench_cluster_types            # the tables below (~5 min on a 2-core machine)
    python -m benchmarks.bench_cluster_types --smoke    # seconds: 30 jobs, tiny scaling sizes
    python -m benchmarks.bench_cluster_types --scaling-only --large   # table 3 up to 100,000 jobs

Prints, as markdown tables:

1. the built-in schedulers on Gavel's traces (Gavel's 10-column format, read by
   ``traces.load_gavel_trace``; job times from Gavel's measured throughputs) and heterogeneous clusters:
   T1 (Gavel's physical-cluster trace less one job) on 8 V100 + 16 P100 + 24 K80 in servers of 4, T3
   (150 jobs of Gavel's generator) on 12 of each type, T4 (500 jobs) on 36 of each; average JCT and
   makespan, with Gavel's figures for its heterogeneity-agnostic ``fifo`` and aware ``fifo_perf``
   from its own simulator (``benchmarks/data/gavel/README.md``) beside them;
2. FIFO on T3 with the three types listed in each of the 6 orders (the spread of the average JCT);
3. seconds per ``dg.cluster.run`` of generated traces (``traces.generate(n, seed, mean_interarrival)``,
   the load of ``bench_cluster``'s trace: 1,000 jobs at 30 s on 256 GPUs, scaled by the GPUs) on
   ``Cluster.uniform(G // 8, 8)`` per scheduler and size.

The exit status is always 0 (timings depend on the machine).
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

from benchmarks import common
from benchmarks.common import best_time, markdown_table
from doppler_gym import cluster as C

DATA = common.ROOT / "benchmarks" / "data" / "gavel"
# trace -> (cluster GPUs v100:p100:k80, Gavel's fifo (JCT, makespan), Gavel's fifo_perf (JCT, makespan)) [s]
GAVEL = {"t1_mmf95": ((8, 16, 24), (35_962, 196_524), (19_438, 73_505)),
         "t3_gen150": ((12, 12, 12), (65_639, 1.81e6), (49_990, 1_400_017)),
         "t4_gen500": ((36, 36, 36), (134_996, 3.49e6), (85_270, 1_242_288))}
SCHEDULERS = ("fifo", "fifo-strict", "srtf", "las", "tiresias", "gandiva")


def cluster_of(counts: tuple[int, int, int], order: tuple[str, ...] = ("v100", "p100", "k80")) -> C.Cluster:
    """``counts`` GPUs of v100, p100, k80 in servers of 4, the types' servers listed in ``order``."""
    per = dict(zip(("v100", "p100", "k80"), counts))
    return C.Cluster(tuple(C.Node(4, t, None) for t in order for _ in range(per[t] // 4)),
                     name=":".join(str(c) for c in counts))


def scheduler(name: str) -> C.Scheduler:
    return C.schedulers.FIFO(backfill=False) if name == "fifo-strict" else C.schedulers.make(name)


def trace_path(name: str) -> Path:
    """Gavel's comparison trace ``name`` (``benchmarks/data/gavel/``, MIT)."""
    return DATA / f"{name}.trace"


def gavel_table(names: tuple[str, ...], schedulers: tuple[str, ...], limit: int | None) -> list[dict]:
    rows, out = [], []
    for name in names:
        path = trace_path(name)
        if not path.exists():
            print(f"({path} not found: {name} skipped)")
            continue
        counts, fifo, perf = GAVEL[name]
        trace = C.traces.load_gavel_trace(path, limit=limit)
        cluster = cluster_of(counts)
        for s in schedulers:
            seconds, r = best_time(lambda t=trace, c=cluster, s=s: C.run(t, c, scheduler(s), seed=0))
            common.finite_positive(r.avg_jct, f"{name} {s}: average JCT")
            rows.append([name, cluster.name, s, f"{r.avg_jct:,.0f}", f"{r.makespan:,.0f}", f"{seconds:.2f}"])
            out.append({"trace": name, "scheduler": s, "avg_jct": r.avg_jct, "makespan": r.makespan})
        rows.append([name, cluster.name, "Gavel fifo (agnostic)", f"{fifo[0]:,.0f}", f"{fifo[1]:,.0f}", ""])
        rows.append([name, cluster.name, "Gavel fifo_perf (aware)", f"{perf[0]:,.0f}", f"{perf[1]:,.0f}", ""])
    print(markdown_table(("trace", "v100:p100:k80", "scheduler", "avg JCT [s]", "makespan [s]", "seconds"), rows))
    return out


def order_table(limit: int | None) -> None:
    trace = C.traces.load_gavel_trace(trace_path("t3_gen150"), limit=limit)
    rows, jcts = [], []
    for order in itertools.permutations(("v100", "p100", "k80")):
        r = C.run(trace, cluster_of((12, 12, 12), order), "fifo", seed=0)
        jcts.append(r.avg_jct)
        rows.append([" + ".join(order), f"{r.avg_jct:,.1f}", f"{r.makespan:,.0f}"])
    common.check(max(jcts) - min(jcts) <= 1e-6 * max(jcts), f"FIFO's average JCT depends on node order: {jcts}")
    print(markdown_table(("servers listed", "fifo avg JCT [s]", "makespan [s]"), rows))


def scaling_table(sizes: list[tuple[int, int]], schedulers: tuple[str, ...], seed: int) -> None:
    """One run per size and scheduler: wall and CPU seconds (the CPU time of this process: on a shared machine
    the wall time grows with the other processes' load, given as the 1-minute load average before the run)."""
    rows = []
    for n_jobs, n_gpus in sizes:
        trace = C.traces.generate(n_jobs, seed=seed, mean_interarrival=30.0 * 256 / n_gpus)
        cluster = C.Cluster.uniform(n_gpus // 8, 8)
        for s in schedulers:
            load = os.getloadavg()[0]
            cpu0 = time.process_time()
            seconds, r = best_time(lambda t=trace, c=cluster, s=s: C.run(t, c, s, seed=0))
            cpu = time.process_time() - cpu0
            common.check(r.n_jobs == n_jobs, f"{s}: {r.n_jobs} jobs finished of {n_jobs}")
            rows.append([f"{n_jobs:,}", f"{n_gpus:,}", s, f"{seconds:.2f}", f"{cpu:.2f}", f"{load:.1f}",
                         f"{r.avg_jct:,.0f}"])
            print(f"  {n_jobs} jobs, {n_gpus} GPUs, {s}: {seconds:.2f} s ({cpu:.2f} s CPU, load {load:.1f})",
                  flush=True)
    print()
    print(markdown_table(("jobs", "GPUs", "scheduler", "seconds", "CPU s", "load avg", "avg JCT [s]"), rows))


def main(argv: list[str] | None = None) -> None:
    parser = common.parser(__doc__, writes=False)
    parser.add_argument("--large", action="store_true",
                        help="add 30,000 jobs on 3,072 GPUs and 100,000 jobs on 10,240 GPUs (las, tiresias; "
                        "about 2 min per 100,000-job run on a 2-core machine)")
    parser.add_argument("--scaling-only", action="store_true", help="only table 3 (the cost as the trace grows)")
    args = parser.parse_args(argv)
    common.start("bench_cluster_types", args)
    if args.scaling_only:
        scaling(args)
        return
    limit = 30 if args.smoke else None
    names = ("t3_gen150",) if args.smoke else tuple(GAVEL)
    schedulers = ("fifo", "las") if args.smoke else SCHEDULERS
    print("\n## 1. Gavel's traces on heterogeneous clusters (servers of 4 GPUs)\n")
    gavel_table(names, schedulers, limit)
    print("\n## 2. FIFO on T3 (12 V100 + 12 P100 + 12 K80) with the servers listed in each order\n")
    order_table(limit)
    scaling(args)


def scaling(args) -> None:
    """Table 3: the smoke size, or 1,000-10,000 jobs under four schedulers (and with ``--large`` 30,000 and
    100,000 jobs under las and tiresias)."""
    print("\n## 3. Seconds per run as the trace and the cluster grow\n")
    if args.smoke:
        scaling_table([(50, 16)], ("fifo", "las", "tiresias", "gandiva"), args.seed)
        return
    sizes = [(1_000, 128), (3_000, 384), (10_000, 1_024)]
    scaling_table(sizes, ("fifo", "las", "tiresias", "gandiva"), args.seed)
    if args.large:
        scaling_table([(30_000, 3_072), (100_000, 10_240)], ("las", "tiresias"), args.seed)


if __name__ == "__main__":
    main()
