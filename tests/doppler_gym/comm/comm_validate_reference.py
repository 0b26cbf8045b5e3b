"""A slow, pure-Python replay of a comm Schedule, epoch by epoch, to cross-check the numpy validator."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

from doppler_gym.comm.schedule import Schedule, link_timing


def reference_check(schedule: Schedule) -> tuple[set[str], dict[tuple[int, int], int]]:
    """``(error kinds, {(commodity, gpu): first epoch it is held})`` by direct replay."""
    topo, demand = schedule.topology, schedule.demand
    timing = link_timing(topo, schedule.tau, schedule.chunk_bytes)
    kinds: set[str] = set()
    rows = []
    for x, lk, k in schedule.sends.tolist():
        if not (0 <= x < demand.n_commodities and 0 <= lk < topo.n_links and k >= 0):
            kinds.add("ids")
        else:
            rows.append((x, lk, k))
    if len(set(rows)) != len(rows):
        kinds.add("duplicate")

    def lag(lk: int) -> int:
        s, d = int(topo.src[lk]), int(topo.dst[lk])
        if topo.is_switch[s] and not topo.is_switch[d]:
            return int(timing.delta[lk])
        return 1 + int(timing.delta[lk]) + int(timing.beta[lk])

    # capacity, window by window
    per_link = defaultdict(Counter)
    for _x, lk, k in rows:
        per_link[lk][k] += 1
    for lk, counts in per_link.items():
        b = int(timing.beta[lk])
        cap = math.floor((b + 1) * timing.kappa[lk] + 1e-9)
        for end in range(b, max(counts) + b + 1):
            if sum(counts[e] for e in range(end - b, end + 1)) > cap:
                kinds.add("capacity")

    held: dict[tuple[int, int], int] = {}
    for x in range(demand.n_commodities):
        held[(x, int(demand.source[x]))] = 0
    at_switch = Counter()  # (x, switch, epoch) -> copies that arrive for that epoch
    for x, lk, k in rows:
        if topo.is_switch[topo.dst[lk]]:
            at_switch[(x, int(topo.dst[lk]), k + lag(lk))] += 1
        else:
            key = (x, int(topo.dst[lk]))
            held[key] = min(held.get(key, math.inf), k + lag(lk))
    by_epoch = defaultdict(list)
    for x, lk, k in rows:
        by_epoch[k].append((x, lk))
    for k in sorted(by_epoch):
        out_of_switch = Counter()
        for x, lk in by_epoch[k]:
            s = int(topo.src[lk])
            if topo.is_switch[s]:
                out_of_switch[(x, s)] += 1
            elif held.get((x, s), math.inf) > k:
                kinds.add("causality")
        for (x, s), n_out in out_of_switch.items():
            arrived = at_switch[(x, s, k)]
            if arrived == 0 or (not topo.copy_capable[s] and n_out > arrived):
                kinds.add("switch")
    for _x, lk, k in rows:
        if k + lag(lk) > schedule.epochs:
            kinds.add("horizon")
    for x in range(demand.n_commodities):
        for v in range(topo.n_nodes):
            if demand.wants[x, v] and held.get((x, v), math.inf) > schedule.epochs:
                kinds.add("demand")
    return kinds, {key: int(e) for key, e in held.items() if e < math.inf}
