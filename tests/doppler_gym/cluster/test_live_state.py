"""The engine's state kept from each change, against the same state found from scratch.

- the active jobs (:meth:`ClusterSimulation._active_jobs`, updated from the jobs whose status changed by
  :func:`~doppler_gym.cluster.step_kernels.update_active`) against ``np.flatnonzero(status <= RUNNING)`` at every
  decision, and the kernel itself against Python's set operations;
- the running block's compiled gather and drop (:class:`~doppler_gym.cluster.running.RunningBlock`) and the
  cross-node bytes of restarts (:func:`~doppler_gym.cluster.step_kernels.reuse_cross_bytes`) against the NumPy
  expressions they replace, to the bit;
- who holds each GPU (:attr:`GpuPool.occupants`, rebuilt from the pool's arrays only when read, and
  :meth:`GpuPool.jobs_on`) against the lists rebuilt from every job's ``alloc``, at every decision and after
  it, with the view's ``occupants``: runs of preemptive (batched), non-preemptive and sharing schedulers with
  failures (restarts with and without a delay: a job may leave and re-enter the active set in one step).
"""

from __future__ import annotations

import numpy as np
import pytest

from doppler_gym import cluster as C
from doppler_gym.cluster import simulation as S
from doppler_gym.cluster.running import EPS, RunningBlock
from doppler_gym.cluster.step_kernels import reuse_cross_bytes, update_active


def test_update_active_is_the_set_update():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 60))
        status = rng.integers(0, 5, n).astype(np.int8)
        old = np.flatnonzero(rng.random(n) < 0.5).astype(np.int64)
        changed = rng.integers(0, n, int(rng.integers(0, 12))).astype(np.int64)  # any order, repeats
        mask = np.zeros(n, dtype=bool)
        got = update_active(old, changed, status, S.RUNNING, mask)
        ch = set(changed.tolist())
        expected = sorted((set(old.tolist()) - ch) | {j for j in ch if status[j] <= S.RUNNING})
        assert got.tolist() == expected
        assert not mask.any()  # the scratch is left clean


def _occupants_from_alloc(sim: S.ClusterSimulation) -> list[list[int]]:
    """Each GPU's jobs, sorted, from every job's GPUs (the brute force)."""
    occ: list[list[int]] = [[] for _ in range(sim.n_gpus)]
    for i, gpus in enumerate(sim.alloc):
        for g in gpus:
            occ[g].append(i)
    return occ


def _check_state(sim: S.ClusterSimulation, view) -> None:
    expected = _occupants_from_alloc(sim)
    assert [sorted(o) for o in view.occupants] == expected
    assert [sim.pool.jobs_on(g) for g in range(sim.n_gpus)] == [len(o) for o in expected]
    assert view.active_idx.tolist() == np.flatnonzero(sim.status <= S.RUNNING).tolist()


@pytest.mark.parametrize("scheduler,restart_delay,cost", [("las", 0.0, 0.0), ("las", 30.0, 20.0),
                                                          ("tiresias", 0.0, 10.0), ("fifo", 0.0, 0.0),
                                                          ("gandiva", 0.0, 5.0), ("srtf", 60.0, 0.0)])
def test_kept_state_equals_a_rebuild_at_every_decision(scheduler, restart_delay, cost):
    trace = C.traces.generate(150, seed=3, mean_interarrival=40.0)
    cluster = C.Cluster.uniform(4, 4)
    failures = C.FailureModel(gpu_mtbf=16 * 3600.0 * 2, restart_delay=restart_delay)  # a failure per 2 h
    sched = C.schedulers.make(scheduler)
    sim = S.ClusterSimulation(trace, cluster, sched, seed=1, failures=failures, preemption_cost=cost)
    view = sim.run_until_decision()
    decisions = 0
    while view is not None:
        _check_state(sim, view)
        sim.allocate_in_order(sched.order(view))
        assert [sorted(o) for o in sim.occupants] == _occupants_from_alloc(sim)  # read again after the change
        decisions += 1
        view = sim.run_until_decision()
    assert decisions > 100 and int(sim.interruptions.sum()) > 0  # the runs do exercise failures


def test_running_block_gather_and_drop_equal_numpy_to_the_bit():
    rng = np.random.default_rng(1)
    n = 500
    work, speed = rng.random(n) * 1e5, rng.random(n)
    gpus_held = rng.integers(0, 9, n)
    idx = np.flatnonzero(rng.random(n) < 0.4)
    block = RunningBlock(idx, work, gpus_held, speed)
    assert np.array_equal(block.work, work[idx]) and np.array_equal(block.gpus, gpus_held[idx])
    assert np.array_equal(block.speed, speed[idx])
    assert np.array_equal(block.done_at, work[idx] * (1 - 1e-12) - EPS)  # exact float64 equality
    gone = rng.random(idx.size) < 0.3
    rest = block.without(gone)
    again = RunningBlock(idx[~gone], work, gpus_held, speed)  # gathered from scratch
    for name in ("idx", "work", "gpus", "speed", "done_at"):
        assert np.array_equal(getattr(rest, name), getattr(again, name)), name


def test_reuse_cross_bytes_is_the_numpy_form():
    rng = np.random.default_rng(2)
    n = 300
    requested, last_gpus = rng.integers(1, 4, n), rng.integers(0, 4, n)
    last_cross = rng.random(n) * 1e9
    jobs = rng.permutation(n)[:120].astype(np.int64)
    spans = rng.random(jobs.size) < 0.5
    cross = rng.random(n)
    expected = cross.copy()
    same = last_gpus[jobs] == requested[jobs]
    expected[jobs[same]] = np.where(spans[same], last_cross[jobs[same]], 0.0)
    other = reuse_cross_bytes(jobs, spans, requested, last_gpus, last_cross, cross)
    assert np.array_equal(cross, expected)
    assert other.tolist() == np.flatnonzero(~same).tolist()
