"""ClusterSimulation driven by hand: the decision protocol, a rejected Allocation changes nothing, run() is the
simulation driven by a scheduler's order; the event queue's order."""

from __future__ import annotations

import math

import numpy as np
import pytest

from doppler_gym import cluster as C
from doppler_gym.cluster.events import ARRIVAL, FAILURE, RESTART, EventQueue


def _one_gpu_jobs(n: int) -> C.JobTrace:
    return C.JobTrace(tuple(C.Job(i, 2.0 * i, 10, gpus=1, workload=None, profile={"*": {1: 1.0}}) for i in range(n)))


def _sim(trace: C.JobTrace, cluster: C.Cluster, scheduler: C.Scheduler, **kwargs) -> C.ClusterSimulation:
    return C.ClusterSimulation(trace, cluster, scheduler, seed=0, failures=C.FailureModel(), **kwargs)


def test_decisions_alternate_with_runs_and_the_result_waits_for_the_end():
    sim = _sim(_one_gpu_jobs(2), C.Cluster((C.Node(1, "v100", None),)), C.schedulers.FIFO())
    with pytest.raises(RuntimeError, match="no decision is pending"):
        sim.allocate_in_order([0])
    view = sim.run_until_decision()
    assert view.now == 0.0 and view.active == [0]
    with pytest.raises(RuntimeError, match="is pending"):
        sim.run_until_decision()
    with pytest.raises(RuntimeError, match="2 unfinished jobs"):
        sim.result()
    while view is not None:
        sim.allocate_in_order(view.active)
        view = sim.run_until_decision()
    # job 0 runs 0-10 s; job 1 arrives at 2 s and waits for the one GPU: 10-20 s
    np.testing.assert_array_equal(sim.result().jobs["completion"], [10.0, 20.0])
    assert sim.run_until_decision() is None
    with pytest.raises(RuntimeError, match="no decision is pending"):
        sim.apply_allocation(C.Allocation({}))


def test_a_rejected_allocation_changes_nothing_and_the_decision_stays_pending():
    trace, one = _one_gpu_jobs(3), C.Cluster((C.Node(2, "v100", None),))

    def drive(reject_first: bool) -> C.ClusterResult:
        sim = _sim(trace, one, C.schedulers.FIFO(), preemption_cost=1.5)
        view = sim.run_until_decision()
        while view is not None:
            if reject_first:
                with pytest.raises(ValueError, match="must be distinct ids"):
                    sim.apply_allocation(C.Allocation({i: (0, 0) for i in view.active}))
            keep = {i: tuple(view.alloc[i]) for i in np.flatnonzero(view.running)}
            waiting = [i for i in view.active if i not in keep]
            free = [g for g in range(one.n_gpus) if not view.occupants[g]]
            keep.update({i: (g,) for i, g in zip(waiting, free, strict=False)})
            sim.apply_allocation(C.Allocation(keep))
            view = sim.run_until_decision()
        return sim.result()

    plain, rejected = drive(False), drive(True)
    for column in ("first_start", "completion", "held"):
        np.testing.assert_array_equal(plain.jobs[column], rejected.jobs[column])
    np.testing.assert_array_equal(plain.jobs["completion"], [10.0, 12.0, 20.0])


@pytest.mark.parametrize("name", ["fifo", "las", "gandiva", "elastic"])
def test_run_is_the_simulation_driven_by_the_schedulers_order(name):
    trace = C.traces.generate(12, seed=3, mean_interarrival=30.0, median_duration=300.0, job_types=("A3C", "generic"))
    cluster = C.Cluster.uniform(2, 4, preset=None)
    failures = C.FailureModel(gpu_mtbf=2e4, restart_delay=30.0, straggler_mtbs=5e3)
    scheduler = C.schedulers.make(name)
    sim = C.ClusterSimulation(trace, cluster, scheduler, seed=4, failures=failures, preemption_cost=2.0)
    view = sim.run_until_decision()
    while view is not None:
        sim.allocate_in_order(scheduler.order(view))
        view = sim.run_until_decision()
    by_hand = sim.result()
    r = C.run(trace, cluster, name, seed=4, failures=failures, preemption_cost=2.0)
    for column in ("first_start", "completion", "held", "lost", "interruptions"):
        np.testing.assert_array_equal(by_hand.jobs[column], r.jobs[column])
    assert (by_hand.avg_jct, by_hand.utilisation) == (r.avg_jct, r.utilisation)


def test_inputs_are_checked_when_the_simulation_is_made():
    one = C.Cluster((C.Node(2, "v100", None),))
    with pytest.raises(ValueError, match="exceeds the cluster's 2 GPUs"):
        _sim(C.JobTrace((C.Job(0, 0.0, 10, gpus=4, workload=None, profile={"*": {4: 1.0}}),)), one, C.schedulers.FIFO())
    with pytest.raises(ValueError, match="checkpoints='daily'"):
        _sim(_one_gpu_jobs(1), one, C.schedulers.FIFO(), checkpoints="daily")


def test_event_queue_orders_by_time_then_kind_then_push_order():
    q = EventQueue()
    assert q.next_time() == math.inf and q.pop_due(1e9) is None
    q.push(5.0, RESTART, 1)
    q.push(5.0, ARRIVAL, 2)
    q.push(5.0, ARRIVAL, 0)
    q.push(1.0, FAILURE)
    assert q.next_time() == 1.0 and q.pop_due(0.5) is None
    assert [q.pop_due(5.0) for _ in range(5)] == [(FAILURE, -1), (ARRIVAL, 2), (ARRIVAL, 0), (RESTART, 1), None]
