"""Exact methods against each other and against enumeration by hand; local search reaches optima."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym import baselines
from tests.doppler_gym.baselines.baseline_graphs import RAW, fork_join, make_graph, small_random, two_chains

pytestmark = pytest.mark.slow  # CP-SAT solves and enumeration


def enumerate_by_hand(graph: dg.DataflowGraph, topo: dg.Topology, config: dg.SimConfig) -> float:
    return min(
        dg.simulate(graph, np.array(a), topo, config=config).makespan
        for a in itertools.product(range(topo.n_devices), repeat=graph.n_ops)
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_brute_force_equals_enumeration_by_hand(seed):
    g = small_random(seed, n_ops=6)
    topo = dg.Topology.uniform(3)
    p = baselines.brute_force(g, topo, RAW)
    assert p.info["op0_fixed"] and p.info["assignments"] == 3**5
    assert p.makespan == enumerate_by_hand(g, topo, RAW)
    assert p.info["optimal_assignments"] >= 1


def test_brute_force_enumerates_everything_on_heterogeneous_devices():
    topo = dg.Topology(speed=[1e12, 2e12], memory=16e9, bandwidth=1e9, latency=1e-6)
    g = make_graph([(0, 1), (0, 2), (1, 3), (2, 3)], [1e12, 2e12, 2e12, 1e12], [5e8] * 4, "diamond")
    config = dg.SimConfig()
    p = baselines.brute_force(g, topo, config)
    assert not p.info["op0_fixed"] and p.info["assignments"] == 2**4
    assert p.makespan == enumerate_by_hand(g, topo, config)


def test_brute_force_refuses_large_graphs():
    g = small_random(0, n_ops=9)
    with pytest.raises(ValueError, match="max_assignments"):
        baselines.brute_force(g, 4, RAW, max_assignments=1000)
    with pytest.raises(ValueError, match="13 ops"):
        baselines.brute_force(small_random(0, n_ops=13), 2, RAW)


@pytest.mark.parametrize(
    "graph", [two_chains(), fork_join(), make_graph([(0, 1), (1, 2)], [3, 1, 2], [1, 5, 1], "chain")]
)
def test_cp_sat_optimum_equals_brute_force_on_tiny_graphs(graph):
    """On these instances the schedule optimum is also reached by FIFO work-conserving execution."""
    cp = baselines.cp_sat(graph, 2, RAW, time_limit=10, workers=1)
    bf = baselines.brute_force(graph, 2, RAW)
    assert cp.info["status"] == "OPTIMAL" and cp.info["exact"]
    assert cp.info["objective"] == cp.info["bound"] == bf.makespan == cp.makespan


@pytest.mark.parametrize("seed", range(6))
def test_cp_sat_schedule_bounds_the_work_conserving_optimum(seed):
    """CP-SAT picks the order too, so its optimum <= the best WC makespan <= WC of its assignment."""
    g = small_random(seed, n_ops=8)
    cp = baselines.cp_sat(g, 3, RAW, time_limit=10, workers=1)
    bf = baselines.brute_force(g, 3, RAW)
    assert cp.info["status"] == "OPTIMAL"
    assert cp.info["bound"] <= cp.info["objective"] <= bf.makespan <= cp.makespan


def test_cp_sat_rounds_physical_costs():
    g = dg.workloads.make("random", n_ops=10, levels=4, seed=2)
    topo = dg.Topology.preset("v100x8-dgx1")
    cp = baselines.cp_sat(g, topo, time_limit=10, workers=1)
    assert not cp.info["exact"] and cp.info["status"] in ("OPTIMAL", "FEASIBLE")
    # the rounded schedule is within a few ticks per op of a true schedule
    assert cp.info["objective"] <= cp.makespan + g.n_ops * cp.info["tick"] * 2


def test_local_search_reaches_the_chainmm_optimum(chainmm):
    """1200.07 paper units is the lower bound (total work / 4): optimal, and the search stops there."""
    p = baselines.local_search(chainmm, 4, seed=0, max_evals=3_000_000, seconds=None)
    bound = dg.makespan_lower_bound(chainmm, 4, dg.SimConfig.reference())
    assert p.info["stopped"] == "lower_bound"
    assert p.makespan == pytest.approx(bound, rel=1e-12) == pytest.approx(1200.07)


def test_local_search_never_worse_than_its_start():
    g = dg.load_graph("paper/llama-block")
    start = baselines.heft(g, 4)
    p = baselines.local_search(g, 4, seed=1, max_evals=2000, seconds=None, starts=[start])
    assert p.info["start"] == "heft" and p.info["start_makespan"] == start.makespan
    assert p.makespan <= start.makespan
    assert p.info["evals"] >= 2000
