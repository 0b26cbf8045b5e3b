"""Helpers of the real-backend tests: small graphs, checks of dependencies and the WC rule, and a
direct NVML probe."""

from __future__ import annotations

import numpy as np

import doppler_gym as dg
from doppler_gym.processes import pid_alive


def gone(pid: int) -> bool:
    """Whether process ``pid`` no longer exists."""
    return not pid_alive(pid)


def small_ffnn() -> dg.workloads.Workload:
    """40 ops, 64-wide: fast on CPU."""
    return dg.workloads.build("ffnn", batch=64, d_in=64, hidden=64, layers=2, blocks=2)


def cost_only_graph(units: str = "paper") -> dg.DataflowGraph:
    """A paper-style graph (costs only): a diamond lattice of 12 ops with varied costs."""
    src = [0, 0, 1, 2, 3, 3, 4, 5, 6, 7, 8, 9, 10]
    dst = [1, 2, 3, 3, 4, 5, 6, 7, 8, 8, 9, 10, 11]
    rng = np.random.default_rng(3)
    flops = rng.uniform(1e4, 2e5, 12)
    if units == "paper":
        return dg.DataflowGraph(
            src=src, dst=dst, flops=flops, out_bytes=4 * flops, name="paperlike", units="paper"
        )
    return dg.DataflowGraph(src=src, dst=dst, flops=flops, out_bytes=rng.uniform(4e2, 4e4, 12), name="costs")


def placements(n_ops: int, n_dev: int, seed: int = 0) -> list[np.ndarray]:
    """All-on-one, round-robin, and two random placements."""
    rng = np.random.default_rng(seed)
    return [
        np.zeros(n_ops, np.int64),
        np.arange(n_ops) % n_dev,
        rng.integers(0, n_dev, n_ops),
        rng.integers(0, n_dev, n_ops),
    ]


def assert_dependencies(graph: dg.DataflowGraph, trace) -> None:
    """Every op starts after each input arrived; a transfer starts after its producer ended."""
    tol = 1e-9
    assert np.all(np.isfinite(trace.start)) and np.all(np.isfinite(trace.end))
    assert np.all(trace.end >= trace.start - tol)
    for k in range(graph.n_edges):
        u, v = int(graph.src[k]), int(graph.dst[k])
        assert trace.start[v] >= trace.end[u] - tol, f"op {v} started before its input {u} ended"
        if trace.assignment[u] != trace.assignment[v]:
            assert trace.edge_start[k] >= trace.end[u] - tol, f"edge {k} moved before op {u} ended"
            assert trace.start[v] >= trace.edge_end[k] - tol, f"op {v} started before edge {k} arrived"
        else:
            assert np.isnan(trace.edge_start[k])


def assert_wc_order(assignment, ready_seq, pick_seq, order: str, priorities=None) -> None:
    """When op b was picked, no op a waiting in the same device's queue was more urgent."""
    assignment = np.asarray(assignment)
    assert np.all(pick_seq >= 0) and np.all(ready_seq >= 0)
    assert np.all(ready_seq < pick_seq)
    for d in np.unique(assignment):
        ops = np.flatnonzero(assignment == d)
        for b in ops:
            waiting = ops[(ready_seq[ops] < pick_seq[b]) & (pick_seq[ops] > pick_seq[b])]
            for a in waiting:
                if order == "fifo":
                    assert ready_seq[a] > ready_seq[b], f"device {d}: op {b} overtook op {a}, ready earlier"
                else:
                    key_a, key_b = (priorities[a], ready_seq[a]), (priorities[b], ready_seq[b])
                    assert key_a > key_b, f"device {d}: op {b} picked while more urgent op {a} waited"


def nvml_probe() -> tuple[str, object]:
    """What NVML says about GPU 0 here, asked directly: ``("ok", (name, total memory [B]))``, or
    the stage that failed (``"import"``, ``"init"``, ``"handle"``) and the exception."""
    try:
        import pynvml
    except ImportError as exc:
        return "import", exc
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001  NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return "init", exc
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(h)
        return "ok", (name.decode() if isinstance(name, bytes) else str(name), pynvml.nvmlDeviceGetMemoryInfo(h).total)
    except Exception as exc:  # noqa: BLE001
        return "handle", exc
    finally:
        pynvml.nvmlShutdown()
