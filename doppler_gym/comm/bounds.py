"""Analytic lower bounds on a collective's finish time, in seconds and in epochs.

Two families (study section 4.3, "always check against analytic bounds"):

- **cut capacity**: every commodity that a GPU wants must enter it, every commodity a source
  must share must leave it, and every commodity wanted on the other side of a chassis cut must
  cross the cut at least once (copies may be made after crossing, so a commodity counts once per
  cut). Time >= chunks x chunk_bytes / (capacity into / out of the node or chassis). Chassis come
  from :attr:`CommTopology.chassis` (fabric switches, chassis -1, are outside every chassis).
- **hop latency**: the farthest demanded (source, destination) pair. In seconds: the smallest
  over routes of (sum of link latencies + one chunk over the route's slowest link). In epochs: the
  shortest route under the arrival offsets of :mod:`doppler_gym.comm.schedule`.

The epoch bounds use the epoch model exactly (window capacities, the epochs a link can still be
used in, switch -> GPU hops landing in their send epoch), so ``lower_bound(...).epochs`` is a
lower bound on the ``epochs`` of every valid :class:`~doppler_gym.comm.schedule.Schedule` with the
same ``tau`` and chunk size. The seconds bounds are for the physical (continuous) problem; the
epoch model may round a small latency (``alpha / tau <= 0.1``) down to zero, so compare schedules
with ``epochs``.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from doppler_gym.comm.demand import Demand
from doppler_gym.comm.schedule import LinkTiming, arrival_offset, link_timing
from doppler_gym.comm.topology import CommTopology, comm_topology


@dataclass(frozen=True)
class LowerBound:
    """Lower bounds for one demand, chunk size and epoch length.

    Attributes:
        epochs: ``max(cut_epochs, hop_epochs)``.
        cut_epochs: cut-capacity bound in epochs.
        hop_epochs: hop-latency bound in epochs.
        seconds: ``max(cut_seconds, hop_seconds)`` [s].
        cut_seconds: cut-capacity bound [s].
        hop_seconds: hop-latency bound [s].
        binding: which cut binds the epoch bound (e.g. ``"into c1.gpu3"``, ``"into chassis 1"``) or
            ``"hop latency"``.
    """

    epochs: int
    cut_epochs: int
    hop_epochs: int
    seconds: float
    cut_seconds: float
    hop_seconds: float
    binding: str


def _cuts(topo: CommTopology, demand: Demand) -> list[tuple[str, np.ndarray, int]]:
    """``(label, crossing link ids, commodities that must cross)`` for every node and chassis cut."""
    out = []
    wants = demand.wants
    for v in topo.gpus:
        need = int(wants[:, v].sum())
        if need:
            out.append((f"into {topo.node_names[v]}", topo.in_links(int(v)), need))
        share = int((wants.any(axis=1) & (demand.source == v)).sum())
        if share:
            out.append((f"out of {topo.node_names[v]}", topo.out_links(int(v)), share))
    chassis = topo.chassis
    ids = np.unique(chassis[chassis >= 0])
    if ids.size > 1:
        for c in ids:
            inside = chassis == c
            src_in = inside[demand.source]
            into = (~src_in & wants[:, inside].any(axis=1)).sum()
            leave = (src_in & wants[:, ~inside].any(axis=1)).sum()
            links_in = np.flatnonzero(~inside[topo.src] & inside[topo.dst])
            links_out = np.flatnonzero(inside[topo.src] & ~inside[topo.dst])
            if into:
                out.append((f"into chassis {c}", links_in, int(into)))
            if leave:
                out.append((f"out of chassis {c}", links_out, int(leave)))
    return out


def _max_sends(topo: CommTopology, timing: LinkTiming, links: np.ndarray, epochs: int) -> int:
    """Most sends ``links`` can carry that still land within ``epochs`` epochs."""
    if links.size == 0:
        return 0
    offset = arrival_offset(topo, timing)[links]
    # a send in epoch k lands in k + offset <= epochs; a switch has nothing to send before epoch 1
    first = np.where(topo.is_switch[topo.src[links]], 1, 0)
    usable = np.maximum(0, epochs - offset - first + 1)
    width = timing.beta[links] + 1
    return int((timing.window_capacity[links] * -(-usable // width)).sum())


def cut_bound_epochs(topology: object, demand: Demand, chunk_bytes: float, tau: float) -> tuple[int, str]:
    """Smallest ``epochs`` for which every cut can carry its commodities, and the binding cut."""
    topo = comm_topology(topology)
    timing = link_timing(topo, tau, chunk_bytes)
    best, label = 0, "none"
    for name, links, need in _cuts(topo, demand):
        if _max_sends(topo, timing, links, 1 << 40) < need:
            raise ValueError(f"cut {name} of topology {topo.name!r} has no link for {need} commodities")
        lo, hi = 0, 1
        while _max_sends(topo, timing, links, hi) < need:
            lo, hi = hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if _max_sends(topo, timing, links, mid) >= need:
                hi = mid
            else:
                lo = mid
        if hi > best:
            best, label = hi, name
    return best, label


def cut_bound_seconds(topology: object, demand: Demand, chunk_bytes: float) -> float:
    """Largest ``commodities x chunk_bytes / capacity`` over the node and chassis cuts [s]."""
    topo = comm_topology(topology)
    best = 0.0
    for _, links, need in _cuts(topo, demand):
        best = max(best, need * float(chunk_bytes) / float(topo.capacity[links].sum()))
    return best


def _shortest(topo: CommTopology, weight: np.ndarray, source: int) -> np.ndarray:
    dist = np.full(topo.n_nodes, math.inf)
    dist[source] = 0.0
    heap = [(0.0, source)]
    while heap:
        d, u = heapq.heappop(heap)
        if d > dist[u]:
            continue
        for lk in topo.out_links(u):
            v = int(topo.dst[lk])
            if d + weight[lk] < dist[v]:
                dist[v] = d + weight[lk]
                heapq.heappush(heap, (dist[v], v))
    return dist


def _demanded_pairs(demand: Demand) -> dict[int, np.ndarray]:
    pairs = {}
    for s in np.unique(demand.source):
        dests = np.flatnonzero(demand.wants[demand.source == s].any(axis=0))
        if dests.size:
            pairs[int(s)] = dests
    return pairs


def hop_bound_epochs(topology: object, demand: Demand, chunk_bytes: float, tau: float) -> int:
    """Farthest demanded pair under the epoch model's arrival offsets (epochs)."""
    topo = comm_topology(topology)
    offset = arrival_offset(topo, link_timing(topo, tau, chunk_bytes)).astype(np.float64)
    worst = 0.0
    for s, dests in _demanded_pairs(demand).items():
        worst = max(worst, float(_shortest(topo, offset, s)[dests].max()))
    return round(worst)


def hop_bound_seconds(topology: object, demand: Demand, chunk_bytes: float) -> float:
    """Farthest demanded pair: min over routes of (latency sum + chunk over the slowest link) [s].

    Computed exactly over bottleneck thresholds: for each capacity level ``c``, the shortest
    latency path using only links with capacity >= ``c``, plus ``chunk_bytes / c``."""
    topo = comm_topology(topology)
    pairs = _demanded_pairs(demand)
    best: dict[tuple[int, int], float] = {}
    for c in np.unique(topo.capacity):
        weight = np.where(topo.capacity >= c, topo.alpha, math.inf)
        for s, dests in pairs.items():
            dist = _shortest(topo, weight, s)
            for d in dests:
                t = float(dist[d]) + float(chunk_bytes) / float(c)
                if t < best.get((s, int(d)), math.inf):
                    best[(s, int(d))] = t
    return max(best.values(), default=0.0)


def lower_bound(topology: object, demand: Demand, chunk_bytes: float, tau: float) -> LowerBound:
    """All bounds for ``demand`` with chunks of ``chunk_bytes`` [B] and epochs of ``tau`` [s]."""
    topo = comm_topology(topology)
    cut_e, label = cut_bound_epochs(topo, demand, chunk_bytes, tau)
    hop_e = hop_bound_epochs(topo, demand, chunk_bytes, tau)
    cut_s = cut_bound_seconds(topo, demand, chunk_bytes)
    hop_s = hop_bound_seconds(topo, demand, chunk_bytes)
    return LowerBound(
        epochs=max(cut_e, hop_e), cut_epochs=cut_e, hop_epochs=hop_e, seconds=max(cut_s, hop_s),
        cut_seconds=cut_s, hop_seconds=hop_s, binding=label if cut_e >= hop_e else "hop latency",
    )
