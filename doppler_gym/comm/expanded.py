"""The time-expanded network shared by the solvers (MILP, LP, rounds): lags, windows, reach.

(Its lower bound on epochs is :func:`doppler_gym.comm.bounds.release_cut_bound_epochs`.)

Timing (the released TE-CCL code, ``teccl/solvers/allgather.py``, ``switch_to_gpu_link_on=False``).
A chunk sent on link ``l = (i, j)`` in epoch ``k`` becomes usable at ``j`` at epoch ``k + lag[l]``:

* ``i`` a GPU or ``j`` a switch: ``lag = 1 + delta + beta``. At a GPU ``j`` the chunk is *held* at
  the start of epoch ``k + lag`` (it can be sent on from then, and a demand of ``j`` for it counts as
  met at the end of epoch ``k + lag - 1``); at a switch ``j`` it *leaves* the switch in epoch ``k + lag``.
* ``i`` a switch and ``j`` a GPU: ``lag = delta``. The switch-to-GPU hop does not count the
  transmission a second time: a chunk the switch sends in epoch ``k`` is held by ``j`` at the start of
  epoch ``k + delta``, so with ``delta = 0`` in the same epoch in which the switch sends it. A schedule
  whose last demand is met at the end of epoch ``E - 1`` can therefore contain a switch-to-GPU send in
  epoch ``E`` (= ``Schedule.epochs``). (The released code models this with a horizon of ``E + 1``
  epochs and its ``use_one_less_epoch`` constraint.)

Capacity: on every window of ``window = beta + 1`` consecutive epochs a link carries at most
``cap = floor((beta + 1) * kappa + 1e-9)`` sends (at least 1); the tolerance avoids the
floating-point pitfall where ``(beta + 1) * kappa`` evaluates to ``0.9999999999999999``.

A GPU holds a chunk from the start of the epoch in which it lands until the end; it may send a held
chunk on all its out-links in one epoch (copy). Switches hold nothing; a copy-capable switch forwards
a chunk that leaves it in epoch ``k`` on any of its out-links in epoch ``k``, a plain switch on as many
out-links as copies reached it.

The horizon ``E`` (epochs) of a model means: every demand met by the end of epoch ``E - 1``, i.e.
held at the start of epoch ``E``; only sends that land by ``E`` are useful.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from doppler_gym.comm.schedule import arrival_offset

INF = np.iinfo(np.int64).max // 4


@dataclass(frozen=True)
class Network:
    """Integer per-link timing of one topology at one epoch duration.

    Attributes:
        n_nodes: number of nodes (GPUs and switches).
        src, dst: (n_links,) int64 endpoints of each directed link.
        is_switch: (n_nodes,) bool.
        copy_capable: (n_nodes,) bool; only read for switches (GPUs always copy).
        lag: (n_links,) int64 [epochs] from a send to the chunk being usable at ``dst`` (see module).
        window: (n_links,) int64 [epochs] = beta + 1, the capacity window.
        cap: (n_links,) int64 [chunks] sends allowed in any window.
        kappa: (n_links,) float64 [chunks/epoch] the raw rate (for bounds and the LP).
    """

    n_nodes: int
    src: np.ndarray
    dst: np.ndarray
    is_switch: np.ndarray
    copy_capable: np.ndarray
    lag: np.ndarray
    window: np.ndarray
    cap: np.ndarray
    kappa: np.ndarray

    @property
    def n_links(self) -> int:
        return int(self.src.shape[0])

    def in_links(self, node: int) -> np.ndarray:
        """(k,) int64 ids of the links into ``node``."""
        return np.flatnonzero(self.dst == node)

    def out_links(self, node: int) -> np.ndarray:
        """(k,) int64 ids of the links out of ``node``."""
        return np.flatnonzero(self.src == node)

    @cached_property
    def out_links_of_node(self) -> list[np.ndarray]:
        """``[n_nodes]`` lists of out-link ids, built once (the Dijkstras of :func:`earliest` run per commodity)."""
        return [self.out_links(i) for i in range(self.n_nodes)]

    @cached_property
    def in_links_of_node(self) -> list[np.ndarray]:
        """``[n_nodes]`` lists of in-link ids, built once (for :func:`to_targets`)."""
        return [self.in_links(i) for i in range(self.n_nodes)]

    def max_sends(self, link: int, last_epoch: int) -> int:
        """Most sends link ``link`` can make in epochs ``0..last_epoch`` (0 when ``last_epoch < 0``)."""
        if last_epoch < 0:
            return 0
        return int(self.cap[link]) * -(-(last_epoch + 1) // int(self.window[link]))


def network(topology: Any, timing: Any) -> Network:
    """Build the :class:`Network` of ``topology`` under ``timing``; ``lag`` and ``cap`` are
    :func:`~doppler_gym.comm.schedule.arrival_offset` and ``LinkTiming.window_capacity``.

    Args:
        topology: a ``CommTopology`` (src, dst, is_switch, copy_capable).
        timing: a ``LinkTiming``: per-link ``kappa`` (n_links,) float64 [chunks/epoch], ``beta`` and
            ``delta`` (n_links,) int [epochs].
    """
    src = np.asarray(topology.src, dtype=np.int64)
    dst = np.asarray(topology.dst, dtype=np.int64)
    is_switch = np.asarray(topology.is_switch, dtype=bool)
    copy_capable = np.asarray(topology.copy_capable, dtype=bool)
    kappa = np.asarray(timing.kappa, dtype=np.float64)
    beta = np.asarray(timing.beta, dtype=np.int64)
    delta = np.asarray(timing.delta, dtype=np.int64)
    if not (src.shape == dst.shape == kappa.shape == beta.shape == delta.shape):
        raise ValueError("network: topology links and timing arrays have different lengths "
                         f"(src {src.shape}, kappa {kappa.shape}, beta {beta.shape}, delta {delta.shape})")
    if np.any(kappa <= 0) or np.any(beta < 0) or np.any(delta < 0):
        raise ValueError("network: timing needs kappa > 0 and beta, delta >= 0 on every link")
    lag = arrival_offset(topology, timing)  # the one arrival rule (schedule.py), shared with the validator
    window = (beta + 1).astype(np.int64)
    cap = np.maximum(1, timing.window_capacity).astype(np.int64)
    return Network(n_nodes=int(is_switch.shape[0]), src=src, dst=dst, is_switch=is_switch,
                   copy_capable=copy_capable, lag=lag, window=window, cap=cap, kappa=kappa)


def open_demand(sources: np.ndarray, wants: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The solvers' view of a demand: what is still to deliver at epoch 0.

    Args:
        sources: (n_commodities,) int node holding each commodity at epoch 0.
        wants: (n_commodities, n_nodes) bool destinations.

    Returns:
        ``sources`` as int64; ``wants`` as a new bool array without each commodity's own source;
        ``holds`` (n_commodities, n_nodes) bool, True exactly at each commodity's source.
    """
    sources = np.asarray(sources, dtype=np.int64)
    wants = np.asarray(wants, dtype=bool).copy()
    holds = np.zeros_like(wants)
    holds[np.arange(wants.shape[0]), sources] = True
    wants &= ~holds
    return sources, wants, holds


def earliest(net: Network, starts: dict[int, int]) -> np.ndarray:
    """Earliest epoch each node can *use* a chunk (GPU: hold it; switch: forward it).

    Args:
        starts: ``{node: epoch}`` where the chunk is usable at the start (holders, in-flight landings).

    Returns:
        (n_nodes,) int64 epochs, ``INF`` where unreachable.
    """
    dist = np.full(net.n_nodes, INF, dtype=np.int64)
    heap = []
    for node, t in starts.items():
        if t < dist[node]:
            dist[node] = t
            heap.append((int(t), int(node)))
    return _relax(net, dist, heap, net.out_links_of_node, net.dst)


def to_targets(net: Network, targets: np.ndarray) -> np.ndarray:
    """Fewest epochs from a node using a chunk to some node of ``targets`` holding it.

    Args:
        targets: (n_nodes,) bool.

    Returns:
        (n_nodes,) int64 epochs (0 on targets), ``INF`` where no target is reachable.
    """
    dist = np.full(net.n_nodes, INF, dtype=np.int64)
    heap = [(0, int(i)) for i in np.flatnonzero(targets)]
    for _, i in heap:
        dist[i] = 0
    return _relax(net, dist, heap, net.in_links_of_node, net.src)


def _relax(net: Network, dist: np.ndarray, heap: list[tuple[int, int]], links_of: list[np.ndarray],
           far_end: np.ndarray) -> np.ndarray:
    """Dijkstra over link lags [epochs]: from the nodes in ``heap`` (``(epoch, node)``, already set in
    ``dist``) along ``links_of[node]`` to ``far_end[link]`` (out-links and heads: forward; in-links
    and tails: backward). Updates ``dist`` (n_nodes,) int64 in place and returns it."""
    heapq.heapify(heap)
    while heap:
        t, i = heapq.heappop(heap)
        if t > dist[i]:
            continue
        for l in links_of[i]:
            j = int(far_end[l])
            nt = t + int(net.lag[l])
            if nt < dist[j]:
                dist[j] = nt
                heapq.heappush(heap, (nt, j))
    return dist


__all__ = ["INF", "Network", "earliest", "network", "open_demand", "to_targets"]
