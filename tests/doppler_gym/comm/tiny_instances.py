"""Tiny topologies with hand-known optimum epochs for the solver tests.

Every link moves 1 B/s and the tests use ``tau = 1 s`` with 1-byte chunks, so ``kappa = 1``
(one chunk per epoch, ``beta = 0``) unless a test slows a link down; ``alpha = 0`` unless given.
"""

from __future__ import annotations

import numpy as np

from doppler_gym.comm.expanded import network
from doppler_gym.comm.schedule import link_timing
from doppler_gym.comm.topology import CommTopology


def make(name: str, n_nodes: int, links: list[tuple[int, int]], switches: tuple[int, ...] = (),
         copy: bool = True, capacity: float | list[float] = 1.0, alpha: float | list[float] = 0.0) -> CommTopology:
    """A topology from (src, dst) pairs; ``switches`` are switch node ids (copy-capable if ``copy``)."""
    is_switch = np.zeros(n_nodes, bool)
    is_switch[list(switches)] = True
    arr = np.array(links, dtype=np.int64).reshape(-1, 2)
    n = arr.shape[0]
    return CommTopology(
        name=name, node_names=tuple(f"n{i}" for i in range(n_nodes)), is_switch=is_switch,
        copy_capable=~is_switch | copy, src=arr[:, 0], dst=arr[:, 1],
        capacity=np.broadcast_to(np.asarray(capacity, np.float64), (n,)).copy(),
        alpha=np.broadcast_to(np.asarray(alpha, np.float64), (n,)).copy(),
    )


def both(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return [p for a, b in pairs for p in ((a, b), (b, a))]


def line3(alpha: float = 0.0) -> CommTopology:
    """GPUs 0 - 1 - 2, both directions."""
    return make("line3", 3, both([(0, 1), (1, 2)]), alpha=alpha)


def ring4(bidirectional: bool) -> CommTopology:
    pairs = [(0, 1), (1, 2), (2, 3), (3, 0)]
    return make("ring4" + ("-bi" if bidirectional else ""), 4, both(pairs) if bidirectional else pairs)


def star(n_gpus: int, copy: bool) -> CommTopology:
    """GPUs 0..n-1 each linked both ways to switch n."""
    s = n_gpus
    return make(f"star{n_gpus}" + ("" if copy else "-nocopy"), n_gpus + 1, both([(g, s) for g in range(n_gpus)]),
                switches=(s,), copy=copy)


def pair(capacity: float) -> CommTopology:
    """Two GPUs linked both ways at ``capacity`` B/s."""
    return make("pair", 2, both([(0, 1)]), capacity=capacity)


def net_of(topo: CommTopology, tau: float = 1.0, chunk_bytes: float = 1.0):
    """The solver network at ``tau`` [s] and ``chunk_bytes`` [B]."""
    return network(topo, link_timing(topo, tau, chunk_bytes))
