"""The CUDA executor's event loop, run on CPU tensors with a fake ``torch.cuda`` (streams, events).

Kernels run at launch on the CPU; fake events report completion only after a random number of
polls, so ops and copies complete out of launch order as on a GPU. This exercises the loop's
bookkeeping (readiness, the WC order, copies, failures, timeouts) without a GPU; the real CUDA
calls are exercised by the ``gpu`` tests.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
import pytest
import torch

from envs_real.executor_cuda import CudaStreams, run_cuda
from envs_real.materialize import external_tensors, materialize, reference_outputs
from envs_real.plan import PlacedGraph
from tests.envs_real.real_helpers import assert_dependencies, assert_wc_order, cost_only_graph, placements, small_ffnn


class FakeCuda:
    """Patches torch.cuda with streams and events that complete after a few polls."""

    def __init__(self, seed: int = 0, max_polls: int = 4) -> None:
        self.rng = np.random.default_rng(seed)
        self.max_polls = max_polls
        self.hang = False
        self.fail_query_after: int | None = None
        self.queries = 0
        self.emptied = 0
        fake = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.t = None
                self.left = 0

            def record(self, stream=None) -> None:
                self.t = time.perf_counter()
                self.left = int(fake.rng.integers(0, fake.max_polls + 1))

            def query(self) -> bool:
                fake.queries += 1
                if fake.fail_query_after is not None and fake.queries > fake.fail_query_after:
                    raise RuntimeError("CUDA error: an illegal memory access was encountered")
                if fake.hang:
                    return False
                self.left -= 1
                return self.left < 0

            def elapsed_time(self, end) -> float:
                return (end.t - self.t) * 1e3

        class Stream:
            def __init__(self, device=None, priority: int = 0) -> None:
                self.device = device

            def wait_event(self, event) -> None:
                assert event.t is not None, "waiting on an event that was never recorded"

        self.Event, self.Stream = Event, Stream

    def install(self, monkeypatch) -> None:
        cuda = torch.cuda
        monkeypatch.setattr(cuda, "Event", self.Event)
        monkeypatch.setattr(cuda, "Stream", self.Stream)
        monkeypatch.setattr(cuda, "stream", lambda s: contextlib.nullcontext())
        monkeypatch.setattr(cuda, "device", lambda d: contextlib.nullcontext())
        monkeypatch.setattr(cuda, "synchronize", lambda d=None: None)
        monkeypatch.setattr(cuda, "current_stream", lambda d=None: self.Stream(d))

        def empty_cache():
            self.emptied += 1

        monkeypatch.setattr(cuda, "empty_cache", empty_cache)


def run(
    graph,
    assignment,
    n_dev,
    fake,
    *,
    order="fifo",
    prio=None,
    lanes=1,
    depth=1,
    timeout=None,
    timing=False,
    mat=None,
):
    mat = mat or materialize(graph, synthetic_scale=1.0)
    placed = PlacedGraph.build(graph, np.asarray(assignment), n_dev)
    ext = external_tensors(mat, ["cpu"] * graph.n_ops)
    streams = CudaStreams(["cpu"] * n_dev, lanes)
    res = run_cuda(
        placed,
        mat,
        ext,
        streams,
        order=order,
        priorities=prio,
        timeout_s=timeout,
        keep_outputs=True,
        op_timing=timing,
        queue_depth=depth,
    )
    return res, mat


class _T:  # a Trace-like view for the shared dependency check
    def __init__(self, res, a):
        self.start, self.end, self.edge_start, self.edge_end = (
            res.start,
            res.end,
            res.edge_start,
            res.edge_end,
        )
        self.assignment = np.asarray(a)


@pytest.mark.parametrize(
    ("order", "lanes", "depth", "timing"),
    [("fifo", 1, 1, False), ("priority", 1, 1, False), ("fifo", 2, 1, True), ("priority", 1, 2, False)],
)
def test_fake_cuda_outputs_order_and_dependencies(monkeypatch, order, lanes, depth, timing):
    fake = FakeCuda(seed=lanes + depth)
    fake.install(monkeypatch)
    w = small_ffnn()
    g = w.graph
    mat = materialize(g)
    ref = reference_outputs(mat)
    prio = np.random.default_rng(2).permutation(g.n_ops).astype(float)
    for a in placements(g.n_ops, 3, seed=4):
        res, _ = run(g, a, 3, fake, order=order, prio=prio, lanes=lanes, depth=depth, timing=timing, mat=mat)
        assert res.error is None, res.error
        assert all(torch.equal(res.outputs[v], ref[v]) for v in range(g.n_ops))
        assert res.timing == ("cuda-events" if timing else "host")
        if not timing:  # host times: launch after arrival, observed completion after launch
            assert_dependencies(g, _T(res, a))
        if depth == 1:  # with queue_depth > 1 the order is committed at launch, still by the rule
            assert_wc_order(a, res.ready_seq, res.pick_seq, order, prio)
        assert res.makespan > 0


def test_fake_cuda_cost_only_graph(monkeypatch):
    fake = FakeCuda(seed=9)
    fake.install(monkeypatch)
    g = cost_only_graph("physical")
    res, mat = run(g, np.arange(g.n_ops) % 2, 2, fake)
    ref = reference_outputs(mat)
    assert res.error is None and all(torch.equal(res.outputs[v], ref[v]) for v in range(g.n_ops))
    remote = np.flatnonzero((np.arange(g.n_ops) % 2)[g.src] != (np.arange(g.n_ops) % 2)[g.dst])
    assert np.all(np.isfinite(res.edge_end[remote]))


def test_fake_cuda_launch_failure_cleans_up(monkeypatch):
    fake = FakeCuda()
    fake.install(monkeypatch)
    from envs_real import materialize as mm

    def oom(operands, eq):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setitem(mm.TORCH_OPS, "relu", oom)
    g = small_ffnn().graph
    res, _ = run(g, np.zeros(g.n_ops, int), 2, fake)
    assert res.error_kind == "out_of_memory" and g.kinds[res.failed_op] == "relu"
    assert "out of memory" in res.error and fake.emptied == 1
    assert np.isnan(res.makespan) and res.outputs is None


def test_fake_cuda_async_error_is_sticky(monkeypatch):
    fake = FakeCuda()
    fake.fail_query_after = 5
    fake.install(monkeypatch)
    g = small_ffnn().graph
    res, _ = run(g, np.arange(g.n_ops) % 2, 2, fake)
    assert res.error_kind == "op_failed" and "illegal memory access" in res.error
    assert "restart the process" in res.error


def test_fake_cuda_timeout(monkeypatch):
    fake = FakeCuda()
    fake.hang = True
    fake.install(monkeypatch)
    g = small_ffnn().graph
    t0 = time.perf_counter()
    res, _ = run(g, np.zeros(g.n_ops, int), 1, fake, timeout=0.2)
    # no hang: the fake never finishes, so ending at all (far below pytest's patience) is the timeout's doing
    assert time.perf_counter() - t0 < 60
    assert res.error_kind == "timeout" and fake.emptied == 1
