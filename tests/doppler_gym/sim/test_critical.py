"""critical_chain: the ops whose timing sets the makespan, checked by hand on a small run and, on
random runs, against the makespan's own sensitivity: lengthening an op on the chain by a little
lengthens the run by as much; lengthening an op off it changes nothing (float costs drawn at random,
so no two event times tie)."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.sim.critical import critical_chain

from .sim_dag_helpers import random_edges

RAW = dg.SimConfig(cost_model="raw", link_model="ideal")  # an op's time is its flops, a transfer's its out_bytes


def _graph(src, dst, flops, out_bytes, name="g") -> dg.DataflowGraph:
    return dg.DataflowGraph(src=np.array(src, dtype=np.int64), dst=np.array(dst, dtype=np.int64),
                            flops=np.array(flops, dtype=np.float64), out_bytes=np.array(out_bytes, dtype=np.float64),
                            name=name)


def test_by_hand_the_device_then_the_data_binds():
    # op 0 (3) and op 1 (1) on device 0, op 2 (5) on device 1, op 3 (2) on device 0 needs 2's output
    # (transfer 1): 0 runs 0-3, 1 runs 3-4 (device 0 held it back), 2 runs 0-5, 3 starts at 6 (data).
    g = _graph([0, 2], [1, 3], [3, 1, 5, 2], [0, 0, 1, 0])
    trace = dg.sim.simulate(g, np.array([0, 0, 1, 0]), 2, config=RAW)
    assert trace.makespan == pytest.approx(8.0)
    assert critical_chain(g, trace).tolist() == [2, 3]
    # now the device binds: op 3 also waits for ops 0 and 1 (0-3, 3-4) but 2 is short (0-1, arrives 2)
    g = _graph([2], [3], [3, 1, 1, 2], [0, 0, 1, 0])
    trace = dg.sim.simulate(g, np.array([0, 0, 1, 0]), 2, config=RAW)
    assert trace.makespan == pytest.approx(6.0)
    assert critical_chain(g, trace).tolist() == [0, 1, 3]


@pytest.mark.parametrize("seed", range(6))
def test_the_chain_is_what_the_makespan_is_sensitive_to(seed):
    rng, src, dst = random_edges(30, seed)
    flops = rng.uniform(1.0, 10.0, 30)
    out_bytes = rng.uniform(0.5, 3.0, 30)
    assignment = rng.integers(0, 3, 30)
    base = dg.sim.simulate(_graph(src, dst, flops, out_bytes), assignment, 3, config=RAW)
    chain = set(critical_chain(_graph(src, dst, flops, out_bytes), base).tolist())
    assert base.end[max(chain, key=lambda v: base.end[v])] == base.makespan
    delta = 1e-6
    for v in range(30):
        longer = flops.copy()
        longer[v] += delta
        grown = dg.sim.simulate(_graph(src, dst, longer, out_bytes), assignment, 3, config=RAW).makespan - base.makespan
        assert grown == pytest.approx(delta if v in chain else 0.0, abs=delta * 1e-3), (v, sorted(chain))


def test_each_link_of_the_chain_is_tight_on_a_paper_graph():
    g = dg.instances.resolve_graph("paper/llama-layer")
    config = dg.instances.default_config(g)
    topo = dg.instances.resolve_topology(4)
    trace = dg.sim.simulate(g, dg.baselines.heft(g, topo, config).assignment, topo, config=config)
    chain = critical_chain(g, trace)
    assert trace.start[chain[0]] == 0.0 and trace.end[chain[-1]] == trace.makespan
    edges = set(zip(g.src.tolist(), g.dst.tolist()))
    for a, b in zip(chain[:-1], chain[1:]):
        same_device = trace.assignment[a] == trace.assignment[b]
        assert (a, b) in edges or (same_device and trace.end[a] == pytest.approx(trace.start[b], rel=1e-9))


def test_a_graph_without_ops_and_a_trace_of_another_graph():
    g = _graph([], [], [], [])
    assert critical_chain(g, dg.sim.simulate(g, np.zeros(0, dtype=np.int64), 2, config=RAW)).size == 0
    other = _graph([0], [1], [1.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="trace has 2 ops"):
        critical_chain(_graph([], [], [1.0], [1.0]), dg.sim.simulate(other, np.zeros(2, dtype=np.int64), 2, config=RAW))
