"""island_search against hand-driven local_search calls, and the same result as Ray tasks."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym import baselines
from doppler_gym.baselines import LocalSearchResearch
from doppler_gym.parallel import island_search, island_seed
from tests.doppler_gym.parallel.ray_fixture import RAY_ADDRESS, ray_local  # noqa: F401  (fixture)

EVALS = 384
OPTS = {"batch_size": 64, "research": LocalSearchResearch(patience=3)}


@pytest.fixture(scope="module")
def instance():
    g = dg.workloads.make("ffnn")  # 160 ops; on 3 devices 384 evaluations stay above the lower bound
    return g, dg.Topology.uniform(3), dg.SimConfig()


def _by_hand(g, topo, config, islands, rounds, seed):
    """A second implementation: the documented seeds, the best of each round as the next round's start."""
    best, evals = None, 0
    for r in range(rounds):
        starts = None if best is None else [best]
        found = [baselines.local_search(g, topo, config, seed=island_seed(seed, r, i), max_evals=EVALS,
                                        seconds=None, starts=starts, **OPTS) for i in range(islands)]
        evals += sum(p.info["evals"] for p in found)
        round_best = min(found, key=lambda p: p.makespan)  # min keeps the first of equal makespans
        if best is None or round_best.makespan < best.makespan:
            best = round_best
    return best, evals


@pytest.mark.parametrize("rounds", [1, 2])
def test_island_search_equals_hand_driven_local_search(instance, rounds):
    g, topo, config = instance
    got = island_search(g, topo, config, islands=3, rounds=rounds, max_evals=EVALS, seed=5, **OPTS)
    want, evals = _by_hand(g, topo, config, 3, rounds, 5)
    assert got.makespan == want.makespan
    np.testing.assert_array_equal(got.assignment, want.assignment)
    assert got.name == "island_search"
    assert got.info["evals"] == evals >= 3 * rounds * EVALS  # + 1 per restart's kicked start
    assert got.makespan == min(min(m) for m in got.info["island_makespans"])
    assert got.makespan == pytest.approx(dg.simulate(g, got.assignment, topo, config=config).makespan)
    assert got.makespan >= dg.makespan_lower_bound(g, topo, config) * (1 - 1e-12)


def test_islands_differ_and_seeds_are_distinct(instance):
    g, topo, config = instance
    p = island_search(g, topo, config, islands=4, max_evals=64, seed=0, batch_size=64,
                      research=LocalSearchResearch(patience=1))
    assert len({island_seed(0, 0, i) for i in range(4)}) == 4
    assert len(p.info["island_makespans"][0]) == 4


@pytest.mark.slow
def test_ray_islands_equal_local(instance, ray_local):  # noqa: F811
    g, topo, config = instance
    local = island_search(g, topo, config, islands=3, rounds=2, max_evals=EVALS, seed=1, **OPTS)
    remote = island_search(g, topo, config, islands=3, rounds=2, max_evals=EVALS, seed=1, ray_address=RAY_ADDRESS,
                           **OPTS)
    assert remote.makespan == local.makespan
    np.testing.assert_array_equal(remote.assignment, local.assignment)
    assert remote.info["island_makespans"] == local.info["island_makespans"]


def test_bad_arguments(instance):
    g, topo, config = instance
    with pytest.raises(ValueError, match="islands must be an integer >= 1"):
        island_search(g, topo, config, islands=0)
    with pytest.raises(TypeError, match="'seconds' is set by island_search"):
        island_search(g, topo, config, seconds=3.0)
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        island_search(g, topo, config, seed=-1)
