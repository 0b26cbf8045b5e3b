"""doppler_gym.cluster: each check against an independent reference (hand computation, the graph
simulator called directly, the Poisson rate, Young's interval, the scheduling literature)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym import cluster as C
from doppler_gym.baselines.critical_path import critical_path
from doppler_gym.cluster import failures as fl


def _one_job_cluster(n_gpus: int = 8) -> C.Cluster:
    return C.Cluster((C.Node(n_gpus, "v100", "v100x8-dgx1"),))


def test_one_job_alone_takes_iterations_times_simulated_iteration_time_plus_checkpoints():
    job = C.Job(job_id=0, arrival=10.0, iterations=1000, gpus=4, workload="ffnn", workload_params={"layers": 2},
                checkpoint_every=100, checkpoint_cost=0.5)
    r = C.run(C.JobTrace((job,)), _one_job_cluster(), "fifo", seed=0)
    # Reference: the graph timed directly on the first 4 GPUs of the DGX-1 preset.
    base = dg.Topology.preset("v100x8-dgx1")
    topo = dg.Topology(speed=base.speed[:4], memory=base.memory[:4], bandwidth=base.bandwidth[:4, :4],
                       latency=base.latency[:4, :4])
    graph = dg.workloads.make("ffnn", layers=2)
    t = dg.simulate(graph, critical_path(graph, topo).assignment, topology=topo).makespan
    assert r.jobs["iter_time"][0] == pytest.approx(t, rel=1e-12)
    # arrival + 1000 iterations + 9 checkpoints (none after the last iteration)
    assert r.jobs["completion"][0] == pytest.approx(10.0 + 1000 * t + 9 * 0.5, rel=1e-9)
    assert r.avg_jct == pytest.approx(1000 * t + 4.5, rel=1e-9)
    assert r.interruptions == 0
    assert r.utilisation == pytest.approx(0.5)  # 4 of 8 GPUs held all along (checkpoints hold them too)


def test_one_profiled_job_by_hand(tmp_path):
    # 10 iterations of 2 s, a 1 s checkpoint after iterations 3, 6 and 9: 20 + 3 = 23 s.
    job = C.Job(0, 5.0, 10, gpus=2, workload=None, profile={"*": {2: 2.0}}, checkpoint_every=3, checkpoint_cost=1.0)
    r = C.run(C.JobTrace((job,)), _one_job_cluster(), "las", seed=3)
    assert r.jobs["completion"][0] == pytest.approx(28.0)
    assert r.effective_fraction == pytest.approx(20.0 / 23.0)
    assert r.goodput == pytest.approx(10 / (2 * 23 / 3600))  # iterations per busy GPU-hour
    path = tmp_path / "jobs.csv"
    r.to_csv(path)
    lines = path.read_text().splitlines()
    assert lines[0].startswith("job_id,arrival,gpus,iterations,iter_time,checkpoint_every") and len(lines) == 2
    assert lines[1].split(",")[:6] == ["0", "5.0", "2", "10", "2.0", "3"]


def test_interruptions_match_the_per_gpu_poisson_rate():
    # A 4-GPU job on an 8-GPU node: half the failures hit it; rate 4 / MTBF while it holds GPUs.
    mtbf = 1_600.0  # [s] per GPU
    job = C.Job(0, 0.0, 200_000, gpus=4, workload=None, profile={"*": {4: 1.0}}, checkpoint_every=10)
    r = C.run(C.JobTrace((job,)), _one_job_cluster(), "fifo", seed=7,
              failures=C.FailureModel(gpu_mtbf=mtbf, restart_delay=30.0))
    expected = 4 * r.jobs["held"][0] / mtbf  # ~500
    assert abs(r.interruptions - expected) <= 4 * math.sqrt(expected), (r.interruptions, expected)
    # the restart delays are in the elapsed time, outside the held time
    assert r.jobs["completion"][0] == pytest.approx(r.jobs["held"][0] + 30.0 * r.interruptions)
    lost = r.jobs["lost"][0]
    assert r.jobs["held"][0] == pytest.approx(200_000 + lost)
    assert 0 < lost / r.interruptions < 10  # at most one segment of 10 iterations lost per failure


def test_effective_fraction_peaks_near_youngs_interval():
    cost, job_mtbf = 20.0, 2_000.0  # [s]
    t_young = fl.young_interval(cost, job_mtbf)  # ~283 s
    factors = (1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8)
    eff, exact = [], []
    for f in factors:
        every = max(1, round(f * t_young))  # iterations of 1 s
        job = C.Job(0, 0.0, 300_000, gpus=8, workload=None, profile={"*": {8: 1.0}}, checkpoint_every=every,
                    checkpoint_cost=cost)
        r = C.run(C.JobTrace((job,)), _one_job_cluster(), "fifo", seed=11,
                  failures=C.FailureModel(gpu_mtbf=8 * job_mtbf))
        eff.append(r.effective_fraction)
        # Poisson failures, no restart delay: a segment of T + C seconds takes M (e^((T+C)/M) - 1) on average
        exact.append(every / (job_mtbf * math.expm1((every + cost) / job_mtbf)))
    best = factors[int(np.argmax(eff))]
    assert 1 / 2 <= best <= 2, dict(zip(factors, eff))
    np.testing.assert_allclose(eff[:5], exact[:5], atol=0.03)  # the long intervals see few, costly failures
    assert eff[3] > eff[0] + 0.2 and eff[3] > eff[-1] + 0.2
    # the "young" policy picks that interval itself
    job = C.Job(0, 0.0, 300_000, gpus=8, workload=None, profile={"*": {8: 1.0}}, checkpoint_cost=cost)
    r = C.run(C.JobTrace((job,)), _one_job_cluster(), "fifo", seed=11, failures=C.FailureModel(gpu_mtbf=8 * job_mtbf),
              checkpoints="young")
    assert r.jobs["checkpoint_every"][0] == round(t_young) and r.effective_fraction == pytest.approx(eff[3])


def test_stragglers_slow_a_job_by_the_stationary_slow_probability():
    # Each GPU is slow a fraction p = d / (m + d) of the time; a 4-GPU job runs at speed s while any
    # of its GPUs is slow (probability q = 1 - (1 - p)^4), so its long-run pace is (1 - q) + q s.
    m, d, speed = 4_000.0, 1_000.0, 0.5
    q = 1 - (1 - d / (m + d)) ** 4
    job = C.Job(0, 0.0, 1_000_000, gpus=4, workload=None, profile={"*": {4: 1.0}})
    fm = C.FailureModel(straggler_mtbs=m, straggler_duration=d, straggler_speed=speed)
    r = C.run(C.JobTrace((job,)), C.Cluster((C.Node(4, "v100", None),)), "fifo", seed=4, failures=fm)
    # over 20 seeds: mean 0.703 (expected 0.705), standard deviation 0.008
    assert r.effective_fraction == pytest.approx((1 - q) + q * speed, abs=0.03)
    assert r.interruptions == 0 and r.jobs["held"][0] == r.jobs["jct"][0]


def test_jobs_share_node_uplinks_max_min_fairly():
    # 3 nodes of 8 GPUs, uplinks of 1 GB/s. A (12 GPUs) lands on nodes 0 (8) + 1 (4), B (12) on 2 (8) + 1 (4).
    # Demands at full speed [GB/s] = 2 x crossing bytes x (GPUs there / 12) / 1 s:
    # A: node 0 1.2, node 1 0.6; B: node 1 0.2, node 2 0.4. Node 0 saturates first at x_A = 1/1.2;
    # node 1 then has 1 - 0.5 = 0.5 GB/s left for B's 0.2: B runs at full speed.
    cluster = C.Cluster.uniform(3, 8, preset=None, node_uplink_bandwidth=1e9)
    a = C.Job(0, 0.0, 1_000, gpus=12, workload=None, profile={"*": {12: 1.0}}, cross_node_bytes=0.9e9)
    b = C.Job(1, 0.0, 1_000, gpus=12, workload=None, profile={"*": {12: 1.0}}, cross_node_bytes=0.3e9)
    r = C.run(C.JobTrace((a, b)), cluster, "fifo", seed=0)
    np.testing.assert_allclose(r.jobs["completion"], [1_000 * 1.2, 1_000.0])
    # the same jobs without contention, and a job on one node, run at full speed
    free = C.run(C.JobTrace((a, b)), C.Cluster.uniform(3, 8, preset=None), "fifo", seed=0)
    np.testing.assert_allclose(free.jobs["completion"], [1_000.0, 1_000.0])
    one = C.Job(0, 0.0, 1_000, gpus=8, workload=None, profile={"*": {8: 1.0}}, cross_node_bytes=1e12)
    assert C.run(C.JobTrace((one,)), cluster, "fifo", seed=0).jobs["completion"][0] == pytest.approx(1_000.0)
    # a graph job's crossing bytes come from its placement: none on one node, some across two
    times = C.IterationTimes(C.Cluster.uniform(2, 8))
    ffnn = C.Job(0, 0.0, 10, gpus=12, workload="ffnn")
    assert times.cross_bytes(ffnn, "v100", 8) == 0.0 and times.cross_bytes(ffnn, "v100", 12) > 0


@pytest.mark.parametrize("seed", [0, 3])
def test_heavy_tailed_trace_srtf_beats_las_and_tiresias_beat_fifo_on_average_jct(seed):
    trace = C.traces.generate(300, seed=seed, mean_interarrival=120.0)  # log-normal durations, sigma 1.8
    cluster = C.Cluster.uniform(4, 8)
    jct = {s: C.run(trace, cluster, s, seed=0).avg_jct for s in ("fifo", "las", "tiresias", "srtf")}
    assert jct["srtf"] < min(jct["las"], jct["tiresias"]), jct
    assert max(jct["las"], jct["tiresias"]) < jct["fifo"], jct  # seeds 0-3 all hold (e.g. 11k, 16k, 18k, 30k s)


@pytest.mark.parametrize("seed", [1, 4])  # seeds 1-5: utilisation 0.89-0.95 -> 1.15-1.25
def test_gpu_sharing_raises_utilisation_on_small_jobs(seed):
    small = C.traces.generate(300, seed=seed, mean_interarrival=20.0, gpu_counts=(1,), gpu_probs=(1.0,),
                              median_duration=600.0, duration_sigma=0.5)
    cluster = C.Cluster.uniform(2, 8)
    model = C.ParametricInterference(0.68)
    fifo = C.run(small, cluster, "fifo", seed=0, interference=model)
    shared = C.run(small, cluster, "gandiva", seed=0, interference=model)
    assert fifo.utilisation == pytest.approx(fifo.occupancy) and fifo.utilisation <= 1.0
    assert shared.utilisation > 1.1 * fifo.utilisation, (shared.utilisation, fifo.utilisation)
    assert shared.avg_jct < fifo.avg_jct and shared.goodput > fifo.goodput


def test_gavel_interference_and_trace_are_shipped():
    table = C.interference.gavel_table()
    # Gavel's scheduler/simulation_throughputs.json: ('ResNet-18 (batch size 16)', 1) alone on a V100
    assert table["v100"]["solo_steps_per_s"]["ResNet-18 (batch size 16)"]["1"] == pytest.approx(32.353384328946916)
    pair = C.GavelInterference()("ResNet-18 (batch size 16)", "ResNet-18 (batch size 64)", "v100")
    assert pair is not None and all(0 < f <= 1 for f in pair)
    assert C.GavelInterference()("generic", "generic", "v100") == (0.68, 0.68)  # the parametric fallback
    trace = C.traces.load("gavel-msr")
    assert len(trace) == 533 and trace.jobs[0].gpus == 4 and trace.jobs[0].job_type == "Transformer (batch size 128)"
    r = C.run(C.traces.load("gavel-msr", limit=40), C.Cluster.uniform(4, 8), "fifo", seed=0)
    assert np.all(np.isfinite(r.jobs["jct"])) and r.n_jobs == 40


def test_same_seed_same_result_with_failures():
    trace = C.traces.generate(120, seed=5, mean_interarrival=30.0, checkpoint_every=50, checkpoint_cost=5.0)
    cluster = C.Cluster.uniform(2, 8)
    fm = C.FailureModel(gpu_mtbf=50_000.0, restart_delay=60.0)
    a = C.run(trace, cluster, "srtf", seed=1, failures=fm)
    b = C.run(trace, cluster, "srtf", seed=1, failures=fm)
    c = C.run(trace, cluster, "srtf", seed=2, failures=fm)
    assert a.summary() == b.summary() and a.interruptions > 0
    for col in a.jobs:
        np.testing.assert_array_equal(a.jobs[col], b.jobs[col])
    assert not np.array_equal(a.jobs["completion"], c.jobs["completion"])
    assert C.traces.generate(50, seed=3).jobs == C.traces.generate(50, seed=3).jobs


def test_checkpoint_timeline_helpers():
    # 3 iterations of 2 s + a 1 s checkpoint = a 7 s segment
    assert fl.rollback(13.9, 2.0, 3, 1.0) == 7.0 and fl.rollback(14.0, 2.0, 3, 1.0) == 14.0
    assert fl.rollback(100.0, 2.0, None, 1.0) == 0.0
    assert fl.total_work(10, 2.0, 3, 1.0) == 23.0 and fl.total_work(9, 2.0, 3, 1.0) == 20.0
    # halfway through iteration 5 (of segment 2) stays halfway through iteration 5 at 4 s per iteration
    assert fl.rescale(7.0 + 3.0, 2.0, 4.0, 3, 1.0) == pytest.approx(13.0 + 6.0)
    assert fl.young_interval(20.0, 2_000.0) == pytest.approx(math.sqrt(80_000))
    assert C.FailureModel.llama3().gpu_mtbf == pytest.approx(16_384 * 54 * 86_400 / 419)


def test_bad_input_names_the_field():
    cluster = _one_job_cluster()
    with pytest.raises(ValueError, match="gpus=16 exceeds"):
        C.run(C.JobTrace((C.Job(0, 0.0, 10, gpus=16),)), cluster, "fifo", seed=0)
    with pytest.raises(ValueError, match="arrival"):
        C.Job(0, -1.0, 10)
    with pytest.raises(ValueError, match="checkpoint_cost"):
        C.Job(0, 0.0, 10, checkpoint_cost=-2.0)
    with pytest.raises(ValueError, match="iterations"):
        C.Job(0, 0.0, 0)
    with pytest.raises(ValueError, match="profile"):
        C.Job(0, 0.0, 10, workload=None, profile={"*": {1: -1.0}})
    with pytest.raises(ValueError, match="unknown trace 'philly'"):
        C.run("philly", cluster, "fifo", seed=0)
    with pytest.raises(ValueError, match="unknown scheduler 'sjf'"):
        C.run(C.JobTrace((C.Job(0, 0.0, 10),)), cluster, "sjf", seed=0)
    with pytest.raises(ValueError, match="gpu_mtbf"):
        C.FailureModel(gpu_mtbf=0.0)
    with pytest.raises(ValueError, match="restart_delay"):
        C.FailureModel(restart_delay=-1.0)
    with pytest.raises(ValueError, match="GPU type"):
        C.run(C.JobTrace((C.Job(0, 0.0, 10, workload=None, profile={"k80": {1: 1.0}}),)), cluster, "fifo", seed=0)
    with pytest.raises(ValueError, match="unknown workload 'resnet'"):
        C.run(C.JobTrace((C.Job(0, 0.0, 10, workload="resnet"),)), cluster, "fifo", seed=0)
    with pytest.raises(ValueError, match=r"workload_params \['depth'\]"):
        C.run(C.JobTrace((C.Job(0, 0.0, 10, workload_params={"depth": 3}),)), cluster, "fifo", seed=0)
    with pytest.raises(ValueError, match="checkpoints='daly'"):
        C.run(C.JobTrace((C.Job(0, 0.0, 10),)), cluster, "fifo", seed=0, checkpoints="daly")
    with pytest.raises(ValueError, match="straggler_speed"):
        C.FailureModel(straggler_speed=0.0)
    with pytest.raises(ValueError, match="node_uplink_bandwidth"):
        C.Cluster.uniform(2, 8, node_uplink_bandwidth=0.0)
    with pytest.raises(ValueError, match="rack_size"):
        C.Cluster.uniform(2, 8, rack_size=0)
    with pytest.raises(ValueError, match="rack_uplink_bandwidth"):
        C.Cluster.uniform(2, 8, rack_size=1, rack_uplink_bandwidth=-1.0)
    with pytest.raises(ValueError, match="unknown trace 'pollux'"):
        C.traces.load("pollux")
    with pytest.raises(ValueError, match="cross_node_bytes"):
        C.Job(0, 0.0, 10, cross_node_bytes=-1.0)
    with pytest.raises(ValueError, match="unique"):
        C.JobTrace((C.Job(0, 0.0, 10), C.Job(0, 1.0, 10)))


@pytest.mark.parametrize("name", ["srtf", "las", "tiresias"])
def test_preemption_loses_no_work_and_capacity_holds(name):
    trace = C.traces.generate(150, seed=2, mean_interarrival=40.0, checkpoint_every=7, checkpoint_cost=3.0)
    r = C.run(trace, C.Cluster.uniform(2, 8), name, seed=0)
    # without failures or sharing, each job holds GPUs for exactly its solo work: iterations x 1 s + checkpoints
    solo = np.array([j.iterations * 1.0 + ((j.iterations - 1) // 7) * 3.0 for j in trace.jobs])
    np.testing.assert_allclose(r.jobs["held"], solo, rtol=1e-9)
    assert r.util_v.max() <= 16 and np.all(r.jobs["first_start"] >= r.jobs["arrival"])
    assert r.utilisation == pytest.approx(float((solo * r.jobs["gpus"]).sum()) / (16 * r.makespan))


def test_heterogeneous_nodes_and_multi_node_sub_topology():
    mixed = C.Cluster((C.Node(4, "v100", None), C.Node(4, "k80", None)))
    prof = {"v100": {4: 1.0, 8: 1.0}, "k80": {4: 3.0, 8: 3.0}}
    big = C.Job(0, 0.0, 10, gpus=8, workload=None, profile=prof)
    small = C.Job(1, 100.0, 10, gpus=4, workload=None, profile=prof)
    r = C.run(C.JobTrace((big, small)), mixed, "fifo", seed=0)
    assert list(r.jobs["iter_time"]) == [3.0, 1.0]  # the slowest type it spans; then the first fitting node
    dgx = C.Cluster.uniform(2, 8, inter_node_bandwidth=12.5e9)
    topo = C.timing.sub_topology(dgx.nodes[0], 12, dgx)
    base = dg.Topology.preset("v100x8-dgx1")
    assert topo.n_devices == 12 and topo.bandwidth[0, 8] == 12.5e9 and topo.bandwidth[8, 11] == base.bandwidth[0, 3]
    np.testing.assert_array_equal(topo.bandwidth[:8, :8], base.bandwidth)


def _drive(trace: C.JobTrace, cluster: C.Cluster, plans: dict[float, dict[int, tuple[int, ...]]], **kwargs):
    """Run a ClusterSimulation with explicit Allocations: at event time t, ``plans[t]`` (else keep)."""
    sim = C.ClusterSimulation(trace, cluster, C.schedulers.FIFO(), seed=0, failures=C.FailureModel(), **kwargs)
    view = sim.run_until_decision()
    while view is not None:
        keep = {i: tuple(view.alloc[i]) for i in np.flatnonzero(view.running)}
        sim.apply_allocation(C.Allocation(plans.get(view.now, keep)))
        view = sim.run_until_decision()
    return sim.result()


def test_racks_share_their_uplinks_max_min_fairly_with_node_uplinks():
    # 2 racks x 2 nodes x 4 GPUs. A (4 GPUs, 1e9 B crossing per 1 s iteration) on nodes 0 + 2 spans both racks:
    # it puts 2 x 1e9 x 2/4 = 1e9 B/s on the uplinks of nodes 0 and 2 and of racks 0 and 1. B (0.5e9 B) on
    # nodes 1 + 3: 0.5e9 B/s on each of its links. C (2 GPUs on node 0) spans no node and sends nothing.
    a = C.Job(0, 0.0, 100, gpus=4, workload=None, profile={"*": {4: 1.0}}, cross_node_bytes=1e9)
    b = C.Job(1, 0.0, 100, gpus=4, workload=None, profile={"*": {4: 1.0}}, cross_node_bytes=0.5e9)
    c = C.Job(2, 0.0, 100, gpus=2, workload=None, profile={"*": {2: 1.0}}, cross_node_bytes=1e12)
    trace = C.JobTrace((a, b, c))
    plan = {0.0: {0: (0, 1, 8, 9), 1: (4, 5, 12, 13), 2: (2, 3)}}
    # Racks of 1.2e9 B/s only: rack 0 carries 1.5e9 at full speed, so both A and B run at 1.2 / 1.5 = 0.8.
    racks = C.Cluster.uniform(4, 4, preset=None, rack_size=2, rack_uplink_bandwidth=1.2e9)
    r = _drive(trace, racks, plan)
    np.testing.assert_allclose(r.jobs["completion"], [125.0, 125.0, 100.0])
    # Node uplinks of 0.6e9 B/s too: node 0 (A's 1e9) saturates first at x_A = 0.6; A then uses 0.6e9 of each
    # rack uplink, leaving 0.6e9 for B's 0.5e9: B runs at full speed. A: 100 / 0.6 s.
    both = C.Cluster.uniform(4, 4, preset=None, rack_size=2, rack_uplink_bandwidth=1.2e9, node_uplink_bandwidth=0.6e9)
    r = _drive(trace, both, plan)
    np.testing.assert_allclose(r.jobs["completion"], [100 / 0.6, 100.0, 100.0])
    # A and B on one rack each (nodes 0 + 1, nodes 2 + 3): no rack traffic, racks never bind
    r = _drive(trace, racks, {0.0: {0: (0, 1, 4, 5), 1: (8, 9, 12, 13), 2: (2, 3)}})
    np.testing.assert_allclose(r.jobs["completion"], [100.0, 100.0, 100.0])
    assert racks.node_rack == (0, 0, 1, 1) and C.Cluster.uniform(3, 4).node_rack == (0, 0, 0)
    # the progressive filling on its own, by hand: links L1 (cap 1) and L2 (cap 3); j1 on L1 (demand 2),
    # j2 on L1 + L2 (1, 1), j3 on L2 (4). L1 saturates at x = 1/3 (j1, j2); L2 then has 3 - 1/3 left for j3's 4.
    x = C.bandwidth.max_min_shares({1: {"L1": 2.0}, 2: {"L1": 1.0, "L2": 1.0}, 3: {"L2": 4.0}},
                                   {"L1": 1.0, "L2": 3.0})
    assert x == pytest.approx({1: 1 / 3, 2: 1 / 3, 3: (3 - 1 / 3) / 4})


def test_allocations_are_checked_and_preemption_cost_is_paid():
    jobs = tuple(C.Job(i, 0.0, 10, gpus=1, workload=None, profile={"*": {1: 1.0}}) for i in range(3))
    one = C.Cluster((C.Node(2, "v100", None),))
    for plan, match in (({0: (0,), 1: (0,), 2: (0,)}, "would hold 3 jobs"), ({0: (0, 1)}, "between gpus=1"),
                        ({0: (5,)}, r"distinct ids in \[0, 2\)"), ({7: (0,)}, "job index 7")):
        with pytest.raises(ValueError, match=match):
            _drive(C.JobTrace(jobs), one, {0.0: plan})
    with pytest.raises(ValueError, match="cannot share GPU 0"):
        _drive(C.JobTrace(jobs), one, {0.0: {0: (0,), 1: (0,)}}, interference=lambda a, b, g: None)
    with pytest.raises(ValueError, match="preemption_cost"):
        C.run(C.JobTrace(jobs), one, "fifo", seed=0, preemption_cost=-1.0)
    # job 0 runs 0-4 on GPU 0, migrates to GPU 1 at job 1's arrival (t=4) and restores 3 s: it ends at 4 + 3 + 6
    two = (C.Job(0, 0.0, 10, gpus=1, workload=None, profile={"*": {1: 1.0}}),
           C.Job(1, 4.0, 10, gpus=1, workload=None, profile={"*": {1: 1.0}}))
    r = _drive(C.JobTrace(two), one, {0.0: {0: (0,)}, 4.0: {0: (1,), 1: (0,)}}, preemption_cost=3.0)
    np.testing.assert_allclose(r.jobs["completion"], [13.0, 14.0])
    assert r.jobs["held"][0] == pytest.approx(13.0)


def test_pollux_workload_is_shipped_with_its_licence_and_iteration_times_by_hand():
    trace = C.traces.load("pollux-workload-1")
    assert "pollux-workload-1" in C.traces.names() and len(trace) == 160
    first = trace.jobs[0]  # cifar10-0,107,cifar10,6,2048 in Pollux's simulator/workloads/workload-1.csv
    assert (first.arrival, first.gpus, first.job_type, first.iterations) == (107.0, 6, "cifar10", 3178)
    # local batch ceil(2048 / 6) = 342, between the measured one-GPU step times at 257 and 363
    t = 0.18708271980285646 + (342 - 257) / (363 - 257) * (0.2595393657684326 - 0.18708271980285646)
    assert first.profile["*"][6] == pytest.approx(t, rel=1e-12)
    # bert at 384 on 12 GPUs: local 32 > max 12, so 3 accumulation steps of 11; yolov3 64 on 4: 2 steps of 8
    assert C.traces.pollux_iteration_time("bert", 384, 12) == pytest.approx(3 * 0.8552833199501038)
    assert C.traces.pollux_iteration_time("yolov3", 64, 4) == pytest.approx(2 * 0.3261484205722809)
    assert [j.job_type for j in trace.jobs].count("ncf") == 68 and max(j.arrival for j in trace.jobs) == 27695.0
    assert all(j.max_gpus >= j.gpus for j in trace.jobs) and first.max_gpus == 64  # 2048 / 32
    assert len(C.traces.load("pollux-workload-1", limit=10)) == 10
    from importlib import resources
    data = resources.files("doppler_gym.cluster").joinpath("data")
    assert "Apache License" in data.joinpath("ADAPTDL_LICENSE").read_text() and "Petuum" in data.joinpath(
        "ADAPTDL_LICENSE").read_text()
    r = C.run(trace, C.Cluster.uniform(16, 4, preset=None), "tiresias", seed=0)
    assert np.isfinite(r.jobs["jct"]).all() and r.avg_jct < C.run(trace, C.Cluster.uniform(16, 4, preset=None),
                                                                    "fifo", seed=0).avg_jct


def test_elastic_scheduler_grows_and_shrinks_jobs_by_hand():
    # A: 100 iterations, request 1 GPU, up to 4, t(k) = 4/k s. B: 30 iterations of 1 s on exactly 2 GPUs, at t=50.
    prof = {"*": {1: 4.0, 2: 2.0, 3: 4 / 3, 4: 1.0}}
    a = C.Job(0, 0.0, 100, gpus=1, max_gpus=4, workload=None, profile=prof)
    b = C.Job(1, 50.0, 30, gpus=2, workload=None, profile={"*": {2: 1.0}})
    node = C.Cluster((C.Node(4, "v100", None),))
    r = C.run(C.JobTrace((a, b)), node, "elastic", seed=0)
    # 0-50: A alone on 4 GPUs (50 iterations). At 50, LAS puts B (no service) first: B 2 GPUs, A 1 + the spare
    # one (4/2 = 2x faster). 50-80: B runs its 30 s, A does 15 iterations at 2 s. At 80, A takes all 4:
    # 35 iterations at 1 s -> 115.
    np.testing.assert_allclose(r.jobs["completion"], [115.0, 80.0])
    assert list(r.jobs["iter_time"]) == [1.0, 1.0]
    fifo = C.run(C.JobTrace((a, b)), node, "fifo", seed=0)  # A on its 1 requested GPU: 400 s
    np.testing.assert_allclose(fifo.jobs["completion"], [400.0, 80.0])
    # each resize is a restart: with a 5 s restore, A pays it at 50 and at 80 (B's first start is no restart)
    r = C.run(C.JobTrace((a, b)), node, "elastic", seed=0, preemption_cost=5.0)
    # 50-55: A restores on 2 GPUs; 55-80: 12.5 iterations; 80-85 restore on 4; 37.5 iterations at 1 s -> 122.5
    np.testing.assert_allclose(r.jobs["completion"], [122.5, 80.0])


def test_placement_inside_a_jobs_allocation_by_name_or_callable():
    job = C.Job(0, 0.0, 10, gpus=4, workload="ffnn", workload_params={"layers": 2})
    cluster = _one_job_cluster()
    base = dg.Topology.preset("v100x8-dgx1")
    topo = dg.Topology(speed=base.speed[:4], memory=base.memory[:4], bandwidth=base.bandwidth[:4, :4],
                       latency=base.latency[:4, :4])
    graph = dg.workloads.make("ffnn", layers=2)
    alone = dg.simulate(graph, np.zeros(graph.n_ops, dtype=np.int64), topology=topo).makespan
    seen = []

    def policy(g, t):  # a "policy": everything on its first GPU
        seen.append(t.n_devices)
        return np.zeros(g.n_ops, dtype=np.int64)

    by_callable = C.run(C.JobTrace((job,)), cluster, "fifo", seed=0, placement=policy)
    by_name = C.run(C.JobTrace((job,)), cluster, "fifo", seed=0, placement="single_device")
    assert seen == [4] and by_callable.jobs["iter_time"][0] == pytest.approx(alone, rel=1e-12)
    assert by_name.jobs["iter_time"][0] == pytest.approx(alone, rel=1e-12)
    default = C.run(C.JobTrace((job,)), cluster, "fifo", seed=0)
    assert default.jobs["iter_time"][0] < alone  # critical_path spreads the work over its 4 GPUs
    with pytest.raises(ValueError, match="unknown baseline 'nope'"):
        C.run(C.JobTrace((job,)), cluster, "fifo", seed=0, placement="nope")
    with pytest.raises(ValueError, match=r"need \(\d+,\) integer device ids in \[0, 4\)"):
        C.run(C.JobTrace((job,)), cluster, "fifo", seed=0, placement=lambda g, t: np.full(g.n_ops, 7))
    with pytest.raises(TypeError, match="placement must be"):
        C.IterationTimes(cluster, placement=3)
