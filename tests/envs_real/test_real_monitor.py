"""NVML monitor: a clear "unavailable" without NVML, and correct figures from a fake NVML."""

from __future__ import annotations

import sys
import time
import types

import numpy as np
import pytest

import doppler_gym as dg
from envs_real import NvmlMonitor, RealBackend
from tests.envs_real.real_helpers import nvml_probe


class _NVMLError(Exception):
    pass


def fake_pynvml(n: int = 2, nvlink: bool = True) -> types.ModuleType:
    """A minimal stand-in for nvidia-ml-py: counters that advance with every call."""
    m = types.ModuleType("pynvml")
    state = {"init": 0, "energy": [1000.0] * n, "nvlink": [[0.0, 0.0] for _ in range(n)]}
    m.NVMLError = _NVMLError
    m.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, m.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 138, 139
    m.NVML_PCIE_UTIL_TX_BYTES, m.NVML_PCIE_UTIL_RX_BYTES = 0, 1

    def init():
        state["init"] += 1

    def shutdown():
        state["init"] -= 1

    def energy(h):
        state["energy"][h] += 500.0  # +0.5 J per call
        return state["energy"][h]

    def fields(h, ids):
        if not nvlink:
            raise _NVMLError("Not Supported")
        state["nvlink"][h][0] += 4.0
        state["nvlink"][h][1] += 2.0
        return [
            types.SimpleNamespace(
                nvmlReturn=0, valueType=3, value=types.SimpleNamespace(ullVal=state["nvlink"][h][k])
            )
            for k in range(2)
        ]

    m.nvmlInit, m.nvmlShutdown = init, shutdown
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetName = lambda h: b"Fake GPU"
    m.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=50 + 10 * h, memory=20)
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=1e9, total=8e10, free=7.9e10)
    m.nvmlDeviceGetPowerUsage = lambda h: 300_000  # mW

    def pcie(h, counter):
        raise _NVMLError("Not Supported")

    m.nvmlDeviceGetPcieThroughput = pcie
    m.nvmlDeviceGetTotalEnergyConsumption = energy
    m.nvmlDeviceGetFieldValues = fields
    m.fake_state = state
    return m


def test_fake_nvml_figures(monkeypatch):
    fake = fake_pynvml(2)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with NvmlMonitor([0, 1], interval_s=0.01) as mon:
        time.sleep(0.05)
    rep = mon.report
    assert rep["available"] is True and rep["reason"] is None
    assert fake.fake_state["init"] == 0  # shut down again
    d0, d1 = rep["devices"]
    assert d0["name"] == "Fake GPU" and d0["n_samples"] >= 2
    assert d0["utilization_gpu_pct"] == {"mean": 50.0, "max": 50.0}
    assert d1["utilization_gpu_pct"]["max"] == 60.0
    assert d0["power_w"]["mean"] == pytest.approx(300.0)
    assert d0["memory_used_bytes"]["max"] == 1e9 and d0["memory_total_bytes"] == 8e10
    assert d0["energy_j"] == pytest.approx(0.5)  # one counter read at start, one at stop
    assert d0["nvlink_tx_bytes"] == 4 * 1024 and d0["nvlink_rx_bytes"] == 2 * 1024
    assert d0["pcie_tx_bytes_per_s"] is None and "pcie" in d0["unsupported"]


def test_fake_nvml_without_nvlink(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(1, nvlink=False))
    rep = NvmlMonitor([0], interval_s=0.01).start().stop()
    assert rep["available"] and rep["devices"][0]["nvlink_tx_bytes"] is None
    assert "nvlink" in rep["devices"][0]["unsupported"]


def test_missing_package_is_reported(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    rep = NvmlMonitor(["cuda:0"]).start().stop()
    assert rep["available"] is False and "nvidia-ml-py" in rep["reason"]


def test_nvml_init_failure_is_reported(monkeypatch):
    fake = fake_pynvml(1)

    def fail():
        raise _NVMLError("NVML Shared Library Not Found")

    fake.nvmlInit = fail
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    rep = NvmlMonitor([0]).start().stop()
    assert rep["available"] is False and "nvmlInit failed" in rep["reason"] and "Not Found" in rep["reason"]


def test_real_nvml_on_this_machine_agrees_with_nvml():
    """The monitor on GPU 0 of this machine reports what NVML, asked directly, says: the GPU's name
    and memory when NVML works, else the stage that failed and NVML's own message."""
    stage, detail = nvml_probe()
    rep = NvmlMonitor([0], interval_s=0.01).start().stop()
    assert rep["available"] is (stage == "ok"), (stage, detail, rep.get("reason"))
    if stage == "ok":
        name, total = detail
        dev = rep["devices"][0]
        assert dev["name"] == name and dev["memory_total_bytes"] == total and dev["n_samples"] >= 1
        assert rep["reason"] is None
    else:
        expected = {"import": "nvidia-ml-py is not installed", "init": "nvmlInit failed",
                    "handle": "could not find the NVML device"}[stage]
        assert expected in rep["reason"] and str(detail) in rep["reason"]
        assert rep["devices"] == []


def test_cpu_devices_report_why():
    assert "CPU" in NvmlMonitor(["cpu"]).start().stop()["reason"]
    assert NvmlMonitor([]).start().stop()["available"] is False
    g = dg.workloads.make("ffnn", batch=16, d_in=16, hidden=16, layers=1, blocks=2)
    be = RealBackend("cpu:2", repeats=1, warmup=0, monitor=True)
    tr = be.execute(g, dg.Topology.uniform(2), np.zeros(g.n_ops, int), None, dg.SimConfig())
    assert tr.error is None
    assert tr.report.monitor["available"] is False and "NVML" in tr.report.monitor["reason"]
