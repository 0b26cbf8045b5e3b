"""doppler_gym.instances: one place resolves graphs, topologies, default configs and assignments."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym import instances


def test_graph_forms():
    g = dg.load_graph("paper/ffnn")
    assert instances.resolve_graph(g) is g
    assert instances.resolve_graph("paper/ffnn").n_ops == g.n_ops
    assert instances.resolve_graph("ffnn").n_ops == dg.workloads.make("ffnn").n_ops
    assert instances.resolve_graph("ffnn", {"layers": 2}).n_ops == dg.workloads.make("ffnn", layers=2).n_ops
    assert set(instances.graph_names()) == {*dg.paper_graph_names(), *dg.workloads.names()}


def test_graph_files(tmp_path):
    g = dg.workloads.make("ffnn", layers=1)
    path = tmp_path / "g.json"
    dg.save_graph(g, path)
    for spec in (path, str(path)):
        assert instances.resolve_graph(spec).n_ops == g.n_ops
    with pytest.raises(ValueError, match="graph file .* does not exist"):
        instances.resolve_graph(str(tmp_path / "missing.txt"))


def test_graph_errors_say_what_where_and_how():
    with pytest.raises(ValueError, match=r"unknown graph 'paper/ffnx': did you mean 'paper/ffnn'\?"):
        instances.resolve_graph("paper/ffnx")
    with pytest.raises(ValueError, match=r"unknown graph 'nosuch' \(options\['graph'\]\): not an existing"):
        instances.resolve_graph("nosuch", where="options['graph']")
    with pytest.raises(ValueError, match="only apply to workload generators"):
        instances.resolve_graph("paper/ffnn", {"layers": 2})
    with pytest.raises(ValueError, match="only apply to workload names"):
        instances.resolve_graph(dg.load_graph("paper/ffnn"), {"layers": 2})
    with pytest.raises(TypeError, match="my_graph must be a DataflowGraph"):
        instances.resolve_graph(3, where="my_graph")


def test_topology_forms_and_errors():
    topo = dg.Topology.uniform(3)
    assert instances.resolve_topology(topo) is topo
    assert instances.resolve_topology("p100x4").name == "p100x4"
    assert instances.resolve_topology("uniform8").n_devices == 8
    assert instances.resolve_topology(np.int64(5)).n_devices == 5
    with pytest.raises(ValueError, match="unknown topology preset 'nosuch'"):
        instances.resolve_topology("nosuch")
    with pytest.raises(ValueError, match=r"--devices=0: a device count must be >= 1"):
        instances.resolve_topology(0, "--devices")
    for bad in (True, 2.5, None):
        with pytest.raises(TypeError, match="topology must be a Topology"):
            instances.resolve_topology(bad)


def test_default_config_follows_the_units():
    assert instances.default_config(dg.load_graph("paper/chainmm")) == dg.SimConfig.reference()
    assert instances.default_config(dg.workloads.make("chainmm")) == dg.SimConfig()


def test_check_assignment_is_the_simulators():
    g = dg.workloads.make("ffnn", layers=1)
    a = instances.check_assignment(g, np.zeros(g.n_ops), dg.Topology.uniform(2))
    assert a.dtype == np.int32 and a.shape == (g.n_ops,)
    with pytest.raises(ValueError, match="has 2 devices"):
        instances.check_assignment(g, np.full(g.n_ops, 2), dg.Topology.uniform(2))


def test_every_caller_uses_it():
    """The CLI, the envs and the baselines resolve a spec to the same instance and default config."""
    import argparse

    from doppler_gym.baselines.common import resolve
    from doppler_gym.cli.common import config_from_args, graph_from_args, topology_from_args
    from doppler_gym.envs.placement import PlacementEnv

    args = argparse.Namespace(graph="paper/ffnn", param=[], topology=None, devices=4, reference=False)
    g = graph_from_args(args)
    assert config_from_args(args, g) == instances.default_config(g) == dg.SimConfig.reference()
    assert topology_from_args(args).n_devices == 4
    _, topo, config = resolve(g, 4, None, "test")
    assert topo.n_devices == 4 and config == dg.SimConfig.reference()
    env = PlacementEnv(graph="paper/ffnn", topology=4)
    env.reset(seed=0)
    assert env.sim_config == dg.SimConfig.reference()
    assert env.context.lower_bound == dg.makespan_lower_bound(g, 4, dg.SimConfig.reference())
