"""LP relaxation (HiGHS) with path decomposition to chunk schedules, on tiny instances."""

from __future__ import annotations

import numpy as np
import pytest

from doppler_gym.comm.demand import make_demand
from doppler_gym.comm.lp import lp_schedule
from doppler_gym.comm.milp import min_epoch_schedule
from doppler_gym.comm.schedule import Schedule
from doppler_gym.comm.validate import validate
from tests.doppler_gym.comm.tiny_instances import line3, net_of, pair, ring4, star

pytest.importorskip("highspy")


def solved(topo, kind, chunks=1, root=None):
    demand = make_demand(kind, topo, chunks=chunks, root=root)
    r = lp_schedule(net_of(topo), demand.source, demand.wants, time_limit=30)
    assert r.sends is not None, "expected an integral LP on this instance"
    sched = Schedule(topology=topo, demand=demand, chunk_bytes=1.0, tau=1.0, epochs=r.schedule_epochs,
                     sends=r.sends, method="lp", optimal=r.optimal)
    return r, validate(sched)


@pytest.mark.parametrize(("topo", "kind", "expected"), [
    (line3(), "alltoall", 2),                 # both chunks of an end GPU cross the middle link
    (ring4(bidirectional=True), "alltoall", 2),  # 16 link-epochs, exactly 16 needed (opposite: 2 hops)
    (ring4(bidirectional=False), "alltoall", 6),  # 1 + 2 + 3 link-epochs per source, 4 links
    (star(3, copy=True), "alltoall", 2),      # each switch->GPU link lands 2 chunks, from epoch 1
    (line3(), "scatter", 2),
    (line3(), "gather", 2),
])
def test_single_destination_demands_are_exact(topo, kind, expected):
    r, report = solved(topo, kind)
    assert report.ok, report.errors
    assert r.epochs == expected == r.schedule_epochs == report.epochs_needed
    assert r.integral and r.optimal


def test_alltoall_with_more_chunks_and_a_slow_link():
    # kappa = 0.5, two chunks each way on one link: sends in epochs 0 and 2, landing by 4
    r, report = solved(pair(0.5), "alltoall", chunks=2)
    assert report.ok, report.errors
    assert r.schedule_epochs == 4


def test_mean_delivery_is_fractional_average():
    r, _ = solved(line3(), "alltoall")
    # 6 chunks: 4 one-hop ones could land at 1, the 2 two-hop ones at 2; capacity forces some
    # one-hop chunks to 2, so the mean lies strictly between 1 and 2
    assert 1.0 < r.mean_delivery < 2.0


def test_multicast_lp_is_copy_free_and_no_better_than_milp():
    topo = star(4, copy=True)
    demand = make_demand("broadcast", topo)
    net = net_of(topo)
    lp = lp_schedule(net, demand.source, demand.wants, time_limit=30)
    milp = min_epoch_schedule(net, demand.source, demand.wants, time_limit=30)
    assert milp.epochs == 1
    assert lp.schedule_epochs >= lp.epochs > milp.epochs  # without copy one GPU->switch link is the bottleneck
    sched = Schedule(topology=topo, demand=demand, chunk_bytes=1.0, tau=1.0, epochs=lp.schedule_epochs,
                     sends=lp.sends, method="lp")
    assert validate(sched).ok


def test_sends_are_sorted_unique_rows():
    r, _ = solved(ring4(bidirectional=True), "alltoall")
    rows = [tuple(x) for x in r.sends.tolist()]
    assert len(rows) == len(set(rows))
    assert np.all(np.diff(r.sends[:, 2]) >= 0)


def test_integral_repair_path_decomposes_to_a_valid_schedule():
    # the MIP repair (used when the LP vertex is fractional) on an instance small enough to check
    from doppler_gym.comm.lp import build_horizon_lp, decompose, solve_horizon_lp

    topo = ring4(bidirectional=True)
    demand = make_demand("alltoall", topo)
    net = net_of(topo)
    srcs = np.unique(demand.source)
    D = np.stack([demand.wants[demand.source == s].sum(axis=0) for s in srcs])
    built = build_horizon_lp(net, srcs, D, 2)
    status, values = solve_horizon_lp(built, 30.0, integral=True)
    assert status == "feasible"
    sends = decompose(net, built, values, demand.source, demand.wants, srcs)
    sched = Schedule(topology=topo, demand=demand, chunk_bytes=1.0, tau=1.0, epochs=2, sends=sends, method="lp")
    assert validate(sched).ok
    one_epoch = build_horizon_lp(net, srcs, D, 1)  # opposite GPUs are two hops apart: 1 epoch is impossible
    assert one_epoch is None or solve_horizon_lp(one_epoch, 30.0)[0] == "infeasible"
