"""The result of one simulated (or measured) execution."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_TIME_FIELDS = ("start", "end", "edge_start", "edge_end")


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
    """

    makespan: float
    start: np.ndarray
    end: np.ndarray
    assignment: np.ndarray
    edge_start: np.ndarray
    edge_end: np.ndarray
    n_devices: int
    time_unit: str

    @classmethod
    def _from_times(
        cls,
        makespan: float,
        times: np.ndarray,
        n_ops: int,
        assignment: np.ndarray,
        n_devices: int,
        time_unit: str,
        divisor: float = 1.0,
    ) -> Trace:
        """The simulator's fast constructor: ``times`` is the kernel's ``(2n + 2E,)`` buffer (op
        start, op end, edge start, edge end) in internal units, ``divisor`` what turns them into
        ``time_unit``. The four array fields are views of it, made (and divided, in place, once)
        on first access: a frozen dataclass otherwise pays ~1 us per call to set its fields, and
        most callers only want the makespan."""
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

    def __getattr__(self, name: str) -> np.ndarray:
        # Only reached for attributes missing from __dict__: the lazy views of _from_times.
        d = self.__dict__
        if name in _TIME_FIELDS and "_times" in d:
            times, n = d["_times"], d["_n_ops"]
            if d["_divisor"] != 1.0:
                times /= d["_divisor"]  # IEEE division, element by element: as exact as the kernel's
            n_edges = (times.shape[0] - 2 * n) // 2
            d["start"], d["end"] = times[:n], times[n : 2 * n]
            d["edge_start"], d["edge_end"] = times[2 * n : 2 * n + n_edges], times[2 * n + n_edges :]
            return d[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

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
