"""Real work-conserving backend on torch devices, NVML monitor and sim calibration.

``envs_real`` implements the simulator's :class:`~doppler_gym.envs.backend.Backend` protocol on
real hardware (layers: ``docs/architecture.md``):

- :class:`RealBackend` (:mod:`.backend`): runs a placed graph with PyTorch, work-conservingly
  (per device a ready queue, worker threads on CPU or CUDA streams and events on GPUs, peer copies
  for cross-device edges), and measures the median makespan of several runs after warm-up.
- :class:`NvmlMonitor` (:mod:`.monitor`): utilisation, memory, power, energy and interconnect
  counters sampled during the runs; "unavailable" (with the reason) without NVML.
- :func:`calibrate` and :func:`fidelity` (:mod:`.calibration`): profile op and transfer times and
  build a graph and topology whose simulations track the real makespans; Kendall tau and mean
  relative error of simulated vs measured makespans over placements.
- :func:`make_real_env` (:mod:`.env`): ``PlacementEnv`` with a ``RealBackend`` (``Doppler-Real-v0``).
- :mod:`.distributed`: the torch.distributed mode (``devices="gloo:2"``, ``"nccl"``,
  ``"gloo:N@HOST:PORT"`` for ranks launched by ``torchrun``): one process per device, a
  point-to-point ``isend``/``irecv`` per cross-device edge.
- :mod:`.estimate`: every call is estimated from the simulator first and refused above
  ``max_estimated_seconds`` / ``max_memory_bytes`` (:class:`WorkloadTooLarge`, saying how to shrink
  the workload); long calls show a progress bar.
- :func:`compare_placements` (:mod:`.compare`): simulator vs real over placements (``doppler eval
  --backend real``): Kendall tau and mean relative error.

Importing ``envs_real`` imports neither torch nor pynvml; they load on first use. Devices:
``"auto"`` (every visible GPU, else CPU workers with a warning), ``"cpu:4"``, ``"cuda"``,
``"cuda:0,1"``, ``"gloo:2"``, ``"nccl"`` or a list (:mod:`.devices`). CPU timings are not GPU timings.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "RealBackend": "envs_real.backend",
    "RealTrace": "envs_real.backend",
    "RunReport": "envs_real.backend",
    "RealExecutionError": "envs_real.backend",
    "NvmlMonitor": "envs_real.monitor",
    "Calibration": "envs_real.calibration",
    "FidelityReport": "envs_real.calibration",
    "calibrate": "envs_real.calibration",
    "fidelity": "envs_real.calibration",
    "sample_placements": "envs_real.calibration",
    "make_real_env": "envs_real.env",
    "RunEstimate": "envs_real.estimate",
    "WorkloadTooLarge": "envs_real.estimate",
    "SimRealComparison": "envs_real.compare",
    "compare_placements": "envs_real.compare",
    "DeviceSet": "envs_real.devices",
    "parse_devices": "envs_real.devices",
}

ENV_ID = "Doppler-Real-v0"  # registered by doppler_gym.envs.registration (string entry point)

__all__ = [
    "ENV_ID",
    "Calibration",
    "DeviceSet",
    "FidelityReport",
    "NvmlMonitor",
    "RealBackend",
    "RealExecutionError",
    "RealTrace",
    "RunEstimate",
    "RunReport",
    "SimRealComparison",
    "WorkloadTooLarge",
    "calibrate",
    "compare_placements",
    "fidelity",
    "make_real_env",
    "parse_devices",
    "sample_placements",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'envs_real' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
