"""Shared helpers of the learned-baseline tests (``test_placeto``, ``test_gdp``): small graphs, the
instance context, and the checks every :class:`~agents.learned_result.LearnedResult` must pass."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from agents.learned_common import instance_context, resolve_instance
from agents.learned_result import LearnedResult
from doppler_gym.envs.context import GraphContext


def tiny_graph() -> dg.DataflowGraph:
    """A 10-op random DAG (workload ``random``, seed 3)."""
    return dg.workloads.make("random", n_ops=10, seed=3)


def comm_chain(n: int = 10) -> dg.DataflowGraph:
    """A chain of ``n`` ops whose transfers (10 units) dwarf its ops (1 unit): the best placement keeps
    every op on one device (makespan ``n``), a uniformly random one pays ~ ``(n - 1) / 2`` transfers."""
    return dg.DataflowGraph(src=np.arange(n - 1), dst=np.arange(1, n), flops=np.full(n, 1e10),
                            out_bytes=np.full(n, 1e11), name="comm_chain", units="paper")


def graph_context(graph: dg.DataflowGraph, devices: int) -> GraphContext:
    """The env's static context of ``graph`` on ``devices`` uniform devices (default sim config),
    what the networks' input tensors are built from."""
    return instance_context(resolve_instance(graph, devices, None, "test"))


def assert_valid_result(res: LearnedResult, name: str, graph: dg.DataflowGraph, devices: int, episodes: int,
                        updates: int) -> None:
    """``res`` is ``name``'s result of a run of ``episodes`` episodes in ``updates`` updates on
    ``graph`` with ``devices`` devices: a valid placement, the curve from episode 0 to the last, and
    the best decode kept."""
    assert isinstance(res, LearnedResult) and res.name == name
    assert res.assignment.shape == (graph.n_ops,) and res.assignment.dtype == np.int64
    assert set(res.assignment.tolist()) <= set(range(devices))
    assert res.episodes == episodes and res.info["updates"] == updates
    assert res.curve[0][0] == 0 and res.curve[-1][0] == episodes
    assert res.makespan <= min(m for _, m in res.curve)  # the best decode is kept
    assert res.makespan <= res.info["best_sampled"]
    assert res.makespan == pytest.approx(dg.simulate(graph, res.assignment, dg.Topology.uniform(devices)).makespan)


def assert_same_result(a: LearnedResult, b: LearnedResult) -> None:
    """Two runs gave the same placement, makespan, learning curve and best training episode."""
    assert np.array_equal(a.assignment, b.assignment)
    assert a.makespan == b.makespan and a.curve == b.curve
    assert a.info["training_best"] == b.info["training_best"]
