"""Collective ops: graph ops that stand for a collective communication among devices.

An op whose kind (``DataflowGraph.kinds``) is one of :data:`COLLECTIVE_KINDS` is a communication
op. Its ``out_bytes`` is the output buffer each participant holds at the end [B] (allgather: the
gathered tensor; reduce-scatter: one shard; allreduce: the reduced tensor; alltoall: the
exchanged buffer; broadcast: the root's tensor) and its ``flops`` the (usually 0 or small)
reduction work [FLOP]. Only the simulator's ``SimConfig(multicast="teccl")`` times it as a
collective (:mod:`doppler_gym.sim.multicast`); everywhere else it is an ordinary op.
"""

from __future__ import annotations

import numpy as np

from doppler_gym.graph.types import DataflowGraph

COLLECTIVE_KINDS = ("allgather", "reduce-scatter", "allreduce", "alltoall", "broadcast")
"""Op kinds that mark a collective op (exact, lower-case spelling)."""


def collective_ops(graph: DataflowGraph) -> np.ndarray:
    """``(k,) int64`` ascending ids of the ops of ``graph`` whose kind is in :data:`COLLECTIVE_KINDS`
    (empty when the graph has no kinds)."""
    if graph.kinds is None:
        return np.zeros(0, np.int64)
    kinds = set(COLLECTIVE_KINDS)
    return np.array([i for i, kind in enumerate(graph.kinds) if kind in kinds], np.int64)
