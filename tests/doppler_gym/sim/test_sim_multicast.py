"""``SimConfig(multicast="teccl")``: one TE-CCL multicast per producer instead of point-to-point copies.

Covered: the default is ``"p2p"``; a hand-checked fan-out (one producer, consumers on three devices
of a 4-GPU ring) where the consumers start at the multicast delays and the two-hop consumer earlier
than under p2p; agreement with the general model's pure-Python oracle (``general_reference.py``)
when each edge's transfer time is the multicast delay; ``simulate`` == ``simulate_batch`` per row,
with and without jitter; boundary errors.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.multicast import edge_times, timer_for
from doppler_gym.sim.packed_layout import Meta
from doppler_gym.sim.packing import pack
from tests.doppler_gym.sim.general_reference import reference_simulate, transfer_time
from tests.doppler_gym.sim.sim_dag_helpers import random_edges

pytest.importorskip("ortools")

BW, LAT, SPEED = 1e10, 1e-6, 1e13  # [B/s], [s], [FLOP/s]
N = 2**26  # [B]


def _ring4() -> dg.Topology:
    return dg.Topology.ring(4, speed=SPEED, memory=16e9, bandwidth=BW, latency=LAT, name="ring4-sim")


RING = _ring4()
DGX1 = dg.Topology.preset("v100x8-dgx1")


def _fan() -> DataflowGraph:
    """Op 0 feeds ops 1, 2, 3 (1e9 FLOPs each = 0.1 ms on the ring's devices)."""
    return DataflowGraph(src=np.array([0, 0, 0]), dst=np.array([1, 2, 3]), flops=np.full(4, 1e9),
                         out_bytes=np.array([N, 0.0, 0.0, 0.0]), name="fan")


def _random_dag(n: int, seed: int) -> DataflowGraph:
    rng, src, dst = random_edges(n, seed)
    order = np.lexsort((dst, src))
    return DataflowGraph(src=src[order], dst=dst[order], flops=rng.uniform(1e8, 5e9, n),
                         out_bytes=rng.uniform(1e5, 5e7, n), name=f"dag{seed}")


def test_default_is_p2p():
    cfg = dg.SimConfig()
    assert cfg.multicast == "p2p" and dg.SimConfig.reference().multicast == "p2p"
    meta = pack(_fan(), RING, 4, cfg).meta
    assert meta[Meta.EDGE_TIMES] == 0


def test_fan_out_on_ring_by_hand():
    """C = 2 (see test_comm_multicast): consumers on 1 and 3 get the data at n/BW + LAT, on 2 at
    n/BW + 2 LAT; p2p gives device 2 two store-and-forward hops, 2 (LAT + n/BW)."""
    g, a = _fan(), np.array([0, 1, 2, 3])
    comp = 1e9 / SPEED
    p2p = dg.simulate(g, a, topology=RING)
    tec = dg.simulate(g, a, topology=RING, config=dg.SimConfig(multicast="teccl", multicast_chunks=2))
    expect = comp + np.array([N / BW + LAT, N / BW + 2 * LAT, N / BW + LAT])
    assert tec.start[1:] == pytest.approx(expect, rel=1e-12)
    assert tec.end[1:] == pytest.approx(expect + comp, rel=1e-12)
    assert p2p.start[2] == pytest.approx(comp + 2 * (LAT + N / BW), rel=1e-12)
    assert tec.makespan < p2p.makespan - 0.9 * N / BW
    # one chunk: whole tensors along a tree, the same times as p2p here
    one = dg.simulate(g, a, topology=RING, config=dg.SimConfig(multicast="teccl"))
    assert one.end == pytest.approx(p2p.end, rel=1e-12)
    # all on one device: nothing moves, both models agree
    same = np.zeros(4, np.int32)
    assert dg.simulate(g, same, topology=RING, config=dg.SimConfig(multicast="teccl")).makespan == \
        dg.simulate(g, same, topology=RING).makespan


def replayed_delays(schedule, nbytes: float) -> np.ndarray:
    """``(n_nodes,)`` [s]: when each node holds every chunk of a one-source multicast schedule,
    its sends replayed at ``nbytes`` by the documented rules (a second implementation, written
    from the text of :mod:`doppler_gym.comm.multicast`): sends in (epoch, commodity, link) order;
    a send starts once its chunk is at the link's tail and the link's previous send is done,
    occupies the link for chunk / capacity, and the chunk is at the head ``alpha`` later."""
    topo, demand = schedule.topology, schedule.demand
    chunk = nbytes / demand.output_chunks
    at = {(int(c), int(demand.source[c])): 0.0 for c in range(demand.n_commodities)}
    link_done: dict[int, float] = {}
    for c, ln, _epoch in sorted(map(tuple, schedule.sends.tolist()), key=lambda x: (x[2], x[0], x[1])):
        begin = max(at[(c, int(topo.src[ln]))], link_done.get(ln, 0.0))
        link_done[ln] = begin + chunk / topo.capacity[ln]
        head = (c, int(topo.dst[ln]))
        at[head] = min(at.get(head, np.inf), link_done[ln] + topo.alpha[ln])
    out = np.full(topo.n_nodes, np.inf)
    for node in range(topo.n_nodes):
        times = [at.get((c, node), np.inf) for c in range(demand.n_commodities)]
        out[node] = max(times)
    return out


@pytest.mark.parametrize(("chunks", "queue_order", "streams"), [(1, "fifo", 1), (2, "fifo", 1), (2, "priority", 2)])
def test_matches_reference_with_multicast_edge_times(chunks, queue_order, streams):
    """The kernel in teccl mode is the general model with each cross-device edge's transfer time
    replaced by its multicast delay (the oracle gets that as an edge factor delay / p2p time).

    The delays come from the solved TE-CCL schedule of each producer's multicast (a CP-SAT solve:
    no hand figure exists for random DAGs on a DGX-1), replayed here by :func:`replayed_delays`,
    not by the timer; ``edge_times`` must give each edge exactly that delay."""
    cfg = dg.SimConfig(multicast="teccl", multicast_chunks=chunks, queue_order=queue_order, streams=streams)
    g = _random_dag(14, seed=chunks)
    prio = np.random.default_rng(3).permutation(g.n_ops).astype(np.float64)
    rng = np.random.default_rng(7)
    timer = timer_for(DGX1, cfg)
    for _ in range(4):
        a = rng.integers(0, 8, g.n_ops).astype(np.int32)
        cross = a[g.src] != a[g.dst]
        delay = np.zeros(g.n_edges)  # same-device edges move nothing
        for u in np.unique(g.src[cross]).tolist():
            mine = np.flatnonzero(cross & (g.src == u))
            plan = timer.plan(int(a[u]), np.unique(a[g.dst[mine]]), float(g.out_bytes[u]))
            assert dg.comm.validate(plan.schedule).ok
            assert plan.schedule.topology.n_nodes == 8  # comm node d is device d (no switches)
            delay[mine] = replayed_delays(plan.schedule, float(g.out_bytes[u]))[a[g.dst[mine]]]
        np.testing.assert_allclose(edge_times(g, a[None, :], timer)[0], delay, rtol=1e-12)
        p2p = np.array([transfer_time(g, e, a[g.src[e]], a[g.dst[e]], DGX1, "topology") for e in range(g.n_edges)])
        factor = np.where(p2p > 0, delay / np.where(p2p > 0, p2p, 1.0), 1.0)
        ref = reference_simulate(g, a, topology=DGX1, priorities=prio, config=cfg, edge_factor=factor)
        got = dg.simulate(g, a, topology=DGX1, priorities=prio, config=cfg)
        np.testing.assert_allclose(got.end, ref.end, rtol=1e-9)
        np.testing.assert_allclose(got.makespan, ref.makespan, rtol=1e-9)


@pytest.mark.parametrize("jitter", [0.0, 0.3])
def test_simulate_batch_agrees(jitter):
    cfg = dg.SimConfig(multicast="teccl", transfer_jitter=jitter, compute_jitter=jitter, seed=3)
    g = _random_dag(12, seed=5)
    rng = np.random.default_rng(11)
    batch = rng.integers(0, 8, (5, g.n_ops)).astype(np.int32)
    got = dg.simulate_batch(g, batch, topology=DGX1, config=cfg)
    if jitter == 0.0:
        np.testing.assert_allclose(got, [dg.simulate(g, row, topology=DGX1, config=cfg).makespan for row in batch],
                                   rtol=1e-12)
    else:  # row b of a batch draws its own factors; a one-row batch draws simulate's
        for row in batch:
            np.testing.assert_allclose(dg.simulate_batch(g, row[None, :], topology=DGX1, config=cfg),
                                       [dg.simulate(g, row, topology=DGX1, config=cfg).makespan], rtol=1e-12)
        np.testing.assert_array_equal(got, dg.simulate_batch(g, batch, topology=DGX1, config=cfg))  # determinism
    p2p = dg.simulate_batch(g, batch, topology=DGX1, config=dg.SimConfig(transfer_jitter=jitter,
                                                                         compute_jitter=jitter, seed=3))
    assert not np.allclose(got, p2p, rtol=1e-12)  # the option changes something on this DAG


def test_topology_none_is_uniform():
    g = _random_dag(8, seed=2)
    a = np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int32)
    cfg = dg.SimConfig(multicast="teccl")
    # uniform = every pair directly linked: a one-chunk multicast is one direct copy per device
    assert dg.simulate(g, a, config=cfg).makespan == pytest.approx(dg.simulate(g, a).makespan, rel=1e-12)


def test_config_errors():
    with pytest.raises(ValueError, match="multicast must be one of"):
        dg.SimConfig(multicast="nccl")
    with pytest.raises(ValueError, match="cost_model='topology'"):
        dg.SimConfig(multicast="teccl", cost_model="raw")
    with pytest.raises(ValueError, match="link_model='ideal'"):
        dg.SimConfig(multicast="teccl", link_model="fifo")
    with pytest.raises(ValueError, match="multicast_chunks"):
        dg.SimConfig(multicast_chunks=0)
    with pytest.raises(ValueError, match="multicast_epoch"):
        dg.SimConfig(multicast_epoch="medium")
    with pytest.raises(ValueError, match="multicast_epoch"):
        dg.SimConfig(multicast_epoch=-1.0)
    with pytest.raises(ValueError, match="multicast_time_limit"):
        dg.SimConfig(multicast_time_limit=0)


def test_missing_solver_is_a_clear_error(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ortools" else real(name, *a))
    topo = dg.Topology.uniform(3, name="uniform3-nosolver")  # a fresh topology: no cached timer
    cfg = dg.SimConfig(multicast="teccl")
    with pytest.raises(ImportError, match="pip install"):
        dg.simulate(_fan(), np.array([0, 1, 2, 1]), topology=topo, config=cfg)
