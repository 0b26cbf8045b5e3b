"""Each baseline on toy graphs whose optimum is known by hand, and rule-specific checks."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym import baselines
from doppler_gym.baselines.common import Costs
from doppler_gym.baselines.timeline import InsertionPlan
from tests.doppler_gym.baselines.baseline_graphs import RAW, fork_join, make_graph, two_chains

STRUCTURED = ("critical_path", "heft", "cpop", "peft", "local_search", "brute_force", "cp_sat")
FAST = {"local_search": {"max_evals": 2000, "seconds": None}, "cp_sat": {"time_limit": 5.0, "workers": 1}}


@pytest.mark.parametrize("name", STRUCTURED + ("metis",))
def test_two_chains_one_per_device(name):
    g = two_chains()
    p = baselines.run(name, g, 2, RAW, **FAST.get(name, {}))
    assert p.makespan == 3.0
    assert (
        p.assignment[0] == p.assignment[1] == p.assignment[2] != p.assignment[3] == p.assignment[4] == p.assignment[5]
    )


@pytest.mark.parametrize("name", STRUCTURED)
def test_fork_join_stays_on_one_device(name):
    g = fork_join()
    p = baselines.run(name, g, 3, RAW, **FAST.get(name, {}))
    assert p.makespan == 5.0
    assert np.unique(p.assignment).size == 1


def test_simple_baselines_by_hand():
    g = fork_join()
    assert baselines.round_robin(g, 2, RAW).assignment.tolist() == [0, 1, 0, 1, 0]
    # 0 on d0 ends at 1; its output reaches d1 at 11, where 1 runs [11, 12] and 3 [12, 13];
    # 2 runs on d0 [1, 2]; 4 on d0 waits for 3's output: 13 + 10 = 23, ends at 24
    assert baselines.round_robin(g, 2, RAW).makespan == 24.0
    single = baselines.single_device(g, 3, RAW)
    assert single.assignment.tolist() == [0] * 5 and single.makespan == 5.0
    assert baselines.single_device(g, 3, RAW, device=2).assignment.tolist() == [2] * 5


def test_single_device_picks_the_fastest():
    topo = dg.Topology(speed=[1e12, 4e12, 2e12], memory=16e9, bandwidth=10e9, latency=0.0)
    g = two_chains()
    p = baselines.single_device(g, topo, dg.SimConfig())
    assert p.assignment.tolist() == [1] * 6
    assert p.makespan == pytest.approx(6 / 4e12)


def test_critical_path_takes_highest_b_level_and_the_bug_takes_the_oldest():
    # sources 0 (b-level 1) and 1 (b-level 5 + 1 + 1 = 7), 1 -> 2; ready list starts [0, 1]
    g = make_graph([(1, 2)], [1, 5, 1], [1, 1, 1], "two-sources")
    fixed = baselines.critical_path(g, 2, RAW)
    assert fixed.order.tolist() == [1, 2, 0]
    buggy = baselines.critical_path(g, 2, RAW, paper_faithful=True)
    assert buggy.order.tolist()[0] == 0  # legal_nodes[0]: one tied maximum, so index 0 of the ready list
    assert buggy.name == "critical_path_paper" and buggy.info["paper_faithful"]


def test_critical_path_paper_faithful_differs_on_chainmm(chainmm):
    fixed = baselines.critical_path(chainmm, 4, seed=0)
    faithful = baselines.critical_path(chainmm, 4, seed=0, paper_faithful=True)
    assert not np.array_equal(fixed.order, faithful.order)
    assert not np.array_equal(fixed.assignment, faithful.assignment)


def test_critical_path_uses_the_b_level_of_the_files():
    """Raw costs: the priorities are exactly the files' comp/comm (DOPPLER's b-level)."""
    g = dg.load_graph("paper/ffnn")
    costs = Costs.of(g, dg.Topology.uniform(4), dg.SimConfig.reference())
    np.testing.assert_array_equal(costs.mean_comp, g.flops)
    np.testing.assert_array_equal(costs.mean_comm, g.out_bytes)


def test_insertion_plan_fills_gaps():
    g = make_graph([], [1, 1, 2, 5], [0, 0, 0, 0], "four")
    plan = InsertionPlan(g, Costs.of(g, dg.Topology.uniform(1), RAW))
    plan.place(0, 0, 0.0)  # busy [0, 1]
    plan.place(1, 0, 5.0)  # busy [5, 6]
    assert plan.earliest_fit(0, ready=1.0, duration=2.0) == 1.0  # fits in the gap [1, 5]
    assert plan.earliest_fit(0, ready=0.0, duration=5.0) == 6.0  # does not fit: after the last op
    assert plan.earliest_fit(0, ready=4.0, duration=1.0) == 4.0
    assert plan.earliest_fit(0, ready=4.5, duration=1.0) == 6.0


def _first_gap_by_scan(starts, ends, ready, duration):
    """The reference: try every gap from time 0 on (what earliest_fit computes with bisection)."""
    prev_end = 0.0
    for s, e in zip(starts, ends):
        t = max(ready, prev_end)
        if t + duration <= s:
            return t
        prev_end = max(prev_end, e)
    return max(ready, prev_end)


@pytest.mark.parametrize("seed", range(5))
def test_insertion_plan_matches_a_scan_of_every_gap(seed):
    # Random plans built by the plan's own rule, zero durations and ties at gap edges included.
    rng = np.random.default_rng(seed)
    n = 120
    flops = rng.choice([0.0, 1.0, 2.0, 3.0], size=n)
    g = make_graph([], flops.tolist(), [0.0] * n, f"ops{seed}")
    plan = InsertionPlan(g, Costs.of(g, dg.Topology.uniform(2), RAW))
    busy = [([], []), ([], [])]
    for op in range(n):
        d = int(rng.integers(2))
        ready = float(rng.integers(0, 40))
        duration = float(plan.costs.comp[op, d])
        for probe_ready in (ready, ready + 0.5, 0.0):
            for probe_duration in (0.0, 1.0, duration):
                expected = _first_gap_by_scan(*busy[d], probe_ready, probe_duration)
                assert plan.earliest_fit(d, probe_ready, probe_duration) == expected
        start = plan.earliest_fit(d, ready, duration)
        plan.place(op, d, start)
        k = int(np.searchsorted(busy[d][0], start, side="right"))
        busy[d][0].insert(k, start)
        busy[d][1].insert(k, start + duration)
    for d in range(2):  # what the bisection relies on: no interval starts strictly inside another
        starts, ends = busy[d]
        assert not any(a < s < e for s in starts for a, e in zip(starts, ends))
        assert any(e == s for s, e in zip(starts, ends))  # zero-length ops were placed too


def test_heft_uses_the_fast_device_and_inserts():
    topo = dg.Topology(speed=[1e12, 3e12], memory=16e9, bandwidth=1e9, latency=0.0)
    g = make_graph([(0, 1), (1, 2)], [3e12, 3e12, 3e12], [1e9, 1e9, 1e9], "chain3")
    p = baselines.heft(g, topo, dg.SimConfig())
    assert p.assignment.tolist() == [1, 1, 1]
    assert p.info["plan_makespan"] == pytest.approx(3.0) and p.makespan == pytest.approx(3.0)


def test_cpop_puts_the_critical_path_on_one_device():
    g = make_graph([(0, 1), (1, 2), (0, 3)], [4, 4, 4, 1], [1, 1, 1, 1], "cp")
    p = baselines.cpop(g, 2, RAW)
    assert p.info["critical_ops"] == [0, 1, 2]
    assert set(p.assignment[[0, 1, 2]].tolist()) == {p.info["critical_device"]}


def test_peft_oct_by_hand():
    from doppler_gym.baselines.peft import optimistic_cost_table

    # 0 -> 1, comp [1, 2], comm of 0 = 3, two uniform devices: OCT(0, p) = min(0 + 2 + 0, 0 + 2 + 3) = 2
    g = make_graph([(0, 1)], [1, 2], [3, 3], "pair")
    oct_ = optimistic_cost_table(g, Costs.of(g, dg.Topology.uniform(2), RAW))
    np.testing.assert_array_equal(oct_, [[2.0, 2.0], [0.0, 0.0]])


def test_metis_balances_independent_components():
    g = dg.load_graph("paper/ffnn")  # four independent components of equal work: the cut is 0
    p = baselines.metis_partition(g, 4)
    assert p.info["edge_cut"] == 0
    assert p.makespan == pytest.approx(dg.makespan_lower_bound(g, 4, dg.SimConfig.reference()), rel=1e-12)
