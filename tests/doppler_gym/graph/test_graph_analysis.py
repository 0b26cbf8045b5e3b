"""Topological order, DOPPLER b-/t-levels and critical path (the makespan bound is in sim/test_bounds.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doppler_gym.graph.analysis import b_level, critical_path, t_level, topological_order
from doppler_gym.graph.io import load_graph
from doppler_gym.graph.types import DataflowGraph

#   0 -> 1 -> 3
#   0 -> 2 -> 3
#        2 -> 4
COMP = [1.0, 2.0, 3.0, 4.0, 5.0]
COMM = [10.0, 20.0, 30.0, 40.0, 50.0]
EDGES = [(0, 1), (0, 2), (1, 3), (2, 3), (2, 4)]


def _toy(perm=None) -> DataflowGraph:
    """The toy DAG, with op i renamed perm[i]."""
    perm = list(range(5)) if perm is None else perm
    comp, comm = np.zeros(5), np.zeros(5)
    comp[perm], comm[perm] = COMP, COMM
    return DataflowGraph(
        src=[perm[s] for s, _ in EDGES], dst=[perm[d] for _, d in EDGES], flops=comp, out_bytes=comm
    )


def test_toy_levels_by_hand():
    g = _toy()
    # b(3)=4, b(4)=5, b(1)=2+20+4, b(2)=3+30+max(4,5), b(0)=1+10+max(26,38)
    assert b_level(g).tolist() == [49.0, 26.0, 38.0, 4.0, 5.0]
    # t(0)=1, t(1)=2+20+1, t(2)=3+30+1, t(3)=4+40+max(23,34), t(4)=5+50+34
    assert t_level(g).tolist() == [1.0, 23.0, 34.0, 78.0, 89.0]
    assert b_level(g).dtype == np.float64


def test_toy_custom_costs():
    g = _toy()
    ones = np.ones(5)
    assert b_level(g, comp=ones, comm=np.zeros(5)).tolist() == [3.0, 2.0, 2.0, 1.0, 1.0]
    assert t_level(g, comp=ones, comm=ones).tolist() == [1.0, 3.0, 3.0, 5.0, 5.0]
    with pytest.raises(ValueError, match=r"comm must have shape \(5,\)"):
        b_level(g, comm=np.ones(4))


def test_toy_critical_path():
    g = _toy()
    assert critical_path(g) == (9.0, [0, 2, 4])  # 0-2-4: 1+3+5
    assert critical_path(g, comp=np.array([1.0, 9.0, 0.0, 0.0, 0.0])) == (10.0, [0, 1, 3])


def test_relabelled_toy_uses_the_heap_path():
    perm = [4, 2, 3, 0, 1]
    g = _toy(perm)
    order = topological_order(g)
    # smallest ready id first: ready {4} -> 4; then {2, 3} -> 2, 3; then 0 (needs 2, 3); then 1 (needs 3)
    assert order.tolist() == [4, 2, 3, 0, 1] and order.dtype == np.int32
    inv = np.argsort(perm)
    assert b_level(g)[perm].tolist() == [49.0, 26.0, 38.0, 4.0, 5.0]
    assert t_level(g)[perm].tolist() == [1.0, 23.0, 34.0, 78.0, 89.0]
    length, path = critical_path(g)
    assert length == 9.0 and [int(inv[v]) for v in path] == [0, 2, 4]


def test_topological_order_smallest_first():
    g = DataflowGraph(src=[3, 2], dst=[1, 0], flops=np.ones(4), out_bytes=np.ones(4))
    assert topological_order(g).tolist() == [2, 0, 3, 1]


def test_empty_and_single():
    empty = DataflowGraph(src=[], dst=[], flops=[], out_bytes=[])
    assert topological_order(empty).shape == (0,)
    assert b_level(empty).shape == (0,) and t_level(empty).shape == (0,)
    assert critical_path(empty) == (0.0, [])
    one = DataflowGraph(src=[], dst=[], flops=[7.0], out_bytes=[9.0])
    assert b_level(one).tolist() == [7.0] and t_level(one).tolist() == [7.0]
    assert critical_path(one) == (7.0, [0])


def test_paper_levels_are_exact_integers():
    g = load_graph("paper/llama-layer")
    for levels in (b_level(g), t_level(g)):
        assert np.all(levels == np.round(levels)) and levels.max() < 2**53


# ---------------------------------------------------------------------- properties
@st.composite
def dags(draw) -> DataflowGraph:
    n = draw(st.integers(1, 25))
    perm = draw(st.permutations(range(n)))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=60)) if pairs else []
    costs = st.lists(st.integers(0, 1000), min_size=n, max_size=n)
    return DataflowGraph(
        src=[perm[i] for i, _ in chosen],
        dst=[perm[j] for _, j in chosen],
        flops=draw(costs),
        out_bytes=draw(costs),
    )


def _reference_longest(g: DataflowGraph, weight: np.ndarray) -> np.ndarray:
    """Longest node-weighted path ending at each op, by n rounds of edge relaxation (no order)."""
    best = weight.astype(np.float64).copy()
    for _ in range(g.n_ops):
        for s, d in zip(g.src.tolist(), g.dst.tolist()):
            best[d] = max(best[d], best[s] + weight[d])
    return best


@settings(max_examples=150, deadline=None)
@given(dags())
def test_topological_order_respects_edges(g):
    order = topological_order(g)
    assert sorted(order.tolist()) == list(range(g.n_ops))
    pos = np.empty(g.n_ops, dtype=np.int64)
    pos[order] = np.arange(g.n_ops)
    assert np.all(pos[g.src] < pos[g.dst])


@settings(max_examples=150, deadline=None)
@given(dags())
def test_level_recurrences(g):
    comp, comm = g.flops, g.out_bytes
    b, t = b_level(g), t_level(g)
    for v in range(g.n_ops):
        succ, pred = g.successors(v), g.predecessors(v)
        want_b = comp[v] + comm[v] + b[succ].max() if succ.size else comp[v]
        want_t = comp[v] + comm[v] + t[pred].max() if pred.size else comp[v]
        assert b[v] == want_b and t[v] == want_t
        assert np.all(b[v] >= comp[v] + b[succ])
        assert np.all(t[v] >= comp[v] + t[pred])


@settings(max_examples=150, deadline=None)
@given(dags())
def test_critical_path_is_the_longest_path(g):
    length, path = critical_path(g)
    ref = _reference_longest(g, g.flops)
    assert length == ref.max()
    assert length == g.flops[path].sum()
    assert g.in_degree[path[0]] == 0 and g.out_degree[path[-1]] == 0
    edges = set(zip(g.src.tolist(), g.dst.tolist()))
    assert all((u, v) in edges for u, v in zip(path[:-1], path[1:]))
    # the compute-only b-level (comm = 0) at the path start equals the path length
    assert b_level(g, comm=np.zeros(g.n_ops))[path[0]] == length
