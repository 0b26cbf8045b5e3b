"""Baselines ignore memory when they place; under SimConfig(memory="enforce") their Placement says
whether it fits, as simulate() does for the same assignment."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym import baselines
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology


@pytest.fixture(scope="module")
def instance():
    g = dg.workloads.make("ffnn", batch=64, d_in=256, hidden=256, layers=4, blocks=2)
    total = float(g.persistent_bytes.sum())  # 16 B per parameter with Adam
    return g, Topology.uniform(4, memory=0.6 * total), total


@pytest.mark.parametrize("name", ["single_device", "round_robin", "critical_path", "heft"])
def test_feasibility_matches_simulate(instance, name):
    g, topo, total = instance
    p = baselines.run(name, g, topo, SimConfig(memory="enforce"))
    tr = dg.simulate(g, p.assignment, topology=topo, config=SimConfig(memory="enforce"))
    assert p.feasible == tr.feasible
    assert (p.memory_violation is None) == (tr.memory_violation is None)
    np.testing.assert_array_equal(p.memory.peak, tr.peak_memory)
    if name == "single_device":  # all parameters on one device: 1 / 0.6 of its memory
        assert not p.feasible and p.memory_violation.excess >= 0.4 * total * 0.999
    if name == "round_robin":
        assert p.feasible


def test_memory_off_placement_has_no_profile(instance):
    g, topo, _ = instance
    p = baselines.run("single_device", g, topo, SimConfig())
    assert p.memory is None and p.feasible and p.memory_violation is None
