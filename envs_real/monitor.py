"""NVML sampler: GPU utilisation, memory, power, energy and interconnect counters around a run.

:class:`NvmlMonitor` runs a background thread that samples, every ``interval_s``, each GPU's
utilisation (``nvmlDeviceGetUtilizationRates``: percent of the last sample period, 1/6 s to 1 s
depending on the product, so too coarse for millisecond runs), memory in use
(``nvmlDeviceGetMemoryInfo``), power (``nvmlDeviceGetPowerUsage``; averaged over 1 s on Ampere and
newer) and PCIe throughput (``nvmlDeviceGetPcieThroughput``, KB/s over a short window). Around the
whole monitored span it takes deltas of the cumulative counters: energy
(``nvmlDeviceGetTotalEnergyConsumption``, mJ since the driver loaded; Volta and newer) and NVLink
data traffic (``nvmlDeviceGetFieldValues`` with ``NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX``,
KiB; GPU-wide totals).

Every metric is optional: one the device does not support (MIG slices, no NVLink, older parts)
is listed under ``unsupported`` and reported as ``None``. Without NVML at all (no
``nvidia-ml-py``, no driver, CPU devices) the report says ``available: False`` and why; the
monitor never raises out of :meth:`~NvmlMonitor.start` or :meth:`~NvmlMonitor.stop`.

torch GPU indices are matched to NVML devices by UUID, then PCI bus id (so
``CUDA_VISIBLE_DEVICES`` reordering is respected), then by index when nothing is hidden.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

DEFAULT_INTERVAL_S = 0.05  # [s]


def unavailable(reason: str) -> dict[str, Any]:
    """The report of a monitor that could not run."""
    return {"available": False, "reason": reason, "devices": []}


class NvmlMonitor:
    """Samples NVML metrics of some GPUs in a background thread.

    Args:
        devices: torch device strings (``"cuda:0"``), torch devices, or NVML indices (ints).
        interval_s: sampling period [s].

    Use as a context manager or with :meth:`start` / :meth:`stop`; :meth:`stop` returns the
    report (also kept as :attr:`report`).
    """

    def __init__(self, devices: Sequence[object], interval_s: float = DEFAULT_INTERVAL_S) -> None:
        if not interval_s > 0:
            raise ValueError(f"NvmlMonitor: interval_s must be > 0 seconds, got {interval_s!r}")
        self.devices = list(dict.fromkeys(str(d) if not isinstance(d, int) else d for d in devices))
        self.interval_s = float(interval_s)
        self.report: dict[str, Any] | None = None
        self._nvml: Any = None
        self._handles: list[Any] = []
        self._names: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._samples: list[list[dict[str, Any]]] = []
        self._unsupported: list[dict[str, str]] = []
        self._start_counters: list[dict[str, Any]] = []
        self._t0 = 0.0
        self._reason: str | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> NvmlMonitor:
        """Initialise NVML and start sampling; on any failure the monitor becomes unavailable."""
        self._reason = self._init()
        if self._reason is not None:
            return self
        self._samples = [[] for _ in self._handles]
        self._unsupported = [{} for _ in self._handles]
        self._t0 = time.perf_counter()
        self._start_counters = [self._counters(i) for i in range(len(self._handles))]
        self._sample_all()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="envs_real-nvml", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        """Stop sampling and return the report (``available: False`` with a reason if NVML failed)."""
        if self._reason is not None:
            self.report = unavailable(self._reason)
            return self.report
        if self._thread is None:
            self.report = unavailable("the monitor was never started")
            return self.report
        self._stop.set()
        self._thread.join(max(1.0, 5 * self.interval_s))
        self._thread = None
        try:
            self._sample_all()
            end_counters = [self._counters(i) for i in range(len(self._handles))]
            duration = time.perf_counter() - self._t0
            devices = [self._summary(i, end_counters[i], duration) for i in range(len(self._handles))]
            self.report = {
                "available": True,
                "reason": None,
                "interval_s": self.interval_s,
                "duration_s": duration,
                "devices": devices,
            }
        except Exception as exc:  # noqa: BLE001  a monitor never breaks a run
            self.report = unavailable(f"NVML failed while summarising: {type(exc).__name__}: {exc}")
        finally:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
        return self.report

    def __enter__(self) -> NvmlMonitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ NVML
    def _init(self) -> str | None:
        if not self.devices:
            return "no GPU devices to monitor"
        if any(isinstance(d, str) and not d.startswith("cuda") for d in self.devices):
            return "CPU devices: NVML monitors NVIDIA GPUs only"
        try:
            import pynvml
        except ImportError as exc:
            return f"nvidia-ml-py is not installed (import pynvml failed: {exc}); pip install nvidia-ml-py"
        self._nvml = pynvml
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001  NVMLError_LibraryNotFound, DriverNotLoaded, ...
            return f"nvmlInit failed: {type(exc).__name__}: {exc} (no NVIDIA driver on this machine?)"
        try:
            self._handles = [self._handle(d) for d in self.devices]
            self._names = [_text(_call(pynvml.nvmlDeviceGetName, h)) for h in self._handles]
        except Exception as exc:  # noqa: BLE001
            with contextlib.suppress(Exception):
                pynvml.nvmlShutdown()
            return f"could not find the NVML device of {self.devices}: {type(exc).__name__}: {exc}"
        return None

    def _handle(self, device: object) -> Any:
        nv = self._nvml
        if isinstance(device, int):
            return nv.nvmlDeviceGetHandleByIndex(device)
        index = int(str(device).partition(":")[2] or 0)
        try:
            import torch

            props = torch.cuda.get_device_properties(index)
        except Exception:  # noqa: BLE001
            props = None
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            text = str(uuid)
            for candidate in (text, f"GPU-{text}"):
                try:
                    return nv.nvmlDeviceGetHandleByUUID(candidate)
                except Exception:  # noqa: BLE001
                    pass
        bus = getattr(props, "pci_bus_id", None)
        if bus is not None:
            domain, dev = getattr(props, "pci_domain_id", 0), getattr(props, "pci_device_id", 0)
            busid = f"{domain:08X}:{bus:02X}:{dev:02X}.0"
            try:
                return nv.nvmlDeviceGetHandleByPciBusId(busid)
            except Exception:  # noqa: BLE001
                pass
        if os.environ.get("CUDA_VISIBLE_DEVICES") not in (None, ""):
            raise RuntimeError(
                f"{device}: no UUID or PCI match and CUDA_VISIBLE_DEVICES is set, so the index is ambiguous"
            )
        return nv.nvmlDeviceGetHandleByIndex(index)

    def _metric(self, i: int, name: str, fn: Any, *args: Any) -> Any:
        """``fn(handle, *args)``, or None (and ``name`` marked unsupported) on any NVML error."""
        if name in self._unsupported[i]:
            return None
        try:
            return fn(self._handles[i], *args)
        except Exception as exc:  # noqa: BLE001
            self._unsupported[i][name] = f"{type(exc).__name__}: {exc}"
            return None

    def _counters(self, i: int) -> dict[str, Any]:
        nv = self._nvml
        energy = self._metric(i, "energy", nv.nvmlDeviceGetTotalEnergyConsumption)
        nvlink = None
        ids = [
            getattr(nv, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", 138),
            getattr(nv, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", 139),
        ]
        values = self._metric(i, "nvlink", nv.nvmlDeviceGetFieldValues, ids)
        if values is not None:
            parsed = [_field_value(v) for v in values]
            if all(p is not None for p in parsed):
                nvlink = parsed
            else:
                self._unsupported[i]["nvlink"] = "NVLink throughput fields not supported on this device"
        return {"energy_mj": energy, "nvlink_kib": nvlink}

    def _sample_all(self) -> None:
        nv = self._nvml
        t = time.perf_counter() - self._t0
        for i in range(len(self._handles)):
            util = self._metric(i, "utilization", nv.nvmlDeviceGetUtilizationRates)
            mem = self._metric(i, "memory", nv.nvmlDeviceGetMemoryInfo)
            power = self._metric(i, "power", nv.nvmlDeviceGetPowerUsage)
            tx = self._metric(
                i, "pcie", nv.nvmlDeviceGetPcieThroughput, getattr(nv, "NVML_PCIE_UTIL_TX_BYTES", 0)
            )
            rx = self._metric(
                i, "pcie", nv.nvmlDeviceGetPcieThroughput, getattr(nv, "NVML_PCIE_UTIL_RX_BYTES", 1)
            )
            self._samples[i].append(
                {
                    "t": t,
                    "util_gpu": None if util is None else float(util.gpu),
                    "util_mem": None if util is None else float(util.memory),
                    "mem_used": None if mem is None else float(mem.used),
                    "mem_total": None if mem is None else float(mem.total),
                    "power_w": None if power is None else power / 1e3,
                    "pcie_tx": None if tx is None else tx * 1e3,
                    "pcie_rx": None if rx is None else rx * 1e3,
                }
            )

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            with contextlib.suppress(Exception):  # keep sampling what still works
                self._sample_all()

    def _summary(self, i: int, end: dict[str, Any], duration: float) -> dict[str, Any]:
        samples = self._samples[i]
        start = self._start_counters[i]

        def stats(key: str) -> dict[str, float] | None:
            xs = [s[key] for s in samples if s[key] is not None]
            return {"mean": sum(xs) / len(xs), "max": max(xs)} if xs else None

        energy = None
        if start["energy_mj"] is not None and end["energy_mj"] is not None:
            energy = (end["energy_mj"] - start["energy_mj"]) / 1e3
        nvlink_tx = nvlink_rx = None
        if start["nvlink_kib"] is not None and end["nvlink_kib"] is not None:
            nvlink_tx = (end["nvlink_kib"][0] - start["nvlink_kib"][0]) * 1024.0
            nvlink_rx = (end["nvlink_kib"][1] - start["nvlink_kib"][1]) * 1024.0
        mem_total = next((s["mem_total"] for s in samples if s["mem_total"] is not None), None)
        return {
            "device": str(self.devices[i]),
            "name": self._names[i],
            "n_samples": len(samples),
            "utilization_gpu_pct": stats("util_gpu"),
            "utilization_memory_pct": stats("util_mem"),
            "memory_used_bytes": stats("mem_used"),
            "memory_total_bytes": mem_total,
            "power_w": stats("power_w"),
            "energy_j": energy,
            "mean_power_from_energy_w": energy / duration if energy is not None and duration > 0 else None,
            "nvlink_tx_bytes": nvlink_tx,
            "nvlink_rx_bytes": nvlink_rx,
            "pcie_tx_bytes_per_s": stats("pcie_tx"),
            "pcie_rx_bytes_per_s": stats("pcie_rx"),
            "unsupported": dict(self._unsupported[i]),
            "series": {key: [s[key] for s in samples] for key in ("t", "util_gpu", "mem_used", "power_w")},
        }


def _call(fn: Any, *args: Any) -> Any:
    return fn(*args)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _field_value(v: Any) -> float | None:
    """The value of an ``nvmlFieldValue_t`` (None when its return code is an error)."""
    if getattr(v, "nvmlReturn", 0) != 0:
        return None
    value = getattr(v, "value", None)
    if value is None:
        return None
    # nvmlValueType_t: 0 double, 1 unsigned int, 2 unsigned long, 3 unsigned long long,
    # 4 signed long long, 5 signed int
    attr = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal"}.get(
        getattr(v, "valueType", 3), "ullVal"
    )
    return float(getattr(value, attr, getattr(value, "ullVal", 0)))
