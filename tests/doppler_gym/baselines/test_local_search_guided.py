"""local_search's hooks for a guide: start placements as a (B, n) array and a (n, D) move proposal."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym import baselines
from doppler_gym.baselines import LocalSearchResearch
from doppler_gym.baselines.local_search import _child_seed, _Moves, default_starts
from tests.doppler_gym.baselines.baseline_graphs import RAW, small_random, two_chains


def test_proposal_moves_draw_one_op_and_its_device_from_the_proposal_row():
    graph = small_random(1, n_ops=6)
    d = 4
    proposal = np.array([[0.0, 1.0, 3.0, 0.0]] * graph.n_ops)  # device 2 three times as likely as 1
    proposal[2] = 0.0  # a zero row: uniform over the other devices
    moves = _Moves(graph, d, 8, np.random.default_rng(0), proposal, 1.0)
    x = np.array([1, 0, 0, 3, 2, 1])
    out = moves.neighbours(x, 20000)
    changed = out != x
    assert np.all(changed.sum(1) == 1)  # exactly one op moves, to another device
    op = changed.argmax(1)
    dev = out[np.arange(out.shape[0]), op]
    assert np.all(np.bincount(op, minlength=6) > 3000)  # ops drawn uniformly (1/6 = 3333 each)
    # op 1 sits on device 0 (weight 0): to 1 w.p. 1/4, to 2 w.p. 3/4
    np.testing.assert_allclose(np.bincount(dev[op == 1], minlength=d) / (op == 1).sum(), [0, 0.25, 0.75, 0], atol=0.03)
    # op 0 sits on device 1: its weight is excluded, so always device 2
    assert np.all(dev[op == 0] == 2)
    # op 2 (zero row, on device 0): uniform over devices 1, 2, 3
    np.testing.assert_allclose(np.bincount(dev[op == 2], minlength=d) / (op == 2).sum(), [0, 1 / 3, 1 / 3, 1 / 3],
                               atol=0.03)


def test_no_proposal_or_a_zero_share_is_the_plain_search():
    graph = small_random(3, n_ops=7)
    plain = baselines.local_search(graph, 3, RAW, seed=2, max_evals=600, seconds=None, batch_size=32)
    zero = baselines.local_search(graph, 3, RAW, seed=2, max_evals=600, seconds=None, batch_size=32,
                                  research=LocalSearchResearch(proposal=np.ones((7, 3)), proposal_share=0.0))
    np.testing.assert_array_equal(plain.assignment, zero.assignment)
    assert plain.info["evals"] == zero.info["evals"] and plain.makespan == zero.makespan


def test_array_starts_and_proposal_are_seeded_and_never_worse_than_the_best_start():
    graph = dg.workloads.make("random", n_ops=40, levels=6, seed=4)
    topo = dg.Topology.uniform(3)
    config = dg.SimConfig()
    rng = np.random.default_rng(0)
    starts = rng.integers(0, 3, (5, graph.n_ops))
    proposal = rng.random((graph.n_ops, 3))
    kwargs = dict(seed=5, max_evals=800, seconds=None, batch_size=64, starts=starts,
                  research=LocalSearchResearch(proposal=proposal))
    a = baselines.local_search(graph, topo, config, **kwargs)
    b = baselines.local_search(graph, topo, config, **kwargs)
    np.testing.assert_array_equal(a.assignment, b.assignment)
    assert a.makespan == b.makespan
    best_start = min(dg.simulate(graph, s, topo, config=config).makespan for s in starts)
    assert a.info["start_makespan"] == pytest.approx(best_start, rel=1e-12)
    assert a.makespan <= best_start
    assert a.makespan == pytest.approx(dg.simulate(graph, a.assignment, topo, config=config).makespan, rel=1e-12)


def test_default_starts_are_the_three_heuristics():
    graph = two_chains()
    names = [p.name for p in default_starts(graph, dg.Topology.uniform(2), RAW, seed=0)]
    assert names == ["critical_path", "heft", "round_robin"]


@pytest.mark.parametrize("kwargs, match", [
    ({"proposal": np.ones((5, 2))}, "proposal has shape"),
    ({"proposal": -np.ones((6, 2))}, ">= 0"),
    ({"proposal": np.full((6, 2), np.nan)}, "finite"),
    ({"proposal": np.ones((6, 2)), "proposal_share": 1.5}, "proposal_share"),
])
def test_bad_proposals_are_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        research = LocalSearchResearch(**kwargs)  # the share is checked here, the proposal's form below
        baselines.local_search(two_chains(), 2, RAW, max_evals=10, seconds=None, research=research)


# ---------------------------------------------------------------------------- racing the starts
def test_a_race_is_the_probes_then_the_search_from_the_best_probe():
    """The documented composition, rebuilt from plain searches: a probe of probe_share * max_evals from
    each start (seeded from the seed and the start's index), then the rest from the best probe."""
    graph = dg.workloads.make("random", n_ops=50, levels=7, seed=8)
    topo, config = dg.Topology.uniform(3), dg.SimConfig()
    starts = default_starts(graph, topo, config, seed=0)
    raced = baselines.local_search(graph, topo, config, seed=3, max_evals=2000, seconds=None, batch_size=50,
                                   starts=starts, probe_share=0.2)
    probes = [baselines.local_search(graph, topo, config, seed=_child_seed(3, i), max_evals=400, seconds=None,
                                     batch_size=50, starts=[s]) for i, s in enumerate(starts)]
    k = int(np.argmin([p.makespan for p in probes]))
    rest = baselines.local_search(graph, topo, config, seed=_child_seed(3, 3), max_evals=2000 - 1200, seconds=None,
                                  batch_size=50, starts=[probes[k]])
    assert raced.makespan == min(rest.makespan, probes[k].makespan)
    assert raced.info["start"] == starts[k].name and raced.info["evals"] == 2000
    assert [p["makespan"] for p in raced.info["probes"]] == [p.makespan for p in probes]
    assert raced.makespan == pytest.approx(dg.simulate(graph, raced.assignment, topo, config=config).makespan,
                                           rel=1e-12)


def test_a_race_from_a_start_at_the_bound_stops_there():
    graph = two_chains()  # two independent chains: one per device is optimal
    topo = dg.Topology.uniform(2)
    best = baselines.local_search(graph, topo, RAW, max_evals=5000, seconds=None)
    assert best.info["stopped"] == "lower_bound"
    worst = np.zeros(graph.n_ops, dtype=np.int64)  # everything on one device
    raced = baselines.local_search(graph, topo, RAW, max_evals=5000, seconds=None, starts=[worst, best.assignment],
                                   probe_share=0.1)
    assert raced.makespan == best.makespan and raced.info["stopped"] == "lower_bound"
    early = baselines.local_search(graph, topo, RAW, max_evals=5000, seconds=None,
                                   starts=[best.assignment, worst], probe_share=0.1)
    assert [p["start"] for p in early.info["probes"]] == ["starts[0]"]  # no probe after one at the bound
    assert early.makespan == best.makespan


def test_one_start_or_a_zero_probe_share_is_no_race():
    graph = small_random(3, n_ops=7)
    start = [default_starts(graph, dg.Topology.uniform(3), RAW, 2)[2]]
    kw = dict(seed=2, max_evals=600, seconds=None, batch_size=32)
    one = baselines.local_search(graph, 3, RAW, starts=start, probe_share=0.3, **kw)
    alone = baselines.local_search(graph, 3, RAW, starts=start, **kw)
    np.testing.assert_array_equal(one.assignment, alone.assignment)
    assert "probes" not in one.info and one.info["evals"] == alone.info["evals"]
    plain = baselines.local_search(graph, 3, RAW, **kw)
    zero = baselines.local_search(graph, 3, RAW, probe_share=0.0, **kw)
    np.testing.assert_array_equal(plain.assignment, zero.assignment)
    assert "probes" not in zero.info


@pytest.mark.parametrize("share", [-0.1, 0.34, float("nan"), True])
def test_bad_probe_shares_are_clear_errors(share):
    with pytest.raises(ValueError, match="probe_share"):
        baselines.local_search(two_chains(), 2, RAW, max_evals=10, seconds=None, probe_share=share)


# ---------------------------------------------------------------------------- research options
def test_default_research_options_are_the_plain_search():
    graph = small_random(3, n_ops=7)
    plain = baselines.local_search(graph, 3, RAW, seed=2, max_evals=600, seconds=None, batch_size=32)
    explicit = baselines.local_search(graph, 3, RAW, seed=2, max_evals=600, seconds=None, batch_size=32,
                                      research=LocalSearchResearch())
    np.testing.assert_array_equal(plain.assignment, explicit.assignment)
    assert plain.info["evals"] == explicit.info["evals"] and plain.makespan == explicit.makespan


@pytest.mark.parametrize("kwargs, match", [
    ({"patience": 0}, "patience must be an integer >= 1"),
    ({"kick": -1}, "kick must be an integer >= 0"),
    ({"block_max": 1}, "block_max must be an integer >= 2"),
    ({"temperature": 0.0}, "temperature must be a positive"),
    ({"critical_share": 1.5}, "critical_share must be a number in"),
])
def test_bad_research_options_are_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LocalSearchResearch(**kwargs)


def test_research_must_be_the_options_object():
    with pytest.raises(TypeError, match="research must be a LocalSearchResearch"):
        baselines.local_search(two_chains(), 2, RAW, max_evals=10, seconds=None, research={"patience": 3})
