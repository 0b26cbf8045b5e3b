"""Partial makespans of placements built one op at a time: :class:`IncrementalPartialMakespan`.

A placement MDP asks for the makespan of its placed ops after every placement (``Doppler-Sim-v0``'s
``"incremental"`` reward), each row its previous row plus one op. :class:`~doppler_gym.sim.partial.PartialMakespan`
simulates every row from scratch; this class keeps each caller's last row (a *slot*, for example one env of a
vector env) and, where the list kernel serves the config, adds the new op to it in time proportional to the op's
inputs when that is exact, bit for bit (the rule and its argument are in
:mod:`doppler_gym.sim.partial_incremental_kernel`); any other row runs whole. Under other configs (priority or
fixed queues, link contention, several streams) every row runs whole through ``PartialMakespan``.
"""

from __future__ import annotations

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.packed_layout import Meta, problem_arrays, segment
from doppler_gym.sim.packing import pack
from doppler_gym.sim.partial import PartialMakespan
from doppler_gym.sim.partial_incremental_kernel import incremental_rows, predecessors
from doppler_gym.sim.partial_kernel import alloc_subproblem
from doppler_gym.topology.types import Topology


class IncrementalPartialMakespan:
    """:class:`~doppler_gym.sim.partial.PartialMakespan` that remembers each slot's last row [the config's
    reported unit].

    Args:
        graph, topology, config: as ``PartialMakespan`` (``n_ops`` ops, ``D`` devices).
        n_slots: how many callers' rows it keeps (``S``): slot ``s`` is ``(n_ops,)`` int32 and ``(n_ops + 2 D)``
            float64 of state.

    Call with ``assignments`` ``(B, n_ops)`` (or ``(n_ops,)``) as ``PartialMakespan`` takes them and ``slots``
    ``(B,)`` (or an int) in ``[0, S)``; rows of one slot are taken in order. The makespans equal
    ``PartialMakespan``'s; a row that extends its slot's last row by one placed op whose inputs are all placed
    costs ``O(inputs + n_ops)`` (the comparison with the kept row) instead of a simulation when the op's ready
    time is later than every ready time on its device. :attr:`whole_runs` counts the rows that ran whole.

    Raises:
        ValueError: as ``PartialMakespan``, and for a slot outside ``[0, S)``.
    """

    def __init__(self, graph: DataflowGraph, topology: Topology, config: SimConfig, n_slots: int) -> None:
        if int(n_slots) < 1:
            raise ValueError(f"IncrementalPartialMakespan: n_slots must be at least 1, got {n_slots}")
        self.whole = PartialMakespan(graph, topology, config)  # the rows this class does not serve
        self.n_slots = int(n_slots)
        self.whole_runs = 0
        self._n_ops = graph.n_ops
        problem = pack(graph, topology, topology.n_devices, self.whole.config)
        self._tables = _static_tables(problem)
        self.incremental = self._tables is not None
        if not self.incremental:
            return
        self._buffers = alloc_subproblem(problem.meta, problem.ints, problem.floats)
        n, d, s = graph.n_ops, topology.n_devices, self.n_slots
        self._state = (np.full((s, n), -1, np.int32), np.zeros(s, np.bool_), np.zeros((s, n)),
                       np.zeros((s, d + 1), np.int64), np.zeros((s, n)), np.zeros((s, n)), np.zeros(s))
        self._scratch = np.empty(n)
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
        assign = assign.astype(np.int32, order="C").reshape(-1, self._n_ops)  # (any negative: unplaced)
        slot = self._slot_rows(slots, assign.shape[0])
        out = np.empty(assign.shape[0])
        self.whole_runs += incremental_rows(*self._buffers, self._tables, assign, slot, self._state, self._scratch, out)
        if out.min() < 0.0:  # a bad device (PartialMakespan says which) or an op of zero duration (the event loop's)
            others = np.flatnonzero(out < 0.0)
            out[others] = self.whole(assign[others])
        return float(out[0]) if single else out

    def _slot_rows(self, slots: np.ndarray | int, rows: int) -> np.ndarray:
        """``(rows,) int64`` slots, checked to lie in ``[0, S)``."""
        if isinstance(slots, (int, np.integer)) and rows == 1 and 0 <= slots < self.n_slots:
            self._one_slot[0] = slots
            return self._one_slot
        slot = np.asarray(slots, dtype=np.int64).reshape(-1)
        if slot.shape[0] != rows or slot.min() < 0 or slot.max() >= self.n_slots:
            raise ValueError(f"IncrementalPartialMakespan: slots must be {rows} ints in [0, {self.n_slots}), "
                             f"got {np.asarray(slots).tolist()}")
        return slot

    def forget(self, slots: np.ndarray | int | None = None) -> None:
        """Drop the kept rows of ``slots`` (all when None): their next rows run whole. Never needed for correct
        results (a row is compared with the kept one), only to free a slot's meaning."""
        if self.incremental:
            self._state[1][slice(None) if slots is None else slots] = False


def _static_tables(problem) -> tuple[np.ndarray, ...] | None:
    """The kernel's static tables (:mod:`doppler_gym.sim.partial_incremental_kernel`) of a packed problem, or None
    where the incremental rules do not hold: the list kernel does not serve it, a factor row is not all ones, or
    a device pair with itself has a latency or 1/bandwidth."""
    meta, ints, floats = problem.meta, problem.ints, problem.floats
    n, n_edges, n_dev = int(meta[Meta.N_OPS]), int(meta[Meta.N_EDGES]), int(meta[Meta.N_DEVICES])
    if not meta[Meta.LIST_KERNEL]:
        return None
    _, _, _, _, comp, _, inv_speed, latency, inv_bw, comp_row = problem_arrays(meta, ints, floats)
    ones = np.all(segment(floats, meta, Meta.COMP_FACTOR_ROW, n) == 1.0) and np.all(
        segment(floats, meta, Meta.EDGE_FACTOR_ROW, n_edges) == 1.0)
    diagonal = np.arange(n_dev) * (n_dev + 1)
    if not ones or np.any(latency[diagonal] != 0.0) or np.any(inv_bw[diagonal] != 0.0):
        return None
    work = comp[comp_row[:, None] + np.arange(n)[None, :]] * inv_speed[:, None]  # (D, n): run_list's product
    return (*predecessors(meta, ints, floats), np.array(latency), np.array(inv_bw), np.ascontiguousarray(work))
