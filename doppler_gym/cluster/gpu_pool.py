"""The GPUs of a cluster simulation and the jobs on them: who holds each GPU, and the free ones indexed for packing.

:class:`GpuPool` keeps, as jobs take and leave GPUs: the jobs on each GPU (two at most, sharing), the free
GPUs, each node's free count, the free GPUs per type, the nodes of each type bucketed by their free
count (so a start packs without scanning the cluster, :meth:`GpuPool.pack`) and the GPUs holding one
single-GPU job (those a waiting single-GPU job may share). The free GPUs, the nodes' free counts and the
buckets are a compiled index (:mod:`doppler_gym.cluster.pool_kernels`); a preemptive admission packs and takes
the GPUs of all the jobs it starts in one compiled call (:meth:`GpuPool.take_packed_many`) and frees those of
the jobs it suspends in another (:meth:`GpuPool.release_many`), with the same state as the per-job calls.
Who holds each GPU is kept in two arrays (the job that took it, the job sharing it), set for a whole batch at
once; the public per-GPU lists (``occupants``) are rebuilt from them, for the GPUs changed since, only when read.
:class:`~doppler_gym.cluster.simulation.ClusterSimulation` owns one and reads its public attributes.
"""

from __future__ import annotations

import bisect
from itertools import chain

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
        occupants: ``G`` lists of the job indices on each GPU (<= 2, in the order they took it): the pool's list,
            brought up to date from the arrays when read (read it again after a take or release: a list read
            before holds the GPUs' jobs at that read).
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
        n_gpus = len(self.node_of)
        self._first = np.full(n_gpus, -1, dtype=np.int64)  # (G,) the job that took each GPU first (-1: free)
        self._second = np.full(n_gpus, -1, dtype=np.int64)  # (G,) the job sharing it (-1: none)
        self._occupants: list[list[int]] = [[] for _ in range(n_gpus)]  # `occupants`, up to date but for _stale
        self._stale = np.zeros(n_gpus, dtype=np.bool_)  # (G,) GPUs changed since `occupants` was last read
        self._any_stale = False
        self.n_busy = 0
        self.n_shared = 0
        self._lone: set[int] = set()  # the GPUs of `lone`
        self._lone_sorted: list[int] | None = []  # `lone`, or None when the set changed since it was built
        self._tid = {t: k for k, t in enumerate(self.gpu_types)}  # type name -> its index in the compiled index
        self._idx = pk.new_index([nd.gpus for nd in nodes], [self._tid[t] for t in self.node_type],
                                 len(self.gpu_types))

    @property
    def occupants(self) -> list[list[int]]:
        """``G`` lists of the jobs on each GPU (<= 2, in the order they took it), rebuilt for the GPUs changed
        since the last read (the same list object each time: do not change it)."""
        if self._any_stale:
            self._sync_occupants()
        return self._occupants

    def jobs_on(self, g: int) -> int:
        """How many jobs hold GPU ``g`` now (0, 1 or 2), from the arrays (no rebuild of ``occupants``)."""
        return int(self._first[g] >= 0) + int(self._second[g] >= 0)

    def jobs_on_many(self, gpus: np.ndarray) -> np.ndarray:
        """``(k,) int64``: how many jobs hold each GPU of ``gpus`` (``(k,)`` ids) now, from the arrays."""
        return (self._first[gpus] >= 0).astype(np.int64) + (self._second[gpus] >= 0)

    def _sync_occupants(self) -> None:
        """Rebuild ``occupants[g]`` of each stale GPU from the arrays (a new list per GPU)."""
        gs = np.flatnonzero(self._stale)
        self._stale[gs] = False
        self._any_stale = False
        occupants = self._occupants
        for g, a, b in zip(gs.tolist(), self._first[gs].tolist(), self._second[gs].tolist()):
            occupants[g] = [] if a < 0 else ([a] if b < 0 else [a, b])

    def _mark_stale(self, gpus: np.ndarray | list[int]) -> None:
        """``occupants`` of ``gpus`` must be rebuilt at the next read."""
        self._stale[gpus] = True
        self._any_stale = True

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
        arr = np.asarray(gpus, dtype=np.int64)
        if (self._first[arr] < 0).all():
            return self._take_free(i, arr)
        self._take_any(i, gpus, changed)
        node_of = self.node_of
        return len({node_of[g] for g in gpus}) > 1

    def release(self, i: int, gpus: list[int], changed: set[int]) -> None:
        """Job ``i`` leaves ``gpus`` (the ids it holds); the jobs left alone on a GPU it shared are added to
        ``changed``."""
        arr = np.asarray(gpus, dtype=np.int64)
        if not self.n_shared or (self._second[arr] < 0).all():
            self._free_lone(arr)
        else:
            self._leave(i, gpus, changed)

    def take_packed_many(self, jobs: list[int] | np.ndarray, needs: np.ndarray,
                         gpu_type: str) -> tuple[list[list[int]], list[bool]]:
        """Jobs ``jobs`` (``m`` indices, a list or an int array, none holding GPUs) each take ``needs`` (``(m,) int64``,
        each >= 1) free GPUs of ``gpu_type``, packed one job after another: the same GPUs and state as
        ``take(i, pack(k, gpu_type))`` per job in that order, in one compiled call plus O(jobs) list operations.
        Returns each job's GPU ids (in pack order) and whether they lie on more than one node. ``ValueError`` if
        too few are free."""
        needs = np.asarray(needs, dtype=np.int64)
        total = int(needs.sum())
        if total > self.free_by_type.get(gpu_type, 0) or (needs.size and int(needs.min()) < 1):
            raise ValueError(f"GpuPool.take_packed_many: {total} GPUs of {gpu_type!r} asked for "
                             f"({self.free_by_type.get(gpu_type, 0)} free; each job needs >= 1): admit fewer jobs")
        idx, out, spans = self._idx, np.empty(total, dtype=np.int64), np.empty(needs.size, dtype=np.bool_)
        pk.pack_take_many(idx.is_free, idx.n_free, idx.bits, idx.bucket_n, idx.node_first, idx.gpu_node,
                          idx.node_tid, needs, self._tid[gpu_type], out, spans)
        self._first[out] = np.repeat(np.asarray(jobs, dtype=np.int64), needs)
        self._mark_stale(out)
        ends = np.cumsum(needs)
        starts = ends - needs
        flat = out.tolist()
        taken = list(map(flat.__getitem__, map(slice, starts.tolist(), ends.tolist())))  # (each job's, C loop)
        self.free_by_type[gpu_type] -= total
        self.n_busy += total
        single = needs == 1
        if single.any():
            self._add_lone(out[starts[single]].tolist())
        return taken, spans.tolist()

    def release_many(self, gpu_lists: list[list[int]]) -> None:
        """The jobs holding ``gpu_lists`` (one list of GPU ids per job) leave them, with no GPU shared
        (``n_shared == 0``; else ``ValueError``): the same state as ``release`` per job, in one compiled call plus
        O(jobs) list operations."""
        if self.n_shared:
            raise ValueError(f"GpuPool.release_many: {self.n_shared} GPUs are shared; call release() per job")
        flat = np.array(list(chain.from_iterable(gpu_lists)), dtype=np.int64)  # (GPUs freed,)
        if not flat.size:
            return
        self._first[flat] = -1
        self._mark_stale(flat)
        self._set_free(flat)
        self.n_busy -= flat.size
        sizes = np.fromiter(map(len, gpu_lists), dtype=np.int64, count=len(gpu_lists))  # (jobs,)
        single = sizes == 1
        if single.any():
            self._remove_lone(flat[(np.cumsum(sizes) - sizes)[single]].tolist())

    def _set_busy(self, gpus: np.ndarray) -> bool:
        """GPUs ``gpus`` (``(k,) int64``, free) become busy in the compiled index and ``free_by_type``; whether they
        span nodes."""
        idx = self._idx
        spans = pk.set_busy(idx.is_free, idx.n_free, idx.bits, idx.bucket_n, idx.gpu_node, idx.node_tid,
                            gpus, 0, len(gpus), True)
        self._count_free(gpus, -1)
        return bool(spans)

    def _set_free(self, gpus: np.ndarray) -> None:
        """GPUs ``gpus`` (``(k,) int64``, busy, left by every job) become free in the compiled index and
        ``free_by_type``."""
        idx = self._idx
        pk.set_busy(idx.is_free, idx.n_free, idx.bits, idx.bucket_n, idx.gpu_node, idx.node_tid,
                    gpus, 0, len(gpus), False)
        self._count_free(gpus, 1)

    def _count_free(self, gpus: np.ndarray, sign: int) -> None:
        """Add ``sign`` (+1 or -1) per GPU of ``gpus`` (``(k,) int64``) to ``free_by_type`` of its type."""
        if len(self.gpu_types) == 1:
            self.free_by_type[self.gpu_types[0]] += sign * len(gpus)
            return
        gpu_type, free_by_type = self.gpu_type, self.free_by_type
        for g in gpus.tolist():
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

    def _take_free(self, i: int, gpus: np.ndarray) -> bool:
        """Job ``i`` takes ``gpus`` (``(k,) int64``), all free: the holders, the compiled index, the free counts and
        the lone-GPU index (:meth:`_take_any` for any GPUs). Returns whether they lie on more than one node."""
        self._first[gpus] = i
        self._mark_stale(gpus)
        spans = self._set_busy(gpus)
        self.n_busy += len(gpus)
        if len(gpus) == 1:
            self._add_lone(gpus.tolist())  # now holds exactly one single-GPU job: it may be shared
        return spans

    def _take_any(self, i: int, gpus: list[int], changed: set[int]) -> None:
        """Job ``i`` takes ``gpus`` (free or holding one job each; ``ValueError`` for a GPU holding two): the
        general form of :meth:`_take_free`; a GPU shared now changes its partner's pace (both jobs go to
        ``changed``)."""
        first, second = self._first, self._second
        full = [g for g in gpus if second[g] >= 0]
        if full:
            raise ValueError(f"GpuPool.take: job {i} asked for GPUs {full} that already hold two jobs "
                             f"({[self.occupants[g] for g in full]}); a GPU holds two jobs at most")
        k = len(gpus)
        newly: list[int] = []  # the free GPUs it takes
        for g in gpus:
            a = int(first[g])
            # the GPUs that now hold exactly one single-GPU job are those a waiting job may share; a GPU
            # shared now changes its partner's pace
            if a < 0:
                first[g] = i
                newly.append(g)
                if k == 1:
                    self._add_lone([g])
            else:
                second[g] = i
                self._remove_lone([g])
                changed.update((a, i))
                self.n_shared += 1
        self._mark_stale(gpus)
        if newly:
            self._set_busy(np.asarray(newly, dtype=np.int64))
        self.n_busy += len(newly)

    def _free_lone(self, gpus: np.ndarray) -> None:
        """The job alone on ``gpus`` (``(k,) int64``) leaves them: they become free (:meth:`_leave` for GPUs that
        may be shared)."""
        self._first[gpus] = -1
        self._mark_stale(gpus)
        self._set_free(gpus)
        self.n_busy -= len(gpus)
        if len(gpus) == 1:
            self._remove_lone(gpus.tolist())

    def _leave(self, i: int, gpus: list[int], changed: set[int]) -> None:
        """Job ``i`` leaves ``gpus`` (some shared): the general form of :meth:`_free_lone`; a GPU's remaining
        job changes pace (it goes to ``changed``)."""
        single = len(gpus) == 1
        first, second = self._first, self._second
        freed: list[int] = []  # the GPUs it leaves free
        for g in gpus:
            a, b = int(first[g]), int(second[g])
            if b >= 0:  # shared: the other job stays, now the GPU's only one
                other = b if a == i else a
                first[g], second[g] = other, -1
                changed.add(other)
                self.n_shared -= 1
                self._add_lone([g])  # (a shared GPU's jobs are single-GPU ones)
            else:
                first[g] = -1
                if single:
                    self._remove_lone([g])
                freed.append(g)
        self._mark_stale(gpus)
        if freed:
            self._set_free(np.asarray(freed, dtype=np.int64))
        self.n_busy -= len(freed)
