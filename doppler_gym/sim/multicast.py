"""Per-edge transfer times of ``SimConfig(multicast="teccl")``: TE-CCL multicasts and collective ops.

**Ordinary ops.** For an assignment, producer ``u`` on device ``a`` whose consumers sit on the
other devices ``V`` (distinct, ``a`` excluded) sends one multicast ``(a, V, out_bytes[u])``; every
edge ``u -> c`` with ``assignment[c] != a`` takes the multicast's delay for ``assignment[c]``
(:meth:`doppler_gym.comm.multicast.MulticastTimer.delays`); same-device edges take 0.

**Collective ops** (kind in :data:`doppler_gym.graph.collective.COLLECTIVE_KINDS`). Op ``c``'s
group ``G`` is the set of distinct devices of ``c``, its producers and its consumers.

- Its in-edges take 0 [s]: each contribution stays on its producer's device, where the collective
  reads it; ``c`` still waits for all of them (a barrier, as a real collective), so it starts
  once its last producer has ended (and its device is free).
- It runs its own ``flops`` (reduction work) on its assigned device as any op.
- Every out-edge, one to a consumer on ``c``'s own device included, takes ``T`` [s] after ``c``
  ends: ``T`` = :meth:`~doppler_gym.comm.multicast.MulticastTimer.collective_time` of ``c``'s kind
  over ``G`` with ``out_bytes[c]`` as the output buffer each member holds at the end [B]
  (ALLGATHER, ALLTOALL over ``G``; REDUCE-SCATTER as the time-reversed ALLGATHER; ALLREDUCE both,
  one after the other; BROADCAST from the device of ``c``'s single producer, a ``ValueError``
  when it has not exactly one). ``|G| == 1`` gives ``T = 0``.
- An edge from one collective op into another takes the first one's ``T`` (its output is
  everywhere in ``G`` only then). Producers feeding a collective op and ordinary ops send their
  ordinary multicast to the ordinary consumers only.

So the collective's data movement is charged once, after the op, as the collective's TE-CCL time
on the topology; a p2p run of the same graph instead copies each input to ``c``'s device and its
output to each other device. The kernel reads these times in place of its route tables
(``Meta.EDGE_TIMES``, :mod:`doppler_gym.sim.packed_layout`), same-device edges included. One timer
(and its schedule cache) is kept per topology object and multicast settings (up to ``MAX_TIMERS``,
then the registry starts afresh). Cost: a Python pass over each assignment's producers and collective ops (about 0.2 ms
per llama-layer assignment once the schedules are cached), plus one CP-SAT solve per new (source,
destination set, size bucket) and per new (kind, group, root, size bucket).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from doppler_gym.graph.collective import collective_ops
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


@dataclass(frozen=True)
class _Collectives:
    """The collective ops of one graph (empty ``ops`` when it has none).

    Attributes:
        ops: ``(k,) int64`` collective op ids, ascending.
        kinds: their kinds.
        members: per collective op, ``(m,) int64`` the op, its producers and its consumers.
        out_edges: per collective op, ``(o,) int64`` its out-edge ids.
        roots: ``(k,) int64`` the producer op of a broadcast, -1 for other kinds.
        plain: ``(n_edges,) bool`` edges neither from nor into a collective op (ordinary multicasts).
    """

    ops: np.ndarray
    kinds: tuple[str, ...]
    members: tuple[np.ndarray, ...]
    out_edges: tuple[np.ndarray, ...]
    roots: np.ndarray
    plain: np.ndarray


@lru_cache(maxsize=64)
def _collectives(graph: DataflowGraph) -> _Collectives:
    """:class:`_Collectives` of ``graph``; raises ``ValueError`` for a broadcast op without exactly one producer."""
    ops = collective_ops(graph)
    kinds = tuple(graph.kinds[c] for c in ops) if ops.size else ()  # type: ignore[index]
    for c, kind in zip(ops.tolist(), kinds):
        if kind == "broadcast" and graph.in_degree[c] != 1:
            raise ValueError(f"graph {graph.name!r}: broadcast op {graph.op_name(c)!r} (op {c}) has "
                             f"{int(graph.in_degree[c])} producers, but a broadcast sends the output of exactly one "
                             "(its root's device); give it one input, or another kind (e.g. 'allgather')")
    members = tuple(np.concatenate(([c], graph.predecessors(c), graph.successors(c))).astype(np.int64)
                    for c in ops.tolist())
    out_edges = tuple(graph.succ_edge[graph.succ_ptr[c] : graph.succ_ptr[c + 1]].astype(np.int64)
                      for c in ops.tolist())
    roots = np.array([int(graph.predecessors(c)[0]) if k == "broadcast" else -1 for c, k in zip(ops.tolist(), kinds)],
                     np.int64)
    is_coll = np.zeros(graph.n_ops, bool)
    is_coll[ops] = True
    return _Collectives(ops, kinds, members, out_edges, roots, ~(is_coll[graph.src] | is_coll[graph.dst]))


def edge_times(graph: DataflowGraph, assignments: np.ndarray, timer) -> np.ndarray:
    """Transfer time of every edge under ``multicast="teccl"`` (module docstring).

    Args:
        graph: the dataflow graph.
        assignments: ``(B, n_ops) int32`` checked device ids.
        timer: a :class:`~doppler_gym.comm.multicast.MulticastTimer` of the run's topology.

    Returns:
        ``(B, n_edges) float64`` [s]: an ordinary cross-device edge's multicast delay, a collective
        op's in-edge 0, its out-edge the collective's time (same device too), other edges 0.

    Raises:
        ValueError: a broadcast op without exactly one producer.
    """
    coll = _collectives(graph)
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
        for i, c in enumerate(coll.ops.tolist()):
            root = int(row[coll.roots[i]]) if coll.roots[i] >= 0 else None
            out[r, coll.out_edges[i]] = timer.collective_time(coll.kinds[i], np.unique(row[coll.members[i]]),
                                                              float(size[c]), root=root)
        a_dev = row[src]
        b_dev = row[dst]
        moves = a_dev != b_dev
        cross = np.flatnonzero((moves & coll.plain) if coll.ops.size else moves)
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
