"""Analytic lower bounds on a collective's finish time, in seconds and in epochs.

Two families, for a demand on a topology (:func:`lower_bound`):

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

The solvers' own bound, on their :class:`~doppler_gym.comm.expanded.Network`, is
:func:`release_cut_bound_epochs`: the hop-latency bound plus cuts whose commodities arrive at
release epochs and still need epochs inside the cut; the MILP, LP and rounds searches start
from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from doppler_gym.comm.demand import Demand
from doppler_gym.comm.expanded import INF, Network, earliest, to_targets
from doppler_gym.comm.paths import shortest_paths
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
        worst = max(worst, float(shortest_paths(topo, offset, s)[0][dests].max()))
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
            dist = shortest_paths(topo, weight, s)[0]
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


# ---------------------------------------------------------------------- the solvers' bound
def release_cut_bound_epochs(net: Network, sources: np.ndarray, wants: np.ndarray) -> int:
    """The solvers' lower bound on the epochs of any schedule of ``(sources, wants)`` on ``net`` [epochs].

    Where :func:`cut_bound_epochs` counts link capacity only, these cuts also count when the
    commodities can first reach the cut (release epochs) and the epochs they still need inside it.
    The MILP, LP and rounds searches start their horizon at it.

    Args:
        sources: (n_commodities,) int node holding each commodity at epoch 0.
        wants: (n_commodities, n_nodes) bool destinations.

    Two bounds, the larger wins:

    1. hop latency: every demand's earliest possible landing;
    2. cuts: for every GPU and for every node set that falls apart when the slowest links are removed
       (and its complement), the ``N`` commodities that must enter the set are unit jobs with release
       times (the earliest epoch any entry link's tail can have them) on the entry links' send slots
       (at most ``cap`` sends per aligned window of ``beta + 1`` epochs: a relaxation of the sliding
       window). The smallest ``T`` by which all ``N`` can land (Hall's condition on the nested slot
       sets, exact for this relaxation) plus the fewest epochs any entering commodity still needs
       from an entry point to all its destinations inside the set bounds the schedule.
    """
    sources = np.asarray(sources, dtype=np.int64)
    wants = np.asarray(wants, dtype=bool)
    if wants.size == 0 or not wants.any():
        return 0
    uniq = np.unique(sources)
    reach = {}
    bound = 1
    for s in uniq:
        d = earliest(net, {int(s): 0})
        reach[int(s)] = d
        rows = wants[sources == s].any(axis=0)
        if np.any(d[rows] >= INF):
            bad = int(np.flatnonzero(rows & (d >= INF))[0])
            raise ValueError(f"demand unreachable: node {bad} wants a chunk of node {int(s)} but no path "
                             "of links leads there; check the topology's links or the demand")
        bound = max(bound, int(d[rows].max()))
    dist_to: dict[int, np.ndarray] = {}
    for group in _cut_sets(net):
        inside = np.zeros(net.n_nodes, dtype=bool)
        inside[list(group)] = True
        enter = wants[:, inside].any(axis=1) & ~inside[sources]
        if not enter.any():
            continue
        links = np.flatnonzero(~inside[net.src] & inside[net.dst])
        heads = np.unique(net.dst[links])
        release = np.array([min(int(reach[int(s)][net.src[l]]) for l in links) for s in sources[enter]])
        # fewest epochs from the entry heads to all destinations inside, over entering commodities
        tail = INF
        for c in np.flatnonzero(enter):
            dests = np.flatnonzero(wants[c] & inside)
            worst = 0
            for d in dests:
                if int(d) not in dist_to:
                    t = np.zeros(net.n_nodes, dtype=bool)
                    t[d] = True
                    dist_to[int(d)] = to_targets(net, t)
                worst = max(worst, int(dist_to[int(d)][heads].min()))
            tail = min(tail, worst)
            if tail == 0:
                break
        T = max(1, int(release.min()) + int(net.lag[links].min()))
        while not _hall_ok(net, links, release, T):
            T += 1
        bound = max(bound, T + int(tail))
    return bound


def _hall_ok(net: Network, links: np.ndarray, release: np.ndarray, T: int) -> bool:
    """Can unit jobs with these release epochs all land by ``T`` on the aligned-window slots of ``links``?"""
    rel = np.sort(release)[::-1]
    n = rel.shape[0]
    for idx, x in enumerate(rel):
        if idx + 1 < n and rel[idx + 1] == x:
            continue  # count all jobs released at >= x at once
        jobs = idx + 1
        slots = 0
        for l in links:
            last = T - int(net.lag[l])
            if last < x:
                continue
            w = int(net.window[l])
            slots += int(net.cap[l]) * (last // w - int(x) // w + 1)
        if slots < jobs:
            return False
    return True


def _cut_sets(net: Network) -> list[tuple[int, ...]]:
    """Single GPUs, plus the components left when the slowest links go (and their complements)."""
    sets = [(int(i),) for i in np.flatnonzero(~net.is_switch)]
    rate = net.cap / net.window
    fast = rate > rate.min() + 1e-12
    if fast.any() and not fast.all():
        parent = list(range(net.n_nodes))

        def find(a: int) -> int:
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        for l in np.flatnonzero(fast):
            parent[find(int(net.src[l]))] = find(int(net.dst[l]))
        groups: dict[int, list[int]] = {}
        for i in range(net.n_nodes):
            groups.setdefault(find(i), []).append(i)
        if len(groups) > 1:
            everyone = set(range(net.n_nodes))
            for g in groups.values():
                sets.append(tuple(g))
                sets.append(tuple(sorted(everyone - set(g))))
    return sets
