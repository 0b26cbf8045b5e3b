"""GpuPool's incremental indexes against a rebuild from scratch after every take and release.

The reference is the plain definition: the free GPUs of each node read off ``occupants``,
:func:`placement.pack` over them, counts by type, and the lone GPUs (one single-GPU job) listed by a scan.
"""

from __future__ import annotations

import numpy as np
import pytest

from doppler_gym.cluster import placement as pl
from doppler_gym.cluster.gpu_pool import GpuPool
from doppler_gym.cluster.types import Cluster, Node


def _cluster() -> Cluster:
    return Cluster((Node(4, "v100", None), Node(8, "v100", None), Node(2, "k80", None), Node(4, "k80", None),
                    Node(8, "v100", None)), name="mixed")


def _check(pool: GpuPool, cluster: Cluster, holding: dict[int, list[int]]) -> None:
    """Every index of ``pool`` equals its rebuild from the jobs ``holding`` their GPUs."""
    n = sum(nd.gpus for nd in cluster.nodes)
    occupants: list[list[int]] = [[] for _ in range(n)]
    for i, gpus in holding.items():
        for g in gpus:
            occupants[g].append(i)
    assert [sorted(o) for o in pool.occupants] == [sorted(o) for o in occupants]
    assert pool.n_busy == sum(1 for o in occupants if o)
    assert pool.n_shared == sum(1 for o in occupants if len(o) == 2)
    lone = [g for g, o in enumerate(occupants) if len(o) == 1 and len(holding[o[0]]) == 1]
    assert pool.lone == lone
    gpu_node = pool.gpu_node
    for t in ("v100", "k80"):
        free = {nd: v for nd, v in pl.free_by_node(occupants, gpu_node).items() if cluster.nodes[nd].gpu_type == t}
        assert pool.free_by_type[t] == sum(len(v) for v in free.values())
        for k in (1, 2, 3, 5, 8, 9):
            assert pool.free_gpus(k, t) == pl.pack(free, k), (t, k)
    assert pool.free_gpus(3) == pl.pack(pl.free_by_node(occupants, gpu_node), 3)


@pytest.mark.parametrize("seed", range(4))
def test_take_and_release_keep_every_index_equal_to_a_rebuild(seed):
    cluster = _cluster()
    pool = GpuPool(cluster)
    rng = np.random.default_rng(seed)
    holding: dict[int, list[int]] = {}
    next_job = 0
    for _ in range(300):
        if holding and rng.random() < 0.45:  # a job leaves
            i = int(rng.choice(sorted(holding)))
            pool.release(i, holding.pop(i), set())
        elif rng.random() < 0.2 and pool.lone:  # a single-GPU job shares a lone GPU
            g = int(rng.choice(pool.lone))
            changed: set[int] = set()
            assert pool.take(next_job, [g], changed) is False
            assert changed == set(pool.occupants[g]) == {pool.occupants[g][0], next_job}  # both now share
            holding[next_job] = [g]
            next_job += 1
        else:  # a job takes free GPUs of one type, packed
            t = "v100" if rng.random() < 0.6 else "k80"
            k = int(rng.choice([1, 1, 2, 3, 4, 6]))
            gpus = pool.free_gpus(k, t)
            if gpus is None:
                continue
            spans = pool.take(next_job, gpus, set())
            assert spans == (len({int(pool.gpu_node[g]) for g in gpus}) > 1)
            holding[next_job] = gpus
            next_job += 1
        _check(pool, cluster, holding)


def test_a_third_job_on_a_shared_gpu_is_refused_and_changes_nothing():
    cluster = _cluster()
    pool = GpuPool(cluster)
    g = pool.free_gpus(1, "v100")[0]
    pool.take(0, [g], set())
    pool.take(1, [g], set())  # now shared by jobs 0 and 1
    before = ([list(o) for o in pool.occupants], pool.n_busy, pool.n_shared, list(pool.lone))
    with pytest.raises(ValueError, match="hold two jobs"):
        pool.take(2, [g], set())
    assert ([list(o) for o in pool.occupants], pool.n_busy, pool.n_shared, list(pool.lone)) == before
    assert pool.jobs_on(g) == 2 and pool.occupants[g] == [0, 1]  # in the order they took it
