"""Collective ops (kinds in ``dg.COLLECTIVE_KINDS``) in the simulator.

Covered: under ``multicast="p2p"`` (and the reference model) a collective op is an ordinary op;
under ``"teccl"``, by hand on a 4-GPU ring, the op waits for its last contribution (barrier) with
free in-edges, and every consumer, one on its own device too, starts the collective's time after
it; a group of one costs nothing; broadcast takes its root from its single producer (and names
the op when it has not exactly one); ordinary multicasts in the same graph skip the collective's
device; ``simulate_batch`` equals single calls; the schedule cache is reused; workloads with
``collectives=True``; the env and the CLI.
"""

from __future__ import annotations

import importlib.util
import json

import gymnasium as gym
import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.comm import multicast as mc
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.multicast import edge_times, timer_for
from tests.doppler_gym.sim.sim_dag_helpers import random_edges

needs_ortools = pytest.mark.skipif(importlib.util.find_spec("ortools") is None,
                                   reason="multicast='teccl' needs OR-Tools (pip install doppler-gym[solvers])")

BW, LAT, SPEED = 1e10, 1e-6, 1e13  # [B/s], [s], [FLOP/s]
N = 2**26  # [B] a power of two: its own size bucket
F = 1e9  # [FLOP] 0.1 ms on a ring device
RING = dg.Topology.ring(4, speed=SPEED, memory=16e9, bandwidth=BW, latency=LAT, name="ring4-coll")
TECCL = dg.SimConfig(multicast="teccl")


def _tp(kind: str = "allgather", kinds: bool = True) -> DataflowGraph:
    """Ops 0 and 1 (F and 2F FLOPs) feed op 2 (the collective: 1e8 FLOPs, N bytes out), which feeds
    ops 3 and 4 (F each)."""
    return DataflowGraph(src=np.array([0, 1, 2, 2]), dst=np.array([2, 2, 3, 4]),
                         flops=np.array([F, 2 * F, 1e8, F, F]), out_bytes=np.array([N, N, N, 0.0, 0.0]),
                         kinds=("einsum", "einsum", kind, "relu", "relu") if kinds else None, name="tp")


def _time(kind: str, group: list[int], size: float = N, root: int | None = None) -> float:
    return timer_for(RING, TECCL).collective_time(kind, group, size, root=root)


def test_p2p_ignores_collective_kinds():
    a = np.array([0, 1, 2, 0, 3], np.int32)
    for cfg in (dg.SimConfig(), dg.SimConfig(link_model="fifo")):
        got = dg.simulate(_tp("allreduce"), a, topology=RING, config=cfg)
        plain = dg.simulate(_tp(kinds=False), a, topology=RING, config=cfg)
        np.testing.assert_array_equal(got.end, plain.end)
        np.testing.assert_array_equal(got.edge_start, plain.edge_start)
    ref = dg.SimConfig.reference()
    makespan = dg.simulate(_tp("allreduce"), a, config=ref).makespan
    assert makespan == dg.simulate(_tp(kinds=False), a, config=ref).makespan


@needs_ortools
def test_allgather_by_hand():
    """Ops 0 and 2 and both consumers on device 0, op 1 on its ring neighbour 1: G = {0, 1}. The
    collective starts when op 1 (the slower contribution) ends, 2F / SPEED, its in-edge from device
    1 free; both consumers (on its own device) start LAT + (N/2) / BW after it ends. Under p2p op 1's
    output is copied to device 0 first and nothing waits after op 2."""
    g, a = _tp("allgather"), np.array([0, 1, 0, 0, 0], np.int32)
    tr = dg.simulate(g, a, topology=RING, config=TECCL)
    t = LAT + N / 2 / BW
    assert _time("allgather", [0, 1]) == pytest.approx(t, rel=1e-12)
    assert tr.start[2] == pytest.approx(2 * F / SPEED, rel=1e-12)  # barrier: the last contribution
    assert tr.end[2] == pytest.approx(2 * F / SPEED + 1e8 / SPEED, rel=1e-12)
    assert tr.start[3] == pytest.approx(tr.end[2] + t, rel=1e-12)  # same device, still waits T
    assert tr.start[4] == pytest.approx(tr.end[3], rel=1e-12)  # one stream: after op 3
    np.testing.assert_allclose(tr.edge_end[2:], tr.end[2] + t, rtol=1e-12)
    assert tr.edge_end[1] == tr.end[1]  # the contribution stays in place
    p2p = dg.simulate(g, a, topology=RING)
    assert p2p.start[2] == pytest.approx(2 * F / SPEED + LAT + N / BW, rel=1e-12)
    assert p2p.start[3] == p2p.end[2]


@needs_ortools
@pytest.mark.parametrize("kind", ["reduce-scatter", "allreduce", "alltoall"])
def test_kinds_over_three_devices(kind):
    """Consumers on devices 0 and 3 of a collective on 2 with a producer on 1: G = {0, 1, 2, 3}, and
    each consumer starts the collective's time after the op ends.

    The times by hand on the 4-ring (one chunk per member's share, c = its bytes / BW): every member
    needs a share from the member opposite, two hops away, so no schedule beats 2 c + 2 LAT, and
    two epochs reach it (each directed link carries one 1-hop and one 2-hop share, the relay sent
    after the link's own share): ALLTOALL (shares N/4) 2 (N/4) / BW + 2 LAT; REDUCE-SCATTER (the
    ALLGATHER of 4 shards of N, run backwards) 2 N / BW + 2 LAT; ALLREDUCE (reduce-scatter then
    allgather of shares N/4) 2 (2 (N/4) / BW + 2 LAT)."""
    g, a = _tp(kind), np.array([1, 1, 2, 0, 3], np.int32)
    tr = dg.simulate(g, a, topology=RING, config=TECCL)
    t = {"alltoall": 2 * (N / 4) / BW + 2 * LAT, "reduce-scatter": 2 * N / BW + 2 * LAT,
         "allreduce": 2 * (2 * (N / 4) / BW + 2 * LAT)}[kind]
    assert _time(kind, [0, 1, 2, 3]) == pytest.approx(t, rel=1e-12)
    np.testing.assert_allclose(tr.start[3:], tr.end[2] + t, rtol=1e-12)
    assert tr.start[2] == pytest.approx(tr.end[1], rel=1e-12)  # the in-edges from device 1 are free


@needs_ortools
def test_group_of_one_costs_nothing():
    g, a = _tp("allreduce"), np.zeros(5, np.int32)
    tr = dg.simulate(g, a, topology=RING, config=TECCL)
    np.testing.assert_array_equal(tr.end, dg.simulate(g, a, topology=RING).end)
    assert np.isnan(tr.edge_start).all()  # nothing moved


@needs_ortools
def test_broadcast_root_is_its_producer():
    g = DataflowGraph(src=np.array([0, 1, 1]), dst=np.array([1, 2, 3]), flops=np.array([F, 0.0, F, F]),
                      out_bytes=np.array([N, N, 0.0, 0.0]), kinds=("einsum", "broadcast", "relu", "relu"), name="bc")
    a = np.array([1, 0, 1, 2], np.int32)  # root on device 1, the op on 0: G = {0, 1, 2}
    tr = dg.simulate(g, a, topology=RING, config=TECCL)
    t = _time("broadcast", [0, 1, 2], root=1)
    assert t >= LAT + N / BW
    np.testing.assert_allclose(tr.start[2:], F / SPEED + t, rtol=1e-12)
    bad = DataflowGraph(src=np.array([0, 1, 2]), dst=np.array([2, 2, 3]), flops=np.ones(4), out_bytes=np.ones(4),
                        kinds=("x", "x", "broadcast", "x"), names=("a", "b", "bcast", "c"), name="bad")
    with pytest.raises(ValueError, match=r"graph 'bad': broadcast op 'bcast' \(op 2\) has 2 producers"):
        dg.simulate(bad, np.array([0, 1, 2, 3]), topology=RING, config=TECCL)
    dg.simulate(bad, np.array([0, 1, 2, 3]), topology=RING)  # p2p: an ordinary op


@needs_ortools
def test_ordinary_multicast_skips_the_collective():
    """Op 0 feeds the collective (op 2, device 2) and op 3 (device 3): its multicast goes to device 3
    only; op 1's edge into the collective is free."""
    g = DataflowGraph(src=np.array([0, 0, 1, 2]), dst=np.array([2, 3, 2, 4]), flops=np.full(5, F),
                      out_bytes=np.full(5, float(N)), kinds=("e", "e", "allgather", "e", "e"), name="mixed")
    a = np.array([[0, 1, 2, 3, 2]], np.int32)
    timer = timer_for(RING, TECCL)
    times = edge_times(g, a, timer)[0]
    assert times[0] == 0 and times[2] == 0
    assert times[1] == timer.delays(0, [3], N)[0]
    assert times[3] == timer.collective_time("allgather", [0, 1, 2], N)


def _random_collective_dag(n: int, seed: int) -> DataflowGraph:
    rng, src, dst = random_edges(n, seed)
    kinds = tuple(str(k) for k in rng.choice(["einsum", "einsum", "allreduce", "allgather", "alltoall"], n))
    return DataflowGraph(src=src, dst=dst, flops=rng.uniform(1e8, 5e9, n),
                         out_bytes=rng.uniform(1e5, 5e7, n), kinds=kinds, name=f"cdag{seed}")


@needs_ortools
def test_batch_equals_single_and_cache_is_reused(monkeypatch):
    g = _random_collective_dag(12, seed=4)
    rng = np.random.default_rng(5)
    batch = rng.integers(0, 4, (4, g.n_ops)).astype(np.int32)
    got = dg.simulate_batch(g, batch, topology=RING, config=TECCL)
    np.testing.assert_allclose(got, [dg.simulate(g, row, topology=RING, config=TECCL).makespan for row in batch],
                               rtol=1e-12)
    assert not np.allclose(got, dg.simulate_batch(g, batch, topology=RING))
    timer = timer_for(RING, TECCL)
    solves = timer.solves

    def no_solve(*args, **kwargs):
        raise AssertionError("solved again: the cache missed")

    monkeypatch.setattr(mc, "solve", no_solve)
    np.testing.assert_array_equal(dg.simulate_batch(g, batch[::-1], topology=RING, config=TECCL), got[::-1])
    assert timer.solves == solves


def test_workloads_with_collectives():
    for name, params in (("llama-layer", {"blocks": 2}), ("llama-block", {}), ("ffnn", {"layers": 2})):
        plain = dg.workloads.make(name, **params)
        coll = dg.workloads.make(name, collectives=True, **params)
        changed = [i for i in range(plain.n_ops) if plain.kinds[i] != coll.kinds[i]]
        assert changed and dg.collective_ops(coll).tolist() == changed
        assert {plain.kinds[i] for i in changed} == {"formation"}
        assert {coll.kinds[i] for i in changed} == {"allreduce"}
        assert all(".sum[" in coll.names[i] for i in changed)
        for field in ("src", "dst", "flops", "out_bytes"):
            np.testing.assert_array_equal(getattr(plain, field), getattr(coll, field))
        assert plain.specs == coll.specs and plain.names == coll.names
    with pytest.raises(TypeError, match="collectives must be True or False"):
        dg.workloads.make("llama-block", collectives="yes")


@needs_ortools
def test_env_and_cli(capsys, tmp_path):
    from doppler_gym.cli.main import main

    g = dg.workloads.make("llama-block", blocks=2, collectives=True, seq=64, d_model=256, n_heads=4, batch=2)
    path = tmp_path / "tp.json"
    dg.save_graph(g, path)
    topo = dg.Topology.preset("v100x8-dgx1")
    a = np.arange(g.n_ops) % 8
    expected = dg.simulate(g, a, topology=topo, config=TECCL).makespan
    assert expected != dg.simulate(g, a, topology=topo).makespan
    out_json = tmp_path / "r.json"
    assert main(["simulate", str(path), "--topology", "v100x8-dgx1", "--assignment", "round-robin",  # TECCL's model
                 "--cost-model", "topology", "--multicast", "teccl", "--json", str(out_json)]) == 0
    capsys.readouterr()
    assert json.loads(out_json.read_text())["makespan"] == pytest.approx(expected, rel=1e-12)
    env = gym.make("Doppler-Sim-v0", graph=g, topology=topo, sim_config=TECCL)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    while True:  # random valid actions to the end of the episode
        action = int(rng.choice(np.flatnonzero(env.get_wrapper_attr("action_masks")())))
        *_, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert info["makespan"] == dg.simulate(g, info["assignment"], topo, config=TECCL).makespan
    env.close()
