"""GPU-only checks of the real backend (CUDA streams and events, NVML). Skipped without a GPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import doppler_gym as dg
from envs_real import RealBackend, calibrate, fidelity
from envs_real import materialize as materialize_mod
from envs_real.materialize import reference_outputs
from tests.envs_real.real_helpers import (
    assert_dependencies,
    assert_wc_order,
    cost_only_graph,
    nvml_probe,
    placements,
    small_ffnn,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)"
    ),
]


@pytest.mark.parametrize(
    "config", [dg.SimConfig(), dg.SimConfig(queue_order="priority"), dg.SimConfig(streams=2)]
)
def test_cuda_outputs_equal_single_device_reference(config):
    w = small_ffnn()
    g = w.graph
    be = RealBackend("cuda", repeats=2, warmup=1, keep_outputs=True, workload=w)
    ref = reference_outputs(be.materialized(g))  # on the CPU
    prio = np.random.default_rng(0).permutation(g.n_ops).astype(float)
    for a in placements(g.n_ops, 4):  # 4 logical devices: streams stand in on a single GPU
        tr = be.execute(g, dg.Topology.uniform(4), a, prio, config)
        assert tr.error is None, tr.error
        for v in range(g.n_ops):
            torch.testing.assert_close(be.last_outputs[v], ref[v], rtol=1e-4, atol=1e-4)
        assert_dependencies(g, tr)
        assert_wc_order(a, be.last_report.ready_seq, be.last_report.pick_seq, config.queue_order, prio)


def test_cuda_event_timing_and_monitor():
    g = cost_only_graph("paper")
    be = RealBackend("cuda", repeats=3, warmup=1, op_timing=True, monitor=True, synthetic_scale=1.0)
    tr = be.execute(g, dg.Topology.uniform(2), np.arange(g.n_ops) % 2, None, dg.SimConfig())
    assert tr.error is None and tr.report.timing == "cuda-events"
    assert np.all(tr.end >= tr.start)
    # the monitor is available exactly when NVML, asked directly, answers for GPU 0; then it sampled
    # each physical GPU the two logical devices ran on, whose memory held the run's CUDA context
    stage, detail = nvml_probe()
    mon = tr.report.monitor
    assert mon["available"] is (stage == "ok"), (stage, detail, mon.get("reason"))
    if stage == "ok":
        used = sorted(set(be.devices.mapping(2)))
        assert [d["device"] for d in mon["devices"]] == used
        for dev in mon["devices"]:
            assert dev["n_samples"] >= 1 and dev["memory_used_bytes"]["max"] > 0
            assert dev["memory_total_bytes"] >= dev["memory_used_bytes"]["max"]
    else:
        assert str(detail) in mon["reason"]


def test_cuda_failure_frees_memory(monkeypatch):
    g = small_ffnn().graph

    def oom(operands, eq):
        raise torch.OutOfMemoryError("CUDA out of memory (injected)")

    monkeypatch.setitem(materialize_mod.TORCH_OPS, "relu", oom)
    be = RealBackend("cuda", repeats=1, warmup=0)
    before = torch.cuda.memory_allocated()
    tr = be.execute(g, dg.Topology.uniform(2), np.arange(g.n_ops) % 2, None, dg.SimConfig())
    assert tr.report.error_kind == "out_of_memory"
    assert torch.cuda.memory_allocated() <= before


def test_cuda_calibration_and_fidelity():
    g = cost_only_graph("paper")
    be = RealBackend("cuda", repeats=3, warmup=1, synthetic_scale=1.0)
    cal = calibrate(g, backend=be, n_devices=2, reps=3)
    rep = fidelity(cal, be, n_random=2)
    assert np.all(np.isfinite(rep.measured)) and np.isfinite(rep.mean_relative_error)
