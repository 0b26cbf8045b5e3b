"""RealBackend on CPU worker threads: same math as one device, dependencies, the WC order,
failures and timeouts, the Backend protocol and the trace format."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest
import torch

import doppler_gym as dg
from doppler_gym.envs.backend import Backend
from envs_real import RealBackend, RealExecutionError, RealTrace
from envs_real import materialize as materialize_mod
from envs_real.materialize import reference_outputs
from tests.envs_real.real_helpers import assert_dependencies, assert_wc_order, cost_only_graph, placements, small_ffnn

FIFO = dg.SimConfig()
PRIORITY = dg.SimConfig(queue_order="priority")


def backend(n: int = 3, **kw) -> RealBackend:
    kw.setdefault("repeats", 1)
    kw.setdefault("warmup", 0)
    return RealBackend(f"cpu:{n}", **kw)


def test_is_a_backend():
    be = backend()
    assert isinstance(be, Backend) and be.name == "real"


@pytest.mark.parametrize(
    "config", [FIFO, PRIORITY, dg.SimConfig(streams=2)], ids=["fifo", "priority", "2lanes"]
)
def test_outputs_equal_single_device_reference(config):
    w = small_ffnn()
    g, topo = w.graph, dg.Topology.uniform(3)
    be = backend(keep_outputs=True, workload=w)
    ref = reference_outputs(be.materialized(g))
    prio = np.random.default_rng(0).permutation(g.n_ops).astype(float)
    for a in placements(g.n_ops, 3):
        tr = be.execute(g, topo, a, prio, config)
        assert tr.error is None
        for v in range(g.n_ops):
            assert torch.equal(be.last_outputs[v], ref[v]), f"op {v} differs under placement {a}"
        assert_dependencies(g, tr)
        assert_wc_order(a, be.last_report.ready_seq, be.last_report.pick_seq, config.queue_order, prio)
    # and the assembled output is the untiled computation
    _, want = w.evaluate(seed=0)
    got = w.assemble({v: t.double().numpy() for v, t in be.last_outputs.items()})
    np.testing.assert_allclose(got["Y"], want["Y"], rtol=1e-4, atol=1e-5)


def test_cost_only_graph_runs_synthetic_ops():
    g = cost_only_graph("paper")
    be = backend(keep_outputs=True)
    ref = reference_outputs(be.materialized(g))
    for a in placements(g.n_ops, 3, seed=1):
        tr = be.execute(g, dg.Topology.uniform(3), a, None, FIFO)
        assert tr.error is None and be.last_report.synthetic_ops == g.n_ops
        assert all(torch.equal(be.last_outputs[v], ref[v]) for v in range(g.n_ops))
        assert_dependencies(g, tr)
        assert_wc_order(a, be.last_report.ready_seq, be.last_report.pick_seq, "fifo")


def test_single_device_priority_order_matches_the_simulator():
    """One device, one lane, distinct priorities: the start order is fully determined."""
    g = small_ffnn().graph
    rng = np.random.default_rng(7)
    for _ in range(3):
        prio = rng.permutation(g.n_ops).astype(float)
        a = np.zeros(g.n_ops, np.int64)
        tr = backend(1).execute(g, dg.Topology.uniform(1), a, prio, PRIORITY)
        sim = dg.simulate(g, a, dg.Topology.uniform(1), prio, PRIORITY)
        np.testing.assert_array_equal(np.argsort(tr.start), np.argsort(sim.start))


def test_lanes_bound_concurrency_per_device():
    g = cost_only_graph("paper")
    be = backend(2)
    tr = be.execute(g, dg.Topology.uniform(2), np.arange(g.n_ops) % 2, None, dg.SimConfig(streams=2))
    for d in range(2):
        ops = np.flatnonzero(tr.assignment == d)
        for v in ops:  # at most 2 ops of a device overlap any instant
            t = tr.start[v]
            assert np.sum((tr.start[ops] <= t) & (tr.end[ops] > t)) <= 2


def test_trace_format_and_median():
    w = small_ffnn()
    be = backend(repeats=3, warmup=1)
    a = np.arange(w.graph.n_ops) % 3
    tr = be.execute(w.graph, dg.Topology.uniform(3), a, None, FIFO)
    rep = be.last_report
    assert isinstance(tr, RealTrace) and tr.report is rep and tr.error is None
    assert len(rep.makespans) == 3 and len(rep.warmup_makespans) == 1
    assert tr.makespan == pytest.approx(np.median(rep.makespans))
    assert tr.time_unit == "s" and tr.n_devices == 3
    assert tr.start.shape == tr.end.shape == (w.graph.n_ops,)
    assert tr.edge_start.shape == (w.graph.n_edges,)
    np.testing.assert_array_equal(tr.assignment, a)
    assert any("not GPU timings" in n for n in rep.notes)
    assert tr.report.monitor["available"] is False
    # the time divisor of a topology config scales reported times
    tr2 = be.execute(w.graph, dg.Topology.uniform(3), a, None, dg.SimConfig(time_divisor=1e-3))
    assert tr2.time_unit == "s/0.001"  # milliseconds
    assert tr2.makespan == pytest.approx(np.median(be.last_report.makespans) / 1e-3)
    assert tr2.makespan == pytest.approx(np.nanmax(tr2.end))


def test_bad_inputs_raise():
    g = small_ffnn().graph
    be, topo = backend(), dg.Topology.uniform(2)
    with pytest.raises(ValueError, match="shape"):
        be.execute(g, topo, np.zeros(3, int), None, FIFO)
    with pytest.raises(ValueError, match="has 2 devices"):
        be.execute(g, topo, np.full(g.n_ops, 2), None, FIFO)
    with pytest.raises(ValueError, match="priorities"):
        be.execute(g, topo, np.zeros(g.n_ops, int), None, PRIORITY)
    with pytest.raises(ValueError, match="repeats"):
        RealBackend("cpu:2", repeats=0)
    with pytest.raises(ValueError, match="on_error"):
        RealBackend("cpu:2", on_error="ignore")


def _patch_op(monkeypatch, fn_name: str, replacement):
    monkeypatch.setitem(materialize_mod.TORCH_OPS, fn_name, replacement)


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (RuntimeError("mat1 and mat2 shapes cannot be multiplied"), "op_failed"),
        (torch.OutOfMemoryError("out of memory"), "out_of_memory"),
    ],
)
def test_failing_op_ends_the_run_with_a_clear_error(monkeypatch, exc, kind):
    w = small_ffnn()
    g = w.graph
    seen = []

    def boom(operands, equation):
        seen.append(weakref.ref(operands[0]))
        raise type(exc)(*exc.args)

    _patch_op(monkeypatch, "relu", boom)
    be = backend(repeats=2)  # the default timeout (60 s) is far away: the failure itself ends the run
    tr = be.execute(g, dg.Topology.uniform(3), np.arange(g.n_ops) % 3, None, FIFO)
    rep = be.last_report
    assert tr.makespan == float("inf") and tr.error == rep.error
    assert rep.error_kind == kind and g.kinds[rep.failed_op] == "relu"
    assert f"op {rep.failed_op} ({g.op_name(rep.failed_op)}) on device" in rep.error
    assert np.isnan(tr.end[rep.failed_op])
    # the run stopped there: nothing downstream of the failed op started, every thread exited
    below, stack = set(), [rep.failed_op]
    while stack:
        for s in g.successors(stack.pop()).tolist():
            if s not in below:
                below.add(s)
                stack.append(s)
    assert below and np.all(np.isnan(tr.start[sorted(below)]))
    assert rep.leaked_threads == 0
    gc.collect()
    assert seen and all(r() is None for r in seen), "the run's tensors were not freed"
    info = rep.as_info()
    assert info["error"] == rep.error and info["error_kind"] == kind
    # the same failure raises on request
    with pytest.raises(RealExecutionError, match="failed") as err:
        backend(on_error="raise").execute(g, dg.Topology.uniform(3), np.zeros(g.n_ops, int), None, FIFO)
    assert err.value.report.error_kind == kind


class StuckThirdOp:
    """Stand-in for the synthetic kernel whose third call is held until :meth:`release` (60 s at
    most: a safety net, the tests release it themselves); the other calls run the real kernel."""

    def __init__(self, original) -> None:
        self.original = original
        self.calls = 0
        self.held = threading.Event()  # the third call is inside its kernel
        self.go = threading.Event()
        self.done = threading.Event()  # the third call returned

    def __call__(self, operands, m):
        self.calls += 1
        if self.calls == 3:
            self.held.set()
            self.go.wait(60)
            out = self.original(operands, m)
            self.done.set()
            return out
        return self.original(operands, m)

    def release(self) -> None:
        self.go.set()
        assert self.done.wait(30), "the held op never finished"
        for t in threading.enumerate():  # its worker exits without starting another op
            if t.name.startswith("envs_real-"):
                t.join(30)
                assert not t.is_alive(), f"{t.name} still running after the run was cancelled"


def test_timeout_cancels_the_run(monkeypatch):
    """A run past ``timeout_s`` ends at the deadline, not when its stuck op ends: it returns while
    the op is still held, reports that op's thread as leaked, and starts no op after it. One device,
    one lane: ops run one by one, so the first two are done and the third is the stuck one."""
    g = cost_only_graph("paper")
    original = materialize_mod.synthetic_matmul
    stuck = StuckThirdOp(original)
    monkeypatch.setattr(materialize_mod, "synthetic_matmul", stuck)
    be = backend(2, timeout_s=0.3)
    tr = be.execute(g, dg.Topology.uniform(2), np.zeros(g.n_ops, int), None, FIFO)
    assert stuck.held.is_set() and not stuck.done.is_set()  # returned with the op still in its kernel
    rep = be.last_report
    assert rep.error_kind == "timeout" and tr.makespan == float("inf")
    assert f"with 2 of {g.n_ops} ops done" in tr.error
    assert rep.leaked_threads == 1
    stuck.release()
    assert stuck.calls == 3  # cancelled: no op started after the deadline, not even once the third ended

    stuck = StuckThirdOp(original)
    monkeypatch.setattr(materialize_mod, "synthetic_matmul", stuck)
    try:
        with pytest.raises(RealExecutionError, match="timeout") as err:
            backend(2, timeout_s=0.3, on_error="raise").execute(
                g, dg.Topology.uniform(2), np.zeros(g.n_ops, int), None, FIFO
            )
        assert not stuck.done.is_set() and err.value.report.error_kind == "timeout"
    finally:
        stuck.release()
    assert stuck.calls == 3


def test_failure_makespan_option(monkeypatch):
    g = cost_only_graph("paper")
    monkeypatch.setattr(
        materialize_mod, "synthetic_matmul", lambda operands, m: (_ for _ in ()).throw(ValueError("bad shape"))
    )
    tr = backend(failure_makespan=123.0).execute(
        g, dg.Topology.uniform(2), np.zeros(g.n_ops, int), None, FIFO
    )
    assert tr.makespan == 123.0 and "ValueError: bad shape" in tr.error


def test_bound_graph_runs_its_source():
    g = cost_only_graph("paper")
    other = dg.DataflowGraph(g.src, g.dst, g.flops * 7, g.out_bytes, name="calibrated", units="physical")
    be = backend(keep_outputs=True)
    be.bind(other, source=g)
    assert be.source(other) is g
    be.execute(other, dg.Topology.uniform(2), np.zeros(g.n_ops, int), None, FIFO)
    ref = reference_outputs(be.materialized(g))
    assert all(torch.equal(be.last_outputs[v], ref[v]) for v in range(g.n_ops))
    with pytest.raises(ValueError, match="same DAG"):
        be.bind(small_ffnn().graph, source=g)
