"""The ``pipeline`` workload: schedules simulated under ``queue_order="fixed"`` against the published formulas.

With unit costs (F = 1, a fused backward B = 2, split B = W = 1, so B + W is the fused backward) and no
communication, bubble time / work per device is (p - 1) / m for
GPipe (Huang et al. 2019) and 1F1B (Narayanan et al. 2021), (p - 1) / (v m) for interleaved 1F1B with v
chunks (same paper; m a multiple of p) and (p - 1) / (3 m) for ZB-H1 (Qi et al. 2024; split backward,
m >= p). Peak stashed microbatches on the first stage (F done, its B not yet): m for GPipe, min(p, m) for
1F1B.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import doppler_gym as dg
from doppler_gym.workloads import llama


def run(schedule: str, p: int, m: int, **kw) -> tuple[dg.workloads.Workload, dg.Trace]:
    w = dg.workloads.build("pipeline", stages=p, microbatches=m, schedule=schedule, unit_costs=True, **kw)
    return w, dg.simulate(w.graph, w.assignment, topology=p, priorities=w.priorities, config=w.config)


def bubble_ratio(tr: dg.Trace) -> np.ndarray:
    """``(p,)`` idle time / busy time of each device over the makespan."""
    busy = tr.device_busy
    return (tr.makespan - busy) / busy


def expected_ratio(schedule: str, p: int, m: int, v: int = 1) -> float:
    return {"gpipe": (p - 1) / m, "1f1b": (p - 1) / m, "zb-h1": (p - 1) / (3 * m),
            "interleaved": (p - 1) / (v * m)}[schedule]


def peak_stash(w: dg.workloads.Workload, tr: dg.Trace, stage: int) -> int:
    """Most microbatches whose F of virtual stage ``stage`` is done and whose B is not, at any time."""
    names = w.graph.names
    f_end = {n[2:-1].split(",")[1]: tr.end[i] for i, n in enumerate(names) if n.startswith(f"F[{stage},")}
    b_end = {n[2:-1].split(",")[1]: tr.end[i] for i, n in enumerate(names) if n.startswith(f"B[{stage},")}
    return max(sum(f_end[j] <= t < b_end[j] for j in f_end) for t in f_end.values())


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("p", "m"), [(1, 3), (2, 1), (2, 4), (3, 5), (4, 4), (4, 8), (5, 3), (6, 12)])
def test_gpipe_and_1f1b_bubble(schedule, p, m):
    _, tr = run(schedule, p, m)
    assert tr.makespan == 3 * m + 3 * (p - 1)  # work (F + B) m = 3m per device plus (p - 1)(F + B)
    np.testing.assert_allclose(bubble_ratio(tr), expected_ratio(schedule, p, m), rtol=1e-12)


@pytest.mark.parametrize(("p", "m"), [(1, 2), (2, 2), (2, 5), (3, 3), (3, 7), (4, 8), (5, 6), (6, 6)])
def test_zb_h1_bubble_is_a_third_of_1f1b(p, m):
    w, tr = run("zb-h1", p, m)
    assert (np.array(w.graph.kinds) == "wgrad").sum() == p * m
    assert tr.makespan == 3 * m + (p - 1)  # (p - 1)(F + B - W) = p - 1 with F = B = W = 1
    np.testing.assert_allclose(bubble_ratio(tr), expected_ratio("zb-h1", p, m), rtol=1e-12)
    _, one = run("1f1b", p, m, split_backward=True)
    assert tr.makespan < one.makespan or p == 1


@pytest.mark.parametrize(("p", "m", "v"), [(2, 2, 2), (2, 6, 3), (3, 6, 2), (4, 4, 2), (4, 8, 2), (4, 8, 4), (3, 9, 3)])
def test_interleaved_bubble(p, m, v):
    _, tr = run("interleaved", p, m, chunks=v)
    assert tr.makespan == 3 * v * m + 3 * (p - 1)  # chunks of one unit: bubble (p - 1)(F + B) of a chunk
    np.testing.assert_allclose(bubble_ratio(tr), expected_ratio("interleaved", p, m, v), rtol=1e-12)


@settings(max_examples=25, deadline=None)
@given(p=st.integers(1, 5), k=st.integers(1, 4), v=st.integers(1, 3),
       schedule=st.sampled_from(["gpipe", "1f1b", "zb-h1", "interleaved"]))
def test_bubble_formulas_any_p_m(p, k, v, schedule):
    m = k * p if schedule in ("interleaved", "zb-h1") else k + p - 2 or 1  # the papers' m >= p / p | m settings
    v = v if schedule == "interleaved" else 1
    _, tr = run(schedule, p, m, chunks=v)
    np.testing.assert_allclose(bubble_ratio(tr), expected_ratio(schedule, p, m, v), rtol=1e-12)


@pytest.mark.parametrize(("p", "m"), [(2, 3), (3, 6), (4, 8), (4, 2), (5, 7)])
def test_peak_stash_on_first_stage(p, m):
    gpipe_w, gpipe = run("gpipe", p, m)
    assert peak_stash(gpipe_w, gpipe, 0) == m
    w, tr = run("1f1b", p, m)
    assert peak_stash(w, tr, 0) == min(p, m)
    for s in range(p):  # stage s holds at most p - s (Megatron-LM's 1F1B memory argument)
        assert peak_stash(w, tr, s) == min(p - s, m)


def test_unit_costs_split_backward_adds_up_to_the_fused_one():
    fused, _ = run("1f1b", 3, 6)
    split, _ = run("1f1b", 3, 6, split_backward=True)
    kinds_f, kinds_s = np.array(fused.graph.kinds), np.array(split.graph.kinds)
    assert set(fused.graph.flops[kinds_f == "backward"]) == {2.0}  # the fused B: input and weight gradients
    assert set(split.graph.flops[kinds_s == "backward"]) == set(split.graph.flops[kinds_s == "wgrad"]) == {1.0}
    assert fused.graph.flops.sum() == split.graph.flops.sum() == 3 * 3 * 6
    # so ZB-H1 is faster than 1F1B, as Qi et al. publish: 3m + p - 1 against 3(m + p - 1)
    assert run("zb-h1", 4, 8)[1].makespan == 27 < run("1f1b", 4, 8)[1].makespan == 33


def test_design_contract_example():
    w = dg.workloads.build("pipeline", stages=4, microbatches=8, schedule="1f1b", unit_costs=True)
    tr = dg.simulate(w.graph, w.assignment, topology=4, priorities=w.priorities, config=w.config)
    assert tr.makespan == 33.0  # (F + B)(m + p - 1)
    assert w.config.queue_order == "fixed"
    np.testing.assert_array_equal(np.bincount(w.assignment), [16, 16, 16, 16])


def test_work_conserving_fifo_differs_from_the_schedule():
    # Under FIFO the devices are not bound to the schedule: GPipe's order is not what FIFO runs.
    w, tr = run("1f1b", 4, 8)
    fifo = dg.simulate(w.graph, w.assignment, topology=4, config=dg.SimConfig(cost_model="raw"))
    assert not np.array_equal(fifo.start, tr.start)


def test_priorities_are_topological_so_any_assignment_runs():
    w = dg.workloads.build("pipeline", stages=3, microbatches=4, schedule="zb-h1", unit_costs=True)
    assert np.all(w.priorities[w.graph.src] < w.priorities[w.graph.dst])
    rng = np.random.default_rng(0)
    assign = rng.integers(0, 3, (5, w.graph.n_ops))
    ms = dg.simulate_batch(w.graph, assign, topology=3, priorities=w.priorities, config=w.config)
    assert np.all(ms >= w.graph.flops.sum() / 3)  # the work bound; no deadlock was raised


def test_layer_costs():
    p, v, layers = 2, 2, 8
    w = dg.workloads.build("pipeline", stages=p, microbatches=4, schedule="interleaved", chunks=v, layers=layers,
                           micro_batch=1, seq=128, d_model=256, n_heads=4, ffn_hidden=512, dtype="bfloat16")
    layer = llama.build_layer(batch=1, seq=128, d_model=256, n_heads=4, ffn_hidden=512, blocks=1).graph
    kinds = np.array(w.graph.kinds)
    forward = layer.flops.sum() * layers / (p * v)
    np.testing.assert_allclose(w.graph.flops[kinds == "forward"], forward)
    np.testing.assert_allclose(w.graph.flops[kinds == "backward"], 2 * forward)
    np.testing.assert_array_equal(w.graph.flops[kinds == "send"], 0.0)
    moved = (kinds == "send") | (kinds == "backward")
    np.testing.assert_array_equal(w.graph.out_bytes[moved], 128 * 256 * 2)  # one bf16 activation per microbatch
    assert w.graph.precisions == ("bf16",) * w.graph.n_ops
    assert w.config.cost_model == "topology" and w.config.queue_order == "fixed"
    params_per_chunk = (256 + 4 * 256 * 256 + 256 + 3 * 256 * 512) * layers // (p * v)  # norms, attention, MLP
    holders = np.flatnonzero(w.graph.persistent_bytes)
    assert [w.graph.names[i] for i in holders] == [f"F[{c},0]" for c in range(p * v)]
    np.testing.assert_array_equal(w.graph.persistent_bytes[holders], params_per_chunk * (2 + 2 + 4 + 4 + 4))  # Adam
    tr = dg.simulate(w.graph, w.assignment, topology=dg.Topology.uniform(p), priorities=w.priorities,
                     config=w.config)
    assert tr.makespan >= 4 * v * 3 * forward / dg.Topology.uniform(p).speed[0]  # each device's work


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"schedule": "zero"}, "schedule must be one of"),
    ({"schedule": "1f1b", "chunks": 2}, "needs schedule='interleaved'"),
    ({"schedule": "interleaved", "chunks": 2, "microbatches": 6}, "multiple of stages"),
    ({"schedule": "zb-h1", "split_backward": False}, "needs split_backward=True"),
    ({"stages": 0}, "stages must be an integer >= 1"),
    ({"layers": 30}, "divisible by stages"),
])
def test_bad_arguments(kwargs, match):
    args = {"stages": 4, "microbatches": 8, **kwargs}
    with pytest.raises(ValueError, match=match):
        dg.workloads.build("pipeline", **args)
