"""The makespan of a partial placement: the simulated run of the ops placed so far, on their own.

A placement MDP places ops in a topological order, so the placed ops are closed under predecessors and
their run does not depend on the unplaced ones. :class:`PartialMakespan` simulates exactly that, on the
simulator's own kernels (:mod:`doppler_gym.sim.partial_kernel`), so that the makespan equals, bit for bit,
:func:`doppler_gym.simulate` of the subgraph induced by the placed ops (those ops and the edges between
them, ids renumbered in order) with the same devices and priorities (0 when nothing is placed):

* where the list kernel serves the config (:func:`doppler_gym.sim.packing.list_kernel_applies`: one
  stream, FIFO queues, ideal links; :meth:`SimConfig.reference` among them), it runs on the full graph with
  each unplaced op's in-degree out of reach, so that an unplaced op is never ready, never queued;
* elsewhere (and for a row whose op duration rounds to zero there) the row's induced subgraph is packed in
  place and run on the event loop, so that an unplaced op is never requested, queued or sent to.

``Doppler-Sim-v0``'s per-step reward (:mod:`doppler_gym.envs.rewards`, ``"incremental"``) is its change per
placement, as in Placeto (Addanki et al., NeurIPS 2019), whose per-step reward is the change of the
simulated runtime; the flat observation's lookahead asks for one row per device.

The run is the simulator's own under the config's deterministic part: jitter, stragglers and memory limits
are left out (they belong to the final run), and TE-CCL multicast is replaced by point-to-point transfers.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numba import get_num_threads

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim import fixed_order
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.packing import pack
from doppler_gym.sim.partial_kernel import alloc_subproblem, partial_rows, partial_rows_parallel
from doppler_gym.topology.types import Topology

PARALLEL_ROWS = 16  # from this many rows on, one parallel (prange) call where Numba has threads; else one serial call


def deterministic(config: SimConfig) -> SimConfig:
    """``config`` without jitter, stragglers, memory limits or TE-CCL multicast (the partial run's model)."""
    return replace(config, compute_jitter=0.0, transfer_jitter=0.0, stragglers=(), memory="off", multicast="p2p")


def _read_only(values: np.ndarray) -> np.ndarray:
    """``values`` marked read-only (Numba types read-only arrays apart: one compiled signature for every call)."""
    values.setflags(write=False)
    return values


class PartialMakespan:
    """Makespans of partial placements of one graph on one topology [the config's reported unit].

    Args:
        graph: the graph (``n_ops`` ops).
        topology: the devices (``D``).
        config: the runtime model (its deterministic part is used, see the module docstring).

    Call with ``assignments`` ``(B, n_ops)`` or ``(n_ops,)`` integer devices in ``[0, D)``, ``-1`` (any
    negative) for an unplaced op, and (for ``queue_order`` ``"priority"``/``"fixed"``) ``priorities``
    ``(B, n_ops)`` or ``(n_ops,)`` (one row for every assignment), lower first: the SEL position of each
    placed op (unplaced entries are ignored). Returns ``(B,)`` float64 or a float: row ``b`` is the makespan
    of :func:`doppler_gym.simulate` on the subgraph induced by its placed ops (for prefixes not closed under
    predecessors the result is not specified). ``B >= PARALLEL_ROWS`` rows run in one parallel call on Numba's
    current thread count when it is above 1, other batches in one serial call.

    Raises:
        ValueError: assignments of the wrong width, a device ``>= D``, missing priorities under
            ``"priority"``/``"fixed"``, or a ``"fixed"`` order that deadlocks.
    """

    def __init__(self, graph: DataflowGraph, topology: Topology, config: SimConfig) -> None:
        self.graph = graph
        self.config = deterministic(config)
        problem = pack(graph, topology, topology.n_devices, self.config)
        self.problem = problem  # the packed problem (read-only arrays) of the deterministic config
        # The serial kernel packs each row's induced problem into these (Numba holds the GIL meanwhile).
        self._buffers = alloc_subproblem(problem.meta, problem.ints, problem.floats)
        self._n_ops = graph.n_ops
        self._n_devices = topology.n_devices
        self._no_priorities = _read_only(np.zeros((1, graph.n_ops)))  # FIFO queues read none

    def __call__(self, assignments: np.ndarray, priorities: np.ndarray | None = None) -> np.ndarray | float:
        assign = assignments if type(assignments) is np.ndarray else np.asarray(assignments)
        single = assign.ndim == 1
        if assign.ndim not in (1, 2) or assign.shape[-1] != self._n_ops:
            raise ValueError(f"PartialMakespan: assignments must have {self._n_ops} columns (one per op), "
                             f"got shape {np.shape(assignments)}")
        # A C-contiguous, writable int32 copy (one compiled signature for every input), in one numpy call.
        assign = assign.astype(np.int32, order="C").reshape(-1, self._n_ops)
        prio = self._queue_keys(assign, priorities)
        rows = assign.shape[0]
        out = np.empty(rows)
        threads = get_num_threads() if rows >= PARALLEL_ROWS else 1
        if threads > 1:
            failed = partial_rows_parallel(*self._buffers, assign, prio, out, threads)
        else:
            failed = partial_rows(*self._buffers, assign, prio, out)
        if failed:
            self._raise_failed(assign, prio, out)
        return float(out[0]) if single else out

    def _queue_keys(self, assign: np.ndarray, priorities: np.ndarray | None) -> np.ndarray:
        """``(P, n)`` read-only float64 device-queue keys, ``P`` 1 or ``B``: none under FIFO queues; else the
        priorities (under ``"fixed"``, each placed op's rank on its device, the unplaced ops ranked after)."""
        order = self.config.queue_order
        if order == "fifo":
            return self._no_priorities
        if priorities is None:
            raise ValueError(f"PartialMakespan: queue_order={order!r} needs priorities (the SEL position of each "
                             f"placed op)")
        prio = np.atleast_2d(np.asarray(priorities, dtype=np.float64))
        if prio.ndim != 2 or prio.shape[1] != self._n_ops or prio.shape[0] not in (1, assign.shape[0]):
            raise ValueError(f"PartialMakespan: priorities must be ({self._n_ops},) or ({assign.shape[0]}, "
                             f"{self._n_ops}), got shape {np.shape(priorities)}")
        if order == "fixed":  # ranks among the placed ops: the unplaced ones go after them
            prio = fixed_order.device_ranks(np.where(assign >= 0, prio, self._n_ops + np.arange(self._n_ops)),
                                            np.maximum(assign, 0))
        return _read_only(np.array(prio, dtype=np.float64, order="C"))

    def _raise_failed(self, assign: np.ndarray, prio: np.ndarray, out: np.ndarray) -> None:
        """Say why a row failed: a device outside ``[0, D)`` or a ``"fixed"`` order that deadlocks."""
        b = int(np.flatnonzero(out < 0.0)[0])
        if assign[b].max() >= self._n_devices:
            raise ValueError(f"PartialMakespan: row {b} puts op {int(np.argmax(assign[b]))} on device "
                             f"{int(assign[b].max())}; devices are 0..{self._n_devices - 1} (-1 = unplaced)")
        raise ValueError(f"PartialMakespan: row {b}: the fixed order of its placed ops deadlocks (priorities "
                         f"{prio[b % prio.shape[0]][assign[b] >= 0][:8]}...); give the SEL positions")
