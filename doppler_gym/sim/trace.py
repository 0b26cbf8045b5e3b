"""The result of one simulated (or measured) execution."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # memory.py imports this module
    from doppler_gym.sim.memory import MemoryProfile, MemoryViolation


class _KernelTimes:
    """The four time fields of a :class:`Trace` made by :meth:`Trace.from_kernel_times`, filled on first read.

    A non-data descriptor: a trace built field by field (``Trace(...)``, ``dataclasses.replace``,
    a copy) holds the arrays in its ``__dict__``, which Python reads before this. On a trace of
    :meth:`~Trace.from_kernel_times`, the first read of any of the four divides the kernel's buffer
    in place, once, and stores the four views, so later reads are plain attribute reads.
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, trace: Trace | None, owner: type | None = None) -> np.ndarray:
        if trace is None:  # class access: no default value, the dataclass field stays required
            raise AttributeError(self.name)
        fields = trace.__dict__
        if "_times" not in fields:
            raise AttributeError(f"{type(trace).__name__!r} object has no attribute {self.name!r}")
        times, n, divisor = fields["_times"], fields["_n_ops"], fields["_divisor"]
        if divisor != 1.0:
            times /= divisor  # IEEE division, element by element: as exact as the kernel's
        n_edges = (times.shape[0] - 2 * n) // 2
        fields["start"], fields["end"] = times[:n], times[n : 2 * n]
        fields["edge_start"], fields["edge_end"] = times[2 * n : 2 * n + n_edges], times[2 * n + n_edges :]
        return fields[self.name]


@dataclass(frozen=True, eq=False)
class Trace:
    """Timeline of one execution of a placed graph. Times are in ``time_unit``.

    Attributes:
        makespan: time from start to the last op's end.
        start: ``(n_ops,) float64`` start time of each op.
        end: ``(n_ops,) float64`` end time of each op.
        assignment: ``(n_ops,) int32`` device of each op.
        edge_start: ``(n_edges,) float64`` when each edge's transfer began moving (NaN when
            producer and consumer share a device: nothing moves; except the output of a collective
            op under ``multicast="teccl"``, which reaches even its own device after the collective).
        edge_end: ``(n_edges,) float64`` when each edge's data reached its consumer.
        n_devices: number of devices of the topology.
        time_unit: ``"s"``, ``"paper"`` (raw cost / 1e10) or ``"cost"``.
        memory: the run's per-device memory (:class:`~doppler_gym.sim.memory.MemoryProfile`) under
            ``SimConfig(memory="track"/"enforce")``; ``None`` under ``memory="off"``.
        nominal_makespan: the makespan without the config's stragglers (``None`` unless the trace
            comes from :func:`doppler_gym.sim.whatif_analysis.whatif`).
        straggler_cost: ``(k,) float64`` makespan each straggler cost, in ``whatif``'s method
            (``None`` unless from ``whatif``).
    """

    makespan: float
    start: np.ndarray = _KernelTimes()
    end: np.ndarray = _KernelTimes()
    assignment: np.ndarray
    edge_start: np.ndarray = _KernelTimes()
    edge_end: np.ndarray = _KernelTimes()
    n_devices: int
    time_unit: str
    memory: MemoryProfile | None = None
    nominal_makespan: float | None = None
    straggler_cost: np.ndarray | None = None

    @classmethod
    def from_kernel_times(
        cls,
        makespan: float,
        times: np.ndarray,
        n_ops: int,
        assignment: np.ndarray,
        n_devices: int,
        time_unit: str,
        divisor: float = 1.0,
    ) -> Trace:
        """The trace of one kernel run, over the kernel's own buffer (the simulator's constructor).

        Args:
            makespan: in ``time_unit`` (already divided).
            times: ``(2 n_ops + 2 n_edges,) float64`` op start, op end, edge start, edge end, in
                internal units; taken over, not copied (divided in place on first read).
            n_ops: ops of the graph.
            assignment, n_devices, time_unit: the fields of the same name.
            divisor: internal units per ``time_unit``.

        The four time fields are views of ``times``, made (and divided, once) when one of them is
        first read: a frozen dataclass otherwise pays ~1 us per call to set its fields, and most
        callers only want the makespan.
        """
        self = object.__new__(cls)
        fields = self.__dict__  # filled in place: cheaper than replacing it through object.__setattr__
        fields["makespan"] = float(makespan)
        fields["assignment"] = assignment
        fields["n_devices"] = n_devices
        fields["time_unit"] = time_unit
        fields["_times"] = times
        fields["_n_ops"] = n_ops
        fields["_divisor"] = divisor
        return self

    def with_memory(self, memory: MemoryProfile) -> Trace:
        """This trace with ``memory`` attached (a shallow copy: the time arrays are shared)."""
        out = object.__new__(type(self))
        out.__dict__.update(self.__dict__)
        out.__dict__["memory"] = memory
        return out

    @property
    def feasible(self) -> bool:
        """False when the run was under ``SimConfig(memory="enforce")`` and some device ran out of
        memory (see :attr:`memory_violation`); True otherwise."""
        return self.memory is None or self.memory.feasible

    @property
    def memory_violation(self) -> MemoryViolation | None:
        """Which device first runs out of memory, when and by how much; ``None`` when all fit or
        memory is off."""
        return None if self.memory is None else self.memory.violation

    @property
    def peak_memory(self) -> np.ndarray:
        """``(n_devices,) float64`` peak memory in use on each device [B]; needs
        ``SimConfig(memory="track")`` or ``"enforce"``."""
        if self.memory is None:
            raise ValueError("this trace has no memory profile; simulate with SimConfig(memory='track') "
                             "(or 'enforce'), or call doppler_gym.sim.memory.memory_profile(graph, trace)")
        return self.memory.peak

    def with_straggler_costs(self, nominal_makespan: float, cost: np.ndarray) -> Trace:
        """This trace with the what-if figures of its stragglers (a shallow copy: the time arrays are shared)."""
        out = object.__new__(type(self))
        out.__dict__.update(self.__dict__)
        out.__dict__["nominal_makespan"] = float(nominal_makespan)
        out.__dict__["straggler_cost"] = cost
        return out

    @property
    def straggler_slowdown(self) -> float | None:
        """``makespan / nominal_makespan`` (``None`` without what-if figures; 1.0 for a nominal makespan of 0)."""
        if self.nominal_makespan is None:
            return None
        return self.makespan / self.nominal_makespan if self.nominal_makespan > 0 else 1.0

    @property
    def device_busy(self) -> np.ndarray:
        """``(n_devices,) float64`` total compute time run on each device."""
        return np.bincount(self.assignment, weights=self.end - self.start, minlength=self.n_devices)

    @property
    def transfers(self) -> np.ndarray:
        """``(k,) int64`` ids of the edges whose data moved (crossed devices, or left a collective op)."""
        return np.flatnonzero(~np.isnan(self.edge_start))

    @property
    def utilisation(self) -> np.ndarray:
        """``(n_devices,) float64`` busy time / makespan per device (0 when the makespan is 0)."""
        if self.makespan <= 0:
            return np.zeros(self.n_devices)
        return self.device_busy / self.makespan
