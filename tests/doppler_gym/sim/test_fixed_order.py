"""``SimConfig(queue_order="fixed")``: each device runs its ops in the given order and waits for the next one.

References: hand-computed toys, and a pure-Python list scheduler (one stream per device, ideal links, raw
costs: an op starts at the later of its device's previous end and its last input's arrival).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import doppler_gym as dg
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.fixed_order import device_ranks

RAW_FIXED = dg.SimConfig(cost_model="raw", queue_order="fixed")


def reference_fixed(graph: DataflowGraph, assign: np.ndarray, prio: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Start and end of each op under the fixed order (raw costs, one stream, ideal links); None on deadlock."""
    n = graph.n_ops
    seqs = {}
    for o in sorted(range(n), key=lambda o: (prio[o], o)):
        seqs.setdefault(int(assign[o]), []).append(o)
    preds = [[] for _ in range(n)]
    for s, d in zip(graph.src, graph.dst):
        preds[d].append(int(s))
    start, end = np.full(n, np.nan), np.full(n, np.nan)
    head = dict.fromkeys(seqs, 0)
    free = dict.fromkeys(seqs, 0.0)
    progress = True
    while progress:
        progress = False
        for d, seq in seqs.items():
            while head[d] < len(seq) and all(not np.isnan(end[p]) for p in preds[seq[head[d]]]):
                o = seq[head[d]]
                ready = max(
                    [end[p] + (graph.out_bytes[p] if assign[p] != d else 0.0) for p in preds[o]], default=0.0
                )
                start[o] = max(free[d], ready)
                end[o] = start[o] + graph.flops[o]
                free[d] = end[o]
                head[d] += 1
                progress = True
    return None if np.isnan(end).any() else (start, end)


def random_dag(rng: np.random.Generator, n: int, p: float) -> DataflowGraph:
    src, dst = [], []
    for j in range(n):
        for i in range(j):
            if rng.random() < p:
                src.append(i)
                dst.append(j)
    flops = rng.integers(1, 6, n).astype(float)
    out_bytes = rng.integers(0, 4, n).astype(float)
    return DataflowGraph(src=src, dst=dst, flops=flops, out_bytes=out_bytes)


def test_device_waits_for_its_next_op_although_another_is_ready():
    # op0 (2 units) and op2 (1 unit) on device 0; op2 needs op1 (device 1, 1 unit) whose output takes 3 to move.
    g = DataflowGraph(src=[1], dst=[2], flops=[2.0, 1.0, 1.0], out_bytes=[0.0, 3.0, 0.0])
    assign = np.array([0, 1, 0])
    fifo = dg.simulate(g, assign, topology=2, config=dg.SimConfig(cost_model="raw"))
    assert fifo.makespan == 5.0  # work-conserving: op0 runs 0-2 while op2 waits for its input (4)
    tr = dg.simulate(g, assign, topology=2, priorities=[5.0, 0.0, 1.0], config=RAW_FIXED)
    # fixed: device 0 runs op2 first; it arrives at 1 + 3 = 4, runs 4-5; only then op0 runs 5-7
    np.testing.assert_array_equal(tr.start, [5.0, 0.0, 4.0])
    np.testing.assert_array_equal(tr.end, [7.0, 1.0, 5.0])
    assert tr.makespan == 7.0
    assert tr.edge_end[0] == 4.0 and tr.edge_start[0] == 1.0  # the graph's one edge, nothing added


def test_no_priorities_means_op_id_order():
    g = DataflowGraph(src=[1], dst=[2], flops=[2.0, 1.0, 1.0], out_bytes=[0.0, 3.0, 0.0])
    tr = dg.simulate(g, np.array([1, 0, 1]), topology=2, config=RAW_FIXED)
    np.testing.assert_array_equal(tr.start, [0.0, 0.0, 4.0])


def test_two_streams_start_in_order_and_overlap():
    # One device, two streams, order a, b, c; b needs x (another device, arrives at 3); c is ready at once.
    g = DataflowGraph(src=[3], dst=[1], flops=[4.0, 1.0, 1.0, 1.0], out_bytes=[0.0, 0.0, 0.0, 2.0])
    cfg = dg.SimConfig(cost_model="raw", queue_order="fixed", streams=2)
    tr = dg.simulate(g, np.array([0, 0, 0, 1]), topology=2, priorities=[0, 1, 2, 0], config=cfg)
    # a runs 0-4 on one stream; the other waits for b (ready at 1 + 2 = 3); c gets the stream a frees at 4
    np.testing.assert_array_equal(tr.start[:3], [0.0, 3.0, 4.0])
    prio = dg.simulate(g, np.array([0, 0, 0, 1]), topology=2, priorities=[0, 1, 2, 0],
                       config=dg.SimConfig(cost_model="raw", queue_order="priority", streams=2))
    assert prio.start[2] == 0.0  # the work-conserving priority queue runs c at once


@pytest.mark.parametrize("seed", range(6))
def test_matches_reference_with_topological_priorities(seed):
    rng = np.random.default_rng(seed)
    g = random_dag(rng, 14, 0.25)
    prio = rng.permutation(g.n_ops).astype(float)
    prio = np.sort(prio)  # op ids are a topological order here: any increasing key is one too
    for _ in range(3):
        assign = rng.integers(0, 3, g.n_ops)
        want = reference_fixed(g, assign, prio)
        assert want is not None  # a topological order never deadlocks
        tr = dg.simulate(g, assign, topology=3, priorities=prio, config=RAW_FIXED)
        np.testing.assert_array_equal(tr.start, want[0])
        np.testing.assert_array_equal(tr.end, want[1])


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 10), devices=st.integers(1, 3))
def test_any_order_matches_reference_or_deadlocks(seed, n, devices):
    rng = np.random.default_rng(seed)
    g = random_dag(rng, n, 0.3)
    assign = rng.integers(0, devices, n)
    prio = rng.permutation(n).astype(float)  # any order, often not topological
    want = reference_fixed(g, assign, prio)
    topo = dg.Topology.uniform(devices)
    if want is None:
        with pytest.raises(ValueError, match="deadlocks"):
            dg.simulate(g, assign, topology=topo, priorities=prio, config=RAW_FIXED)
        with pytest.raises(ValueError, match=r"assignments\[1\].*deadlocks"):
            dg.simulate_batch(g, np.stack([np.zeros(n, int), assign]), topology=topo, priorities=np.stack(
                [np.arange(n, dtype=float), prio]), config=RAW_FIXED)
    else:
        tr = dg.simulate(g, assign, topology=topo, priorities=prio, config=RAW_FIXED)
        np.testing.assert_array_equal(tr.end, want[1])
        batch = dg.simulate_batch(g, np.stack([assign, assign]), topology=topo, priorities=prio, config=RAW_FIXED)
        np.testing.assert_array_equal(batch, [tr.makespan, tr.makespan])


def test_deadlock_message_names_the_device_and_op():
    g = DataflowGraph(src=[0], dst=[1], flops=[1.0, 1.0], out_bytes=[0.0, 0.0], names=("fwd", "bwd"))
    with pytest.raises(ValueError, match=r"device 0 waits for 'bwd' \(rank 0\)"):
        dg.simulate(g, np.array([0, 0]), topology=1, priorities=[1.0, 0.0], config=RAW_FIXED)


def test_device_ranks_by_priority_then_op_id():
    prio = np.array([[3.0, 1.0, 1.0, 0.0, 2.0]])
    assign = np.array([[0, 1, 0, 0, 1], [1, 1, 1, 1, 1]])
    ranks = device_ranks(prio, assign)
    np.testing.assert_array_equal(ranks[0], [2, 0, 1, 0, 1])  # device 0: op3, op2, op0; device 1: op1, op4
    np.testing.assert_array_equal(ranks[1], [4, 1, 2, 0, 3])  # one device: 3, 1, 2 (tie by id), 4, 0


def test_one_op_per_device_all_orders_agree():
    # With every op on its own device the order cannot matter: all three queue orders agree.
    rng = np.random.default_rng(3)
    g = random_dag(rng, 8, 0.4)
    assign = np.arange(8)
    ms = {q: dg.simulate(g, assign, topology=8, priorities=np.zeros(8),
                         config=dg.SimConfig(cost_model="raw", queue_order=q)).makespan
          for q in ("fifo", "priority", "fixed")}
    assert len(set(ms.values())) == 1


def test_device_count_topology():
    g = DataflowGraph(src=[0], dst=[1], flops=[1.0, 1.0], out_bytes=[0.0, 2.0])
    a = dg.simulate(g, np.array([0, 1]), topology=2, config=dg.SimConfig(cost_model="raw"))
    b = dg.simulate(g, np.array([0, 1]), topology=dg.Topology.uniform(2), config=dg.SimConfig(cost_model="raw"))
    assert a.makespan == b.makespan == 2.0
    with pytest.raises(ValueError, match="device count must be >= 1"):
        dg.simulate(g, np.array([0, 0]), topology=0)
