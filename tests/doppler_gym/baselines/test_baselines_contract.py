"""The contract every baseline keeps: re-simulated makespan, topological order, seeds, errors."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym import baselines
from doppler_gym.baselines import Placement
from tests.doppler_gym.baselines.baseline_graphs import RAW, fork_join, small_random, two_chains

OPTIONS = {
    "local_search": {"max_evals": 1500, "seconds": None, "batch_size": 64},
    "cp_sat": {"time_limit": 5.0, "workers": 1},
}
SEEDED = ("random", "metis", "critical_path", "local_search")


def is_topological(graph: dg.DataflowGraph, order: np.ndarray) -> bool:
    pos = np.empty(graph.n_ops, dtype=np.int64)
    pos[order] = np.arange(graph.n_ops)
    return bool(np.all(pos[graph.src] < pos[graph.dst]))


def cases():
    """(graph, topology, config): raw FIFO, the reference model, physical costs on a heterogeneous
    topology in priority mode with several streams."""
    return [
        (small_random(1, n_ops=8), 3, RAW),
        (dg.load_graph("paper/ffnn"), 4, None),
        (
            dg.workloads.make("random", n_ops=40, seed=3),
            dg.Topology.preset("v100x8-dgx1"),
            dg.SimConfig(queue_order="priority", streams=2),
        ),
        (
            small_random(2, n_ops=9),
            dg.Topology.preset("p100x4"),
            dg.SimConfig(link_model="fifo", queue_order="priority"),
        ),
    ]


@pytest.mark.parametrize("case", range(4))
def test_every_placement_resimulates_to_its_makespan(case):
    graph, topo, config = cases()[case]
    topo_obj = dg.Topology.uniform(topo) if isinstance(topo, int) else topo
    cfg = config if config is not None else dg.SimConfig.reference()
    for name in baselines.names():
        if name == "brute_force" and baselines.count_assignments(graph, topo_obj, cfg) > 200_000:
            continue
        if name == "cp_sat" and graph.n_ops > 12:
            continue
        p = baselines.run(name, graph, topo, config, **OPTIONS.get(name, {}))
        assert isinstance(p, Placement)
        assert p.assignment.shape == p.order.shape == (graph.n_ops,)
        assert p.assignment.dtype == p.order.dtype == np.int64
        assert p.assignment.min() >= 0 and p.assignment.max() < topo_obj.n_devices
        assert is_topological(graph, p.order), name
        prio = p.priorities() if cfg.queue_order == "priority" else None
        expected = dg.simulate(graph, p.assignment, topo_obj, priorities=prio, config=cfg).makespan
        assert p.makespan == expected, name
        assert p.seconds >= 0


@pytest.mark.parametrize("name", SEEDED)
def test_seeds_reproduce(name):
    g = dg.load_graph("paper/chainmm")
    opts = OPTIONS.get(name, {})
    a = baselines.run(name, g, 4, seed=3, **opts)
    b = baselines.run(name, g, 4, seed=3, **opts)
    np.testing.assert_array_equal(a.assignment, b.assignment)
    np.testing.assert_array_equal(a.order, b.order)
    assert a.makespan == b.makespan


def test_different_seeds_differ():
    g = dg.load_graph("paper/chainmm")
    assert not np.array_equal(baselines.random_placement(g, 4, seed=0).assignment,
                              baselines.random_placement(g, 4, seed=1).assignment)
    orders = {tuple(baselines.critical_path(g, 4, seed=s).order) for s in range(4)}
    assert len(orders) > 1


def test_default_config_follows_the_units():
    paper = dg.load_graph("paper/ffnn")
    assert baselines.round_robin(paper, 4).makespan == dg.simulate(
        paper, np.arange(paper.n_ops) % 4, dg.Topology.uniform(4), config=dg.SimConfig.reference()).makespan
    phys = dg.workloads.make("random", n_ops=30, seed=0)
    assert baselines.round_robin(phys, 4).makespan == dg.simulate(
        phys, np.arange(30) % 4, dg.Topology.uniform(4), config=dg.SimConfig()).makespan


def test_registry():
    assert set(baselines.names()) >= {"random", "round_robin", "single_device", "critical_path", "heft", "cpop", "peft",
                                      "metis", "local_search", "brute_force", "cp_sat"}
    assert baselines.get("round-robin") is baselines.round_robin
    assert "paper_faithful" in baselines.options("critical_path")
    p = baselines.run("critical-path", two_chains(), 2, RAW, seed=1)
    assert p.name == "critical_path"


@pytest.mark.parametrize(
    ("call", "error", "needle"),
    [
        (lambda: baselines.heft("graph", 2), TypeError, "DataflowGraph"),
        (lambda: baselines.heft(two_chains(), "4"), TypeError, "Topology or a device count"),
        (lambda: baselines.heft(two_chains(), 0), ValueError, ">= 1"),
        (lambda: baselines.heft(two_chains(), 2, config="raw"), TypeError, "SimConfig"),
        (lambda: baselines.critical_path(two_chains(), 2, seed=-1), ValueError, "seed"),
        (lambda: baselines.single_device(two_chains(), 2, device=5), ValueError, "0..1"),
        (lambda: baselines.local_search(two_chains(), 2, seconds=None), ValueError, "budget"),
        (lambda: baselines.local_search(two_chains(), 2, batch_size=0), ValueError, "batch_size"),
        (lambda: baselines.local_search(two_chains(), 2, starts=[np.zeros(3)]), ValueError, "starts[0]"),
        (lambda: baselines.brute_force(dg.load_graph("paper/ffnn"), 4), ValueError, "local_search"),
        (lambda: baselines.cp_sat(two_chains(), 2, time_limit=0), ValueError, "time_limit"),
        (lambda: baselines.run("nope", two_chains(), 2), ValueError, "known baselines"),
        (lambda: baselines.run("heft", two_chains(), 2, seed=1), TypeError, "takes no option 'seed'"),
    ],
)
def test_invalid_inputs(call, error, needle):
    with pytest.raises(error) as exc:
        call()
    assert needle in str(exc.value)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"assignment": np.zeros((2, 2)), "order": [0, 1]}, "1-D"),
        ({"assignment": [0, 1], "order": [0, 1, 2]}, "expected (2,)"),
        ({"assignment": [0, -1], "order": [0, 1]}, "negative"),
        ({"assignment": [0, 1], "order": [1, 1]}, "permutation"),
        ({"assignment": [0, 1], "order": [0, 1], "makespan": float("nan")}, "makespan"),
    ],
)
def test_placement_validation(kwargs, needle):
    args = {"name": "x", "makespan": 1.0, "seconds": 0.0, **kwargs}
    with pytest.raises(ValueError) as exc:
        Placement(**args)
    assert needle in str(exc.value)


def test_placement_is_read_only():
    p = baselines.round_robin(two_chains(), 2, RAW)
    with pytest.raises(ValueError):
        p.assignment[0] = 1


@pytest.mark.parametrize(("fn", "module", "needle"), [
    (baselines.metis_partition, "pymetis", "pip install pymetis"),
    (baselines.cp_sat, "ortools.sat.python", "pip install ortools"),
])
def test_missing_solver_says_how_to_install(monkeypatch, fn, module, needle):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError) as exc:
        fn(fork_join(), 2, RAW)
    assert needle in str(exc.value)
