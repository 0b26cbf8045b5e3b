"""Type-aware scheduling on clusters of several GPU types (issue 36): placement, migration, zero-throughput
types, type-aware estimates, strict FIFO, Tiresias' promotion, sharing only at one GPU, Gavel trace files.

The expected times are computed by hand in the comments; Gavel's own figures come from
``/work/shared/data/gavel/comparison/README.md`` (Gavel's unmodified simulator on the same trace)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from doppler_gym import cluster as C
from doppler_gym.cluster import failures as fl

GEN150 = Path(__file__).parents[3] / "benchmarks" / "data" / "gavel" / "t3_gen150.trace"  # Gavel's T3 (MIT)
SCHEDULERS = ("fifo", "srtf", "las", "tiresias", "gandiva", "elastic")


# ---------------------------------------------------------------------- the straddle case of the issue
def _straddle_trace() -> C.JobTrace:
    """A: 1 GPU, 10,000 s on a V100 (10x slower on a K80); B: 2 GPUs, 100,000 s on two V100s, 1,000,000 s on K80s."""
    a = C.Job(0, 0.0, 10_000, gpus=1, workload=None, profile={"v100": {1: 1.0}, "k80": {1: 10.0}})
    b = C.Job(1, 0.0, 100_000, gpus=2, workload=None, profile={"v100": {2: 1.0}, "k80": {1: 10.0, 2: 10.0}})
    return C.JobTrace((a, b))


def _straddle_cluster(k80s: int, k80_first: bool) -> C.Cluster:
    v100, k80 = C.Node(2, "v100", None), C.Node(k80s, "k80", None)
    return C.Cluster((k80, v100) if k80_first else (v100, k80))


# B's completion [s] by hand. One K80: B never spans V100 + K80. fifo/srtf/gandiva: B waits for A's V100
# (free at 10,000 s): 10,000 + 100,000. las/elastic: at the 60 s round B (0 GPU s) outranks A (60 GPU s) and
# takes both V100s, A moves to the K80: B ends at 60 + 100,000. tiresias: A passes the 3,600 GPU s threshold at
# 3,600 s, B (queue 0) takes the V100s then: 3,600 + 100,000.
ONE_K80 = {"fifo": 110_000.0, "srtf": 110_000.0, "gandiva": 110_000.0, "las": 100_060.0, "elastic": 100_060.0,
           "tiresias": 103_600.0}


@pytest.mark.parametrize("k80_first", [False, True])
@pytest.mark.parametrize("name", SCHEDULERS)
def test_a_two_gpu_job_never_straddles_v100_and_k80(name, k80_first):
    r = C.run(_straddle_trace(), _straddle_cluster(1, k80_first), name, seed=0)
    assert r.jobs["completion"][1] == pytest.approx(ONE_K80[name], rel=1e-9)
    assert r.jobs["iter_time"][1] == 1.0  # on V100s: never at K80 pace


@pytest.mark.parametrize("k80_first", [False, True])
@pytest.mark.parametrize("name", SCHEDULERS)
def test_a_job_on_slow_gpus_migrates_when_faster_ones_free_up(name, k80_first):
    # two K80s: B starts on them at once (0.1 of its work per 10,000 s), and at 10,000 s, when A frees its
    # V100, moves to the V100s: 99% of its work left, 99,000 s there, so it ends at 109,000 s (not 1,000,000)
    r = C.run(_straddle_trace(), _straddle_cluster(2, k80_first), name, seed=0)
    assert r.jobs["completion"][1] == pytest.approx(109_000.0, rel=1e-9)
    assert r.jobs["completion"][0] == pytest.approx(10_000.0, rel=1e-9)


@pytest.mark.parametrize("name", ["fifo", "las"])
def test_migration_pays_only_after_the_restore_cost(name):
    cluster = _straddle_cluster(2, False)
    # a 30 s restore: the move still pays (99,030 s left against 990,000 s): B ends at 10,000 + 30 + 99,000
    r = C.run(_straddle_trace(), cluster, name, seed=0, preemption_cost=30.0)
    assert r.jobs["completion"][1] == pytest.approx(109_030.0, rel=1e-9)
    # a 900,000 s restore: 99,000 + 900,000 > 990,000 left on the K80s, so B stays there: 1,000,000 s
    r = C.run(_straddle_trace(), cluster, name, seed=0, preemption_cost=900_000.0)
    assert r.jobs["completion"][1] == pytest.approx(1_000_000.0, rel=1e-9)


def test_migration_pays_is_the_remaining_time_comparison_with_checkpoints():
    # B checkpoints every 1,000 iterations (5 s each); at 10,000 s on K80s it has done 999 iterations...
    job = C.Job(1, 0.0, 100_000, gpus=2, workload=None, profile={"v100": {2: 1.0}, "k80": {2: 10.0}},
                checkpoint_every=1_000, checkpoint_cost=5.0)
    sim = C.ClusterSimulation(C.JobTrace((job,)), C.Cluster((C.Node(2, "k80", None), C.Node(2, "v100", None))),
                              C.schedulers.FIFO(), seed=0, failures=C.FailureModel(), preemption_cost=30.0)
    view = sim.run_until_decision()
    sim.apply_allocation(C.Allocation({0: (0, 1)}))  # the K80s, as an explicit plan may put it
    assert sim.job_gpu_type[0] == "k80" and sim.iter_time[0] == 10.0
    # at the start: left on K80 = 1e6 + 99 x 5; on V100 = 1e5 + 99 x 5 (+ 30 s restore): it pays
    left_k80 = fl.total_work(100_000, 10.0, 1_000, 5.0)
    left_v100 = fl.total_work(100_000, 1.0, 1_000, 5.0)
    assert left_v100 + 30.0 < left_k80 and sim.migration_pays(0, "v100")
    assert not sim.migration_pays(0, "k80")  # not faster
    del view


# ---------------------------------------------------------------------- node order
def test_fifo_on_a_heterogeneous_cluster_does_not_depend_on_node_order():
    trace = C.traces.load_gavel_trace(GEN150)
    assert len(trace) == 150
    jct = []
    for perm in itertools.permutations(["v100", "p100", "k80"]):
        cluster = C.Cluster(tuple(C.Node(4, t, None) for t in perm for _ in range(3)))  # 12 of each, 4 per server
        jct.append(C.run(trace, cluster, "fifo", seed=0).avg_jct)
    assert max(jct) / min(jct) - 1 < 1e-9  # the type-blind engine: 66k, 90k or 151k s by the order
    # Gavel's heterogeneity-aware FIFO (fifo_perf) on this trace and cluster: 49,990 s (Gavel's simulator)
    assert jct[0] == pytest.approx(49_990.0, rel=0.05)


def test_node_order_of_a_mixed_cluster_leaves_las_and_srtf_unchanged():
    trace = C.traces.load_gavel_trace(GEN150, limit=60)
    for name in ("las", "srtf", "tiresias"):
        results = set()
        for perm in (["v100", "p100", "k80"], ["k80", "p100", "v100"]):
            cluster = C.Cluster(tuple(C.Node(4, t, None) for t in perm for _ in range(3)))
            results.add(round(C.run(trace, cluster, name, seed=0).avg_jct, 6))
        assert len(results) == 1, name


def test_every_running_job_holds_gpus_of_one_type():
    trace = C.traces.load_gavel_trace(GEN150, limit=80)
    cluster = C.Cluster(tuple(C.Node(4, t, None) for t in ("k80", "v100", "p100") for _ in range(2)))
    for name in ("fifo", "las", "gandiva"):
        sim = C.ClusterSimulation(trace, cluster, C.schedulers.make(name), seed=0, failures=C.FailureModel())
        view = sim.run_until_decision()
        while view is not None:
            sim.allocate_in_order(C.schedulers.make(name).order(view))
            for i in np.flatnonzero(sim.status == 1):  # RUNNING
                types = {sim.gpu_type[g] for g in sim.alloc[i]}
                assert len(types) == 1 and sim.job_gpu_type[i] in types
                assert math.isfinite(sim.iteration_time(i, next(iter(types)), len(sim.alloc[i])))
            # the free-GPU index agrees with a scan of the GPUs, and its packing with placement.pack's
            free = C.placement.free_by_node(sim.occupants, sim.gpu_node)
            for t in sim.gpu_types:
                assert sim.free_by_type[t] == sum(1 for g in range(sim.n_gpus) if not sim.occupants[g]
                                                  and sim.gpu_type[g] == t)
                of_t = C.placement.of_types(free, sim.node_type, (t,))
                for k in (1, 2, 3, 5):
                    assert sim.free_gpus(k, t) == (C.placement.pack(of_t, k) if k <= sim.free_by_type[t] else None)
            view = sim.run_until_decision()


# ---------------------------------------------------------------------- throughput 0: kept off that type
def test_zero_throughput_types_are_kept_off_not_rejected():
    profile = C.traces.gavel_profile("ResNet-50 (batch size 128)")
    assert math.isinf(profile["k80"][2]) and math.isfinite(profile["k80"][1])  # Gavel: 0 steps/s on 2+ K80s
    blocker = C.Job(0, 0.0, 500, gpus=2, workload=None, profile={"v100": {2: 1.0}})
    job = C.Job(1, 0.0, 1_000, gpus=2, workload=None, profile=profile, job_type="ResNet-50 (batch size 128)")
    cluster = C.Cluster((C.Node(4, "k80", None), C.Node(2, "v100", None)))
    for name in ("fifo", "las"):
        r = C.run(C.JobTrace((blocker, job)), cluster, name, seed=0)
        # the K80s are free all along, but the job waits for the V100s (free at 500 s under fifo)
        assert r.jobs["iter_time"][1] == pytest.approx(profile["v100"][2])
    r = C.run(C.JobTrace((blocker, job)), cluster, "fifo", seed=0)
    assert r.jobs["first_start"][1] == 500.0


def test_a_job_no_type_can_run_is_one_clear_error():
    profile = C.traces.gavel_profile("ResNet-50 (batch size 128)")
    job = C.Job(7, 0.0, 1_000, gpus=4, workload=None, profile=profile, job_type="ResNet-50 (batch size 128)")
    with pytest.raises(ValueError, match=r"Job 7 \(ResNet-50 \(batch size 128\)\) cannot run on any GPU type .*k80"):
        C.run(C.JobTrace((job,)), C.Cluster((C.Node(8, "k80", None),)), "fifo", seed=0)
    # a type the profile leaves out is one the job cannot run on
    only_v100 = C.Job(0, 0.0, 10, workload=None, profile={"v100": {1: 1.0}})
    r = C.run(C.JobTrace((only_v100,)), C.Cluster((C.Node(4, "k80", None), C.Node(1, "v100", None))), "las", seed=0)
    assert r.jobs["iter_time"][0] == 1.0


def test_an_allocation_on_a_type_the_job_cannot_run_on_is_refused():
    profile = C.traces.gavel_profile("ResNet-50 (batch size 128)")
    job = C.Job(0, 0.0, 10, gpus=2, workload=None, profile=profile)
    sim = C.ClusterSimulation(C.JobTrace((job,)), C.Cluster((C.Node(2, "k80", None), C.Node(2, "v100", None))),
                              C.schedulers.FIFO(), seed=0, failures=C.FailureModel())
    sim.run_until_decision()
    with pytest.raises(ValueError, match="cannot run on 2 GPUs of type 'k80'.*give it GPUs of v100"):
        sim.apply_allocation(C.Allocation({0: (0, 1)}))
    assert sim.free_gpus(2, "v100") == [2, 3] and sim.free_gpus(3, "v100") is None
    assert sim.type_ranking(0) == ("v100",)


# ---------------------------------------------------------------------- type-aware estimates
def test_srtf_remaining_time_is_on_the_best_type_not_the_first_node():
    # the first node is a K80 (10x slower for this job): the estimate must be the V100's 100 s
    job = C.Job(0, 0.0, 100, gpus=1, workload=None, profile={"v100": {1: 1.0}, "k80": {1: 10.0}})
    sim = C.ClusterSimulation(C.JobTrace((job,)), C.Cluster((C.Node(1, "k80", None), C.Node(1, "v100", None))),
                              C.schedulers.SRTF(), seed=0, failures=C.FailureModel())
    view = sim.run_until_decision()
    assert view.remaining[0] == pytest.approx(100.0)


def test_elastic_grows_on_the_type_it_runs_on():
    # t(k) on v100 = 8/k s, on k80 t = 80 s at any count (no speedup there); the K80 node is listed first
    prof = {"v100": {k: 8.0 / k for k in range(1, 5)}, "k80": {k: 80.0 for k in range(1, 5)}}
    job = C.Job(0, 0.0, 100, gpus=1, max_gpus=4, workload=None, profile=prof)
    r = C.run(C.JobTrace((job,)), C.Cluster((C.Node(4, "k80", None), C.Node(4, "v100", None))), "elastic", seed=0)
    assert r.jobs["iter_time"][0] == pytest.approx(2.0)  # grown to all 4 V100s: 100 iterations x 2 s
    assert r.jobs["completion"][0] == pytest.approx(200.0)


# ---------------------------------------------------------------------- strict FIFO
def test_strict_fifo_blocks_behind_the_head_backfilling_does_not():
    # 4 GPUs; job 0 holds 3 until 100 s; job 1 needs 2 (waits); job 2 needs 1 (fits on the free one)
    jobs = (C.Job(0, 0.0, 100, gpus=3, workload=None, profile={"*": {3: 1.0}}),
            C.Job(1, 1.0, 50, gpus=2, workload=None, profile={"*": {2: 1.0}}),
            C.Job(2, 2.0, 10, gpus=1, workload=None, profile={"*": {1: 1.0}}))
    node = C.Cluster((C.Node(4, "v100", None),))
    back = C.run(C.JobTrace(jobs), node, C.schedulers.FIFO(), seed=0)
    strict = C.run(C.JobTrace(jobs), node, C.schedulers.FIFO(backfill=False), seed=0)
    assert back.jobs["first_start"].tolist() == [0.0, 100.0, 2.0]
    # strict: job 2 waits behind job 1 until 100 s, when both start (2 + 1 of 4 GPUs)
    assert strict.jobs["first_start"].tolist() == [0.0, 100.0, 100.0]
    assert C.schedulers.make("fifo").backfill is True
    with pytest.raises(ValueError, match="backfill must be True or False"):
        C.schedulers.FIFO(backfill="no")


# ---------------------------------------------------------------------- Tiresias' starvation promotion
def test_tiresias_promotes_a_starved_job_to_the_first_queue():
    # one GPU; job 0 (4,000 s) arrives first, passes the 3,600 GPU s threshold at 3,600 s; job 1 (20,000 s)
    # arrives at 3,000 s. Without promotion: at 3,600 s job 1 (queue 0) preempts job 0, which waits in queue 1
    # until job 1 passes 3,600 GPU s too (at 7,200 s), then FIFO within queue 1: job 0 (older) finishes at 7,600.
    jobs = (C.Job(0, 0.0, 4_000, workload=None, profile={"*": {1: 1.0}}),
            C.Job(1, 3_000.0, 20_000, workload=None, profile={"*": {1: 1.0}}))
    one = C.Cluster((C.Node(1, "v100", None),))
    plain = C.run(C.JobTrace(jobs), one, C.schedulers.Tiresias(), seed=0)
    assert plain.jobs["completion"][0] == pytest.approx(7_600.0)
    # with STARVELIMIT 0.5: job 0 (3,600 s of service) is promoted after waiting 0.5 x 3,600 = 1,800 s, at
    # the 60 s round tick at or after 5,400 s, and (queue 0, older) preempts job 1 (1,800 GPU s, queue 0 too)
    promoted = C.run(C.JobTrace(jobs), one, C.schedulers.Tiresias(starve_limit=0.5), seed=0)
    assert promoted.jobs["completion"][0] == pytest.approx(5_400.0 + 400.0)
    with pytest.raises(ValueError, match="starve_limit must be None or a number > 0"):
        C.schedulers.Tiresias(starve_limit=0)


# ---------------------------------------------------------------------- sharing only where measured
def test_only_single_gpu_jobs_share():
    # gandiva on one 2-GPU node: job 0 takes both GPUs; job 1 (2 GPUs) and job 2 (1 GPU) cannot share with it
    jobs = (C.Job(0, 0.0, 100, gpus=2, workload=None, profile={"*": {2: 1.0}}),
            C.Job(1, 1.0, 100, gpus=2, workload=None, profile={"*": {2: 1.0}}),
            C.Job(2, 2.0, 100, gpus=1, workload=None, profile={"*": {1: 1.0}}))
    r = C.run(C.JobTrace(jobs), C.Cluster((C.Node(2, "v100", None),)), "gandiva", seed=0)
    assert r.jobs["first_start"].tolist() == [0.0, 100.0, 200.0]  # no sharing: one after the other
    # two single-GPU jobs on one GPU do share (the parametric 0.68 each)
    pair = (C.Job(0, 0.0, 100, workload=None, profile={"*": {1: 1.0}}),
            C.Job(1, 0.0, 100, workload=None, profile={"*": {1: 1.0}}))
    r = C.run(C.JobTrace(pair), C.Cluster((C.Node(1, "v100", None),)), "gandiva", seed=0)
    assert r.jobs["first_start"].tolist() == [0.0, 0.0]
    assert C.placement.shared("a", 2, [[0], [1]], ["a", "a"], ["v100", "v100"], C.ParametricInterference()) is None


def test_an_allocation_sharing_a_multi_gpu_job_is_refused():
    jobs = (C.Job(0, 0.0, 100, gpus=2, workload=None, profile={"*": {2: 1.0}}),
            C.Job(1, 0.0, 100, gpus=1, workload=None, profile={"*": {1: 1.0}}))
    sim = C.ClusterSimulation(C.JobTrace(jobs), C.Cluster((C.Node(2, "v100", None),)), C.schedulers.FIFO(), seed=0,
                              failures=C.FailureModel(), interference=C.ParametricInterference())
    sim.run_until_decision()
    with pytest.raises(ValueError, match="only single-GPU jobs share"):
        sim.apply_allocation(C.Allocation({0: (0, 1), 1: (1,)}))


# ---------------------------------------------------------------------- Gavel trace files
def test_gavel_trace_file_rows_become_jobs_timed_by_gavels_throughputs():
    first = GEN150.read_text().splitlines()[0].split("\t")
    trace = C.traces.load_gavel_trace(GEN150)
    job = trace.jobs[0] if trace.jobs[0].arrival == float(first[9]) else None
    assert job is not None and job.job_type == first[0] and job.iterations == int(first[5])
    assert job.gpus == int(first[6])
    table = C.interference.gavel_table()
    thr = table["v100"]["solo_steps_per_s"][first[0]][first[6]]
    assert job.profile["v100"][int(first[6])] == pytest.approx(1.0 / thr)


@pytest.mark.parametrize("row,match", [
    ("A3C\tcmd\tdir\t--n\t1\t100\t1\t1\t-1\t0", None),
    ("Inception\tcmd\tdir\t--n\t1\t100\t1\t1\t-1\t0", r"bad.trace:2: field 1 \(job type\) 'Inception' was never "
                                                      r"measured by Gavel"),
    ("A3C\tcmd\tdir\t--n\t1\t100\t1\t1\t-1", r"bad.trace:2: 9 tab-separated fields, Gavel's trace format has 10"),
    ("A3C\tcmd\tdir\t--n\t1\tmany\t1\t1\t-1\t0", r"bad.trace:2: field 6 \(total steps\) 'many' must be an integer"),
    ("A3C\tcmd\tdir\t--n\t1\t100\t0\t1\t-1\t0", r"bad.trace:2: field 7 \(scale factor\) '0'"),
    ("A3C\tcmd\tdir\t--n\t1\t100\t1\t1\t-1\t-5", r"bad.trace:2: field 10 \(arrival time\) '-5'"),
])
def test_a_bad_gavel_trace_row_names_its_line_and_field(tmp_path, row, match):
    path = tmp_path / "bad.trace"
    path.write_text("A3C\tcmd\tdir\t--n\t1\t100\t1\t1\t-1\t0\n" + row + "\n")
    if match is None:
        assert len(C.traces.load_gavel_trace(path)) == 2
    else:
        with pytest.raises(ValueError, match=match):
            C.traces.load_gavel_trace(path)
