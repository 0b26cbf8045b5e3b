"""Ring and direct baselines (always valid, known epoch counts) and the NCCL-like cost model."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.comm.baselines import direct_schedule, nccl_time, ring_order, ring_schedule
from doppler_gym.comm.demand import chunk_bytes_for, make_demand
from doppler_gym.comm.epochs import epoch_duration
from doppler_gym.comm.topology import CommTopology, comm_topology
from doppler_gym.comm.validate import validate


def ring_topology(n: int, capacity: float = 1e9, alpha: float = 0.0, both: bool = True) -> CommTopology:
    src = list(range(n)) + (list(range(n)) if both else [])
    dst = [(i + 1) % n for i in range(n)] + ([(i - 1) % n for i in range(n)] if both else [])
    return CommTopology(
        name=f"ring{n}", node_names=tuple(f"g{i}" for i in range(n)), is_switch=np.zeros(n, bool),
        copy_capable=np.ones(n, bool), src=np.array(src), dst=np.array(dst), capacity=np.full(len(src), capacity),
        alpha=np.full(len(src), alpha),
    )


@pytest.mark.parametrize("spec", ["dgx1", "ndv2-2", "ndv2-3", "dgx2-1", "dgx2-2", "amd-1", "amd-2", "mesh-3"])
@pytest.mark.parametrize("kind", ["allgather", "alltoall", "broadcast", "gather"])
def test_baselines_are_valid_everywhere(spec, kind):
    topo = comm_topology(spec)
    demand = make_demand(kind, topo)
    chunk = chunk_bytes_for(demand, 64e6)
    for epoch in ("fast", "slow"):
        tau = epoch_duration(topo, chunk, epoch)
        for make in (ring_schedule, direct_schedule):
            s = make(topo, demand, chunk, tau)
            rep = validate(s)
            assert rep.ok, (make.__name__, epoch, rep.errors[:3])
            assert s.epochs == rep.epochs_needed  # the baselines claim exactly the epochs they need
            assert s.method == make.__name__.split("_")[0] and not s.optimal


def test_baselines_valid_on_a_doppler_topology_and_with_plain_switches():
    topo = dg.Topology.preset("p100x4")
    d = make_demand("allgather", topo, chunks=3)
    for make in (ring_schedule, direct_schedule):
        assert validate(make(topo, d, 1e6)).ok
    plain = comm_topology("dgx2-2", switch_copy=False)
    d2 = make_demand({1: list(range(2, 17)) + [18, 20]}, plain, chunks=2)
    for make in (ring_schedule, direct_schedule):
        rep = validate(make(plain, d2, 1e6))
        assert rep.ok, rep.errors[:3]


@pytest.mark.parametrize("n", [3, 5, 8])
def test_ring_allgather_takes_n_minus_1_steps(n):
    topo = ring_topology(n)
    d = make_demand("allgather", topo)
    s = ring_schedule(topo, d, chunk_bytes=1e9, tau=1.0)  # kappa = 1 chunk per epoch
    assert s.epochs == n - 1
    assert validate(s).ok
    assert s.finish_time == pytest.approx(n - 1)
    assert s.algo_bandwidth == pytest.approx(n * 1e9 / (n - 1))
    # every ring link carries n - 1 chunks, each commodity n - 1 hops
    assert s.n_sends == n * (n - 1)


def test_ring_allgather_pipelines_chunks():
    n, c = 4, 3
    topo = ring_topology(n, both=False)
    s = ring_schedule(topo, make_demand("allgather", topo, chunks=c), chunk_bytes=1e9, tau=1.0)
    assert s.epochs == (n - 1) * c  # each link must carry (n - 1) * C chunks, one per epoch
    assert validate(s).ok


def test_ring_with_latency_and_slow_links():
    # alpha = 1.5 s -> delta = 2; capacity 0.5 chunk/epoch -> beta = 1: each hop lands 4 epochs later
    topo = ring_topology(4, capacity=0.5e9, alpha=1.5)
    s = ring_schedule(topo, make_demand("allgather", topo), chunk_bytes=1e9, tau=1.0)
    assert s.epochs == 3 * 4
    assert validate(s).ok


def test_ring_order_prefers_fast_links():
    topo = comm_topology("dgx1")
    order = ring_order(topo, 1e6)
    assert sorted(order.tolist()) == list(range(8)) and order[0] == 0
    hops = topo.link_id[order, np.roll(order, -1)]
    assert np.all(hops >= 0) and np.all(topo.capacity[hops] == 50e9)  # a ring of doubled NVLinks
    s = ring_schedule(topo, make_demand("allgather", topo), chunk_bytes=1e9 / 8)
    assert s.epochs == 7 and s.tau == pytest.approx(1e9 / 8 / 50e9)


def test_ndv2_ring_crosses_each_nic_once():
    topo = comm_topology("ndv2-2")
    order = ring_order(topo, 62.5e6)
    names = [topo.node_names[i] for i in order]
    chassis = [n.split(".")[0] for n in names]
    assert sum(a != b for a, b in zip(chassis, chassis[1:] + chassis[:1])) == 2


def test_direct_uses_copy_on_a_full_mesh():
    topo = comm_topology(dg.Topology.uniform(5, bandwidth=1e9, latency=0.0))
    s = direct_schedule(topo, make_demand("allgather", topo), chunk_bytes=1e9, tau=1.0)
    assert s.epochs == 1 and s.n_sends == 20 and validate(s).ok


def test_direct_through_a_plain_switch_serialises():
    topo = CommTopology(
        name="star", node_names=("s", "a", "b", "c"), is_switch=np.array([True, False, False, False]),
        copy_capable=np.array([False, True, True, True]), src=np.array([1, 2, 3, 0, 0, 0]),
        dst=np.array([0, 0, 0, 1, 2, 3]), capacity=np.full(6, 1e9), alpha=np.zeros(6),
    )
    d = make_demand("broadcast", topo, root="a")
    s = direct_schedule(topo, d, chunk_bytes=1e9, tau=1.0)
    assert validate(s).ok
    assert s.epochs == 2  # a sends two copies into the switch, one per epoch
    copy = CommTopology(**{**{f: getattr(topo, f) for f in ("name", "node_names", "is_switch", "src", "dst",
                                                             "capacity", "alpha")},
                           "copy_capable": np.ones(4, bool)})
    assert direct_schedule(copy, d, chunk_bytes=1e9, tau=1.0).epochs == 1


def test_baseline_input_errors():
    with pytest.raises(ValueError, match="defined on 8 nodes"):
        ring_schedule("dgx2-1", make_demand("allgather", "dgx1"), 1e6)
    with pytest.raises(ValueError, match="chunk_bytes must be positive"):
        direct_schedule("dgx1", make_demand("allgather", "dgx1"), 0.0)


def test_nccl_time_formulas():
    n, b, a, s = 4, 1e9, 1e-6, 4e9
    topo = ring_topology(n, capacity=b, alpha=a)
    assert nccl_time(topo, "allgather", s) == pytest.approx((n - 1) * (a + s / (n * b)))
    assert nccl_time(topo, "reduce-scatter", s) == pytest.approx((n - 1) * (a + s / (n * b)))
    assert nccl_time(topo, "allreduce", s) == pytest.approx(2 * (n - 1) * (a + s / (n * b)))
    assert nccl_time(topo, "broadcast", s) == pytest.approx((n - 1) * a + s / b)
    assert nccl_time(topo, "alltoall", s) == pytest.approx((n - 1) * a + (n - 1) * s / (2 * b))
    assert nccl_time(topo, "allreduce", s, algorithm="tree") == pytest.approx(2 * 2 * a + 2 * s / b)
    assert nccl_time(topo, "broadcast", s, algorithm="tree") == pytest.approx(2 * a + s / b)
    with pytest.raises(ValueError, match="tree algorithm covers broadcast and allreduce, not allgather"):
        nccl_time(topo, "allgather", s, algorithm="tree")
    with pytest.raises(ValueError, match="'ring' or 'tree'"):
        nccl_time(topo, "allgather", s, algorithm="mesh")


def test_nccl_time_on_ndv2_is_nic_bound():
    t = nccl_time("ndv2-2", "allgather", 1e9)
    assert t == pytest.approx(15 * (1.3e-6 + 1e9 / (16 * 12.5e9)), rel=1e-3)
    assert 1e9 / t < 12.5e9 * 16 / 15 + 1  # algbw below the NIC-bound ring rate
    # dgx2-2: 32 GPUs; the best ring crosses between the chassis twice, each time on a direct NIC
    # link (odd egress GPU to the even ingress GPU: 2.6 us, 12.5 GB/s), every other hop through an
    # NVSwitch (0.7 us, 125 GB/s): alpha = 2.6 us, B = 12.5 GB/s, 2 (n-1) (alpha + S / (n B))
    assert nccl_time("dgx2-2", "allreduce", 1e6) == pytest.approx(2 * 31 * (2.6e-6 + 1e6 / (32 * 12.5e9)), rel=1e-9)
