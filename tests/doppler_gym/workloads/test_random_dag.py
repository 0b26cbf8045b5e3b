"""The random layered DAG generator: seeded, acyclic, requested size, every level reached."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doppler_gym import workloads
from doppler_gym.graph.validate import find_cycle


def same_graph(a, b):
    return (
        a.n_ops == b.n_ops
        and np.array_equal(a.src, b.src)
        and np.array_equal(a.dst, b.dst)
        and np.array_equal(a.flops, b.flops)
        and np.array_equal(a.out_bytes, b.out_bytes)
    )


def test_same_seed_same_graph_different_seed_different_graph():
    assert same_graph(workloads.make("random", seed=7), workloads.make("random", seed=7))
    assert not same_graph(workloads.make("random", seed=7), workloads.make("random", seed=8))


def longest_path_ops(g):
    depth = np.ones(g.n_ops, dtype=int)
    for v in range(g.n_ops):  # ops are numbered level by level, so ids are a topological order
        preds = g.predecessors(v)
        if preds.size:
            depth[v] = 1 + depth[preds].max()
    return int(depth.max())


@settings(max_examples=25, deadline=None)
@given(
    n_ops=st.integers(1, 120),
    levels=st.integers(1, 15),
    edge_prob=st.floats(0.0, 1.0),
    skip_prob=st.floats(0.0, 0.2),
    seed=st.integers(0, 2**32),
)
def test_random_graph_invariants(n_ops, levels, edge_prob, skip_prob, seed):
    levels = min(levels, n_ops)
    g = workloads.make(
        "random", n_ops=n_ops, levels=levels, edge_prob=edge_prob, skip_prob=skip_prob, seed=seed,
        flops_range=(10.0, 100.0), bytes_range=(5.0, 5.0),
    )  # fmt: skip
    assert g.n_ops == n_ops
    assert find_cycle(g.n_ops, g.src, g.dst) is None and np.all(g.src < g.dst)
    assert np.all((g.flops >= 10.0) & (g.flops <= 100.0)) and np.all(g.out_bytes == 5.0)
    assert longest_path_ops(g) == levels
    if levels > 1:  # no isolated op
        assert np.all(g.in_degree + g.out_degree > 0)
    assert g.specs is None and len(g.names) == n_ops


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"n_ops": 3, "levels": 5}, "levels=5 exceeds n_ops=3"),
        ({"edge_prob": 1.5}, r"edge_prob must be a probability in \[0, 1\]"),
        ({"flops_range": (5.0, 1.0)}, "flops_range must satisfy 0 < low <= high"),
        ({"bytes_range": "big"}, "bytes_range must be a \\(low, high\\) pair"),
        ({"seed": -1}, "seed must be an integer >= 0"),
    ],
)
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        workloads.make("random", **params)
