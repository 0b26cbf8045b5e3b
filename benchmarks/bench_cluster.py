"""Job-level cluster simulation (``doppler_gym.cluster``): speed, schedulers, failures, checkpoints.

Run from the repository root::

    python -m benchmarks.bench_cluster            # 1,000 generated jobs on 256 GPUs, then the tables
    python -m benchmarks.bench_cluster --quick    # 300 jobs on 64 GPUs
    python -m benchmarks.bench_cluster --smoke    # 40 jobs on 16 GPUs, one scheduler on the shipped traces

Prints, as markdown tables:

1. seconds per ``dg.cluster.run`` of the generated trace (``traces.generate(n, seed=0,
   mean_interarrival=30)``: Poisson arrivals, log-normal durations with median 30 min and log-sd
   1.8, GPU counts 1/2/4/8/16) on ``Cluster.uniform(n_gpus // 8, 8)`` (V100 DGX-1 nodes), per
   scheduler (best of ``--repeats``), with the metrics of each run;
2. the same trace with failures (per-GPU MTBF ``--mtbf`` seconds, 600 s restart delay) and a
   checkpoint every 600 iterations (1 s each) costing 30 s;
3. Gavel's shipped ``gavel-msr`` trace (533 jobs, iteration times from Gavel's V100 throughputs) on
   64 V100;
4. the effective-time fraction of one 8-GPU job against its checkpoint interval, around Young's
   interval sqrt(2 C M), with the expected fraction under Poisson failures and no restart delay
   (a segment of T + C seconds takes M (e^((T+C)/M) - 1) on average);
5. the Pollux/AdaptDL simulator's workload 1 (``pollux-workload-1``, 160 jobs) on 64 GPUs (16 nodes of
   4, as in Pollux) with every scheduler including ``elastic``, without and with a 30 s
   checkpoint-restore cost per preemption, migration or resize (``preemption_cost``).

The exit status is always 0 (timings depend on the machine).
"""

from __future__ import annotations

import math

from benchmarks import common
from benchmarks.common import best_time, markdown_table
from doppler_gym import cluster as C

SCHEDULERS = ("fifo", "srtf", "las", "tiresias", "gandiva")
COLUMNS = ("scheduler", "seconds", "avg JCT [s]", "p99 JCT [s]", "makespan [s]", "util.", "occup.",
           "goodput [it/GPU h]", "effective", "interruptions")


def row(name: str, seconds: float, r: C.ClusterResult) -> list[str]:
    """The cells of one scheduler's row of :data:`COLUMNS`."""
    return [name, f"{seconds:.2f}", f"{r.avg_jct:,.0f}", f"{r.p99_jct:,.0f}", f"{r.makespan:,.0f}",
            f"{r.utilisation:.3f}", f"{r.occupancy:.3f}", f"{r.goodput:,.0f}", f"{r.effective_fraction:.3f}",
            str(r.interruptions)]


def table(trace: C.JobTrace, cluster: C.Cluster, repeats: int, schedulers: tuple[str, ...] = SCHEDULERS,
          **kwargs: object) -> None:
    """Print one markdown row per scheduler: the fastest of ``repeats`` runs [s] and the run's metrics."""
    rows = []
    for name in schedulers:
        seconds, result = best_time(lambda name=name: C.run(trace, cluster, name, seed=0, **kwargs), repeats)
        common.finite_positive(result.avg_jct, f"{name}: average JCT")
        common.check(0.0 < result.occupancy <= 1.0 + 1e-9, f"{name}: occupancy {result.occupancy} not in (0, 1]")
        rows.append(row(name, seconds, result))
    print(markdown_table(COLUMNS, rows))
    print()


def main(argv: list[str] | None = None) -> None:
    parser = common.parser(__doc__, writes=False)
    parser.add_argument("--quick", action="store_true", help="300 jobs on 64 GPUs")
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats per scheduler (best is reported)")
    parser.add_argument("--mtbf", type=float, default=2e6, help="per-GPU MTBF for table 2 [s]")
    args = parser.parse_args(argv)
    n_jobs, n_gpus = (300, 64) if args.quick else (1_000, 256)
    few = SCHEDULERS  # the schedulers of the shipped traces' tables
    fractions, seeds = (1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8), range(args.seed, args.seed + 5)
    if args.smoke:
        n_jobs, n_gpus, args.repeats, few, fractions = 40, 16, 1, ("fifo",), (1,)
        seeds = range(args.seed, args.seed + 1)
    common.start("bench_cluster", args)
    print(f"{n_jobs} jobs, {n_gpus} GPUs\n")
    cluster = C.Cluster.uniform(n_gpus // 8, 8)

    print(f"## 1. {n_jobs} generated jobs on {n_gpus} GPUs, no failures\n")
    trace = C.traces.generate(n_jobs, seed=args.seed, mean_interarrival=30.0)
    table(trace, cluster, args.repeats)

    print(f"## 2. the same with failures (MTBF {args.mtbf:g} s per GPU), checkpoints every 600 it. (30 s)\n")
    trace_ck = C.traces.generate(n_jobs, seed=args.seed, mean_interarrival=30.0, checkpoint_every=600,
                                 checkpoint_cost=30.0)
    table(trace_ck, cluster, 1, failures=C.FailureModel(gpu_mtbf=args.mtbf, restart_delay=600.0))

    print("## 3. gavel-msr (533 jobs) on 64 V100\n")
    table(C.traces.load("gavel-msr"), C.Cluster.uniform(8, 8), 1, few)

    cost, job_mtbf = 20.0, 2_000.0
    t_young = C.young_interval(cost, job_mtbf)
    print(f"## 4. one 8-GPU job, C = {cost:g} s, job MTBF = {job_mtbf:g} s: Young's interval {t_young:.0f} s\n")
    print(f"| T / Young | T [it. of 1 s] | effective-time fraction (seeds {seeds[0]}-{seeds[-1]}) "
          "| T / (M (e^((T+C)/M) - 1)) |")
    print("|---:|---:|---|---:|")
    node = C.Cluster((C.Node(8, "v100", None),))
    for f in fractions:
        every = max(1, round(f * t_young))
        job = C.Job(0, 0.0, 300_000, gpus=8, workload=None, profile={"*": {8: 1.0}}, checkpoint_every=every,
                    checkpoint_cost=cost)
        eff = [C.run(C.JobTrace((job,)), node, "fifo", seed=s, failures=C.FailureModel(gpu_mtbf=8 * job_mtbf))
               .effective_fraction for s in seeds]
        common.check(all(0.0 < e <= 1.0 for e in eff), f"T / Young {f:g}: effective fractions {eff} not in (0, 1]")
        model = every / (job_mtbf * math.expm1((every + cost) / job_mtbf))  # Poisson failures, no restart delay
        print(f"| {f:g} | {every} | {', '.join(f'{e:.3f}' for e in eff)} | {model:.3f} |")

    pollux = C.traces.load("pollux-workload-1")
    for restore in (0.0, 30.0):
        print(f"\n## 5. pollux-workload-1 (160 jobs) on 16 x 4 GPUs, preemption cost {restore:g} s\n")
        schedulers = (*few, "elastic")
        table(pollux, C.Cluster.uniform(16, 4, preset=None), 1, schedulers, preemption_cost=restore)


if __name__ == "__main__":
    main()
