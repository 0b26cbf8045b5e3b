"""Per-device memory of one simulated run, derived exactly from the times of its trace.

Memory never changes the timing, so it is computed after the run from the op start/end times and
the per-edge arrival times (``Trace.start``, ``Trace.end``, ``Trace.edge_end``), with no cost in
the kernels. Each byte lives over a closed interval on one device:

================  ===========================  =============================================
what              device                       interval
================  ===========================  =============================================
output of op i    ``assignment[i]``            ``[end_i, max(end_i, end of i's consumers on
                                               that device, arrival of each of its transfers
                                               to another device)]``: freed once its last
                                               local consumer ends and its last outgoing
                                               transfer is done (a sink's output: ``[end_i,
                                               end_i]``, handed over at once)
received copy     each other device r that     ``[first arrival of i's output at r, last end
                  consumes op i's output       of i's consumers on r]``: one copy per device,
                                               however many consumers read it there
workspace of i    ``assignment[i]``            ``[start_i, end_i]``
persistent of i   ``assignment[i]``            ``[0, makespan]``: weights, gradients, optimizer
                                               state
================  ===========================  =============================================

Sizes: ``graph.out_bytes`` [B] for outputs and copies, ``graph.workspace_bytes`` and
``graph.persistent_bytes`` [B]. A graph in ``units="paper"`` (the DOPPLER files) gives transfer
*times* in ``out_bytes``, not sizes: its outputs count 0 B, so its memory is its declared workspace
and persistent bytes (none in the shipped files).

Intervals are closed: at one instant every allocation counts before any free, so an op's inputs,
its workspace and its output all count at the instant it ends (the handover), and the peak does
not depend on the order of same-time events (it is the largest sum over intervals containing one
instant, an upper bound on every ordering). Under ``SimConfig(multicast="teccl")`` an output is
held until its last consumer's data has arrived (the multicast's end), the same rule.

``enforce`` (``SimConfig(memory="enforce")``): a run is infeasible when some device's in-use bytes
exceed its capacity (``Topology.memory``) at some instant; :class:`MemoryViolation` says which device
first does so, when, and by how much its peak exceeds the capacity.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numba import njit

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.dispatch import run_packed
from doppler_gym.sim.packed_layout import Meta
from doppler_gym.sim.trace import Trace
from doppler_gym.topology.types import Topology


@dataclass(frozen=True)
class MemoryViolation:
    """The first point where a device runs out of memory.

    Attributes:
        device: the device that runs out first (the lowest id among ties).
        time: the first instant its in-use memory exceeds its capacity [the trace's time unit].
        peak: its peak in-use memory over the run [B].
        capacity: its memory [B] (``Topology.memory``).
    """

    device: int
    time: float
    peak: float
    capacity: float

    @property
    def excess(self) -> float:
        """How far its peak exceeds its capacity [B]: what must move off the device."""
        return self.peak - self.capacity

    def as_dict(self) -> dict[str, float | int]:
        """``{"device", "time", "peak_bytes", "capacity_bytes", "excess_bytes"}`` (JSON-ready)."""
        return {"device": self.device, "time": self.time, "peak_bytes": self.peak,
                "capacity_bytes": self.capacity, "excess_bytes": self.excess}

    def __str__(self) -> str:
        return (f"device {self.device} runs out of memory at t={self.time:.6g}: peak {_gb(self.peak)} > "
                f"capacity {_gb(self.capacity)} (excess {_gb(self.excess)})")


@dataclass(frozen=True, eq=False)
class MemoryProfile:
    """Memory of one run on each device (see the module docstring for the model).

    Attributes:
        peak: ``(D,) float64`` largest in-use memory of each device [B].
        peak_time: ``(D,) float64`` first instant each device reaches its peak [time unit] (0
            for a device that holds nothing).
        persistent: ``(D,) float64`` persistent bytes held by each device all run [B].
        capacity: ``(D,) float64`` memory of each device [B].
        violation: the first point over capacity, or ``None`` when every device fits.
        enforced: whether the run was under ``SimConfig(memory="enforce")`` (then a violation
            makes it infeasible; under ``"track"`` it is reported only).
        event_ptr: ``(D + 1,) int64``: device ``d``'s events are ``event_ptr[d]:event_ptr[d+1]``.
        event_time: ``(K,) float64`` time of each allocation or free, ascending per device
            (allocations before frees at one instant) [time unit].
        event_bytes: ``(K,) float64`` in-use memory right after each event [B].
        time_unit: unit of the times (the trace's).
    """

    peak: np.ndarray
    peak_time: np.ndarray
    persistent: np.ndarray
    capacity: np.ndarray
    violation: MemoryViolation | None
    enforced: bool
    event_ptr: np.ndarray
    event_time: np.ndarray
    event_bytes: np.ndarray
    time_unit: str

    @property
    def n_devices(self) -> int:
        """Number of devices."""
        return int(self.peak.shape[0])

    @property
    def fits(self) -> bool:
        """Whether every device stays within its capacity all run."""
        return self.violation is None

    @property
    def feasible(self) -> bool:
        """False only when the run was enforced and does not fit."""
        return self.fits or not self.enforced

    @property
    def excess(self) -> np.ndarray:
        """``(D,) float64`` ``max(peak - capacity, 0)`` per device [B]."""
        return np.maximum(self.peak - self.capacity, 0.0)

    def timeline(self, device: int) -> tuple[np.ndarray, np.ndarray]:
        """``(times, bytes)`` of ``device``: a step function starting at ``(0, 0)``, in use ``bytes[k]``
        from ``times[k]`` on (draw with ``where="post"``); an instant with both allocations and
        frees appears twice (its transient peak, then the level after it)."""
        if not 0 <= device < self.n_devices:
            raise ValueError(f"MemoryProfile.timeline: device {device} is outside 0..{self.n_devices - 1}")
        lo, hi = int(self.event_ptr[device]), int(self.event_ptr[device + 1])
        return (np.concatenate([[0.0], self.event_time[lo:hi]]),
                np.concatenate([[0.0], self.event_bytes[lo:hi]]))


# ---------------------------------------------------------------------------------------- model
@njit(cache=True)
def _intervals(src, succ_ptr, succ_edge, edge_dst, out_bytes, workspace, persistent, a, start, end, edge_end,
               makespan, n_dev):
    """The closed intervals of the module's table with bytes > 0: ``(device, t_alloc, t_free, nbytes)``.

    ``succ_ptr``/``succ_edge``: the graph's CSR out-edges; ``edge_dst``: ``(n_edges,)`` consumers;
    ``out_bytes`` zeros for a paper graph. One pass over each producer's out-edges, with per-device
    scratch (first arrival, last consumer end) for the received copies.
    """
    n = a.shape[0]
    cap = 3 * n + src.shape[0]
    device = np.empty(cap, np.int64)
    t0 = np.empty(cap)
    t1 = np.empty(cap)
    nb = np.empty(cap)
    first = np.full(n_dev, np.inf)
    last = np.full(n_dev, -np.inf)
    touched = np.empty(n_dev, np.int64)
    k = 0
    for i in range(n):
        d = a[i]
        size = out_bytes[i]
        free = end[i]
        n_touched = 0
        for p in range(succ_ptr[i], succ_ptr[i + 1]):
            e = succ_edge[p]
            j = edge_dst[e]
            r = a[j]
            if r == d:
                free = max(free, end[j])
            else:
                free = max(free, edge_end[e])
                if first[r] == np.inf:
                    touched[n_touched] = r
                    n_touched += 1
                first[r] = min(first[r], edge_end[e])
                last[r] = max(last[r], end[j])
        for q in range(n_touched):
            r = touched[q]
            if size > 0:
                device[k], t0[k], t1[k], nb[k] = r, first[r], last[r], size
                k += 1
            first[r] = np.inf
            last[r] = -np.inf
        if size > 0:
            device[k], t0[k], t1[k], nb[k] = d, end[i], free, size
            k += 1
        if workspace[i] > 0:
            device[k], t0[k], t1[k], nb[k] = d, start[i], end[i], workspace[i]
            k += 1
        if persistent[i] > 0:
            device[k], t0[k], t1[k], nb[k] = d, 0.0, makespan, persistent[i]
            k += 1
    return device[:k], t0[:k], t1[:k], nb[:k]


@njit(cache=True)
def _sweep(device, t_alloc, t_free, nbytes, capacity):
    """Events of closed intervals per device in time order, allocations before frees at one instant.

    Returns ``(event_ptr (D+1,), event_time (2K,), event_bytes (2K,), peak (D,), peak_time (D,),
    first_over (D,))``: ``event_bytes`` the in-use memory after each event, ``first_over`` the
    first time each device exceeds ``capacity`` (``inf`` if never).
    """
    n_dev = capacity.shape[0]
    m = device.shape[0]
    dev = np.concatenate((device, device))
    time = np.concatenate((t_alloc, t_free))
    delta = np.concatenate((nbytes, -nbytes))
    # by time, stably: allocations (the first m events) stay before frees at one instant ...
    by_time = np.argsort(time, kind="mergesort")
    ptr = np.zeros(n_dev + 1, np.int64)
    for q in range(2 * m):
        ptr[dev[q] + 1] += 1
    for d in range(n_dev):
        ptr[d + 1] += ptr[d]
    # ... then by device, a stable counting sort
    order = np.empty(2 * m, np.int64)
    fill = ptr[:-1].copy()
    for q in range(2 * m):
        o = by_time[q]
        order[fill[dev[o]]] = o
        fill[dev[o]] += 1
    ev_time = np.empty(2 * m)
    level = np.empty(2 * m)
    peak = np.zeros(n_dev)
    peak_time = np.zeros(n_dev)
    first_over = np.full(n_dev, np.inf)
    for d in range(n_dev):
        acc = 0.0
        for q in range(ptr[d], ptr[d + 1]):
            o = order[q]
            acc += delta[o]
            ev_time[q] = time[o]
            level[q] = acc
            if acc > peak[d]:
                peak[d], peak_time[d] = acc, time[o]
            if acc > capacity[d] and first_over[d] == np.inf:
                first_over[d] = time[o]
    return ptr, ev_time, level, peak, peak_time, first_over


def _sizes(graph: DataflowGraph) -> np.ndarray:
    """Output sizes [B]: ``out_bytes``, or zeros for a paper graph (whose ``out_bytes`` are times)."""
    return graph.out_bytes if graph.units == "physical" else np.zeros(graph.n_ops)


def intervals(
    graph: DataflowGraph, assignment: np.ndarray, start: np.ndarray, end: np.ndarray, edge_end: np.ndarray,
    makespan: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The closed intervals of the module's table, those with bytes > 0.

    Args:
        graph: the graph that ran.
        assignment: ``(n_ops,)`` integer device of each op.
        start, end: ``(n_ops,) float64`` op start and end times.
        edge_end: ``(n_edges,) float64`` arrival time of each edge's data at its consumer.
        makespan: the run's end (same unit as the times).

    Returns:
        ``(device, t_alloc, t_free, nbytes)``: ``(K,) int64, float64, float64, float64``.
    """
    a = np.ascontiguousarray(assignment, dtype=np.int64)
    n_dev = int(a.max()) + 1 if a.size else 1
    return _intervals(graph.src, graph.succ_ptr, graph.succ_edge, graph.dst, _sizes(graph), graph.workspace_bytes,
                      graph.persistent_bytes, a, np.ascontiguousarray(start, dtype=np.float64),
                      np.ascontiguousarray(end, dtype=np.float64), np.ascontiguousarray(edge_end, dtype=np.float64),
                      float(makespan), n_dev)


def profile_of(
    graph: DataflowGraph, assignment: np.ndarray, start: np.ndarray, end: np.ndarray, edge_end: np.ndarray,
    makespan: float, capacity: np.ndarray, enforced: bool = False, time_unit: str = "s",
) -> MemoryProfile:
    """The :class:`MemoryProfile` of a run given by its times (arguments as in :func:`intervals`);
    ``capacity``: ``(D,)`` memory of each device [B], ``D`` the topology's device count."""
    capacity = np.ascontiguousarray(capacity, dtype=np.float64)
    a = np.ascontiguousarray(assignment, dtype=np.int64)
    ptr, time, level, peak, peak_time, first_over = _sweep(
        *intervals(graph, a, start, end, edge_end, makespan), capacity
    )
    violation = None
    if np.isfinite(first_over).any():
        d = int(np.argmin(first_over))  # earliest; the lowest device among ties
        violation = MemoryViolation(d, float(first_over[d]), float(peak[d]), float(capacity[d]))
    persistent = np.bincount(a, weights=graph.persistent_bytes, minlength=capacity.shape[0])
    for arr in (peak, peak_time, persistent, capacity, ptr, time, level):
        arr.setflags(write=False)
    return MemoryProfile(peak=peak, peak_time=peak_time, persistent=persistent, capacity=capacity,
                         violation=violation, enforced=bool(enforced), event_ptr=ptr, event_time=time,
                         event_bytes=level, time_unit=time_unit)


def memory_profile(
    graph: DataflowGraph, trace: Trace, capacity: object = None, enforced: bool = False
) -> MemoryProfile:
    """The :class:`MemoryProfile` of ``trace`` (a run of ``graph``), e.g. of a measured trace.

    Args:
        graph: the graph that ran.
        trace: its trace (``start``, ``end``, ``edge_end``, ``makespan``, ``assignment``).
        capacity: ``(n_devices,)`` memory of each device [B] (e.g. ``topology.memory``); ``None`` =
            unlimited.
        enforced: mark the profile as enforced (see :attr:`MemoryProfile.feasible`).
    """
    if trace.start.shape != (graph.n_ops,):
        raise ValueError(f"memory_profile: the trace has {trace.start.shape[0]} ops but graph {graph.name!r} "
                         f"has {graph.n_ops}; pass the graph that was run")
    cap = np.full(trace.n_devices, np.inf) if capacity is None else np.asarray(capacity, dtype=np.float64)
    if cap.shape != (trace.n_devices,):
        raise ValueError(f"memory_profile: capacity has shape {cap.shape}; expected ({trace.n_devices},), "
                         f"one size in bytes per device")
    return profile_of(graph, trace.assignment, trace.start, trace.end, trace.edge_end, trace.makespan, cap,
                      enforced, trace.time_unit)


def fits(
    graph: DataflowGraph, assignment: np.ndarray, times: np.ndarray, makespan: float, capacity: np.ndarray
) -> bool:
    """Whether a run given by a kernel ``times`` buffer (``(2 n_ops + 2 n_edges,)``: op start, op end,
    edge start, edge end, any one unit) stays within ``capacity`` ``(D,)`` [B] on every device."""
    n, n_edges = graph.n_ops, graph.n_edges
    start, end, edge_end = times[:n], times[n : 2 * n], times[2 * n + n_edges :]
    first_over = _sweep(*intervals(graph, assignment, start, end, edge_end, makespan), capacity)[5]
    return not np.isfinite(first_over).any()


# ---------------------------------------------------------------------------- simulator hooks
def capacity_of(topology: Topology | None, n_devices: int) -> np.ndarray:
    """``(n_devices,) float64`` memory of each device [B]: ``topology.memory``, or that of
    ``Topology.uniform(n_devices)`` for ``None`` (its default per device). Read under every cost
    model: ``cost_model="raw"`` ignores the topology's speeds and links, not its memory."""
    if topology is None:
        return _uniform_memory(n_devices)
    return topology.memory


@lru_cache(maxsize=16)
def _uniform_memory(n_devices: int) -> np.ndarray:
    """``Topology.uniform(n_devices).memory``, built once per device count (a topology costs ~1 ms)."""
    return Topology.uniform(n_devices).memory


def attach(trace: Trace, graph: DataflowGraph, topology: Topology | None, config: SimConfig) -> Trace:
    """``trace`` with its :class:`MemoryProfile` under ``config.memory`` (``"track"``/``"enforce"``)."""
    profile = profile_of(graph, trace.assignment, trace.start, trace.end, trace.edge_end, trace.makespan,
                         capacity_of(topology, trace.n_devices), config.memory == "enforce", trace.time_unit)
    return trace.with_memory(profile)


def enforce_batch(
    graph: DataflowGraph, topology: Topology | None, problem: object, priority: np.ndarray,
    comp_factor: np.ndarray, edge_factor: np.ndarray, assignments: np.ndarray, makespans: np.ndarray,
) -> None:
    """Set ``makespans[b] = inf`` for each row ``b`` of ``assignments`` that runs out of memory.

    Reruns each row once with its own times buffer (:func:`~doppler_gym.sim.dispatch.run_packed`,
    row ``b`` with priority row ``b % P`` and factor rows ``b % J`` as ``run_many`` uses them), so
    it costs about a serial batch. ``problem``: the :class:`~doppler_gym.sim.packing.PackedProblem`.
    """
    if not graph.has_memory and (graph.units != "physical" or not graph.out_bytes.any()):
        return  # nothing is ever held: every row fits
    meta, n, n_edges = problem.meta, graph.n_ops, graph.n_edges
    capacity = capacity_of(topology, problem.n_devices)
    floats = problem.floats.copy()
    times = np.empty(problem.n_times, np.float64)
    p_o, c_o, e_o = meta[Meta.PRIORITY_ROW], meta[Meta.COMP_FACTOR_ROW], meta[Meta.EDGE_FACTOR_ROW]
    for b in range(assignments.shape[0]):
        floats[p_o : p_o + n] = priority[b % priority.shape[0]]
        floats[c_o : c_o + n] = comp_factor[b % comp_factor.shape[0]]
        floats[e_o : e_o + n_edges] = edge_factor[b % edge_factor.shape[0]]
        makespan = run_packed(meta, problem.ints, floats, assignments[b], times)
        if makespan >= 0.0 and not fits(graph, assignments[b], times, float(times[n : 2 * n].max()), capacity):
            makespans[b] = np.inf


def _gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:.4g} GB" if abs(nbytes) >= 1e6 else f"{nbytes:.6g} B"
