"""Gavel's policies and round mechanism against Gavel's own simulator, on Gavel's traces.

Run from the repository root::

    python -m benchmarks.bench_gavel                  # the tables of docs/results/gavel.md (about a minute)
    python -m benchmarks.bench_gavel --seeds 3        # fewer seeds for the agnostic policies' spread
    python -m benchmarks.bench_gavel --scale          # and the scaling table (up to 100,000 jobs)
    python -m benchmarks.bench_gavel --smoke          # T1 rows only, checked against Gavel's figures

Traces: ``benchmarks/data/gavel/`` (Gavel's 10-column format, MIT; see its README). Gavel's figures
(average JCT and makespan from its unmodified simulator, commit c4fa400, cvxpy + ECOS) are those of
``/work/shared/data/gavel/comparison/README.md``, copied into ``GAVEL`` below. Each row runs
:func:`doppler_gym.cluster.rounds.simulate_rounds` with the row's round length and reset interval;
``fifo (Gavel's bugs)`` is :class:`~doppler_gym.cluster.gavel_policies.FIFOPolicy` with ``gavel_bugs=True``
(the over-allocating FIFO Gavel runs), ``fifo`` the fixed one. Agnostic policies shuffle the GPU types
every round and ``fifo`` draws types at random, so their rows also give the range over ``--seeds`` seeds.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks import common
from doppler_gym.cluster import Cluster, FailureModel, JobTrace, Node, gavel_engine, rounds
from doppler_gym.cluster import gavel_policies as gp
from doppler_gym.cluster.interference import gavel_table

REQUIRES = ("highspy",)
TRACES = Path(__file__).resolve().parent / "data" / "gavel"

# (trace, cluster, policy, round [s], reset [s], Gavel's avg JCT [s], Gavel's makespan [s], note)
GAVEL = [
    ("t1_mmf95", "16:0:0", "fifo-bugs", 360, 1920, 38_583, 103_271, "Gavel's FIFO as it runs"),
    ("t1_mmf95", "16:0:0", "fifo", 60, 0, 33_924, 97_816, "strict FIFO, matched mechanics"),
    ("t1_mmf95", "16:0:0", "max_min_fairness", 360, 1920, 34_903, 90_389, ""),
    ("t1_mmf95", "32:0:0", "fifo-bugs", 360, 1920, 13_800, 61_512, "Gavel's FIFO as it runs"),
    ("t1_mmf95", "32:0:0", "fifo", 60, 0, 12_593, 61_336, "strict FIFO, matched mechanics"),
    ("t1_mmf95", "32:0:0", "max_min_fairness", 360, 1920, 11_815, 63_312, ""),
    ("t1_mmf95", "8:16:24", "fifo-bugs", 360, 1920, 35_962, 196_524, "agnostic"),
    ("t1_mmf95", "8:16:24", "fifo_perf", 360, 1920, 19_438, 73_505, "aware"),
    ("t1_mmf95", "8:16:24", "fifo_perf", 360, 0, 17_115, 68_773, "aware, reset every round"),
    ("t1_mmf95", "8:16:24", "max_min_fairness", 360, 1920, 19_826, 75_838, "agnostic"),
    ("t1_mmf95", "8:16:24", "max_min_fairness_perf", 360, 1920, 14_490, 63_945, "aware"),
    ("t3_gen150", "12:12:12", "fifo-bugs", 360, 1920, 65_639, 1.81e6, "agnostic"),
    ("t3_gen150", "12:12:12", "fifo_perf", 360, 1920, 49_990, 1_400_017, "aware"),
    ("t3_gen150", "12:12:12", "fifo_perf", 360, 0, 49_510, 1_399_504, "aware, reset every round"),
    ("t3_gen150", "12:12:12", "max_min_fairness", 360, 1920, 75_407, 1.83e6, "agnostic"),
    ("t4_gen500", "36:36:36", "fifo-bugs", 360, 1920, 134_996, 3.49e6, "agnostic"),
    ("t4_gen500", "36:36:36", "fifo_perf", 360, 1920, 85_270, 1_242_288, "aware"),
    ("t4_gen500", "36:36:36", "fifo_perf", 360, 0, 83_184, 1_237_936, "aware, reset every round"),
    ("t4_gen500", "36:36:36", "max_min_fairness", 360, 1920, 95_886, 1.83e6, "agnostic"),
]
SETTINGS = [("t1_mmf95", "8:16:24"), ("t3_gen150", "12:12:12"), ("t4_gen500", "36:36:36")]
FAMILIES = [("fifo", "fifo_perf"), ("max_min_fairness", "max_min_fairness_perf"),
            ("finish_time_fairness", "finish_time_fairness_perf")]


def run(trace: str, cluster: str, policy: str, round_s: float = 360.0, reset_s: float = 1920.0,
        seed: int = 0) -> tuple[rounds.RoundResult, float]:
    """One run and its wall time [s]; ``policy`` ``"fifo-bugs"`` is Gavel's FIFO as it runs."""
    jobs = rounds.read_gavel_trace(TRACES / f"{trace}.trace")
    pol = gp.Policy("fifo", seed=seed, gavel_bugs=True) if policy == "fifo-bugs" else gp.Policy(policy, seed=seed)
    t0 = time.perf_counter()
    r = rounds.simulate_rounds(jobs, rounds.parse_cluster(cluster), pol, round_s=round_s, reset_s=reset_s, seed=seed)
    return r, time.perf_counter() - t0


def randomised(policy: str) -> bool:
    """Whether a policy's result depends on the seed (the agnostic ones: per-round type shuffle, fifo's draws)."""
    return policy == "fifo-bugs" or not gp.AWARE[policy]


def comparison(rows: list, seeds: int) -> tuple[list, list]:
    """The comparison table's rows and the JSON records."""
    table, records = [], []
    for trace, cluster, policy, round_s, reset_s, g_jct, g_mk, note in rows:
        r, wall = run(trace, cluster, policy, round_s, reset_s)
        spread = ""
        jcts = [r.avg_jct]
        if randomised(policy) and seeds > 1:
            jcts += [run(trace, cluster, policy, round_s, reset_s, seed=s)[0].avg_jct for s in range(1, seeds)]
            spread = f"{min(jcts):,.0f}-{max(jcts):,.0f}"
        name = "fifo (Gavel's bugs)" if policy == "fifo-bugs" else policy
        mech = f"{round_s:g} s, " + ("reset when jobs change" if reset_s == 0 else f"reset >= {reset_s:g} s")
        table.append([trace, cluster, name, mech, f"{g_jct:,.0f}", f"{r.avg_jct:,.0f}", f"{r.avg_jct / g_jct:.3f}",
                      spread, f"{g_mk:,.0f}", f"{r.makespan:,.0f}", f"{r.makespan / g_mk:.3f}", note])
        records.append({"trace": trace, "cluster": cluster, "policy": name, "round_s": round_s, "reset_s": reset_s,
                        "gavel_avg_jct": g_jct, "avg_jct": r.avg_jct, "avg_jct_seeds": jcts, "gavel_makespan": g_mk,
                        "makespan": r.makespan, "wall_s": wall, "jobs_per_s": len(r.jct) / wall})
        print(f"  {trace} {cluster} {name} [{mech}]: JCT {r.avg_jct:,.0f} s (Gavel {g_jct:,.0f}, "
              f"x{r.avg_jct / g_jct:.3f}), makespan {r.makespan:,.0f} s (x{r.makespan / g_mk:.3f}) in {wall:.2f} s",
              flush=True)
    return table, records


def aware_vs_agnostic(settings: list, families: list) -> tuple[list, list]:
    """Average JCT [s] of each agnostic policy and its aware form on each setting, and the ratio."""
    table, records = [], []
    for trace, cluster in settings:
        for agnostic, aware in families:
            a, wa = run(trace, cluster, agnostic)
            b, wb = run(trace, cluster, aware)
            table.append([trace, cluster, agnostic, f"{a.avg_jct:,.0f}", f"{b.avg_jct:,.0f}",
                          f"{a.avg_jct / b.avg_jct:.2f}", f"{a.makespan:,.0f}", f"{b.makespan:,.0f}",
                          f"{wa + wb:.1f}"])
            records.append({"trace": trace, "cluster": cluster, "agnostic": agnostic, "aware": aware,
                            "agnostic_avg_jct": a.avg_jct, "aware_avg_jct": b.avg_jct,
                            "agnostic_makespan": a.makespan, "aware_makespan": b.makespan})
            print(f"  {trace} {cluster} {agnostic}: {a.avg_jct:,.0f} -> {aware} {b.avg_jct:,.0f} "
                  f"(x{a.avg_jct / b.avg_jct:.2f})", flush=True)
    return table, records


ENGINE = [("16:0:0", "max_min_fairness", 34_903), ("32:0:0", "max_min_fairness", 11_815),
          ("8:16:24", "fifo_perf", 19_438), ("8:16:24", "max_min_fairness", 19_826),
          ("8:16:24", "max_min_fairness_perf", 14_490)]


def engine_cluster(spec: str) -> Cluster:
    """Gavel's ``V:P:K`` cluster as engine nodes of 4 GPUs of one type (T1's physical cluster's servers)."""
    return Cluster(tuple(Node(4, t, None) for t, v in rounds.parse_cluster(spec).items() for _ in range(v // 4)),
                   name=spec)


def on_engine(rows: list) -> tuple[list, list]:
    """T1 under the policies on the event engine (:mod:`doppler_gym.cluster.gavel_engine`): against the round
    simulator and Gavel, then with failures (per-GPU MTBF 48 h, 60 s restarts, a 10 s checkpoint every
    5% of each job)."""
    jobs = rounds.read_gavel_trace(TRACES / "t1_mmf95.trace")
    trace = rounds.to_job_trace(jobs, "t1_mmf95")
    ckpt = JobTrace(tuple(replace(j, checkpoint_every=max(1, j.iterations // 20), checkpoint_cost=10.0)
                          for j in trace.jobs), name="t1_mmf95+ckpt")
    failures = FailureModel(gpu_mtbf=48 * 3600.0, restart_delay=60.0)
    table, records = [], []
    for spec, policy, g_jct in rows:
        t0 = time.perf_counter()
        e = gavel_engine.run_gavel_policy(trace, engine_cluster(spec), policy, seed=0)
        wall = time.perf_counter() - t0
        own = rounds.simulate_rounds(jobs, rounds.parse_cluster(spec), policy)
        f = gavel_engine.run_gavel_policy(ckpt, engine_cluster(spec), policy, seed=0, failures=failures)
        table.append([spec, policy, f"{g_jct:,.0f}", f"{own.avg_jct:,.0f}", f"{e.avg_jct:,.0f}",
                      f"{e.avg_jct / own.avg_jct:.3f}", f"{own.makespan:,.0f}", f"{e.makespan:,.0f}",
                      f"{f.avg_jct:,.0f}", f"{f.interruptions}", f"{wall:.2f}"])
        records.append({"cluster": spec, "policy": policy, "gavel_avg_jct": g_jct, "rounds_avg_jct": own.avg_jct,
                        "engine_avg_jct": e.avg_jct, "rounds_makespan": own.makespan, "engine_makespan": e.makespan,
                        "engine_failures_avg_jct": f.avg_jct, "interruptions": f.interruptions, "wall_s": wall})
        print(f"  t1_mmf95 {spec} {policy}: engine {e.avg_jct:,.0f} s, rounds {own.avg_jct:,.0f} s, with failures "
              f"{f.avg_jct:,.0f} s ({f.interruptions} interruptions)", flush=True)
    return table, records


def generated(n: int, gpus_per_type: int, seed: int, load: float = 0.9) -> rounds.GavelJobs:
    """``n`` one-GPU jobs of the Gavel job types measured on all three GPU types (uniformly drawn), solo V100
    durations log-normal (median 1 h, log-sd 1), Poisson arrivals at ``load`` x the cluster's capacity
    in V100-equivalents (``gpus_per_type`` of each type, counted as 1 + 0.6 + 0.3 V100s)."""
    table = gavel_table()
    kinds = sorted(jt for jt in table["v100"]["solo_steps_per_s"]
                   if all(table[g]["solo_steps_per_s"][jt].get("1", 0) > 0 for g in rounds.GPU_TYPES))
    rng = np.random.default_rng(seed)
    jt = rng.choice(kinds, n)
    duration = np.exp(np.log(3600.0) + rng.standard_normal(n))  # [s] on a V100
    steps = np.maximum(1, (duration * [table["v100"]["solo_steps_per_s"][j]["1"] for j in jt]).astype(np.int64))
    rate = load * gpus_per_type * 1.9 / duration.mean()  # [jobs/s]
    arrival = np.concatenate([[0.0], np.cumsum(rng.exponential(1 / rate, n - 1))])
    return rounds.GavelJobs(tuple(jt), steps, np.ones(n, dtype=np.int64), np.ones(n), arrival)


def scaling(sizes: list[tuple[int, int]], seed: int) -> tuple[list, list]:
    """Wall time of the round simulator on generated traces of growing size."""
    table, records = [], []
    for n, per_type in sizes:
        jobs = generated(n, per_type, seed)
        for policy in ("max_min_fairness_perf", "fifo_perf"):
            t0 = time.perf_counter()
            r = rounds.simulate_rounds(jobs, dict.fromkeys(rounds.GPU_TYPES, per_type), policy)
            wall = time.perf_counter() - t0
            table.append([f"{n:,}", f"{3 * per_type:,}", policy, f"{r.rounds:,}", f"{r.allocations:,}",
                          f"{r.avg_jct:,.0f}", f"{wall:.1f}"])
            records.append({"jobs": n, "gpus": 3 * per_type, "policy": policy, "rounds": r.rounds,
                            "allocations": r.allocations, "avg_jct": r.avg_jct, "wall_s": wall})
            print(f"  {n:,} jobs, {3 * per_type:,} GPUs, {policy}: {wall:.1f} s", flush=True)
    return table, records


def main() -> None:
    p = common.parser(__doc__, seed=None)
    p.add_argument("--seeds", type=int, default=10, help="seeds for the agnostic policies' range (default 10)")
    p.add_argument("--scale", action="store_true",
                   help="also time generated traces of 1,000-100,000 jobs on 96-10,239 GPUs (about 2 minutes)")
    args = p.parse_args()
    common.start("bench_gavel", args)
    rows = [r for r in GAVEL if r[0] == "t1_mmf95"] if args.smoke else GAVEL
    settings = SETTINGS[:1] if args.smoke else SETTINGS
    families = FAMILIES[:2] if args.smoke else FAMILIES
    seeds = 2 if args.smoke else args.seeds
    print("\n## Gavel's simulator against ours (average JCT and makespan [s])")
    table, comp = comparison(rows, seeds)
    print(common.markdown_table(["trace", "cluster", "policy", "mechanics", "Gavel JCT", "ours", "ratio",
                                 f"ours, seeds 0-{seeds - 1}", "Gavel makespan", "ours", "ratio", "note"], table,
                                "lllllrrrrrrl"))
    print("\n## Heterogeneity-aware against agnostic (360 s rounds, reset >= 1,920 s, seed 0)")
    table, versus = aware_vs_agnostic(settings, families)
    print(common.markdown_table(["trace", "cluster", "agnostic policy", "agnostic JCT", "aware JCT",
                                 "agnostic / aware", "agnostic makespan", "aware makespan", "wall [s]"], table,
                                "llllrrrrr"))
    print("\n## T1 on the event engine (360 s rounds, reset >= 1,920 s, seed 0; average JCT and makespan [s])")
    table, engine = on_engine(ENGINE[:3] if args.smoke else ENGINE)
    print(common.markdown_table(["cluster", "policy", "Gavel JCT", "round sim JCT", "engine JCT", "engine / round sim",
                                 "round sim makespan", "engine makespan", "engine JCT, failures", "interruptions",
                                 "engine wall [s]"], table, "llrrrrrrrrr"))
    mtd = [(t, c, run(t, c, "min_total_duration")[0]) for t, c in settings]
    print("\n## min_total_duration (makespan policy; Gavel gives no figure on these traces)")
    print(common.markdown_table(["trace", "cluster", "avg JCT [s]", "makespan [s]"],
                                [[t, c, f"{r.avg_jct:,.0f}", f"{r.makespan:,.0f}"] for t, c, r in mtd]))
    scale = []
    if args.scale or args.smoke:
        print("\n## Scaling: generated one-GPU traces at load 0.9 (360 s rounds, reset >= 1,920 s, seed 0)")
        sizes = [(300, 16)] if args.smoke else [(1_000, 32), (4_000, 128), (20_000, 683), (100_000, 3_413)]
        table, scale = scaling(sizes, seed=0)
        print(common.markdown_table(["jobs", "GPUs", "policy", "rounds", "allocations", "avg JCT [s]", "wall [s]"],
                                    table, "rrlrrrr"))
    if args.smoke:
        for rec in scale:
            common.finite_positive(rec["avg_jct"], f"generated {rec['jobs']} jobs, {rec['policy']}: avg JCT")
        for rec in comp:
            common.check(abs(rec["avg_jct"] / rec["gavel_avg_jct"] - 1) <= 0.05,
                         f"{rec['trace']} {rec['cluster']} {rec['policy']}: avg JCT {rec['avg_jct']:.0f} s is "
                         f"not within 5% of Gavel's {rec['gavel_avg_jct']:.0f} s")
        for rec in engine:
            common.check(abs(rec["engine_avg_jct"] / rec["rounds_avg_jct"] - 1) <= 0.01,
                         f"{rec['cluster']} {rec['policy']}: the engine's avg JCT {rec['engine_avg_jct']:.0f} s is not "
                         f"within 1% of the round simulator's {rec['rounds_avg_jct']:.0f} s")
            common.check(rec["interruptions"] > 0, f"{rec['cluster']} {rec['policy']}: no failure under a 48 h MTBF")
        for rec in versus:
            common.check(rec["aware_avg_jct"] < rec["agnostic_avg_jct"],
                         f"{rec['aware']} ({rec['aware_avg_jct']:.0f} s) does not beat {rec['agnostic']} "
                         f"({rec['agnostic_avg_jct']:.0f} s) on {rec['trace']}")
    common.write_results(args.out, "bench_gavel", args,
                         {"comparison": comp, "aware_vs_agnostic": versus, "engine": engine, "scaling": scale,
                          "min_total_duration": [{"trace": t, "cluster": c, "avg_jct": r.avg_jct,
                                                  "makespan": r.makespan} for t, c, r in mtd]})


if __name__ == "__main__":
    main()
