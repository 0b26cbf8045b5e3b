"""MILP (CP-SAT) minimum-epoch schedules on tiny instances with hand-known optima."""

from __future__ import annotations

import numpy as np
import pytest

from doppler_gym.comm.bounds import release_cut_bound_epochs
from doppler_gym.comm.demand import make_demand
from doppler_gym.comm.milp import min_epoch_schedule
from doppler_gym.comm.schedule import Schedule
from doppler_gym.comm.validate import validate
from tests.doppler_gym.comm.tiny_instances import line3, net_of, pair, ring4, star

pytest.importorskip("ortools")

pytestmark = pytest.mark.slow  # MILP (CP-SAT) solves


def solved(topo, kind, chunks=1, root=None, tau=1.0, **kw):
    """(MilpResult, validation report) of ``kind`` on ``topo`` with 1-byte chunks."""
    demand = make_demand(kind, topo, chunks=chunks, root=root)
    r = min_epoch_schedule(net_of(topo, tau), demand.source, demand.wants, time_limit=30, **kw)
    sched = Schedule(topology=topo, demand=demand, chunk_bytes=1.0, tau=tau, epochs=r.epochs, sends=r.sends,
                     method="milp", solver_seconds=r.seconds, optimal=r.optimal)
    return r, validate(sched)


@pytest.mark.parametrize(("topo", "kind", "expected"), [
    (line3(), "allgather", 2),            # end chunks cross two links, pipelined
    (line3(), "broadcast", 2),
    (ring4(bidirectional=False), "allgather", 3),  # the classic ring: n - 1 steps
    (ring4(bidirectional=True), "allgather", 2),   # both directions, copy at the first hop
    (star(4, copy=True), "broadcast", 1),    # GPU -> switch (1 epoch), switch copies, lands at once
    (star(4, copy=False), "broadcast", 2),   # no copy: a second source (GPU 1) relays in epoch 1
    (star(3, copy=True), "allgather", 2),    # one switch->GPU link per GPU, used from epoch 1
    (line3(alpha=1.0), "allgather", 4),      # delta = 1: every hop takes 2 epochs
])
def test_known_optimum(topo, kind, expected):
    r, report = solved(topo, kind)
    assert report.ok, report.errors
    assert r.epochs == expected == report.epochs_needed
    assert r.optimal


def test_slow_link_window():
    # kappa = 0.5: a chunk needs 2 epochs and the link carries one chunk per 2-epoch window;
    # two chunks each way: sends in epochs 0 and 2, the second lands at the start of epoch 4
    r, report = solved(pair(0.5), "allgather", chunks=2)
    assert report.ok, report.errors
    assert r.epochs == 4 and r.optimal
    assert sorted(r.sends[r.sends[:, 1] == 0, 2].tolist()) == [0, 2]


def test_pruned_schedule_has_no_redundant_work():
    r, report = solved(ring4(bidirectional=True), "allgather")
    assert report.ok and not report.warnings
    # every GPU receives each chunk exactly once: 4 chunks x 3 receivers
    assert r.sends.shape[0] == 12


def test_same_seed_same_schedule():
    a, _ = solved(star(3, copy=True), "allgather", seed=7)
    b, _ = solved(star(3, copy=True), "allgather", seed=7)
    assert np.array_equal(a.sends, b.sends)


def test_lower_bound_never_above_optimum_and_search_reports_it():
    topo = ring4(bidirectional=False)
    demand = make_demand("allgather", topo)
    net = net_of(topo)
    lb = release_cut_bound_epochs(net, demand.source, demand.wants)
    r = min_epoch_schedule(net, demand.source, demand.wants, time_limit=30)
    assert lb <= r.epochs and r.lower_bound == lb
    assert any(status == "feasible" for _, status, _ in r.solves)


def test_search_climbs_above_a_loose_bound():
    # no-copy star, root 0 broadcasts to 4 GPUs: each switch arrival feeds one GPU, so holders
    # grow 1 -> 2 -> 4 -> 5: epoch 0 root sends (lands 1), epoch 1 both holders send (land 2),
    # epoch 2 one more send (lands 3). The analytic bound (hop latency 1) is far below.
    r, report = solved(star(5, copy=False), "broadcast")
    assert report.ok, report.errors
    assert r.epochs == 3 and r.optimal
    assert r.lower_bound < 3
    assert [e for e, status, _ in r.solves if status == "infeasible"]  # smaller horizons were refuted


def test_empty_demand_is_zero_epochs():
    topo = line3()
    r = min_epoch_schedule(net_of(topo), np.array([0]), np.zeros((1, 3), bool))
    assert r.epochs == 0 and r.sends.shape == (0, 3) and r.optimal


def test_unreachable_demand_raises():
    from tests.doppler_gym.comm.tiny_instances import make

    topo = make("oneway", 2, [(0, 1)])
    wants = np.array([[True, False]])  # node 0 wants a chunk of node 1: no link 1 -> 0
    with pytest.raises(ValueError, match="unreachable"):
        min_epoch_schedule(net_of(topo), np.array([1]), wants)


def test_time_out_before_any_schedule_raises_with_advice():
    topo = ring4(bidirectional=False)
    demand = make_demand("allgather", topo)
    with pytest.raises(RuntimeError, match="raise time_limit"):
        min_epoch_schedule(net_of(topo), demand.source, demand.wants, time_limit=1e-9)
