"""The GPUs of a cluster simulation and the jobs on them: who holds each GPU, and the free ones indexed for packing.

:class:`GpuPool` keeps, as jobs take and leave GPUs: the jobs on each GPU (two at most, sharing), the free
GPUs of each node (sorted ids), the free GPUs per type, the nodes of each type bucketed by their free
count (so a start packs without scanning the cluster, :meth:`GpuPool.pack`) and the GPUs holding one
single-GPU job (those a waiting single-GPU job may share). A start or release updates each node's free
list and bucket once per run of its GPUs, not once per GPU: the engine calls it at every start.
:class:`~doppler_gym.cluster.simulation.ClusterSimulation` owns one and reads its public attributes.
"""

from __future__ import annotations

import bisect
import itertools

import numpy as np

from doppler_gym.cluster import placement as pl
from doppler_gym.cluster.types import Cluster


def sorted_remove(values: list[int], x: int) -> None:
    """Remove ``x`` from the ascending list ``values`` of distinct ints (it must be there): O(log n) search
    and a memmove, where ``list.remove`` scans (the node buckets and the lone-GPU index hold thousands)."""
    del values[bisect.bisect_left(values, x)]


class GpuPool:
    """The GPUs of ``cluster`` (ids node by node, ``G`` in all) and the jobs holding them.

    Attributes (read-only outside the class; the lists and dicts are updated in place):
        gpu_node: ``(G,) int64`` node of each GPU; node_of: the same as ``G`` Python ints.
        gpu_type: ``G`` GPU type names; node_type: ``n_nodes`` names; gpu_types: the types, sorted.
        type_capacity: ``{type: GPUs}``; free_by_type: ``{type: free GPUs now}``.
        occupants: ``G`` lists of the job indices on each GPU (<= 2, in the order they took it).
        n_busy: GPUs holding at least one job; n_shared: GPUs holding two.
        lone: sorted ids of the GPUs holding exactly one job, a single-GPU one (those a job may share).
    """

    def __init__(self, cluster: Cluster) -> None:
        nodes = cluster.nodes
        self.gpu_node = np.repeat(np.arange(len(nodes)), [nd.gpus for nd in nodes])  # (G,) int64
        self.node_of: list[int] = self.gpu_node.tolist()  # (the per-GPU loops)
        self.node_type = [nd.gpu_type for nd in nodes]
        self.gpu_type = [self.node_type[k] for k in self.node_of]
        self.gpu_types = tuple(sorted(set(self.node_type)))
        self.type_capacity = {t: sum(nd.gpus for nd in nodes if nd.gpu_type == t) for t in self.gpu_types}
        self.free_by_type = dict(self.type_capacity)
        self.occupants: list[list[int]] = [[] for _ in range(len(self.node_of))]
        self.n_busy = 0
        self.n_shared = 0
        self.lone: list[int] = []
        first = np.concatenate([[0], np.cumsum([nd.gpus for nd in nodes])])
        self._free_on_node = [list(range(int(first[k]), int(first[k + 1]))) for k in range(len(nodes))]
        # {type: {c: sorted ids of the nodes of that type with exactly c > 0 free GPUs}}: pack without a scan
        self._by_free: dict[str, dict[int, list[int]]] = {t: {} for t in self.gpu_types}
        for k, nd in enumerate(nodes):
            bisect.insort(self._by_free[nd.gpu_type].setdefault(nd.gpus, []), k)

    # -- choosing free GPUs ----------------------------------------------------------------------------
    def free_gpus(self, k: int, gpu_type: str | None = None) -> list[int] | None:
        """``k`` free GPUs of ``gpu_type`` packed on the fewest nodes of that type
        (:func:`~doppler_gym.cluster.placement.pack`), or ``None`` if fewer are free; ``gpu_type=None``: of any
        type (packed over every node, types mixed: O(nodes)). With a type: O(GPUs per node + nodes taken)."""
        if gpu_type is None:
            if k > len(self.node_of) - self.n_busy:
                return None
            return pl.pack({nd: v for nd, v in enumerate(self._free_on_node) if v}, k)
        if k > self.free_by_type.get(gpu_type, 0):
            return None
        return self.pack(k, gpu_type)

    def pack(self, k: int, gpu_type: str) -> list[int]:
        """:func:`placement.pack` over the free GPUs of ``gpu_type`` (at least ``k`` must be free), from the nodes
        bucketed by free count: the fullest node holding ``k`` (lowest id among equals), else the nodes with the
        most free GPUs first. O(GPUs per node + nodes taken), not O(nodes)."""
        buckets, free_on = self._by_free[gpu_type], self._free_on_node
        fitting = [c for c in buckets if c >= k and buckets[c]]
        if fitting:
            return free_on[buckets[min(fitting)][0]][:k]
        chosen: list[int] = []
        for c in sorted((c for c in buckets if buckets[c]), reverse=True):
            for nd in buckets[c]:
                chosen += free_on[nd][: k - len(chosen)]
                if len(chosen) == k:
                    return chosen
        return chosen

    # -- taking and leaving GPUs -----------------------------------------------------------------------
    def take(self, i: int, gpus: list[int], changed: set[int]) -> bool:
        """Job ``i`` takes ``gpus`` (ids; each free or holding one job). The jobs whose GPUs become shared (their
        pace changes) are added to ``changed``. Returns whether ``gpus`` lie on more than one node."""
        occupants = self.occupants
        if all(not occupants[g] for g in gpus):
            nodes = self._take_free(i, gpus)
        else:
            self._take_any(i, gpus, changed)
            nodes = {self.node_of[g] for g in gpus}
        return len(set(nodes)) > 1

    def release(self, i: int, gpus: list[int], changed: set[int]) -> None:
        """Job ``i`` leaves ``gpus`` (the ids it holds); the jobs left alone on a GPU it shared are added to
        ``changed``."""
        occupants = self.occupants
        if not self.n_shared or all(len(occupants[g]) == 1 for g in gpus):
            self._free_lone(gpus)
        else:
            self._leave(i, gpus, changed)

    def _take_free(self, i: int, gpus: list[int]) -> list[int]:
        """Job ``i`` takes ``gpus``, all free: occupants, the per-node free lists (each run of GPUs on one node
        removed at once, its bucket moved once), the free counts and the lone-GPU index (:meth:`_take_any` for
        any GPUs). Returns the node of each run (a node twice if its GPUs are not consecutive in ``gpus``)."""
        occupants = self.occupants
        for g in gpus:
            occupants[g].append(i)
        free_on, node_type, free_by_type = self._free_on_node, self.node_type, self.free_by_type
        nodes = []
        for nd, run in itertools.groupby(gpus, self.node_of.__getitem__):
            taken = list(run)
            nodes.append(nd)
            free, m = free_on[nd], len(taken)
            was = len(free)
            if free[:m] == taken:  # (a packed start takes a node's lowest free GPUs)
                del free[:m]
            else:
                for g in taken:
                    free.remove(g)
            free_by_type[node_type[nd]] -= m
            self._node_free_changed(nd, was)
        self.n_busy += len(gpus)
        if len(gpus) == 1:
            bisect.insort(self.lone, gpus[0])  # now holds exactly one single-GPU job: it may be shared
        return nodes

    def _take_any(self, i: int, gpus: list[int], changed: set[int]) -> None:
        """Job ``i`` takes ``gpus`` (free or holding one job each): the general form of :meth:`_take_free`;
        a GPU shared now changes its partner's pace (both jobs go to ``changed``)."""
        k = len(gpus)
        occupants, n_busy = self.occupants, self.n_busy
        node_of, gpu_type, free_on, free_by_type = self.node_of, self.gpu_type, self._free_on_node, self.free_by_type
        before: dict[int, int] = {}  # node -> its free GPUs before the start (each node re-bucketed once)
        lone = self.lone
        for g in gpus:
            occ = occupants[g]
            if not occ:
                n_busy += 1
                nd = node_of[g]
                if nd not in before:
                    before[nd] = len(free_on[nd])
                free_on[nd].remove(g)
                free_by_type[gpu_type[g]] -= 1
            occ.append(i)
            # the GPUs that now hold exactly one single-GPU job are those a waiting job may share; a GPU
            # shared now changes its partner's pace
            if len(occ) == 1:
                if k == 1:
                    bisect.insort(lone, g)
            elif len(occ) == 2:
                sorted_remove(lone, g)
                changed.update(occ)
                self.n_shared += 1
        for nd, was in before.items():
            self._node_free_changed(nd, was)
        self.n_busy = n_busy

    def _free_lone(self, gpus: list[int]) -> None:
        """The job alone on ``gpus`` leaves them: they become free (each node's free list and bucket updated once;
        :meth:`_leave` for GPUs that may be shared)."""
        occupants = self.occupants
        for g in gpus:
            occupants[g].clear()
        free_on, node_type, free_by_type = self._free_on_node, self.node_type, self.free_by_type
        for nd, run in itertools.groupby(gpus, self.node_of.__getitem__):
            back = list(run)
            free = free_on[nd]
            was = len(free)
            free += back
            free.sort()
            free_by_type[node_type[nd]] += len(back)
            self._node_free_changed(nd, was)
        self.n_busy -= len(gpus)
        if len(gpus) == 1:
            sorted_remove(self.lone, gpus[0])

    def _leave(self, i: int, gpus: list[int], changed: set[int]) -> None:
        """Job ``i`` leaves ``gpus`` (some shared): the general form of :meth:`_free_lone`; a GPU's remaining
        job changes pace (it goes to ``changed``)."""
        single = len(gpus) == 1
        occupants, lone, node_of, free_on = self.occupants, self.lone, self.node_of, self._free_on_node
        before: dict[int, int] = {}  # node -> its free GPUs before the release (each node re-bucketed once)
        for g in gpus:
            occ = occupants[g]
            occ.remove(i)
            if occ:
                changed.update(occ)
                self.n_shared -= 1  # (two jobs to a GPU at most: it now holds one)
            if single and not occ:
                sorted_remove(lone, g)
            elif len(occ) == 1:  # a shared GPU (both jobs single-GPU) keeps its other job
                bisect.insort(lone, g)
            if not occ:
                self.n_busy -= 1
                nd = node_of[g]
                if nd not in before:
                    before[nd] = len(free_on[nd])
                bisect.insort(free_on[nd], g)
                self.free_by_type[self.gpu_type[g]] += 1
        for nd, was in before.items():
            self._node_free_changed(nd, was)

    def _node_free_changed(self, nd: int, before: int) -> None:
        """Move node ``nd`` from the free-count bucket ``before`` to its current one."""
        buckets, after = self._by_free[self.node_type[nd]], len(self._free_on_node[nd])
        if before:
            sorted_remove(buckets[before], nd)
        if after:
            bisect.insort(buckets.setdefault(after, []), nd)
