"""Named comm topologies against the hardware facts, conversion, and constructor validation."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.comm.topology import CommTopology, comm_topology, names, reverse_topology

GB = 1e9


def capacity_counts(topo: CommTopology) -> dict[float, int]:
    values, counts = np.unique(topo.capacity / GB, return_counts=True)
    return {float(v): int(c) for v, c in zip(values, counts)}


def link(topo: CommTopology, a: str, b: str) -> int:
    return int(topo.link_id[topo.node_id(a), topo.node_id(b)])


def test_names_lists_the_patterns():
    assert names() == ("dgx1", "ndv2-K", "dgx2-K", "amd-K", "mesh-L")


def test_dgx1_hybrid_cube_mesh():
    t = comm_topology("dgx1")
    assert (t.n_nodes, t.n_gpus, t.n_links) == (8, 8, 32)
    assert capacity_counts(t) == {25.0: 16, 50.0: 16}
    assert np.all(t.alpha == 0.7e-6)
    # each GPU: 4 NVLink neighbours, 6 NVLinks (two doubled, two single), i.e. 150 GB/s out
    for g in t.gpus:
        assert t.out_links(int(g)).size == 4 and t.in_links(int(g)).size == 4
        assert t.capacity[t.out_links(int(g))].sum() == pytest.approx(150 * GB)
    assert t.capacity[link(t, "gpu0", "gpu1")] == 50 * GB
    assert t.capacity[link(t, "gpu0", "gpu2")] == 25 * GB
    assert link(t, "gpu0", "gpu5") == -1  # no NVLink: not every pair is linked


def test_dgx1_is_the_preset_renumbered():
    # One DGX-1 description: comm GPU i is the v100x8-dgx1 preset's GPU TECCL_GPU_ORDER[i], with the
    # same NVLink bandwidth on every pair; only the latency differs (per hop vs per copy).
    from doppler_gym.comm.topology import TECCL_GPU_ORDER

    t = comm_topology("dgx1")
    preset = dg.Topology.preset("v100x8-dgx1")
    order = np.asarray(TECCL_GPU_ORDER)
    assert sorted(order.tolist()) == list(range(8))
    capacity = np.zeros((8, 8))
    capacity[t.src, t.dst] = t.capacity
    np.testing.assert_array_equal(capacity, preset.bandwidth[np.ix_(order, order)])
    assert np.all(t.alpha < preset.latency[preset.bandwidth > 0])


def test_ndv2_one_nic_per_chassis():
    t1 = comm_topology("ndv2-1")
    assert (t1.n_nodes, t1.n_links) == (8, 32) and not t1.is_switch.any()
    t2 = comm_topology("ndv2-2")
    # every node is a GPU (the released code turned GPU0 of chassis 0 into a switch)
    assert (t2.n_nodes, t2.n_gpus, t2.n_links) == (16, 16, 66)
    assert capacity_counts(t2) == {12.5: 2, 25.0: 32, 50.0: 32}
    ib = np.flatnonzero(t2.capacity == 12.5 * GB)
    pairs = {(t2.node_names[t2.src[i]], t2.node_names[t2.dst[i]]) for i in ib}
    assert pairs == {("c0.gpu0", "c1.gpu1"), ("c1.gpu0", "c0.gpu1")}
    assert np.all(t2.alpha[ib] == 1.3e-6)
    t4 = comm_topology("ndv2-4")
    assert (t4.n_gpus, t4.n_nodes - t4.n_gpus, t4.n_links) == (32, 1, 136)
    assert capacity_counts(t4) == {12.5: 8, 25.0: 64, 50.0: 64}
    sw = int(np.flatnonzero(t4.is_switch)[0])
    assert t4.chassis[sw] == -1 and t4.copy_capable[sw]
    # one NIC uplink per chassis from local GPU 0, one downlink to local GPU 1
    assert sorted(t4.node_names[i] for i in t4.src[t4.in_links(sw)]) == [f"c{c}.gpu0" for c in range(4)]
    assert sorted(t4.node_names[i] for i in t4.dst[t4.out_links(sw)]) == [f"c{c}.gpu1" for c in range(4)]


def test_dgx2_scales_with_chassis():
    t1 = comm_topology("dgx2-1")
    assert (t1.n_gpus, t1.n_nodes, t1.n_links) == (16, 17, 32)
    assert capacity_counts(t1) == {125.0: 32}
    t2 = comm_topology("dgx2-2")
    assert (t2.n_gpus, t2.n_nodes, t2.n_links) == (32, 34, 80)
    assert capacity_counts(t2) == {12.5: 16, 125.0: 64}
    assert np.all(t2.alpha[t2.capacity == 125 * GB] == 0.35e-6)
    assert np.all(t2.alpha[t2.capacity == 12.5 * GB] == 2.6e-6)
    for m in range(8):
        assert link(t2, f"c0.gpu{2 * m + 1}", f"c1.gpu{2 * m}") >= 0
        assert link(t2, f"c1.gpu{2 * m + 1}", f"c0.gpu{2 * m}") >= 0
    # the chassis count is honoured (the released class always built 2)
    t3 = comm_topology("dgx2-3")
    assert t3.n_gpus == 48
    assert capacity_counts(t3)[12.5] == 2 * 8 * 3  # per rail: 3 uplinks + 3 downlinks
    assert (t3.n_nodes - t3.n_gpus) == 3 + 8  # 3 NVSwitches + 8 rail switches


def test_dgx2_switch_copy_option():
    assert comm_topology("dgx2-2").copy_capable.all()
    plain = comm_topology("dgx2-2", switch_copy=False)
    assert not plain.copy_capable[plain.is_switch].any()
    assert plain.copy_capable[~plain.is_switch].all()
    again = comm_topology(plain, switch_copy=True)
    assert again.copy_capable.all() and comm_topology(plain) is plain


def test_amd_mi250x():
    t1 = comm_topology("amd-1")
    assert (t1.n_gpus, t1.n_links) == (16, 56)
    assert capacity_counts(t1) == {50.0: 32, 100.0: 16 // 2, 200.0: 16}
    # xGMI adjacency is symmetric
    cap = np.zeros((16, 16))
    cap[t1.src, t1.dst] = t1.capacity
    assert np.array_equal(cap, cap.T)
    t2 = comm_topology("amd-2")
    assert (t2.n_gpus, t2.n_nodes, t2.n_links) == (32, 49, 208)
    # all NIC links at 25 GB/s (the released code left NIC 16 at 50 GB/s) and every GCD a GPU
    assert capacity_counts(t2) == {25.0: 96, 50.0: 64, 100.0: 16, 200.0: 32}
    assert all(not t2.is_switch[t2.node_id(f"c{c}.gcd{i}")] for c in range(2) for i in range(16))
    assert all(t2.is_switch[t2.node_id(f"c{c}.nic{k}")] for c in range(2) for k in range(8))
    top = t2.node_id("global-switch")
    assert t2.in_links(top).size == 16 and t2.out_links(top).size == 16


def test_mesh_has_no_wraparound():
    t = comm_topology("mesh-3")
    assert (t.n_gpus, t.n_links) == (9, 2 * 2 * 3 * 2)
    assert np.all(t.capacity == 100 * GB)
    assert link(t, "gpu0.2", "gpu1.0") == -1  # row end is not linked to the next row's start
    assert link(t, "gpu0.2", "gpu0.0") == -1  # and rows do not wrap
    assert link(t, "gpu0.0", "gpu1.0") >= 0
    corner, centre = t.node_id("gpu0.0"), t.node_id("gpu1.1")
    assert t.out_links(corner).size == 2 and t.out_links(centre).size == 4


def test_from_doppler_topology_uses_direct_links_only():
    topo = dg.Topology(
        speed=np.ones(3), memory=np.ones(3),
        bandwidth=np.array([[0, 10e9, 0], [10e9, 0, 5e9], [0, 5e9, 0]]),
        latency=np.full((3, 3), 2e-6), name="line3",
    )
    t = comm_topology(topo)
    assert (t.n_gpus, t.n_links, t.name) == (3, 4, "line3")
    assert t.capacity[link(t, "dev1", "dev2")] == 5e9
    assert link(t, "dev0", "dev2") == -1
    assert np.all(t.alpha == 2e-6)
    preset = comm_topology(dg.Topology.uniform(4))
    assert preset.n_links == 12


def test_reverse_topology_turns_every_link():
    t = comm_topology("ndv2-2")
    r = reverse_topology(t)
    assert np.array_equal(r.src, t.dst) and np.array_equal(r.dst, t.src)
    assert np.array_equal(r.capacity, t.capacity)
    assert r.name == "ndv2-2-reversed"


def test_in_and_out_links_partition_the_links():
    t = comm_topology("amd-2")
    outs = np.concatenate([t.out_links(i) for i in range(t.n_nodes)])
    ins = np.concatenate([t.in_links(i) for i in range(t.n_nodes)])
    assert np.array_equal(np.sort(outs), np.arange(t.n_links))
    assert np.array_equal(np.sort(ins), np.arange(t.n_links))
    assert all(np.all(t.src[t.out_links(i)] == i) for i in range(t.n_nodes))


def good_kwargs(**over):
    kw = {
        "name": "t", "node_names": ("a", "b"), "is_switch": np.array([False, False]),
        "copy_capable": np.array([True, True]), "src": np.array([0, 1]), "dst": np.array([1, 0]),
        "capacity": np.array([1e9, 1e9]), "alpha": np.array([0.0, 0.0]),
    }
    kw.update(over)
    return kw


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"capacity": np.array([1e9, 0.0])}, r"link 1 .*capacity 0\.0.*positive"),
        ({"capacity": np.array([1e9])}, r"capacity must have shape \(2,\)"),
        ({"alpha": np.array([0.0, -1e-6])}, r"link 1 .*alpha.*>= 0"),
        ({"dst": np.array([0, 0])}, r"link 0 goes from node 0 to itself"),
        ({"dst": np.array([1, 5])}, r"link 1 has dst=5, not a node id in 0..1"),
        ({"src": np.array([0, 0]), "dst": np.array([1, 1])}, r"parallel links 0 -> 1; merge"),
        ({"copy_capable": np.array([True, False])}, r"GPU node 1 \(b\) has copy_capable=False"),
        ({"is_switch": np.array([True, True])}, r"no GPU node"),
        ({"node_names": ("a", "a")}, r"unique"),
        ({"is_switch": np.array([0, 1])}, r"is_switch must be a bool array"),
    ],
)
def test_constructor_rejects_bad_input(over, match):
    with pytest.raises((ValueError, TypeError), match=match):
        CommTopology(**good_kwargs(**over))


def test_constructor_accepts_and_freezes():
    t = CommTopology(**good_kwargs())
    assert t.n_links == 2 and t.src.dtype == np.int32
    with pytest.raises(ValueError):
        t.capacity[0] = 5.0  # read-only


@pytest.mark.parametrize(
    ("spec", "match"),
    [("dgx3", "unknown comm topology"), ("ndv2", "add the chassis count, e.g. ndv2-2"),
     ("mesh-1", "side L >= 2"), ("amd-0", "K must be >= 1")],
)
def test_bad_names(spec, match):
    with pytest.raises(ValueError, match=match):
        comm_topology(spec)


def test_bad_spec_type():
    with pytest.raises(TypeError, match="expected a name"):
        comm_topology(3.5)
