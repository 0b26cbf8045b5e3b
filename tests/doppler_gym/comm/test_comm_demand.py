"""Collective demands: commodity counts, who wants what, composites, and errors."""

from __future__ import annotations

import numpy as np
import pytest

from doppler_gym.comm.demand import (
    COLLECTIVES,
    Demand,
    canonical_kind,
    chunk_bytes_for,
    composition,
    is_composite,
    make_demand,
    reverse_topology,
)
from doppler_gym.comm.topology import CommTopology, comm_topology
from doppler_gym.topology.types import Topology


def test_allgather_every_gpu_wants_every_other_chunk():
    t = comm_topology("dgx2-2")
    d = make_demand("allgather", t, chunks=2)
    assert d.n_commodities == 32 * 2
    assert np.array_equal(np.unique(d.source), t.gpus)
    assert d.wants[:, t.is_switch].sum() == 0
    assert np.all(d.wants.sum(axis=1) == 31)
    assert not d.wants[np.arange(d.n_commodities), d.source].any()
    assert d.output_chunks == 64
    assert chunk_bytes_for(d, 1e9) == pytest.approx(1e9 / 64)


def test_alltoall_one_destination_per_chunk():
    t = comm_topology("ndv2-2")
    d = make_demand("alltoall", t, chunks=3)
    assert d.n_commodities == 16 * 15 * 3
    assert np.all(d.wants.sum(axis=1) == 1)
    # each (source, destination) pair has C distinct chunk ids
    dest = d.wants.argmax(axis=1)
    pairs = {}
    for s, dd, c in zip(d.source, dest, d.chunk):
        pairs.setdefault((s, dd), set()).add(int(c))
    assert len(pairs) == 16 * 15 and all(len(v) == 3 for v in pairs.values())
    assert d.output_chunks == 16 * 3  # 1 GB buffer -> 1e9 / 48 B chunks
    assert chunk_bytes_for(d, 1e9) == pytest.approx(1e9 / 48)


def test_broadcast_scatter_gather_roots():
    t = comm_topology("dgx1")
    b = make_demand("broadcast", t, chunks=4, root=3)
    assert np.all(b.source == 3) and np.all(b.wants.sum(axis=1) == 7) and b.output_chunks == 4
    s = make_demand("scatter", t, chunks=2)
    assert np.all(s.source == 0) and s.n_commodities == 14 and np.all(s.wants.sum(axis=1) == 1)
    assert len(set(zip(s.chunk.tolist(), s.source.tolist()))) == 14
    g = make_demand("gather", t, root="gpu5")
    assert np.all(g.wants[:, 5]) and g.wants.sum() == 7 and 5 not in g.source


def test_multicast_mapping():
    t = comm_topology("dgx1")
    d = make_demand({0: [3, 5, 6], "gpu7": 1}, t, chunks=2)
    assert d.name == "multicast" and d.n_commodities == 4
    assert np.array_equal(np.flatnonzero(d.wants[0]), [3, 5, 6])
    assert np.array_equal(np.flatnonzero(d.wants[3]), [1])


def test_composites():
    assert set(COLLECTIVES) >= {"allgather", "alltoall", "reduce-scatter", "allreduce"}
    assert is_composite("ReduceScatter") and is_composite("all_reduce") and not is_composite("allgather")
    assert composition("reduce-scatter") == (("allgather", True),)
    assert composition("allreduce") == (("allgather", True), ("allgather", False))
    assert composition("alltoall") == (("alltoall", False),)
    with pytest.raises(ValueError, match="composite.*reverse_topology"):
        make_demand("allreduce", "dgx1")
    r = reverse_topology(comm_topology("ndv2-2"))
    d = make_demand("allgather", r)  # the reduce-scatter part builds on the reversed topology
    assert d.n_commodities == 16


def test_canonical_kind_spellings():
    assert canonical_kind("All-Gather") == "allgather"
    assert canonical_kind("reduce_scatter") == "reduce-scatter"
    with pytest.raises(ValueError, match="unknown collective 'allgathr'"):
        canonical_kind("allgathr")


@pytest.mark.parametrize(
    ("kind", "kwargs", "match"),
    [
        ("allgather", {"chunks": 0}, "chunks must be a positive integer"),
        ("allgather", {"root": 1}, "root applies to broadcast"),
        ("broadcast", {"root": 99}, "node id 99 is not in"),
        ("broadcast", {"root": "nvswitch"}, "is switch 'nvswitch'; pick a GPU"),
        ({1: [1, 2]}, {}, "lists itself"),
        ({1: []}, {}, "no destinations"),
        ({1: ["nvswitch"]}, {}, "is a switch"),
        ({}, {}, "mapping is empty"),
        ({1: [2]}, {"root": 1}, "a mapping names its GPUs"),
        ({1: [2]}, {"group": [1, 2]}, "a mapping names its GPUs"),
        ("allgather", {"group": [3]}, "at least 2 distinct GPUs"),
        ("allgather", {"group": [3, 3]}, "at least 2 distinct GPUs"),
        ("allgather", {"group": [3, "nvswitch"]}, "is a switch"),
        ("broadcast", {"group": [3, 4], "root": 5}, "not in the group"),
    ],
)
def test_errors(kind, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_demand(kind, "dgx2-1", **kwargs)


@pytest.mark.parametrize("kind", ["allgather", "alltoall", "broadcast", "scatter", "gather"])
def test_group_restricts_the_participants(kind):
    """Over a group of k GPUs a collective is the one of a k-GPU topology (the same commodity,
    delivery and output-chunk counts), and no other GPU sends or wants anything."""
    rooted = kind in ("broadcast", "scatter", "gather")
    group = [6, 1, 3]
    d = make_demand(kind, "dgx1", chunks=2, group=group, root=3 if rooted else None)
    small = make_demand(kind, comm_topology(Topology.uniform(3)), chunks=2, root=1 if rooted else None)
    assert (d.n_commodities, d.n_deliveries, d.output_chunks) == (
        small.n_commodities, small.n_deliveries, small.output_chunks)
    outside = np.setdiff1d(np.arange(8), group)
    assert not d.wants[:, outside].any() and not np.isin(d.source, outside).any()
    if kind == "allgather":
        assert np.array_equal(np.unique(d.source), [1, 3, 6]) and d.output_chunks == 6
    if kind == "broadcast":
        assert np.all(d.source == 3) and np.array_equal(np.flatnonzero(d.wants[0]), [1, 6])
    by_name = make_demand(kind, "dgx1", chunks=2, group=["gpu1", "gpu3", "gpu6"], root="gpu3" if rooted else None)
    assert np.array_equal(by_name.wants, d.wants) and np.array_equal(by_name.source, d.source)


def test_unreachable_destination_is_reported():
    t = CommTopology(
        name="oneway", node_names=("a", "b", "c"), is_switch=np.zeros(3, bool), copy_capable=np.ones(3, bool),
        src=np.array([0, 1]), dst=np.array([1, 2]), capacity=np.ones(2), alpha=np.zeros(2),
    )
    assert make_demand("broadcast", t).n_commodities == 1
    with pytest.raises(ValueError, match=r"'a' \(node 0\) cannot be reached from source 'b'"):
        make_demand("allgather", t)


def test_demand_constructor_checks_shapes():
    with pytest.raises(ValueError, match=r"wants must have shape \(2, n_nodes\)"):
        Demand("x", 1, np.array([0, 1]), np.array([0, 0]), np.zeros((3, 4), bool))
    with pytest.raises(ValueError, match="wants its own source node"):
        Demand("x", 1, np.array([0]), np.array([0]), np.array([[True, True]]))
    with pytest.raises(ValueError, match="positive"):
        chunk_bytes_for(make_demand("allgather", "dgx1"), 0)
