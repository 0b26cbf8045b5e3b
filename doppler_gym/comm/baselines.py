"""Baseline schedules (ring, direct) on the epoch model, and an NCCL-like alpha-beta cost model.

Both schedules are built by one greedy packer: a commodity moves hop by hop along a route; each
GPU-to-GPU *segment* (a GPU, zero or more switches, a GPU) is reserved at the earliest epoch at or
after the chunk is held where every link of the segment has window capacity left (switch hops are
forced to the arrival epoch, as the timing rule in :mod:`doppler_gym.comm.schedule` requires).
A segment may share a send already reserved for the same commodity, link and epoch when that link
enters a copy-capable switch (the switch multicasts). The results pass
:func:`doppler_gym.comm.validate.validate` by construction (the tests check it).

- :func:`ring_schedule`: the GPUs in one ring order (:func:`ring_order`); each commodity travels
  around the ring from its source until it has passed every GPU that wants it (ALLGATHER: n-1
  hops; the REDUCE-SCATTER ring is the same pattern reversed). A ring hop between GPUs without a
  direct link follows the shortest route (through switches or GPUs).
- :func:`direct_schedule`: each commodity follows its source's shortest-path tree to its
  destinations: one path per destination, shared prefixes sent once.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import time

import numpy as np

from doppler_gym.comm.demand import Demand, canonical_kind
from doppler_gym.comm.epochs import epoch_duration
from doppler_gym.comm.paths import shortest_paths
from doppler_gym.comm.schedule import LinkTiming, Schedule, arrival_offset, link_timing
from doppler_gym.comm.topology import CommTopology, comm_topology

BRUTE_FORCE_GPUS = 8  # ring orders are enumerated up to this many GPUs, searched (2-opt) above
RING_STARTS = 8  # nearest-neighbour starts tried (each then improved by 2-opt)
HOP_TIE = 1e-3  # per-hop cost added to route weights [epochs]: fewer hops win ties
HOP_EPS = 1e-12  # a route must be shorter by more than this to replace a known one [epochs]
MAX_WAIT = 10**6  # epochs a segment may wait for capacity before we give up


# ---------------------------------------------------------------------- routing
def _route_weight(topo: CommTopology, timing: LinkTiming) -> np.ndarray:
    """Per-link routing weight: epochs until the chunk is available at the head, plus a hop tie."""
    return arrival_offset(topo, timing).astype(np.float64) + HOP_TIE


def _path(via: np.ndarray, topo: CommTopology, target: int) -> list[int]:
    links = []
    v = target
    while via[v] >= 0:
        links.append(int(via[v]))
        v = int(topo.src[via[v]])
    return links[::-1]


def _split_segments(topo: CommTopology, links: list[int]) -> list[list[int]]:
    """Cut a path into GPU-to-GPU segments (intermediate nodes of a segment are switches)."""
    segments, current = [], []
    for lk in links:
        current.append(lk)
        if not topo.is_switch[topo.dst[lk]]:
            segments.append(current)
            current = []
    if current:
        raise ValueError(f"topology {topo.name!r}: a route ends at a switch; routes must end at GPUs")
    return segments


# ---------------------------------------------------------------------- packing
class _Packer:
    """Greedy earliest-fit reservation of sends under the window capacity rule."""

    def __init__(self, topo: CommTopology, timing: LinkTiming) -> None:
        self.topo = topo
        self.beta = timing.beta
        self.cap = timing.window_capacity
        self.offset = arrival_offset(topo, timing)
        self.counts = np.zeros((topo.n_links, 64), np.int64)
        self.sent: set[tuple[int, int, int]] = set()
        self.epochs_of: dict[tuple[int, int], list[int]] = {}
        self.rows: list[tuple[int, int, int]] = []
        self.last_arrival = 0

    def _grow(self, upto: int) -> None:
        if upto > self.counts.shape[1]:
            grow = max(self.counts.shape[1], upto - self.counts.shape[1])
            self.counts = np.concatenate([self.counts, np.zeros((self.topo.n_links, grow), np.int64)], axis=1)

    def _next_fit(self, lk: int, k: int) -> int:
        """Smallest epoch >= ``k`` where one more send on ``lk`` keeps every window within capacity."""
        b, cap = int(self.beta[lk]), int(self.cap[lk])
        span = 256
        if b == 0:
            while True:
                self._grow(k + span)
                free = np.flatnonzero(self.counts[lk, k:k + span] < cap)
                if free.size:
                    return k + int(free[0])
                k += span
        while True:
            self._grow(k + span + 2 * b + 1)
            lo = max(0, k - b)
            row = self.counts[lk, lo:k + span + b]
            csum = np.concatenate([[0], np.cumsum(row)])
            ends = np.arange(k, k + span + b)  # window end epochs that may contain a candidate
            win = csum[ends - lo + 1] - csum[np.maximum(ends - b, lo) - lo]
            bad_end = (win + 1 > cap) & (ends >= b)
            # candidate c fits iff no bad window end in [max(c, b), c + b]
            bad = np.concatenate([[0], np.cumsum(bad_end)])
            cands = np.arange(k, k + span)
            first = np.maximum(cands, b) - k
            last = cands + b - k
            n_bad = bad[last + 1] - bad[np.minimum(first, last + 1)]
            ok = np.flatnonzero(n_bad == 0)
            if ok.size:
                return int(cands[ok[0]])
            k += span

    def reserve(self, x: int, segment: list[int], ready: int) -> int:
        """Reserve ``segment`` for commodity ``x`` at the earliest start >= ``ready``; returns the
        epoch from which the segment's last node holds the chunk."""
        cum = [0]
        for lk in segment[:-1]:
            cum.append(cum[-1] + int(self.offset[lk]))
        k0 = ready
        for _ in range(MAX_WAIT):
            plan, jump = [], None
            for lk, c in zip(segment, cum):
                k = k0 + c
                if (x, lk, k) in self.sent:
                    head = int(self.topo.dst[lk])
                    if self.topo.is_switch[head] and self.topo.copy_capable[head]:
                        plan.append((lk, k))  # shared: the copy switch multicasts
                        continue
                    jump = k0 + 1
                    break
                nxt = self._next_fit(lk, k)
                head = int(self.topo.dst[lk])
                if nxt != k and self.topo.is_switch[head] and self.topo.copy_capable[head]:
                    shared = [e for e in self.epochs_of.get((x, lk), ()) if k < e < nxt]
                    nxt = min(shared, default=nxt)  # an earlier send of x on lk could be shared
                if nxt != k:
                    jump = nxt - c
                    break
                plan.append((lk, k))
            if jump is None:
                for lk, kk in plan:
                    if (x, lk, kk) not in self.sent:
                        self.sent.add((x, lk, kk))
                        self.epochs_of.setdefault((x, lk), []).append(kk)
                        self.rows.append((x, lk, kk))
                        self.counts[lk, kk] += 1
                arrival = k0 + cum[-1] + int(self.offset[segment[-1]])
                self.last_arrival = max(self.last_arrival, arrival)
                return arrival
            k0 = jump
        raise RuntimeError(f"no capacity for commodity {x} within {MAX_WAIT} tries")

    def sends(self) -> np.ndarray:
        return np.array(self.rows, dtype=np.int32).reshape(-1, 3)


def _setup(
    topology: object, demand: Demand, chunk_bytes: float, tau: float | None
) -> tuple[CommTopology, float, LinkTiming]:
    topo = comm_topology(topology)
    if demand.n_nodes != topo.n_nodes:
        raise ValueError(
            f"demand {demand.name!r} is defined on {demand.n_nodes} nodes but topology {topo.name!r} has "
            f"{topo.n_nodes}; build it with make_demand(kind, topology)"
        )
    t = epoch_duration(topo, chunk_bytes, "fast" if tau is None else tau)
    return topo, t, link_timing(topo, t, chunk_bytes)


# ---------------------------------------------------------------------- ring
def ring_order(topology: object, chunk_bytes: float, tau: float | None = None) -> np.ndarray:
    """``(n_gpus,) int64`` GPU node ids in ring order, starting at the first GPU.

    The order minimises the slowest ring hop (route length in epochs for this chunk size and
    ``tau``, default the fast epoch), then the sum of hops: by enumeration up to
    ``BRUTE_FORCE_GPUS`` GPUs, by nearest neighbour plus 2-opt above."""
    topo = comm_topology(topology)
    t = epoch_duration(topo, chunk_bytes, "fast" if tau is None else tau)
    weight = _route_weight(topo, link_timing(topo, t, chunk_bytes))
    return _ring_order(topo, tuple(weight.tolist())).copy()


@functools.lru_cache(maxsize=64)
def _ring_order(topo: CommTopology, weight_key: tuple[float, ...]) -> np.ndarray:
    weight = np.array(weight_key)
    gpus = topo.gpus.astype(np.int64)
    n = gpus.shape[0]
    if n <= 2:
        return gpus.copy()
    cost = np.array([shortest_paths(topo, weight, int(g), HOP_EPS)[0][gpus] for g in gpus])

    def score(order: np.ndarray) -> tuple[float, float]:
        hops = cost[order, np.roll(order, -1)]
        return (round(float(hops.max()), 9), round(float(hops.sum()), 9))

    if n <= BRUTE_FORCE_GPUS:
        best, best_score = None, (math.inf, math.inf)
        for perm in itertools.permutations(range(1, n)):
            order = np.array((0,) + perm)
            s = score(order)
            if s < best_score:
                best, best_score = order, s
        return gpus[best]
    best, best_score = None, (math.inf, math.inf)
    for start in range(min(n, RING_STARTS)):
        order = [start]
        left = set(range(n)) - {start}
        while left:
            last = order[-1]
            nxt = min(left, key=lambda j: (cost[last, j], j))
            order.append(nxt)
            left.remove(nxt)
        order = _two_opt(np.array(order), score)
        s = score(order)
        if s < best_score:
            best, best_score = order, s
    assert best is not None
    first = int(np.flatnonzero(best == 0)[0])
    return gpus[np.roll(best, -first)]


def _two_opt(order: np.ndarray, score) -> np.ndarray:
    n = order.shape[0]
    current = score(order)
    improved = True
    while improved:
        improved = False
        for i in range(1, n - 1):
            for j in range(i + 1, n):
                cand = order.copy()
                cand[i:j + 1] = cand[i:j + 1][::-1]
                s = score(cand)
                if s < current:
                    order, current, improved = cand, s, True
    return order


def ring_schedule(topology: object, demand: Demand, chunk_bytes: float, tau: float | None = None) -> Schedule:
    """Ring schedule: every commodity travels around :func:`ring_order` from its source until it
    has passed every GPU that wants it, greedily packed into epochs (see the module docstring).

    Args:
        topology: anything :func:`~doppler_gym.comm.topology.comm_topology` accepts.
        demand: from :func:`~doppler_gym.comm.demand.make_demand` on the same topology.
        chunk_bytes: chunk size [B].
        tau: epoch length [s] or ``"fast"``/``"slow"``; default the fast epoch.
    """
    started = time.perf_counter()
    topo, t, timing = _setup(topology, demand, chunk_bytes, tau)
    weight = _route_weight(topo, timing)
    order = _ring_order(topo, tuple(weight.tolist()))  # ring_order(topo, chunk_bytes, t), timing reused
    n = order.shape[0]
    pos = np.full(topo.n_nodes, -1, np.int64)
    pos[order] = np.arange(n)
    hop_segments = []
    for i in range(n):
        _, via = shortest_paths(topo, weight, int(order[i]), HOP_EPS)
        hop_segments.append(_split_segments(topo, _path(via, topo, int(order[(i + 1) % n]))))
    packer = _Packer(topo, timing)
    heap: list[tuple[int, int, int, int, int]] = []
    tie = itertools.count()
    for x in range(demand.n_commodities):
        p = int(pos[demand.source[x]])
        wanted = np.flatnonzero(demand.wants[x])
        hops = int(((pos[wanted] - p) % n).max()) if wanted.size else 0
        if hops:
            heapq.heappush(heap, (0, next(tie), x, p, hops))
    missing = [set(np.flatnonzero(demand.wants[x]).tolist()) for x in range(demand.n_commodities)]
    while heap:
        ready, _, x, p, hops = heapq.heappop(heap)
        for seg in hop_segments[p]:
            ready = packer.reserve(x, seg, ready)
            missing[x].discard(int(topo.dst[seg[-1]]))  # routes may pass wanted GPUs early
            if not missing[x]:
                break
        if hops > 1 and missing[x]:
            heapq.heappush(heap, (ready, next(tie), x, (p + 1) % n, hops - 1))
    return Schedule(
        topology=topo, demand=demand, chunk_bytes=chunk_bytes, tau=t, epochs=packer.last_arrival,
        sends=packer.sends(), method="ring", solver_seconds=time.perf_counter() - started, optimal=False,
    )


# ---------------------------------------------------------------------- direct
def direct_schedule(topology: object, demand: Demand, chunk_bytes: float, tau: float | None = None) -> Schedule:
    """Direct schedule: each commodity follows its source's shortest-path tree (in epochs) to the
    GPUs that want it, one path per destination with shared prefixes sent once, greedily packed
    into epochs (earliest-ready first). Arguments as :func:`ring_schedule`."""
    started = time.perf_counter()
    topo, t, timing = _setup(topology, demand, chunk_bytes, tau)
    weight = _route_weight(topo, timing)
    trees: dict[int, np.ndarray] = {}
    packer = _Packer(topo, timing)
    heap: list[tuple[int, int, int, int]] = []
    tie = itertools.count()
    children: dict[tuple[int, int], list[list[int]]] = {}
    for x in range(demand.n_commodities):
        s = int(demand.source[x])
        if s not in trees:
            trees[s] = shortest_paths(topo, weight, s, HOP_EPS)[1]
        via = trees[s]
        for d in np.flatnonzero(demand.wants[x]):
            for seg in _split_segments(topo, _path(via, topo, int(d))):
                start = int(topo.src[seg[0]])
                lst = children.setdefault((x, start), [])
                if seg not in lst:
                    lst.append(seg)
        if (x, s) in children:
            heapq.heappush(heap, (0, next(tie), x, s))
    while heap:
        ready, _, x, u = heapq.heappop(heap)
        for seg in children.get((x, u), []):
            arrive = packer.reserve(x, seg, ready)
            v = int(topo.dst[seg[-1]])
            if (x, v) in children:
                heapq.heappush(heap, (arrive, next(tie), x, v))
    return Schedule(
        topology=topo, demand=demand, chunk_bytes=chunk_bytes, tau=t, epochs=packer.last_arrival,
        sends=packer.sends(), method="direct", solver_seconds=time.perf_counter() - started, optimal=False,
    )


# ---------------------------------------------------------------------- alpha-beta model
def nccl_time(topology: object, kind: str, buffer_bytes: float, algorithm: str = "ring") -> float:
    """NCCL-like alpha-beta estimate of a collective's time [s].

    ``S`` = output buffer per GPU [B], ``n`` = GPUs, and over the hops of :func:`ring_order`
    (each hop its shortest route): ``alpha`` = the largest route latency [s] (sum of link
    alphas), ``B`` = the smallest route bottleneck capacity [B/s].

    ring: ALLGATHER and REDUCE-SCATTER ``(n-1) (alpha + S/(n B))``; ALLREDUCE
    ``2 (n-1) (alpha + S/(n B))``; BROADCAST (pipelined chain) ``(n-1) alpha + S/B``; SCATTER and
    GATHER ``(n-1) (alpha + S/(n B))``; ALLTOALL ``(n-1) alpha + (n-1) S/(2 B)`` (a unidirectional
    ring carries ``S/n * (1 + 2 + ... + n-1)`` bytes per link).
    tree (NCCL's pipelined double binary tree, depth ``ceil(log2 n)``): BROADCAST
    ``depth alpha + S/B``; ALLREDUCE (reduce then broadcast) ``2 depth alpha + 2 S/B``.
    """
    topo = comm_topology(topology)
    name = canonical_kind(kind)
    algo = str(algorithm).strip().lower()
    if algo not in ("ring", "tree"):
        raise ValueError(f"nccl_time: algorithm must be 'ring' or 'tree', got {algorithm!r}")
    s = float(buffer_bytes)
    if not math.isfinite(s) or s <= 0:
        raise ValueError(f"nccl_time: buffer_bytes must be a positive number of bytes, got {buffer_bytes!r}")
    n = topo.n_gpus
    if n < 2:
        return 0.0
    order = ring_order(topo, s / n)
    alpha, bandwidth = 0.0, math.inf
    for i in range(n):
        _, via = shortest_paths(topo, np.ones(topo.n_links), int(order[i]), HOP_EPS)
        links = _path(via, topo, int(order[(i + 1) % n]))
        alpha = max(alpha, float(topo.alpha[links].sum()))
        bandwidth = min(bandwidth, float(topo.capacity[links].min()))
    if algo == "tree":
        depth = math.ceil(math.log2(n))
        if name == "broadcast":
            return depth * alpha + s / bandwidth
        if name == "allreduce":
            return 2 * depth * alpha + 2 * s / bandwidth
        raise ValueError(f"nccl_time: NCCL's tree algorithm covers broadcast and allreduce, not {name}; use 'ring'")
    if name in ("allgather", "reduce-scatter", "scatter", "gather"):
        return (n - 1) * (alpha + s / (n * bandwidth))
    if name == "allreduce":
        return 2 * (n - 1) * (alpha + s / (n * bandwidth))
    if name == "broadcast":
        return (n - 1) * alpha + s / bandwidth
    return (n - 1) * alpha + (n - 1) * s / (2 * bandwidth)  # alltoall
