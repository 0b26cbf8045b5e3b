"""Shortest routes over the directed links of a :class:`~doppler_gym.comm.topology.CommTopology`.

One Dijkstra for the baselines' routing (:mod:`doppler_gym.comm.baselines`, weights in epochs) and
the hop-latency bounds (:mod:`doppler_gym.comm.bounds`, weights in seconds or epochs).
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from doppler_gym.comm.topology import CommTopology


def shortest_paths(topo: CommTopology, weight: np.ndarray, source: int,
                   tol: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Shortest distances from ``source`` and the link each node is reached by.

    Args:
        topo: the topology (its ``out_links``, ``dst``).
        weight: ``(n_links,)`` non-negative length of each link (any unit: seconds, epochs; ``inf``
            leaves a link out).
        source: the node the routes start at.
        tol: a route replaces the best one known only when it is shorter by more than ``tol``
            (same unit as ``weight``; > 0 keeps the first-found route among near-ties).

    Returns:
        ``dist`` ``(n_nodes,) float64`` (``inf`` where unreachable) and ``via`` ``(n_nodes,) int64``,
        the last link of a shortest route into each node (-1 for ``source`` and unreachable nodes).
    """
    dist = np.full(topo.n_nodes, math.inf)
    via = np.full(topo.n_nodes, -1, np.int64)
    dist[source] = 0.0
    heap = [(0.0, source)]
    while heap:
        d, u = heapq.heappop(heap)
        if d > dist[u]:
            continue
        for lk in topo.out_links(u):
            v = int(topo.dst[lk])
            nd = d + weight[lk]
            if nd < dist[v] - tol:
                dist[v] = nd
                via[v] = lk
                heapq.heappush(heap, (nd, v))
    return dist, via
