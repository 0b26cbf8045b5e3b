"""The result of one simulated (or measured) execution."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class Trace:
    """Timeline of one execution of a placed graph. Times are in ``time_unit``.

    Attributes:
        makespan: time from start to the last op's end.
        start: ``(n_ops,) float64`` start time of each op.
        end: ``(n_ops,) float64`` end time of each op.
        assignment: ``(n_ops,) int32`` device of each op.
        edge_start: ``(n_edges,) float64`` when each edge's transfer began moving (NaN when
            producer and consumer share a device: nothing moves).
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

    @property
    def device_busy(self) -> np.ndarray:
        """``(n_devices,) float64`` total compute time run on each device."""
        return np.bincount(self.assignment, weights=self.end - self.start, minlength=self.n_devices)

    @property
    def transfers(self) -> np.ndarray:
        """``(k,) int64`` ids of the edges whose data crossed devices."""
        return np.flatnonzero(~np.isnan(self.edge_start))

    @property
    def utilisation(self) -> np.ndarray:
        """``(n_devices,) float64`` busy time / makespan per device (0 when the makespan is 0)."""
        if self.makespan <= 0:
            return np.zeros(self.n_devices)
        return self.device_busy / self.makespan
