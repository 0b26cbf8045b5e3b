"""makespan_lower_bound: the analysis bound in the simulator's reported unit."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg


def test_reference_mode_gives_paper_units():
    g = dg.load_graph("paper/ffnn")
    bound = dg.makespan_lower_bound(g, 4, dg.SimConfig.reference())
    assert bound == pytest.approx(56.70, abs=0.01)
    assert dg.makespan_lower_bound(g, dg.Topology.uniform(4), dg.SimConfig.reference()) == bound


@pytest.mark.parametrize("config", [dg.SimConfig.reference(), dg.SimConfig(), dg.SimConfig(link_model="fifo", streams=1)])
def test_simulated_makespans_never_beat_the_bound(config):
    g = dg.workloads.make("random", n_ops=60, seed=3)
    topo = dg.Topology.preset("v100x8-dgx1")
    rng = np.random.default_rng(0)
    assignments = rng.integers(0, topo.n_devices, (200, g.n_ops))
    makespans = dg.simulate_batch(g, assignments, topology=topo, config=config)
    assert np.all(makespans >= dg.makespan_lower_bound(g, topo, config) * (1 - 1e-12))


def test_topology_mode_uses_device_speeds():
    g = dg.workloads.make("random", n_ops=30, seed=1)
    slow = dg.Topology.uniform(2, speed=1e12)
    fast = dg.Topology.uniform(2, speed=2e12)
    assert dg.makespan_lower_bound(g, slow) == pytest.approx(2 * dg.makespan_lower_bound(g, fast))
    assert dg.makespan_lower_bound(g, 2) == dg.makespan_lower_bound(g, dg.Topology.uniform(2))


def test_streams_raise_capacity():
    # Two independent unit ops on one device with two streams run in 1, so the bound must allow 1.
    g = dg.DataflowGraph(src=[], dst=[], flops=[1.0, 1.0], out_bytes=[0.0, 0.0])
    two_streams = dg.SimConfig(cost_model="raw", streams=2)
    assert dg.simulate(g, [0, 0], config=two_streams).makespan == 1.0
    assert dg.makespan_lower_bound(g, 1, two_streams) == 1.0
    assert dg.makespan_lower_bound(g, 1, dg.SimConfig(cost_model="raw")) == 2.0
