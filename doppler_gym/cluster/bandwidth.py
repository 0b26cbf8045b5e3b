"""Max-min fair sharing of the network's shared links (node uplinks, rack uplinks) by jobs spanning nodes.

A job spanning nodes sends and receives ``2 B g_l / g`` bytes per iteration through the uplink of
each node ``l`` it uses (its ``B`` crossing bytes per iteration leave one node and enter another,
split over its nodes by its ``g_l`` of its ``g`` GPUs there); a job spanning racks likewise
``2 B g_r / g`` through the uplink of each rack ``r`` (conservative: all its crossing bytes are taken
to cross racks too). At full speed that is a demand of those bytes over its iteration time [B/s];
at a fraction ``x`` of its pace it uses ``x`` of it. :func:`max_min_shares` finds the max-min fair
fractions by progressive filling.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np


def link_demands(gpus: list[int], gpu_node: np.ndarray, node_rack: np.ndarray, cross_bytes: float,
                 iter_time: float) -> dict[tuple[str, int], float]:
    """``{("node", l) or ("rack", r): B/s}`` a job on ``gpus`` puts on each shared link at full speed.

    Args:
        gpus: its GPU ids.
        gpu_node: ``(n_gpus,)`` node of each GPU.
        node_rack: ``(n_nodes,)`` rack of each node.
        cross_bytes: bytes per iteration crossing between its nodes [B].
        iter_time: its iteration time [s].
    """
    out: dict[tuple[str, int], float] = {}
    g = len(gpus)
    nodes, counts = np.unique(gpu_node[gpus], return_counts=True)
    if cross_bytes <= 0 or len(nodes) < 2:
        return out
    for nd, c in zip(nodes.tolist(), counts.tolist()):
        out[("node", nd)] = 2 * cross_bytes * c / g / iter_time
    racks = node_rack[nodes]
    if len(np.unique(racks)) > 1:
        for r in np.unique(racks).tolist():
            c = int(counts[racks == r].sum())
            out[("rack", r)] = 2 * cross_bytes * c / g / iter_time
    return out


def max_min_shares(demand: Mapping[Hashable, Mapping[Hashable, float]],
                   capacity: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """Max-min fair progress fractions ``x_j`` in ``(0, 1]`` of jobs sharing capacitated links.

    Args:
        demand: ``{job: {link: B/s at full speed}}``.
        capacity: ``{link: B/s}``; a link missing here is not a bottleneck.

    Progressive filling: raise every unfrozen ``x_j`` together until a link saturates, freeze the
    jobs on it at that level, and go on; no job exceeds 1. Returns ``{job: x_j}`` for every job of
    ``demand``. Ties between links break by their order in ``capacity``'s sorted keys.
    """
    x: dict[Hashable, float] = {}
    used: dict[Hashable, float] = {}  # link -> B/s of the frozen jobs
    while len(x) < len(demand):
        load: dict[Hashable, float] = {}
        for i, d in demand.items():
            if i not in x:
                for link, v in d.items():
                    if link in capacity and v > 0:
                        load[link] = load.get(link, 0.0) + v
        if not load:
            x.update({i: 1.0 for i in demand if i not in x})
            break
        level = {link: (capacity[link] - used.get(link, 0.0)) / v for link, v in load.items()}
        bottleneck = min(level, key=lambda link: (level[link], str(link)))
        if level[bottleneck] >= 1.0:
            x.update({i: 1.0 for i in demand if i not in x})
            break
        for i, d in demand.items():
            if i not in x and d.get(bottleneck, 0.0) > 0:
                x[i] = max(level[bottleneck], 0.0)
                for link, v in d.items():
                    used[link] = used.get(link, 0.0) + x[i] * v
    return x
