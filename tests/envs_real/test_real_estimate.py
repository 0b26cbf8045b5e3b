"""Pre-run estimates and limits of the real backend: a GPU-sized workload is refused before anything is
allocated, with the estimate and how to shrink it; estimates match a hand computation."""

from __future__ import annotations

import resource

import gymnasium as gym
import numpy as np
import pytest

import doppler_gym as dg
import envs_real  # noqa: F401  registers nothing itself; Doppler-Real-v0 is registered by doppler_gym
from envs_real import RealBackend
from envs_real.estimate import (
    COPY_BANDWIDTH,
    COPY_LATENCY_S,
    MEMORY_BANDWIDTH,
    OP_OVERHEAD_S,
    WorkloadTooLarge,
    estimate_run,
)
from tests.envs_real.real_helpers import small_ffnn

SPEED = 1e9  # [FLOP/s] given, so the estimate is a hand computation


def chain_graph(n: int = 3, side: int = 8) -> dg.DataflowGraph:
    """``x_{k+1} = x_k @ w_k``: op 0 reads two externals, each later op its predecessor and a weight."""
    from doppler_gym.graph.spec import OpSpec

    specs = [OpSpec("einsum", ((side, side), (side, side)), (-1, -1), (side, side), "ij,jk->ik")]
    specs += [
        OpSpec("einsum", ((side, side), (side, side)), (k - 1, -1), (side, side), "ij,jk->ik") for k in range(1, n)
    ]
    return dg.DataflowGraph(
        src=np.arange(n - 1), dst=np.arange(1, n), flops=np.full(n, 2.0 * side**3),
        out_bytes=np.full(n, 4.0 * side * side), specs=tuple(specs), name="chain", units="physical",
    )


def test_estimate_matches_a_hand_computation():
    n, side = 3, 8
    g = chain_graph(n, side)
    tile = 4.0 * side * side  # [B]
    flops = 2.0 * side**3
    # one device: ops in sequence; op 0 touches 2 externals + output, later ops 1 external + input + output
    touched = [3 * tile, 3 * tile, 3 * tile]
    per_op = [flops / SPEED + t / MEMORY_BANDWIDTH + OP_OVERHEAD_S for t in touched]
    est = estimate_run(g, 1, "cpu", runs=4, flops_per_s=SPEED)
    assert est.seconds_per_run == pytest.approx(sum(per_op), rel=1e-9)
    assert est.seconds == pytest.approx(4 * sum(per_op), rel=1e-9) and est.runs == 4
    assert est.flops == pytest.approx(n * flops)
    externals = (2 + (n - 1)) * tile
    assert est.memory_bytes == pytest.approx(externals + n * tile)  # no copies on one device
    # two devices, alternating: two copies, each after its producer (the chain stays serial)
    est2 = estimate_run(g, 2, "cpu", assignment=np.array([0, 1, 0]), flops_per_s=SPEED)
    per_dev_speed = SPEED * min(1.0, (__import__("os").cpu_count() or 1) / 2)
    per_op2 = [flops / per_dev_speed + t / MEMORY_BANDWIDTH + OP_OVERHEAD_S for t in touched]
    copy = COPY_LATENCY_S + tile / COPY_BANDWIDTH
    assert est2.seconds_per_run == pytest.approx(sum(per_op2) + 2 * copy, rel=1e-6)
    assert est2.memory_bytes == pytest.approx(externals + n * tile + 2 * tile)


def test_gpu_sized_workload_is_refused_before_allocating():
    """The issue's case: chainmm at its defaults on cpu:2 (11 TFLOP, 7 GB of operands per run)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # [KiB]
    with pytest.raises(WorkloadTooLarge) as err:
        gym.make("Doppler-Real-v0", graph="chainmm", devices="cpu:2")
    msg = str(err.value)
    est = err.value.estimate
    g = dg.workloads.make("chainmm")
    assert est.flops == pytest.approx(g.flops.sum())  # all its ops are spec'd: executed FLOPs = graph FLOPs
    operands = sum(
        np.prod(s) * 4 for sp in g.specs for s, src in zip(sp.operand_shapes, sp.operand_sources) if src == -1
    )
    assert est.memory_bytes >= operands > 5e9
    for part in ("estimated at", "GB of memory", "max_estimated_seconds=", "max_memory_bytes", "--param n=", "n=12288"):
        assert part in msg, f"{part!r} missing from: {msg}"
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown * 1024 < 1e9, f"the refused run still allocated {grown / 1e6:.2f} GB"


def test_limits_are_arguments_and_none_disables_them():
    w = small_ffnn()
    a = np.arange(w.graph.n_ops) % 2
    tight = RealBackend("cpu:2", repeats=1, warmup=0, max_estimated_seconds=1e-9)
    with pytest.raises(WorkloadTooLarge, match="max_estimated_seconds=1e-09"):
        tight.execute(w.graph, dg.Topology.uniform(2), a)
    assert tight.last_report is None  # refused before running
    small_mem = RealBackend("cpu:2", repeats=1, warmup=0, max_memory_bytes=1000)
    with pytest.raises(WorkloadTooLarge, match="memory limit"):
        small_mem.execute(w.graph, dg.Topology.uniform(2), a)
    free = RealBackend("cpu:2", repeats=1, warmup=0, max_estimated_seconds=None, max_memory_bytes=None)
    tr = free.execute(w.graph, dg.Topology.uniform(2), a)
    assert tr.error is None and free.last_report.estimate["memory_bytes"] > 0
    with pytest.raises(ValueError, match="max_memory_bytes"):
        RealBackend("cpu:2", max_memory_bytes=-1)


def test_progress_bar_on_request(capsys):
    w = small_ffnn()
    be = RealBackend("cpu:2", repeats=2, warmup=0, progress=True)
    be.execute(w.graph, dg.Topology.uniform(2), np.arange(w.graph.n_ops) % 2)
    assert "real runs of" in capsys.readouterr().err
    quiet = RealBackend("cpu:2", repeats=2, warmup=0)  # "auto": a run this small shows none
    quiet.execute(w.graph, dg.Topology.uniform(2), np.zeros(w.graph.n_ops, np.int64))
    assert "real runs of" not in capsys.readouterr().err
    envs_real.calibrate(w.graph, backend=be, n_devices=2, reps=1)  # calibration: a bar over the profiled ops
    assert "profiling the ops of" in capsys.readouterr().err


def test_cpu_monitor_reports_unavailable_with_reason():
    w = small_ffnn()
    for monitor in ("auto", True):
        be = RealBackend("cpu:2", repeats=1, warmup=0, monitor=monitor)
        be.execute(w.graph, dg.Topology.uniform(2), np.zeros(w.graph.n_ops, np.int64))
        mon = be.last_report.as_info()["monitor"]
        assert mon["available"] is False and "CPU devices" in mon["reason"]
    assert RealBackend("cpu:2").monitor is False  # "auto" samples NVML on GPUs only


def test_gpu_backends_monitor_by_default_without_needing_a_gpu_to_decide():
    from envs_real.devices import DeviceSet

    gpu = DeviceSet("cuda", ("cuda:0", "cuda:1"), "cuda:0,1")  # as parse_devices builds it on a GPU host
    assert RealBackend(gpu).monitor is True and RealBackend(gpu, monitor=False).monitor is False
    nccl = DeviceSet("cuda", ("cuda:0", "cuda:1"), "nccl", dist="nccl")
    assert RealBackend(nccl).monitor is True
    with pytest.raises(ValueError, match="monitor"):
        RealBackend("cpu:2", monitor="yes")
