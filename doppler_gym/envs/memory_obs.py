"""Memory features of the placement env's observation (``obs["device_memory"]``) and its OOM outcome.

Present when the env's ``sim_config`` tracks memory (``SimConfig(memory="track"/"enforce")``).
Per device ``d`` (rows past ``n_devices`` are zeros), ``(D, 3) float32``:

======  ========================================================================================
column  content
======  ========================================================================================
0       memory in use: the persistent bytes (``graph.persistent_bytes``: weights, gradients,
        optimizer state) of the ops placed on ``d`` so far / ``d``'s memory
1       the same if the selected op were placed on ``d`` (PLC phase; equal to column 0 in SEL)
2       ``d``'s memory / the largest device memory of the topology
======  ========================================================================================

Why the static footprint: it is exact (persistent memory stays the whole run, so it is a lower
bound of the device's final peak that only grows as ops are placed), it costs O(1) per step, and
for a training step it is most of the memory (16 B per parameter with Adam). Activations and
workspaces depend on the final schedule and are known only after the run
(:mod:`doppler_gym.sim.memory`); under ``"enforce"`` they count there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from doppler_gym.envs.context import FEATURE_MAX
from doppler_gym.sim.trace import Trace

MEMORY_KEY = "device_memory"
N_MEMORY_FEATURES = 3


class MemoryFeatures:
    """Running persistent footprint per device of one episode, written into ``out`` ``(D, 3) float32``.

    Args:
        out: the observation array it owns (the builder's ``device_memory``), updated in place.
    """

    def __init__(self, out: np.ndarray) -> None:
        self.out = out
        self.used = np.zeros(0)  # (n_devices,) [B] persistent bytes placed so far
        self._inv_capacity = np.zeros(0)  # (n_devices,) [1/B], 0 for a device without memory
        self._persistent = np.zeros(0)  # (n_ops,) [B]

    def reset(self, persistent_bytes: np.ndarray, capacity: np.ndarray) -> None:
        """Start an episode: ``persistent_bytes`` ``(n_ops,)`` [B] of the graph, ``capacity`` ``(n_devices,)`` [B]."""
        n_dev = capacity.shape[0]
        self._persistent = persistent_bytes
        self.used = np.zeros(n_dev)
        with np.errstate(divide="ignore"):
            self._inv_capacity = np.where(capacity > 0, 1.0 / np.maximum(capacity, 1e-300), 0.0)
        self.out.fill(0.0)
        top = float(capacity.max()) if n_dev else 0.0
        self.out[:n_dev, 2] = capacity / top if top > 0 else 0.0

    def select(self, op: int) -> None:
        """PLC phase for ``op``: column 1 = use if it went to each device."""
        n_dev = self.used.shape[0]
        self.out[:n_dev, 1] = np.minimum((self.used + self._persistent[op]) * self._inv_capacity, FEATURE_MAX)

    def place(self, op: int, device: int) -> None:
        """``op`` went to ``device``: its persistent bytes count there from now on."""
        n_dev = self.used.shape[0]
        self.used[device] += self._persistent[op]
        self.out[:n_dev, 0] = np.minimum(self.used * self._inv_capacity, FEATURE_MAX)
        self.out[:n_dev, 1] = self.out[:n_dev, 0]


def oom_info(trace: Trace) -> dict[str, Any]:
    """The memory entries of the final ``info``: ``feasible`` always; with a memory profile also
    ``peak_memory`` (``(n_devices,)`` [B]) and ``oom`` (the first violation as a dict: ``device``,
    ``time`` [reported unit], ``peak_bytes``, ``capacity_bytes``, ``excess_bytes``; ``None`` when all fit)."""
    info: dict[str, Any] = {"feasible": trace.feasible}
    if trace.memory is not None:
        info["peak_memory"] = trace.memory.peak.copy()
        v = trace.memory.violation
        info["oom"] = None if v is None else v.as_dict()
    return info
