"""Analytic lower bounds: hand-computed values, the published optima they certify, and bound <= baselines."""

from __future__ import annotations

import numpy as np
import pytest

from doppler_gym.comm.baselines import direct_schedule, ring_schedule
from doppler_gym.comm.bounds import (
    cut_bound_epochs,
    cut_bound_seconds,
    hop_bound_epochs,
    hop_bound_seconds,
    lower_bound,
)
from doppler_gym.comm.demand import chunk_bytes_for, make_demand
from doppler_gym.comm.epochs import epoch_duration
from doppler_gym.comm.topology import CommTopology, comm_topology


def line(n: int, capacity: float = 1e9, alpha: float = 0.0) -> CommTopology:
    src = list(range(n - 1)) + list(range(1, n))
    dst = list(range(1, n)) + list(range(n - 1))
    return CommTopology(
        name=f"line{n}", node_names=tuple(f"g{i}" for i in range(n)), is_switch=np.zeros(n, bool),
        copy_capable=np.ones(n, bool), src=np.array(src), dst=np.array(dst), capacity=np.full(len(src), capacity),
        alpha=np.full(len(src), alpha),
    )


def test_line_by_hand():
    t = line(4)
    d = make_demand("allgather", t)
    # end GPU g0 must receive 3 chunks over one link at 1 chunk/epoch; g0 -> g3 is 3 hops
    assert cut_bound_epochs(t, d, 1e9, 1.0) == (3, "into g0")
    assert hop_bound_epochs(t, d, 1e9, 1.0) == 3
    assert cut_bound_seconds(t, d, 1e9) == pytest.approx(3.0)
    # one chunk over the path (1 s) plus 3 latencies
    assert hop_bound_seconds(line(4, alpha=0.25), d, 1e9) == pytest.approx(1.0 + 0.75)
    lb = lower_bound(t, d, 1e9, 1.0)
    assert (lb.epochs, lb.seconds) == (3, pytest.approx(3.0))


def test_slow_link_window_in_cut_bound():
    t = line(2, capacity=0.5e9)  # kappa = 0.5 -> beta = 1: 1 chunk per 2 epochs, lands 2 epochs later
    d = make_demand({0: [1]}, t, chunks=3)
    # sends in epochs 0, 2, 4 -> last lands at the start of epoch 6
    assert cut_bound_epochs(t, d, 1e9, 1.0)[0] == 6
    s = direct_schedule(t, d, 1e9, 1.0)
    assert s.epochs == 6


@pytest.mark.parametrize(
    ("spec", "kind", "buffer", "epoch", "published"),
    [
        ("dgx1", "allgather", 1e9, "fast", 3),  # bound = optimum
        ("dgx2-2", "allgather", 1e9, "slow", 4),  # bound = optimum
        ("dgx2-2", "allgather", 1e9, "fast", 31),  # bound = CP-SAT's optimum
        ("ndv2-2", "alltoall", 1e9, "slow", 64),  # the NIC bound: 64 chunks of 62.5 MB at 12.5 GB/s
        ("dgx2-2", "alltoall", 1e9, "slow", 32),  # 256 chunks over 8 IB links
    ],
)
def test_bounds_certify_published_optima(spec, kind, buffer, epoch, published):
    t = comm_topology(spec)
    d = make_demand(kind, t)
    chunk = chunk_bytes_for(d, buffer)
    assert lower_bound(t, d, chunk, epoch_duration(t, chunk, epoch)).epochs == published


def test_bounds_below_published_optima():
    t = comm_topology("ndv2-2")
    d = make_demand("allgather", t)
    for buffer, epoch, published in ((1e9, "slow", 10), (1e6, "slow", 14), (1e9, "fast", 35)):
        chunk = chunk_bytes_for(d, buffer)
        lb = lower_bound(t, d, chunk, epoch_duration(t, chunk, epoch))
        assert 0 < lb.epochs <= published


def test_ndv2_alltoall_seconds_is_the_nic_bound():
    t = comm_topology("ndv2-2")
    d = make_demand("alltoall", t)
    lb = lower_bound(t, d, chunk_bytes_for(d, 1e9), 5e-3)
    assert lb.cut_seconds == pytest.approx(0.32)  # 320 ms, 3.125 GB/s
    assert lb.binding.startswith("into chassis") or lb.binding.startswith("out of chassis")


@pytest.mark.parametrize("spec", ["dgx1", "ndv2-2", "dgx2-1", "amd-1", "mesh-3"])
@pytest.mark.parametrize("kind", ["allgather", "alltoall", "broadcast"])
def test_bound_never_exceeds_a_baseline(spec, kind):
    t = comm_topology(spec)
    d = make_demand(kind, t, chunks=2 if kind == "broadcast" else 1)
    for buffer in (1e6, 1e9):
        chunk = chunk_bytes_for(d, buffer)
        for epoch in ("fast", "slow"):
            tau = epoch_duration(t, chunk, epoch)
            lb = lower_bound(t, d, chunk, tau)
            for make in (ring_schedule, direct_schedule):
                s = make(t, d, chunk, tau)
                assert lb.epochs <= s.epochs, (make.__name__, buffer, epoch, lb)
                assert lb.cut_seconds <= s.finish_time * (1 + 1e-9)
