"""Per-edge transfer times of ``SimConfig(multicast="teccl")``: one TE-CCL multicast per producer.

For an assignment, producer ``u`` on device ``a`` whose consumers sit on the other devices ``V``
(distinct, ``a`` excluded) sends one multicast ``(a, V, out_bytes[u])``; every edge ``u -> c`` with
``assignment[c] != a`` takes the multicast's delay for ``assignment[c]``
(:meth:`doppler_gym.comm.multicast.MulticastTimer.delays`). The kernel reads these times in place of
its route tables (``kernels.M_EDGE_TIMES``). One timer (and its schedule cache) is kept per
topology object and multicast settings (up to ``MAX_TIMERS``, then the registry starts afresh).
Cost: a Python pass over each assignment's producers (about 0.2 ms per llama-layer assignment once
the schedules are cached), plus one CP-SAT solve per new (source, destination set, size bucket).
"""

from __future__ import annotations

import weakref

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology

MAX_TIMERS = 64  # timers (topology x settings) kept before the registry is cleared
_TIMERS: dict = {}  # (id(topology), chunks, epoch, time_limit) -> (topology, MulticastTimer)
MAX_MEMO = 1 << 16  # delay vectors kept per timer by edge_times before its memo is cleared
_MEMOS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # MulticastTimer -> edge_times' memo


def timer_for(topology: Topology, config: SimConfig):  # -> MulticastTimer
    """The process-wide :class:`~doppler_gym.comm.multicast.MulticastTimer` of ``topology`` under
    ``config``'s multicast settings (created on first use; raises ``ImportError`` without OR-Tools)."""
    from doppler_gym.comm.multicast import MulticastTimer

    key = (id(topology), config.multicast_chunks, config.multicast_epoch, config.multicast_time_limit)
    entry = _TIMERS.get(key)
    if entry is None or entry[0] is not topology:
        timer = MulticastTimer(topology, epoch=config.multicast_epoch, method="milp",
                               time_limit=config.multicast_time_limit, chunks=config.multicast_chunks)
        entry = (topology, timer)  # keeps the topology alive, so its id stays its own
        if len(_TIMERS) >= MAX_TIMERS:
            _TIMERS.clear()
        _TIMERS[key] = entry
    return entry[1]


def edge_times(graph: DataflowGraph, assignments: np.ndarray, timer) -> np.ndarray:
    """Transfer time of every edge under multicast timing.

    Args:
        graph: the dataflow graph.
        assignments: ``(B, n_ops) int32`` checked device ids.
        timer: a :class:`~doppler_gym.comm.multicast.MulticastTimer` of the run's topology.

    Returns:
        ``(B, n_edges) float64`` [s]: the multicast delay of each cross-device edge, 0 for
        same-device edges (the kernel never reads those).
    """
    n_rows = assignments.shape[0]
    out = np.zeros((n_rows, graph.n_edges))
    src, dst = graph.src, graph.dst
    size = graph.out_bytes
    n_dev = timer.n_devices
    # Delays by device of each (source device, size, destination set) met so far with this timer:
    # rows and calls share most of them, and the timer's own cache re-checks its arguments per call.
    memo = _MEMOS.get(timer)
    if memo is None or len(memo) >= MAX_MEMO:
        memo = _MEMOS[timer] = {}
    for r in range(n_rows):
        row = assignments[r]
        a_dev = row[src]
        b_dev = row[dst]
        cross = np.flatnonzero(a_dev != b_dev)
        if cross.size == 0:
            continue
        # The distinct (producer, destination device) pairs, sorted: each producer's run of pairs
        # is its sorted destination set.
        pairs = np.unique(src[cross].astype(np.int64) * n_dev + b_dev[cross])
        producers, first = np.unique(pairs // n_dev, return_index=True)
        targets_all = pairs % n_dev
        bounds = np.append(first, pairs.size).tolist()
        by_dev = np.empty((producers.size, n_dev))
        for i, u in enumerate(producers.tolist()):
            targets = targets_all[bounds[i] : bounds[i + 1]]
            key = (int(row[u]), float(size[u]), targets.tobytes())
            delays = memo.get(key)
            if delays is None:
                delays = np.full(n_dev, np.nan)
                delays[targets] = timer.delays(int(row[u]), targets, float(size[u]))
                memo[key] = delays
            by_dev[i] = delays
        out[r, cross] = by_dev[np.searchsorted(producers, src[cross]), b_dev[cross]]
    return out
