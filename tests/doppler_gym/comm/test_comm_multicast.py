"""``MulticastTimer``: TE-CCL multicast delays on simulator topologies (doppler_gym.comm.multicast).

Hand-checked on a 4-GPU ring (producer 0, destinations 1, 2, 3): the schedule is unique up to
chunk labels, so the replayed delays are known in closed form; a one-destination multicast on the
DGX-1 preset is the point-to-point time of some route (never below the simulator's route time);
the cache solves once per (source, destination set, size bucket); bad inputs raise clear errors.
``collective_time`` (collectives over a group of devices): closed forms for two ring neighbours,
the cache per (kind, group, root, size bucket), errors.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.comm import multicast as mc
from doppler_gym.comm.multicast import MulticastTimer, size_bucket

pytest.importorskip("ortools")

BW = 1e10  # [B/s] ring links
LAT = 1e-6  # [s]
N = 2**26  # [B] a power of two: its own bucket


def _ring4() -> dg.Topology:
    return dg.Topology.ring(4, speed=1e13, memory=16e9, bandwidth=BW, latency=LAT)


def test_size_bucket():
    assert [size_bucket(x) for x in (0, 0.5, 1, 2, 3, 4, 5, 2**20, 2**20 + 1)] == [1, 1, 1, 2, 4, 4, 8, 2**20, 2**21]
    assert size_bucket(1e8) == 2**27
    with pytest.raises(ValueError, match="bytes >= 0"):
        size_bucket(-1)
    with pytest.raises(ValueError, match="bytes >= 0"):
        size_bucket(float("nan"))


def test_ring_two_chunks_by_hand():
    """C = 2: epoch 0 sends chunk a to 1 and chunk b to 3; epoch 1 the other chunk to 1 and 3, and 1, 3
    forward their epoch-0 chunk to 2. Replay (chunk n/2): 1 and 3 hold both at n/BW + LAT, 2 at
    n/BW + 2 LAT. Point to point: 2 is two store-and-forward hops away, 2 (LAT + n/BW)."""
    ring = _ring4()
    timer = MulticastTimer(ring, chunks=2)
    d = timer.delays(0, [1, 2, 3], N)
    assert d == pytest.approx([N / BW + LAT, N / BW + 2 * LAT, N / BW + LAT], rel=1e-12)
    plan = timer.plan(0, [1, 2, 3], N)
    assert plan.schedule.epochs == 2
    assert plan.schedule.tau == pytest.approx(N / 2 / BW, rel=1e-12)  # fast epochs: one chunk per epoch
    assert plan.delivery_epoch.max(axis=0).tolist() == [1, 1, 1]
    assert plan.epoch_delays == pytest.approx([N / BW] * 3, rel=1e-12)  # alpha < 0.1 tau: 0 epochs
    p2p = np.array([ring.transfer_time(N, 0, j) for j in (1, 2, 3)])
    assert p2p == pytest.approx([LAT + N / BW, 2 * (LAT + N / BW), LAT + N / BW], rel=1e-12)
    assert d[1] < p2p[1] - 0.9 * N / BW  # pipelined over two paths: about one full transfer earlier
    assert d[[0, 2]] == pytest.approx(p2p[[0, 2]], rel=1e-12)
    # another size in the same bucket: same schedule, replayed at its own size
    n2 = 3 * 2**24
    assert timer.delays(0, [3, 2, 1], n2) == pytest.approx([n2 / BW + LAT, n2 / BW + 2 * LAT, n2 / BW + LAT],
                                                            rel=1e-12)
    assert timer.solves == 1


def test_ring_one_chunk_is_point_to_point():
    """C = 1: whole tensors store-and-forward along a tree; every destination as point to point."""
    ring = _ring4()
    timer = MulticastTimer(ring, chunks=1)
    d = timer.delays(0, [1, 2, 3], N)
    assert d == pytest.approx([ring.transfer_time(N, 0, j) for j in (1, 2, 3)], rel=1e-12)


def test_one_destination_close_to_point_to_point_dgx1():
    """One destination, C = 1, on the DGX-1 preset: the delay is the store-and-forward time of the
    route TE-CCL chose, never below the simulator's (fastest) route, at most one hop latency above it
    (TE-CCL may take two 50 GB/s hops instead of one 25 GB/s link: equal epochs)."""
    topo = dg.Topology.preset("v100x8-dgx1")
    timer = MulticastTimer(topo)
    for n in (1e8, 2**20, 3e3):
        for j in range(1, 8):
            p2p = topo.transfer_time(n, 0, j)
            got = float(timer.delays(0, [j], n)[0])
            assert p2p * (1 - 1e-12) <= got <= p2p + topo.latency.max() + 1e-15, (n, j, got, p2p)


def test_replay_within_epoch_model():
    """At the bucket size the replay is never later than the epoch model's time plus the latency the
    epoch model dropped (at most 0.1 tau per hop, and a hop takes at least one epoch)."""
    topo = dg.Topology.preset("v100x8-dgx1")
    for chunks in (1, 2):
        timer = MulticastTimer(topo, chunks=chunks)
        plan = timer.plan(0, [3, 5, 6], 2**27)
        d = timer.delays(0, [3, 5, 6], 2**27)
        assert np.all(d <= plan.epoch_delays * 1.1 + 1e-15)
        assert np.all(d > 0)


def test_cache(monkeypatch):
    ring = _ring4()
    timer = MulticastTimer(ring)
    first = timer.delays(0, [1, 2], 1000)
    assert timer.solves == 1 and timer.cache_size == 1

    def no_solve(*args, **kwargs):
        raise AssertionError("solved again: the cache missed")

    monkeypatch.setattr(mc, "solve", no_solve)
    np.testing.assert_array_equal(timer.delays(0, [1, 2], 1000), first)  # exact-size entry
    np.testing.assert_array_equal(timer.delays(0, [2, 1], 1000), first[::-1])  # a set: any order
    timer.delays(0, (2, 1), 1020)  # same bucket (1024 B), new size: replayed, not solved
    assert timer.solves == 1
    monkeypatch.undo()
    timer.delays(0, [1, 2], 1025)  # next bucket
    timer.delays(0, [1, 3], 1000)  # another set
    timer.delays(1, [0, 2], 1000)  # another source
    assert timer.solves == 4 and timer.cache_size == 4


def test_errors(monkeypatch):
    ring = _ring4()
    timer = MulticastTimer(ring)
    for src, dsts, match in ((4, [1], "source device"), (0, [], "no destination"), (0, [0, 1], "none equal"),
                             (0, [1, 1], "distinct"), (0, [7], "distinct")):
        with pytest.raises(ValueError, match=match):
            timer.delays(src, dsts, 10)
    with pytest.raises(ValueError, match="bytes >= 0"):
        timer.delays(0, [1], -5)
    with pytest.raises(TypeError, match="doppler_gym.Topology"):
        MulticastTimer("dgx1")
    with pytest.raises(ValueError, match="unknown method"):
        MulticastTimer(ring, method="gurobi")
    with pytest.raises(ValueError, match="chunks"):
        MulticastTimer(ring, chunks=0)
    with pytest.raises(ValueError, match="time_limit"):
        MulticastTimer(ring, time_limit=0)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ortools" else real(name, *a))
    with pytest.raises(ImportError, match=r"needs ortools.*pip install"):
        MulticastTimer(ring)


def test_collective_time_of_two_neighbours_by_hand():
    """Devices 0 and 1 of the ring share one link each way. ALLGATHER: each sends its half at once,
    ``LAT + (N/2)/BW``; REDUCE-SCATTER with an ``N/2`` shard is the same (the reversed ALLGATHER of
    ``N``); ALLREDUCE of ``N`` is both; ALLTOALL sends one half each way; BROADCAST sends all of N."""
    timer = MulticastTimer(_ring4())
    half = LAT + N / 2 / BW
    assert timer.collective_time("allgather", [1, 0], N) == pytest.approx(half, rel=1e-12)
    assert timer.collective_time("reduce-scatter", [0, 1], N / 2) == pytest.approx(half, rel=1e-12)
    assert timer.collective_time("allreduce", [0, 1], N) == pytest.approx(2 * half, rel=1e-12)
    assert timer.collective_time("alltoall", [0, 1], N) == pytest.approx(half, rel=1e-12)
    assert timer.collective_time("broadcast", [0, 1], N, root=1) == pytest.approx(LAT + N / BW, rel=1e-12)
    assert timer.collective_time("allreduce", [2], N) == 0.0  # a group of one moves nothing
    # three devices in a row (0 - 1 - 2 of the ring): a third of N from each end crosses two hops at
    # least, so no faster than 2 (LAT + (N/3)/BW); and no slower than gathering it all on the middle
    t3 = timer.collective_time("allgather", [0, 1, 2], N)
    assert 2 * (LAT + N / 3 / BW) * (1 - 1e-12) <= t3 <= 4 * (LAT + N / 3 / BW)


def test_collective_cache(monkeypatch):
    timer = MulticastTimer(_ring4())
    first = timer.collective_time("allreduce", [0, 1, 2], 1000)
    assert timer.solves == 1 and timer.cache_size == 1

    def no_solve(*args, **kwargs):
        raise AssertionError("solved again: the cache missed")

    monkeypatch.setattr(mc, "solve", no_solve)
    assert timer.collective_time("All-Reduce", (2, 0, 1), 1000) == first  # any spelling, any order
    assert timer.collective_time("allreduce", [0, 1, 2], 1020) > first  # same bucket: replayed at the size
    assert timer.solves == 1
    monkeypatch.undo()
    timer.collective_time("allreduce", [0, 1, 2], 1025)  # next bucket
    timer.collective_time("allgather", [0, 1, 2], 1000)  # another kind
    timer.collective_time("broadcast", [0, 1, 2], 1000, root=2)  # rooted: keyed by its root
    timer.collective_time("broadcast", [0, 1, 2], 1000, root=0)
    assert timer.solves == 5 and timer.cache_size == 5


def test_collective_errors():
    timer = MulticastTimer(_ring4())
    for args, kwargs, match in ((("allgather", [], 8), {}, "at least one"), (("allgather", [0, 0], 8), {}, "distinct"),
                                (("allgather", [0, 4], 8), {}, "0..3"), (("broadcast", [0, 1], 8), {}, "needs a root"),
                                (("broadcast", [0, 1], 8), {"root": 2}, "needs a root among"),
                                (("allgather", [0, 1], 8), {"root": 0}, "takes no root"),
                                (("allgather", [0, 1], -1), {}, "bytes >= 0"), (("reduce", [0, 1], 8), {}, "unknown")):
        with pytest.raises(ValueError, match=match):
            timer.collective_time(*args, **kwargs)
