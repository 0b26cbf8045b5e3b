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


ROOFLINE = dg.SimConfig(cost_model="roofline")


def test_default_config_is_the_roofline_for_physical_graphs_on_gpu_topologies():
    """Physical units and GPU models on every device: the roofline; no GPU models (a count, ``uniform``) or no
    topology: the FLOP-rate model; paper graphs: the reference model on every topology."""
    chainmm, paper = dg.workloads.make("chainmm"), dg.load_graph("paper/chainmm")
    for preset in ("h100x8-nvswitch", "p100x4", "dc2-wan", dg.Topology.preset("a100x8-dgx")):
        assert instances.default_config(chainmm, preset) == ROOFLINE
        assert instances.default_config(paper, preset) == dg.SimConfig.reference()
    for no_gpus in (None, 8, "uniform8", dg.Topology.uniform(2)):
        assert instances.default_config(chainmm, no_gpus) == dg.SimConfig()
    with pytest.raises(ValueError, match="default_config: topology=0: a device count must be >= 1"):
        instances.default_config(chainmm, 0)


def test_default_config_keeps_a_workloads_own_fields_under_the_roofline():
    """A pipeline's fixed order stays, its FLOP-rate model becomes the roofline; unit (raw) costs stay raw."""
    physical = instances.resolve_graph("pipeline:stages=2,microbatches=2")
    assert instances.default_config(physical, "h100x8-nvswitch") == dg.SimConfig(cost_model="roofline",
                                                                                 queue_order="fixed")
    assert instances.default_config(physical, 2) == dg.SimConfig(queue_order="fixed")
    unit = instances.resolve_graph("pipeline:stages=2,microbatches=2,unit_costs=true")
    assert instances.default_config(unit, "h100x8-nvswitch") == dg.SimConfig(cost_model="raw", queue_order="fixed")


def test_the_default_charges_a_layer_norm_its_memory_traffic_on_the_h100_preset():
    """One bf16 layer norm over an 8192 x 8192 activation (reads x and gamma/beta, writes y), run by every
    default-config caller on ``h100x8-nvswitch``: its HBM traffic over the H100 datasheet's 3.35 TB/s plus the
    3 us launch, where the FLOP-rate model charged its ~8 FLOP per element at the fp32 67 TFLOP/s."""
    from doppler_gym.envs.placement import PlacementEnv
    from doppler_gym.graph.types import DataflowGraph

    elements = 8192 * 8192
    nbytes, flops = 2 * elements * 2 + 2 * 8192 * 2, 8.0 * elements
    g = DataflowGraph(src=[], dst=[], flops=[flops], out_bytes=[2.0 * elements], kinds=("layer_norm",),
                      io_bytes=[nbytes], precisions=("bf16",))
    by_hand = nbytes / 3.35e12 + 3e-6  # [s]
    assert by_hand > 10 * flops / 67e12  # not what the FLOP-rate model charged
    h100 = dg.Topology.preset("h100x8-nvswitch")
    assert dg.baselines.single_device(g, h100).makespan == pytest.approx(by_hand, rel=1e-12)
    env = PlacementEnv(graph=g, topology=h100)
    env.reset(seed=0)
    assert env.context.lower_bound == pytest.approx(by_hand, rel=1e-12)
    uniform = dg.Topology.uniform(8)  # no GPU models: FLOPs over its devices' speed
    assert dg.baselines.single_device(g, uniform).makespan == pytest.approx(flops / uniform.speed[0], rel=1e-12)


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


def test_every_caller_uses_the_roofline_default_on_a_gpu_preset():
    """The same rule through the CLI (``--topology``), the baselines and the envs;
    a ``--cost-model`` flag or a given config is never replaced."""
    import argparse

    from doppler_gym.baselines.common import resolve
    from doppler_gym.cli.common import config_from_args, graph_from_args
    from doppler_gym.envs.placement import PlacementEnv

    args = argparse.Namespace(graph="ffnn", param=["layers=1"], topology="h100x8-nvswitch", devices=None,
                              reference=False)
    g = graph_from_args(args)
    assert config_from_args(args, g) == instances.default_config(g, "h100x8-nvswitch") == ROOFLINE
    assert config_from_args(argparse.Namespace(**vars(args), cost_model="topology"), g) == dg.SimConfig()
    assert config_from_args(argparse.Namespace(**{**vars(args), "topology": None, "devices": 8}), g) == dg.SimConfig()
    h100 = dg.Topology.preset("h100x8-nvswitch")
    assert resolve(g, h100, None, "test")[2] == ROOFLINE
    assert resolve(g, h100, dg.SimConfig(), "test")[2] == dg.SimConfig()
    env = PlacementEnv(graph=g, topology=h100)
    env.reset(seed=0)
    assert env.sim_config == env.context.config == ROOFLINE
    env = PlacementEnv(graph=g, topology=h100, sim_config=dg.SimConfig())
    env.reset(seed=0)
    assert env.sim_config == env.context.config == dg.SimConfig()
