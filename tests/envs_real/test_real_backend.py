"""RealBackend on CPU worker threads: same math as one device, dependencies, the WC order,
failures and timeouts, the Backend protocol and the trace format."""

from __future__ import annotations

import gc
import time
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
    be = backend(repeats=2)
    t0 = time.perf_counter()
    tr = be.execute(g, dg.Topology.uniform(3), np.arange(g.n_ops) % 3, None, FIFO)
    assert time.perf_counter() - t0 < 5
    rep = be.last_report
    assert tr.makespan == float("inf") and tr.error == rep.error
    assert rep.error_kind == kind and g.kinds[rep.failed_op] == "relu"
    assert f"op {rep.failed_op} ({g.op_name(rep.failed_op)}) on device" in rep.error
    assert np.isnan(tr.end[rep.failed_op])
    gc.collect()
    assert seen and all(r() is None for r in seen), "the run's tensors were not freed"
    info = rep.as_info()
    assert info["error"] == rep.error and info["error_kind"] == kind
    # the same failure raises on request
    with pytest.raises(RealExecutionError, match="failed") as err:
        backend(on_error="raise").execute(g, dg.Topology.uniform(3), np.zeros(g.n_ops, int), None, FIFO)
    assert err.value.report.error_kind == kind


def test_timeout_returns_promptly(monkeypatch):
    g = cost_only_graph("paper")

    original = materialize_mod._synthetic
    calls = []

    def sometimes_slow(operands, m):
        calls.append(1)
        if len(calls) == 3:
            time.sleep(1.5)
        return original(operands, m)

    monkeypatch.setattr(materialize_mod, "_synthetic", sometimes_slow)
    be = backend(2, timeout_s=0.3)
    t0 = time.perf_counter()
    tr = be.execute(g, dg.Topology.uniform(2), np.zeros(g.n_ops, int), None, FIFO)
    elapsed = time.perf_counter() - t0
    assert elapsed < 1.4, f"the timeout did not return promptly ({elapsed:.2f} s)"
    assert be.last_report.error_kind == "timeout" and "timeout" in tr.error
    assert tr.makespan == float("inf")
    with pytest.raises(RealExecutionError, match="timeout"):
        calls.clear()
        backend(2, timeout_s=0.3, on_error="raise").execute(
            g, dg.Topology.uniform(2), np.zeros(g.n_ops, int), None, FIFO
        )
    time.sleep(1.3)  # let the leaked (daemon) workers finish their op before the next test


def test_failure_makespan_option(monkeypatch):
    g = cost_only_graph("paper")
    monkeypatch.setattr(
        materialize_mod, "_synthetic", lambda operands, m: (_ for _ in ()).throw(ValueError("bad shape"))
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
