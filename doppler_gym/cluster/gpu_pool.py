"""The GPUs of a cluster simulation and the jobs on them: who holds each GPU, and the free ones indexed for packing.

:class:`GpuPool` keeps, as jobs take and leave GPUs: the jobs on each GPU (two at most, sharing), the free
GPUs, each node's free count, the free GPUs per type, the nodes of each type bucketed by their free
count (so a start packs without scanning the cluster, :meth:`GpuPool.pack`) and the GPUs holding one
single-GPU job (those a waiting single-GPU job may share). The free GPUs, the nodes' free counts and the
buckets are a compiled index (:mod:`doppler_gym.cluster.pool_kernels`); a preemptive admission packs and takes
the GPUs of all the jobs it starts in one compiled call (:meth:`GpuPool.take_packed_many`) and frees those of
the jobs it suspends in another (:meth:`GpuPool.release_many`), with the same state as the per-job calls.
:class:`~doppler_gym.cluster.simulation.ClusterSimulation` owns one and reads its public attributes.
"""

from __future__ import annotations

import bisect

import numpy as np

from doppler_gym.cluster import placement as pl
from doppler_gym.cluster import pool_kernels as pk
from doppler_gym.cluster.types import Cluster


def sorted_remove(values: list[int], x: int) -> None:
    """Remove ``x`` from the ascending list ``values`` of distinct ints (it must be there): O(log n) search
    and a memmove, where ``list.remove`` scans long lists."""
    del values[bisect.bisect_left(values, x)]


class GpuPool:
    """The GPUs of ``cluster`` (ids node by node, ``G`` in all) and the jobs holding them.

    Attributes (read-only outside the class; the lists and dicts are updated in place):
        gpu_node: ``(G,) int64`` node of each GPU; node_of: the same as ``G`` Python ints.
        gpu_type: ``G`` GPU type names; node_type: ``n_nodes`` names; gpu_types: the types, sorted.
        type_capacity: ``{type: GPUs}``; free_by_type: ``{type: free GPUs now}``.
        occupants: ``G`` lists of the job indices on each GPU (<= 2, in the order they took it).
        n_busy: GPUs holding at least one job; n_shared: GPUs holding two.
        lone: sorted ids of the GPUs holding exactly one job, a single-GPU one (those a job may share): a list
            built on read from a set kept at each take and release (the list is the pool's: do not change it);
            n_lone: how many.
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
        self._lone: set[int] = set()  # the GPUs of `lone`
        self._lone_sorted: list[int] | None = []  # `lone`, or None when the set changed since it was built
        self._tid = {t: k for k, t in enumerate(self.gpu_types)}  # type name -> its index in the compiled index
        self._idx = pk.new_index([nd.gpus for nd in nodes], [self._tid[t] for t in self.node_type],
                                 len(self.gpu_types))

    @property
    def lone(self) -> list[int]:
        """Sorted ids of the GPUs holding exactly one job, a single-GPU one (built when the set changed)."""
        if self._lone_sorted is None:
            self._lone_sorted = sorted(self._lone)
        return self._lone_sorted

    @property
    def n_lone(self) -> int:
        """GPUs holding exactly one job, a single-GPU one."""
        return len(self._lone)

    # -- choosing free GPUs ----------------------------------------------------------------------------
    def free_gpus(self, k: int, gpu_type: str | None = None) -> list[int] | None:
        """``k`` free GPUs of ``gpu_type`` packed on the fewest nodes of that type
        (:func:`~doppler_gym.cluster.placement.pack`), or ``None`` if fewer are free; ``gpu_type=None``: of any
        type (packed over every node, types mixed: O(GPUs)). With a type: O(GPUs per node + nodes taken)."""
        if gpu_type is None:
            if k > len(self.node_of) - self.n_busy:
                return None
            free: dict[int, list[int]] = {}
            for g in np.flatnonzero(self._idx.is_free).tolist():
                free.setdefault(self.node_of[g], []).append(g)
            return pl.pack(free, k)
        if k > self.free_by_type.get(gpu_type, 0):
            return None
        return self.pack(k, gpu_type)

    def pack(self, k: int, gpu_type: str) -> list[int]:
        """:func:`placement.pack` over the free GPUs of ``gpu_type`` (at least ``k`` must be free), from the nodes
        bucketed by free count: the fullest node holding ``k`` (lowest id among equals), else the nodes with the
        most free GPUs first (:func:`~doppler_gym.cluster.pool_kernels.pack_into`)."""
        idx, out = self._idx, np.empty(k, dtype=np.int64)
        pk.pack_into(idx.is_free, idx.n_free, idx.bits, idx.bucket_n, idx.node_first, k, self._tid[gpu_type], out, 0)
        return out.tolist()

    # -- taking and leaving GPUs -----------------------------------------------------------------------
    def take(self, i: int, gpus: list[int], changed: set[int]) -> bool:
        """Job ``i`` takes ``gpus`` (ids; each free or holding one job). The jobs whose GPUs become shared (their
        pace changes) are added to ``changed``. Returns whether ``gpus`` lie on more than one node."""
        occupants = self.occupants
        if all(not occupants[g] for g in gpus):
            return self._take_free(i, gpus)
        self._take_any(i, gpus, changed)
        node_of = self.node_of
        return len({node_of[g] for g in gpus}) > 1

    def release(self, i: int, gpus: list[int], changed: set[int]) -> None:
        """Job ``i`` leaves ``gpus`` (the ids it holds); the jobs left alone on a GPU it shared are added to
        ``changed``."""
        occupants = self.occupants
        if not self.n_shared or all(len(occupants[g]) == 1 for g in gpus):
            self._free_lone(gpus)
        else:
            self._leave(i, gpus, changed)

    def take_packed_many(self, jobs: list[int], needs: np.ndarray, gpu_type: str) -> tuple[list[list[int]], list[bool]]:
        """Jobs ``jobs`` (``m`` indices, none holding GPUs) each take ``needs`` (``(m,) int64``, each >= 1) free GPUs
        of ``gpu_type``, packed one job after another: the same GPUs and state as ``take(i, pack(k, gpu_type))``
        per job in that order, in one compiled call plus O(GPUs taken) list updates. Returns each job's GPU ids
        (in pack order) and whether they lie on more than one node. ``ValueError`` if too few are free."""
        needs = np.asarray(needs, dtype=np.int64)
        total = int(needs.sum())
        if total > self.free_by_type.get(gpu_type, 0) or (needs.size and int(needs.min()) < 1):
            raise ValueError(f"GpuPool.take_packed_many: {total} GPUs of {gpu_type!r} asked for "
                             f"({self.free_by_type.get(gpu_type, 0)} free; each job needs >= 1): admit fewer jobs")
        idx, out, spans = self._idx, np.empty(total, dtype=np.int64), np.empty(needs.size, dtype=np.bool_)
        pk.pack_take_many(idx.is_free, idx.n_free, idx.bits, idx.bucket_n, idx.node_first, idx.gpu_node,
                          idx.node_tid, needs, self._tid[gpu_type], out, spans)
        flat, sizes, occupants = out.tolist(), needs.tolist(), self.occupants
        for g, i in zip(flat, np.repeat(np.asarray(jobs, dtype=np.int64), needs).tolist()):
            occupants[g].append(i)
        taken, pos = [], 0
        for k in sizes:
            taken.append(flat[pos:pos + k])
            pos += k
        self.free_by_type[gpu_type] -= total
        self.n_busy += total
        self._add_lone([g[0] for g in taken if len(g) == 1])
        return taken, spans.tolist()

    def release_many(self, gpu_lists: list[list[int]]) -> None:
        """The jobs holding ``gpu_lists`` (one list of GPU ids per job) leave them, with no GPU shared
        (``n_shared == 0``; else ``ValueError``): the same state as ``release`` per job, in one compiled call plus
        O(GPUs freed) list updates."""
        if self.n_shared:
            raise ValueError(f"GpuPool.release_many: {self.n_shared} GPUs are shared; call release() per job")
        flat = [g for gpus in gpu_lists for g in gpus]
        if not flat:
            return
        occupants = self.occupants
        for g in flat:
            occupants[g].clear()
        self._set_free(flat)
        self.n_busy -= len(flat)
        self._remove_lone([gpus[0] for gpus in gpu_lists if len(gpus) == 1])

    def _set_busy(self, gpus: list[int]) -> bool:
        """GPUs ``gpus`` (free) become busy in the compiled index and ``free_by_type``; whether they span nodes."""
        idx = self._idx
        spans = pk.set_busy(idx.is_free, idx.n_free, idx.bits, idx.bucket_n, idx.gpu_node, idx.node_tid,
                            np.asarray(gpus, dtype=np.int64), 0, len(gpus), True)
        self._count_free(gpus, -1)
        return bool(spans)

    def _set_free(self, gpus: list[int]) -> None:
        """GPUs ``gpus`` (busy, left by every job) become free in the compiled index and ``free_by_type``."""
        idx = self._idx
        pk.set_busy(idx.is_free, idx.n_free, idx.bits, idx.bucket_n, idx.gpu_node, idx.node_tid,
                    np.asarray(gpus, dtype=np.int64), 0, len(gpus), False)
        self._count_free(gpus, 1)

    def _count_free(self, gpus: list[int], sign: int) -> None:
        """Add ``sign`` (+1 or -1) per GPU of ``gpus`` to ``free_by_type`` of its type."""
        if len(self.gpu_types) == 1:
            self.free_by_type[self.gpu_types[0]] += sign * len(gpus)
            return
        gpu_type, free_by_type = self.gpu_type, self.free_by_type
        for g in gpus:
            free_by_type[gpu_type[g]] += sign

    def _add_lone(self, gpus: list[int]) -> None:
        """GPUs ``gpus`` now hold exactly one single-GPU job: into ``lone``."""
        if gpus:
            self._lone.update(gpus)
            self._lone_sorted = None

    def _remove_lone(self, gpus: list[int]) -> None:
        """GPUs ``gpus`` (in ``lone``) no longer hold one single-GPU job: out of ``lone``."""
        if gpus:
            self._lone.difference_update(gpus)
            self._lone_sorted = None

    def _take_free(self, i: int, gpus: list[int]) -> bool:
        """Job ``i`` takes ``gpus``, all free: occupants, the compiled index, the free counts and the lone-GPU
        index (:meth:`_take_any` for any GPUs). Returns whether they lie on more than one node."""
        occupants = self.occupants
        for g in gpus:
            occupants[g].append(i)
        spans = self._set_busy(gpus)
        self.n_busy += len(gpus)
        if len(gpus) == 1:
            self._add_lone(gpus)  # now holds exactly one single-GPU job: it may be shared
        return spans

    def _take_any(self, i: int, gpus: list[int], changed: set[int]) -> None:
        """Job ``i`` takes ``gpus`` (free or holding one job each): the general form of :meth:`_take_free`;
        a GPU shared now changes its partner's pace (both jobs go to ``changed``)."""
        k = len(gpus)
        occupants = self.occupants
        newly: list[int] = []  # the free GPUs it takes
        for g in gpus:
            occ = occupants[g]
            if not occ:
                newly.append(g)
            occ.append(i)
            # the GPUs that now hold exactly one single-GPU job are those a waiting job may share; a GPU
            # shared now changes its partner's pace
            if len(occ) == 1:
                if k == 1:
                    self._add_lone([g])
            elif len(occ) == 2:
                self._remove_lone([g])
                changed.update(occ)
                self.n_shared += 1
        if newly:
            self._set_busy(newly)
        self.n_busy += len(newly)

    def _free_lone(self, gpus: list[int]) -> None:
        """The job alone on ``gpus`` leaves them: they become free (:meth:`_leave` for GPUs that may be shared)."""
        occupants = self.occupants
        for g in gpus:
            occupants[g].clear()
        self._set_free(gpus)
        self.n_busy -= len(gpus)
        if len(gpus) == 1:
            self._remove_lone(gpus)

    def _leave(self, i: int, gpus: list[int], changed: set[int]) -> None:
        """Job ``i`` leaves ``gpus`` (some shared): the general form of :meth:`_free_lone`; a GPU's remaining
        job changes pace (it goes to ``changed``)."""
        single = len(gpus) == 1
        occupants = self.occupants
        freed: list[int] = []  # the GPUs it leaves free
        for g in gpus:
            occ = occupants[g]
            occ.remove(i)
            if occ:
                changed.update(occ)
                self.n_shared -= 1  # (two jobs to a GPU at most: it now holds one)
            if single and not occ:
                self._remove_lone([g])
            elif len(occ) == 1:  # a shared GPU (both jobs single-GPU) keeps its other job
                self._add_lone([g])
            if not occ:
                freed.append(g)
        if freed:
            self._set_free(freed)
        self.n_busy -= len(freed)
