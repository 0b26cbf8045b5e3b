"""Time-partitioned (rounds) schedules: valid across round boundaries, deterministic."""

from __future__ import annotations

import numpy as np
import pytest

from doppler_gym.comm.demand import make_demand
from doppler_gym.comm.rounds import default_round_epochs, rounds_schedule
from doppler_gym.comm.schedule import Schedule
from doppler_gym.comm.validate import validate
from tests.doppler_gym.comm.tiny_instances import line3, net_of, pair, ring4, star

pytest.importorskip("ortools")


def solved(topo, kind, chunks=1, **kw):
    demand = make_demand(kind, topo, chunks=chunks)
    r = rounds_schedule(net_of(topo), demand.source, demand.wants, time_limit=30, **kw)
    sched = Schedule(topology=topo, demand=demand, chunk_bytes=1.0, tau=1.0, epochs=r.epochs, sends=r.sends,
                     method="rounds", optimal=r.optimal)
    return r, validate(sched)


def test_one_round_finds_the_optimum_on_a_line():
    r, report = solved(line3(), "allgather")
    assert report.ok, report.errors
    assert r.rounds == 1 and r.epochs == 2 and r.optimal


@pytest.mark.parametrize("topo", [line3(alpha=1.0), ring4(bidirectional=False), star(3, copy=True)])
def test_one_epoch_rounds_carry_buffers_and_in_flight_chunks(topo):
    # one-epoch rounds: with delta = 1 (line) every send is still in flight at the round's end
    r, report = solved(topo, "allgather", round_epochs=1)
    assert report.ok, report.errors
    assert r.rounds >= 2
    assert r.epochs >= r.lower_bound


def test_capacity_windows_span_rounds():
    # kappa = 0.5: a send in the last epoch of a round blocks the first epoch of the next
    r, report = solved(pair(0.5), "allgather", chunks=3, round_epochs=1)
    assert report.ok, report.errors
    assert r.epochs == 6  # sends in epochs 0, 2, 4 each way


def test_same_seed_same_schedule():
    a, _ = solved(ring4(bidirectional=True), "allgather", round_epochs=1, seed=3)
    b, _ = solved(ring4(bidirectional=True), "allgather", round_epochs=1, seed=3)
    assert np.array_equal(a.sends, b.sends)


def test_default_round_length_follows_the_study():
    net = net_of(line3(alpha=30.0))  # delta = 30, lag 31
    assert default_round_epochs(net) == 32
    assert default_round_epochs(net_of(line3())) == 15


def test_bad_round_length():
    topo = line3()
    d = make_demand("allgather", topo)
    with pytest.raises(ValueError, match="round_epochs"):
        rounds_schedule(net_of(topo), d.source, d.wants, round_epochs=0)


@pytest.mark.parametrize("topo", [star(3, copy=True), star(4, copy=False), line3(alpha=1.0)])
def test_greedy_plan_alone_is_valid(topo):
    # a vanishing CP-SAT budget leaves each round to the greedy plan (its hint and fallback)
    r, report = solved(topo, "allgather", round_epochs=2, round_budget=1e-9)
    assert report.ok, report.errors
    assert r.epochs >= r.lower_bound


def test_greedy_round_respects_capacity_and_holds():
    from doppler_gym.comm.expanded import to_targets
    from doppler_gym.comm.rounds import greedy_round

    topo = pair(0.5)
    net = net_of(topo)
    d = make_demand("allgather", topo, chunks=3)
    holds = np.zeros_like(d.wants)
    holds[np.arange(d.n_commodities), d.source] = True
    dist_to = {g: to_targets(net, np.arange(net.n_nodes) == g) for g in (0, 1)}
    plan = greedy_round(net, d.wants, holds, {}, {0: {-1: 1}}, dist_to, 6)  # link 0 busy in epoch -1
    on0 = sorted(plan[plan[:, 1] == 0, 2].tolist())
    assert on0 == [1, 3, 5]  # one send per 2-epoch window, the first window already used at -1
    assert sorted(plan[plan[:, 1] == 1, 2].tolist()) == [0, 2, 4]
