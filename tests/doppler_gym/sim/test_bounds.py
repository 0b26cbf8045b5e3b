"""makespan_lower_bound: max(critical path, work / capacity) in the simulator's reported unit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import doppler_gym as dg
from doppler_gym.graph.analysis import critical_path

RAW = dg.SimConfig(cost_model="raw")

#   0 -> 1 -> 3
#   0 -> 2 -> 3
#        2 -> 4
TOY = dg.DataflowGraph(
    src=[0, 0, 1, 2, 2], dst=[1, 2, 3, 3, 4], flops=[1.0, 2.0, 3.0, 4.0, 5.0], out_bytes=[10.0, 20.0, 30.0, 40.0, 50.0]
)


def test_toy_bound_by_hand():
    # critical path 0-2-4 = 1 + 3 + 5 = 9, total work 15
    assert dg.makespan_lower_bound(TOY, 1, RAW) == 15.0
    assert dg.makespan_lower_bound(TOY, 2, RAW) == 9.0  # path beats 15/2
    assert dg.makespan_lower_bound(TOY, np.int64(4), RAW) == 9.0
    assert dg.makespan_lower_bound(TOY, 2, dg.SimConfig(cost_model="raw", time_divisor=3.0)) == 3.0
    # topology model: path at the fastest speed, work over the speed sum
    fast = dg.Topology(speed=[1.0, 3.0], memory=1.0, bandwidth=1.0, latency=0.0)
    assert dg.makespan_lower_bound(TOY, fast) == pytest.approx(max(9 / 3, 15 / 4))
    slow = dg.Topology.uniform(4, speed=2.0)
    assert dg.makespan_lower_bound(TOY, slow) == pytest.approx(9 / 2)
    assert dg.makespan_lower_bound(TOY, fast, RAW) == 9.0  # raw costs: only the device count matters


def test_bad_arguments():
    for bad in (0, -1, True, 2.5, "4"):
        with pytest.raises(ValueError, match="positive int or a Topology"):
            dg.makespan_lower_bound(TOY, bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="SimConfig"):
        dg.makespan_lower_bound(TOY, 2, "raw")  # type: ignore[arg-type]


def test_empty_graph():
    empty = dg.DataflowGraph(src=[], dst=[], flops=[], out_bytes=[])
    assert dg.makespan_lower_bound(empty, 3, RAW) == 0.0
    assert dg.makespan_lower_bound(empty, 3) == 0.0


# Lower bounds published with the DOPPLER paper's graphs, in paper units (raw cost / 1e10).
@pytest.mark.parametrize(
    "name, devices, expected",
    [
        ("paper/chainmm", 4, 1200.07),
        ("paper/ffnn", 4, 56.70),
        ("paper/llama-block", 4, 97.17),
        ("paper/llama-layer", 4, 97.24),
        ("paper/chainmm", 8, 600.03),
        ("paper/ffnn", 8, 28.35),
        ("paper/llama-block-8gpu", 8, 97.15),
        ("paper/llama-layer-8gpu", 8, 97.23),
    ],
)
def test_published_lower_bounds(name, devices, expected):
    g = dg.load_graph(name)
    bound = dg.makespan_lower_bound(g, devices, dg.SimConfig.reference())
    assert bound == pytest.approx(expected, abs=0.01)
    assert bound == dg.makespan_lower_bound(g, devices, RAW) / 1e10


def test_reference_mode_gives_paper_units():
    g = dg.load_graph("paper/ffnn")
    bound = dg.makespan_lower_bound(g, 4, dg.SimConfig.reference())
    assert bound == pytest.approx(56.70, abs=0.01)
    assert dg.makespan_lower_bound(g, dg.Topology.uniform(4), dg.SimConfig.reference()) == bound


@pytest.mark.parametrize(
    "config", [dg.SimConfig.reference(), dg.SimConfig(), dg.SimConfig(link_model="fifo", streams=2)]
)
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
    assert dg.makespan_lower_bound(g, 1, RAW) == 2.0


# ---------------------------------------------------------------------- property: simulate >= bound
def _line3() -> dg.Topology:
    """Devices 0 - 1 - 2 in a line (no direct 0 <-> 2 link), heterogeneous speeds and links."""
    bw = np.array([[0.0, 12e9, 0.0], [10e9, 0.0, 20e9], [0.0, 25e9, 0.0]])  # [B/s]
    lat = np.array([[0.0, 5e-6, 0.0], [4e-6, 0.0, 3e-6], [0.0, 2e-6, 0.0]])  # [s]
    return dg.Topology(speed=[9e12, 4.5e12, 14e12], memory=16e9, bandwidth=bw, latency=lat, name="line3")


TOPOLOGIES = (
    lambda: dg.Topology.uniform(1),
    lambda: dg.Topology.uniform(2),
    lambda: dg.Topology.uniform(3, speed=1e12, bandwidth=1e9, latency=0.0),
    _line3,
    lambda: dg.Topology.preset("p100x4"),
    lambda: dg.Topology.preset("v100x8-dgx1"),
)


@st.composite
def cases(draw):
    """A DAG (costs with ties and zeros), a topology, a config, priorities and a few assignments."""
    n = draw(st.integers(1, 12))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    edges = [p for p in pairs if draw(st.booleans())] if pairs else []
    relabel = np.array(draw(st.permutations(range(n))), dtype=np.int64)
    cost_model = draw(st.sampled_from(["raw", "topology"]))
    scale = (1.0, 1.0) if cost_model == "raw" else (1e11, 1e9)
    costs = st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, 7.5]), min_size=n, max_size=n)
    g = dg.DataflowGraph(
        src=relabel[[u for u, _ in edges]] if edges else [],
        dst=relabel[[v for _, v in edges]] if edges else [],
        flops=np.array(draw(costs)) * scale[0],
        out_bytes=np.array(draw(costs)) * scale[1],
    )
    topo = draw(st.sampled_from(TOPOLOGIES))()
    config = dg.SimConfig(
        cost_model=cost_model,
        link_model=draw(st.sampled_from(["ideal", "fifo"])),
        streams=draw(st.integers(1, 4)),
        queue_order=draw(st.sampled_from(["fifo", "priority"])),
        time_divisor=draw(st.sampled_from([1.0, 1e10])) if cost_model == "raw" else 1.0,
    )
    devices = st.integers(0, topo.n_devices - 1)
    assignments = np.array(draw(st.lists(st.lists(devices, min_size=n, max_size=n), min_size=1, max_size=4)))
    priorities = np.array(draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), dtype=np.float64)
    return g, topo, config, priorities, assignments


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_simulate_never_beats_the_bound(case):
    g, topo, config, priorities, assignments = case
    bound = dg.makespan_lower_bound(g, topo, config)
    prio = priorities if config.queue_order == "priority" else None
    for a in assignments:
        makespan = dg.simulate(g, a, topology=topo, priorities=prio, config=config).makespan
        assert makespan >= bound * (1 - 1e-12), (makespan, bound)
    if config.cost_model == "raw":  # the definition, in raw units
        path = critical_path(g)[0]
        want = max(path, g.total_flops / (topo.n_devices * config.streams)) / config.time_divisor
        assert bound == pytest.approx(want, rel=1e-12, abs=0)
