"""The list kernel (``doppler_gym.sim.list_kernel``) agrees bit for bit with the event loop, which it stands in for.

``test_reference_parity.py`` checks ``simulate`` (the list kernel, wherever it applies) against SimPy
itself; here both kernels run on the same packed problems, so every model the list kernel serves is
covered: raw and topology costs, heterogeneous devices, multi-hop routes, jitter, many same-time ties,
and the two ways back to the event loop (zero-work ops at packing, a duration that rounds to zero).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.api import jitter_factors
from doppler_gym.sim.event_loop import alloc_workspace, run
from doppler_gym.sim.packed_layout import Meta
from doppler_gym.sim.packing import list_kernel_applies, pack
from tests.doppler_gym.sim.sim_dag_helpers import random_edges

REF = dg.SimConfig.reference()


def _event_loop(graph, assignment, topology, config, row=0, rows=1):
    """``(makespan, times)`` of the event loop :func:`~doppler_gym.sim.event_loop.run` on ``pack``'s problem, with row
    ``row`` of the jitter factors that ``simulate_batch`` draws for ``rows`` assignments."""
    n_devices = topology.n_devices if topology is not None else int(assignment.max()) + 1
    problem = pack(graph, topology, n_devices, config)
    comp_factor, edge_factor = jitter_factors(graph, config, rows=rows)
    times = np.empty(2 * graph.n_ops + 2 * graph.n_edges)
    makespan = run(
        problem.meta, problem.ints, problem.floats, np.zeros(graph.n_ops), comp_factor[row], edge_factor[row],
        assignment.astype(np.int32), times, alloc_workspace(problem.meta),
    )
    return makespan, times


def _times(trace):
    return np.concatenate([trace.start, trace.end, trace.edge_start, trace.edge_end])


def _tied_dag(n: int, seed: int) -> DataflowGraph:
    """A random DAG with costs from {1, 2} x 1e9 (so most events share a timestamp with another)."""
    rng, src, dst = random_edges(n, seed)
    return DataflowGraph(
        src=src, dst=dst,
        flops=rng.integers(1, 3, n).astype(np.float64) * 1e9,
        out_bytes=rng.integers(1, 3, n).astype(np.float64) * 1e9,
    )


CASES = {
    "reference": (None, REF),
    "uniform topology": (dg.Topology.uniform(4), dg.SimConfig()),
    "dgx1 (heterogeneous routes)": (dg.Topology.preset("v100x8-dgx1"), dg.SimConfig()),
    "two nodes": (dg.Topology.preset("h100x8-nvswitch"), dg.SimConfig(time_divisor=1e-3)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_list_kernel_matches_the_event_loop(case):
    topology, config = CASES[case]
    assert list_kernel_applies(_tied_dag(5, 0), config)
    ties = 0
    for seed in range(12):
        g = _tied_dag(60, seed)
        if config.cost_model == "topology":  # costs as FLOPs and bytes of paper-like sizes
            g = DataflowGraph(src=g.src, dst=g.dst, flops=g.flops * 1e3, out_bytes=g.out_bytes * 1e1)
        n_devices = topology.n_devices if topology is not None else 4
        rng = np.random.default_rng(seed)
        placements = (rng.integers(0, n_devices, g.n_ops), np.arange(g.n_ops) % n_devices, np.zeros(g.n_ops, int))
        for a in placements:
            trace = dg.simulate(g, a, topology=topology, config=config)
            makespan, times = _event_loop(g, a, topology, config)
            assert trace.makespan == makespan, f"{case} seed {seed}"
            np.testing.assert_array_equal(_times(trace), times / config.time_divisor)
            batch = dg.simulate_batch(g, a[None, :], topology=topology, config=config)
            assert batch[0] == makespan
            ties += len(trace.start) - len(np.unique(trace.end))
    assert ties > 30, f"the cases must exercise same-time events ({ties} shared end times)"


def test_list_kernel_matches_the_event_loop_with_jitter():
    topology = dg.Topology.preset("v100x8-dgx1")
    config = dg.SimConfig(compute_jitter=0.3, transfer_jitter=0.2, seed=5)
    g = _tied_dag(80, 3)
    g = DataflowGraph(src=g.src, dst=g.dst, flops=g.flops * 1e3, out_bytes=g.out_bytes * 1e1)
    assignments = np.random.default_rng(0).integers(0, 8, (6, g.n_ops))
    batch = dg.simulate_batch(g, assignments, topology=topology, config=config)
    for row, a in enumerate(assignments):
        makespan, _ = _event_loop(g, a, topology, config, row=row, rows=len(assignments))
        assert batch[row] == makespan


def test_zero_work_ops_use_the_event_loop():
    """Zero-work ops break the list kernel's order argument: packing sends the graph to the event loop."""
    g = DataflowGraph(src=np.array([0, 1]), dst=np.array([1, 2]), flops=np.array([1.0, 0.0, 1.0]),
                      out_bytes=np.ones(3))
    assert not list_kernel_applies(g, REF)
    assert pack(g, None, 2, REF).meta[Meta.LIST_KERNEL] == 0
    a = np.array([0, 1, 0])
    assert dg.simulate(g, a, config=REF).makespan == _event_loop(g, a, None, REF)[0]


def test_a_duration_that_rounds_to_zero_falls_back_to_the_event_loop():
    """A positive duration can vanish next to a large start time (1e20 + 1 == 1e20 in float64)."""
    g = DataflowGraph(src=np.array([0, 0, 1]), dst=np.array([1, 2, 2]), flops=np.array([1e20, 1.0, 3.0]),
                      out_bytes=np.array([1.0, 1.0, 1.0]))
    a = np.array([0, 0, 1])
    trace = dg.simulate(g, a, config=REF)
    makespan, times = _event_loop(g, a, None, REF)
    assert trace.end[1] == trace.start[1]  # op 1 took no time at all
    assert trace.makespan == makespan
    np.testing.assert_array_equal(_times(trace), times / REF.time_divisor)
    assert dg.simulate_batch(g, a[None, :], config=REF)[0] == makespan


@pytest.mark.parametrize(
    "config",
    [replace(REF, streams=2), replace(REF, link_model="fifo"), replace(REF, queue_order="priority")],
    ids=["two streams", "fifo links", "priority queues"],
)
def test_other_models_use_the_event_loop(config):
    assert not list_kernel_applies(_tied_dag(5, 0), config)


def test_a_wide_frontier_turns_the_queue_into_a_heap():
    """A star whose consumers alternate between late (other device) and early (same device) arrivals:
    queueing an early one would scan past every late one, so past ``SORTED_SCAN_LIMIT`` the queue
    becomes a heap; the run still agrees with the event loop, ties included."""
    from doppler_gym.sim.list_kernel import SORTED_SCAN_LIMIT

    n_consumers = 8 * SORTED_SCAN_LIMIT
    rng = np.random.default_rng(0)
    g = DataflowGraph(
        src=np.zeros(n_consumers, dtype=np.int64), dst=np.arange(1, n_consumers + 1),
        flops=rng.integers(1, 3, n_consumers + 1).astype(np.float64), out_bytes=np.full(n_consumers + 1, 2.0),
    )
    for a in (np.arange(g.n_ops) % 4, rng.integers(0, 4, g.n_ops)):
        trace = dg.simulate(g, a, config=REF)
        makespan, times = _event_loop(g, a, None, REF)
        assert trace.makespan == makespan
        np.testing.assert_array_equal(_times(trace), times / REF.time_divisor)
