"""The batched starts and preemptions of a preemptive admission on one GPU type against the per-job path.

- :meth:`GpuPool.take_packed_many` / :meth:`GpuPool.release_many` against ``take(i, pack(k, t))`` and
  ``release`` called job by job on a second pool, and both against a rebuild from scratch (the free GPUs read
  off ``occupants``, :func:`placement.pack` over them: ``test_gpu_pool``'s reference), on random batches;
- the engine's batched admission against a simulation whose batched steps are the per-job loop
  (``_preempt`` and ``_start(i, pool.pack(...))`` one job after another, as the engine was written before):
  every job record and the pool state equal at every decision of LAS runs with random orders, failures and
  preemption costs, and the engine's cached running jobs (updated from each admission's and completion's
  change) equal to a gather from scratch;
- the compiled admission (:func:`greedy_changes`) against the greedy loop written out and the NumPy form, and
  :func:`merge_running` against Python's set operations.
"""

from __future__ import annotations

import numpy as np
import pytest

from doppler_gym import cluster as C
from doppler_gym.cluster import placement as pl
from doppler_gym.cluster import simulation as S
from doppler_gym.cluster.admission import greedy_changes
from doppler_gym.cluster.gpu_pool import GpuPool
from doppler_gym.cluster.schedulers import LAS
from doppler_gym.cluster.step_kernels import merge_running
from doppler_gym.cluster.types import Cluster, Node


def _one_type_cluster() -> Cluster:
    """One GPU type, nodes of several sizes (so that packing prefers the fullest fitting node and spans nodes)."""
    return Cluster(tuple(Node(g, "v100", None) for g in (4, 8, 2, 8, 1, 4, 8, 3)), name="one-type")


def _pool_state(pool: GpuPool) -> tuple:
    return ([list(o) for o in pool.occupants], pool.n_busy, pool.n_shared, list(pool.lone), dict(pool.free_by_type),
            [pool.free_gpus(k, "v100") for k in (1, 2, 3, 5, 8, 9, 20)], pool.free_gpus(3))


def _check(pool: GpuPool, holding: dict[int, list[int]]) -> None:
    """Every index of ``pool`` equals its rebuild from the jobs ``holding`` their GPUs (one type, none shared)."""
    occupants: list[list[int]] = [[] for _ in pool.occupants]
    for i, gpus in holding.items():
        for g in gpus:
            occupants[g].append(i)
    assert pool.occupants == occupants
    assert pool.n_busy == sum(1 for o in occupants if o) and pool.n_shared == 0
    assert pool.lone == [g for g, o in enumerate(occupants) if len(o) == 1 and len(holding[o[0]]) == 1]
    free = pl.free_by_node(occupants, pool.gpu_node)
    assert pool.free_by_type == {"v100": sum(len(v) for v in free.values())}
    for k in (1, 2, 3, 5, 8, 9, 20):
        assert pool.free_gpus(k, "v100") == pl.pack(free, k), k


@pytest.mark.parametrize("seed", range(6))
def test_batches_equal_the_per_job_calls_and_a_rebuild(seed):
    cluster = _one_type_cluster()
    batched, per_job = GpuPool(cluster), GpuPool(cluster)
    rng = np.random.default_rng(seed)
    holding: dict[int, list[int]] = {}
    next_job = 0
    for _ in range(120):
        if holding and rng.random() < 0.5:  # a batch of jobs leaves
            out = [i for i in sorted(holding) if rng.random() < 0.5]
            batched.release_many([holding[i] for i in out])
            for i in out:
                per_job.release(i, holding.pop(i), set())
        else:  # a batch of jobs starts, packed one after another
            needs, room = [], batched.free_by_type["v100"]
            for _ in range(int(rng.integers(0, 7))):
                k = int(rng.choice([1, 1, 2, 3, 4, 6, 8, 11]))
                if k <= room:
                    needs.append(k)
                    room -= k
            jobs = list(range(next_job, next_job + len(needs)))
            next_job += len(needs)
            taken, spans = batched.take_packed_many(jobs, np.array(needs, dtype=np.int64), "v100")
            for i, k, gpus, span in zip(jobs, needs, taken, spans):
                expected = pl.pack(pl.free_by_node(per_job.occupants, per_job.gpu_node), k)  # brute force
                assert per_job.pack(k, "v100") == expected == gpus
                assert per_job.take(i, expected, set()) == span == (len({int(per_job.gpu_node[g]) for g in gpus}) > 1)
                holding[i] = gpus
        assert _pool_state(batched) == _pool_state(per_job)
        _check(batched, holding)


def test_batches_refuse_what_the_per_job_path_cannot_do():
    pool = GpuPool(_one_type_cluster())
    with pytest.raises(ValueError, match="GPUs of 'v100' asked for"):
        pool.take_packed_many([0, 1], np.array([30, 10]), "v100")
    taken, _ = pool.take_packed_many([0], np.array([1]), "v100")
    pool.take(1, taken[0], set())  # job 1 shares job 0's GPU
    with pytest.raises(ValueError, match="shared"):
        pool.release_many([taken[0]])


class _PerJobSimulation(C.ClusterSimulation):
    """The engine with its batched admission steps replaced by the per-job loop it replaced."""

    def _preempt_many(self, jobs: np.ndarray) -> None:
        for i in jobs.tolist():
            self._preempt(i)

    def _start_many(self, jobs: np.ndarray) -> None:
        t = self.gpu_types[0]
        for i in jobs.tolist():
            self._start(i, self.pool.pack(int(self.requested[i]), t))


_RECORDS = ("status", "progress", "work", "iter_time", "speed", "attained", "held", "first_start", "completion",
            "interruptions", "lost", "gpus_held", "suspended", "stall_end", "cross_bytes")


def _block_is_a_fresh_gather(sim: C.ClusterSimulation) -> None:
    """The engine's cached running jobs (kept across admissions and completions) equal a gather from scratch."""
    block = sim._running_block()
    idx = np.flatnonzero(sim.status == S.RUNNING)
    np.testing.assert_array_equal(block.idx, idx)
    for got, full in ((block.work, sim.work), (block.gpus, sim.gpus_held), (block.speed, sim.speed)):
        np.testing.assert_array_equal(got, full[idx])


def _same_state(a: C.ClusterSimulation, b: C.ClusterSimulation) -> None:
    _block_is_a_fresh_gather(a)
    for name in _RECORDS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.alloc == b.alloc and a.job_gpu_type == b.job_gpu_type and a.now == b.now
    assert _pool_state(a.pool) == _pool_state(b.pool)


@pytest.mark.parametrize("seed", range(3))
def test_the_batched_admission_equals_the_per_job_loop(seed):
    trace = C.traces.generate(160, seed=seed, mean_interarrival=8.0, checkpoint_every=50, checkpoint_cost=3.0)
    failures = C.FailureModel(gpu_mtbf=46 * 3600.0 * 3, restart_delay=30.0)  # a failure per 3 h
    sims = [cls(trace, _one_type_cluster(), LAS(), seed=seed, failures=failures, preemption_cost=12.0)
            for cls in (C.ClusterSimulation, _PerJobSimulation)]
    rng = np.random.default_rng(seed)
    views, decisions = [s.run_until_decision() for s in sims], 0
    while views[0] is not None:
        assert views[1] is not None
        act = views[0].active_array()
        order = rng.permutation(act) if rng.random() < 0.5 else LAS().order_array(views[0])
        for s in sims:
            s.allocate_in_order(order.copy())
        _same_state(*sims)
        decisions += 1
        views = [s.run_until_decision() for s in sims]
        _block_is_a_fresh_gather(sims[0])  # (after the completions of the next step too)
    assert views[1] is None and decisions > 200
    assert int(sims[0].interruptions.sum()) > 0 and int(sims[0].suspended.sum()) == 0


def _greedy_loop(order: list[int], need: np.ndarray, n_gpus: int) -> list[int]:
    """The admission as defined: in order, each job that fits the GPUs left."""
    left, admitted = n_gpus, []
    for i in order:
        if need[i] <= left:
            admitted.append(i)
            left -= int(need[i])
    return admitted


def test_compiled_admission_is_the_greedy_loop():
    rng = np.random.default_rng(5)
    for _ in range(400):
        n = int(rng.integers(1, 400))
        need = rng.choice([1, 1, 2, 4, 8, 16], size=n).astype(np.int64)
        order = rng.permutation(n)[: int(rng.integers(0, n + 1))].astype(np.int64)
        is_running = rng.random(n) < 0.3
        running = np.flatnonzero(is_running)
        scratch = np.zeros(n, dtype=bool)
        n_gpus = int(rng.integers(1, 200))
        start, stop = greedy_changes(order, need, n_gpus, running, is_running, scratch)
        admitted = _greedy_loop(order.tolist(), need, n_gpus)
        assert start.tolist() == [i for i in admitted if not is_running[i]]
        assert stop.tolist() == [i for i in running.tolist() if i not in set(admitted)]
        assert not scratch.any()


def test_merge_running_is_the_set_update():
    rng = np.random.default_rng(2)
    for _ in range(300):
        n = int(rng.integers(1, 300))
        old = np.flatnonzero(rng.random(n) < 0.4)
        stop = old[rng.random(old.size) < 0.3]
        start = rng.permutation(np.setdiff1d(np.arange(n), old))[: int(rng.integers(0, 20))]
        expected = sorted((set(old.tolist()) - set(stop.tolist())) | set(start.tolist()))
        assert merge_running(old, stop, start.astype(np.int64)).tolist() == expected
