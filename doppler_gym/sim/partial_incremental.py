"""Partial makespans of placements built one op at a time: :class:`IncrementalPartialMakespan`.

A placement MDP asks for the makespan of its placed ops after every placement (``Doppler-Sim-v0``'s
``"incremental"`` reward), each row its previous row plus one op. :class:`~doppler_gym.sim.partial.PartialMakespan`
simulates every row from scratch; this class keeps each caller's last row and its run (a *slot*, for example one
env of a vector env) and, where the list kernel serves the config, resumes that run at the new op's request
instead of running the row whole, bit for bit the same (the rule and its argument are in
:mod:`doppler_gym.sim.partial_incremental_kernel`); any other row runs whole. Under other configs (priority or
fixed queues, link contention, several streams) every row runs whole through ``PartialMakespan``.
"""

from __future__ import annotations

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.list_kernel import N_STATE_ROWS
from doppler_gym.sim.packed_layout import Meta
from doppler_gym.sim.partial import PartialMakespan
from doppler_gym.sim.partial_incremental_kernel import incremental_rows, predecessors
from doppler_gym.topology.types import Topology


class IncrementalPartialMakespan:
    """:class:`~doppler_gym.sim.partial.PartialMakespan` that remembers each slot's last row and its run [the
    config's reported unit].

    Args:
        graph, topology, config: as ``PartialMakespan`` (``n_ops`` ops, ``D`` devices).
        n_slots: how many callers' rows it keeps (``S``): slot ``s`` keeps about ``92 n_ops + 16 D`` bytes.

    Call with ``assignments`` ``(B, n_ops)`` (or ``(n_ops,)``) as ``PartialMakespan`` takes them and ``slots``
    ``(B,)`` (or an int) in ``[0, S)``; rows of one slot are taken in order. The makespans equal
    ``PartialMakespan``'s; a row that extends its slot's last row by one placed op whose inputs are all placed
    (and none of whose consumers is) resumes the slot's run at that op's request: it costs ``O(n_ops)`` (the
    comparison with the kept row) plus, for the ops requested after the new one, a shift by one where the op fits
    an idle stretch of its device, else their run again. :attr:`whole_runs` and :attr:`resumed_runs` count the rows
    that ran whole and that resumed, :attr:`drained_runs` the resumed rows that ran the later requests again.

    Raises:
        ValueError: as ``PartialMakespan``, and for a slot outside ``[0, S)``.
    """

    def __init__(self, graph: DataflowGraph, topology: Topology, config: SimConfig, n_slots: int) -> None:
        if int(n_slots) < 1:
            raise ValueError(f"IncrementalPartialMakespan: n_slots must be at least 1, got {n_slots}")
        self.whole = PartialMakespan(graph, topology, config)  # the rows this class does not serve
        self.n_slots = int(n_slots)
        self.whole_runs = 0
        self.resumed_runs = 0
        self.drained_runs = 0
        self._n_ops = graph.n_ops
        problem = self.whole.problem
        self.incremental = bool(problem.meta[Meta.LIST_KERNEL])
        if not self.incremental:
            return
        self._problem = (problem.meta, problem.ints, problem.floats, predecessors(problem.meta, problem.ints))
        n, d, s = graph.n_ops, topology.n_devices, self.n_slots
        self._state = (np.full((s, n), -1, np.int32), np.zeros(s, np.bool_), np.zeros((s, n), np.int32),
                       np.zeros((s, n), np.int32), np.zeros(s, np.int64), np.zeros(s, np.int64), np.zeros(s),
                       np.zeros((s, N_STATE_ROWS * n), np.int64), np.zeros((s, 3 * n + d + 1), np.int64),
                       np.zeros((s, 2 * n + d)))
        self._one_slot = np.zeros(1, np.int64)

    def __call__(self, assignments: np.ndarray, slots: np.ndarray | int,
                 priorities: np.ndarray | None = None) -> np.ndarray | float:
        if not self.incremental:
            return self.whole(assignments, priorities)
        assign = assignments if type(assignments) is np.ndarray else np.asarray(assignments)
        single = assign.ndim == 1
        if assign.ndim not in (1, 2) or assign.shape[-1] != self._n_ops:
            raise ValueError(f"IncrementalPartialMakespan: assignments must have {self._n_ops} columns (one per op), "
                             f"got shape {np.shape(assignments)}")
        assign = np.ascontiguousarray(assign, dtype=np.int32).reshape(-1, self._n_ops)  # (any negative: unplaced)
        slot = self._slot_rows(slots, assign.shape[0])
        out = np.empty(assign.shape[0])
        whole, resumed, drained, failed = incremental_rows(*self._problem, assign, slot, self._state, out)
        if failed < 0:
            raise self._slots_error(slots, assign.shape[0])
        self.whole_runs += whole
        self.resumed_runs += resumed
        self.drained_runs += drained
        if failed:  # a bad device (PartialMakespan says which) or an op of zero duration (the event loop's)
            others = np.flatnonzero(out < 0.0)
            out[others] = self.whole(assign[others])
        return float(out[0]) if single else out

    def _slot_rows(self, slots: np.ndarray | int, rows: int) -> np.ndarray:
        """``(rows,) int64`` slots (the kernel checks that they lie in ``[0, S)``)."""
        if isinstance(slots, (int, np.integer)) and rows == 1:
            self._one_slot[0] = slots
            return self._one_slot
        slot = np.asarray(slots, dtype=np.int64).reshape(-1)
        if slot.shape[0] != rows:
            raise self._slots_error(slots, rows)
        return slot

    def _slots_error(self, slots: np.ndarray | int, rows: int) -> ValueError:
        return ValueError(f"IncrementalPartialMakespan: slots must be {rows} ints in [0, {self.n_slots}), got "
                          f"{np.asarray(slots).tolist()}")

    def forget(self, slots: np.ndarray | int | None = None) -> None:
        """Drop the kept rows of ``slots`` (all when None): their next rows run whole. Never needed for correct
        results (a row is compared with the kept one), only to free a slot's meaning."""
        if self.incremental:
            self._state[1][slice(None) if slots is None else slots] = False

