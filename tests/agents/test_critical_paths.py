"""Critical-path context: paths and path sums against a brute-force longest-path enumeration."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents import embedding
from agents.critical_paths import PathIndex, best_neighbour, follow
from agents.embedding import StaticEncoder, group_batch
from tests.agents.policy_helpers import make_env, random_dag, stack

pytestmark = pytest.mark.usefixtures("one_thread")


def _all_paths(succ: dict[int, list[int]], v: int) -> list[list[int]]:
    if not succ[v]:
        return [[v]]
    return [[v, *rest] for s in succ[v] for rest in _all_paths(succ, s)]


def brute_force_paths(graph, comp: np.ndarray, comm: np.ndarray) -> tuple[list[list[int]], list[list[int]]]:
    """For every op, its longest path to an exit (b) and from an entry (t, listed from the op back),
    by enumerating all paths, with DOPPLER's lengths: ``comp + comm`` of every op but the exit
    (b) / the entry (t), plus ``comp`` of that end op."""
    n = graph.n_ops
    succ = {v: [] for v in range(n)}
    pred = {v: [] for v in range(n)}
    for s, d in zip(graph.src.tolist(), graph.dst.tolist()):
        succ[s].append(d)
        pred[d].append(s)

    def length(path: list[int]) -> float:
        return float(sum(comp[u] + comm[u] for u in path[:-1]) + comp[path[-1]])

    b = [max(_all_paths(succ, v), key=length) for v in range(n)]
    t = [max(_all_paths(pred, v), key=length) for v in range(n)]
    return b, t


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_paths_equal_brute_force_longest_paths(seed):
    graph = random_dag(n_ops=11, seed=seed)
    env = make_env(graph=graph, topology=2)
    obs, _ = env.reset(seed=0)
    ctx = env.unwrapped.context
    index = PathIndex.from_observation(obs["op_features"], obs["edge_index"], graph.n_ops, graph.n_edges)
    b, t = brute_force_paths(graph, ctx.comp, ctx.comm)
    for v in range(graph.n_ops):
        assert index.b_path(v) == b[v], f"b-path of op {v}"
        assert index.t_path(v) == t[v], f"t-path of op {v}"
    # the COO rows are op ids (not the authors' DFS order): row v lists exactly v's path
    for rows, cols, paths in ((index.b_rows, index.b_cols, b), (index.t_rows, index.t_cols, t)):
        for v in range(graph.n_ops):
            assert sorted(cols[rows == v].tolist()) == sorted(paths[v])


def test_best_neighbour_breaks_ties_by_edge_order_and_follow_chains():
    # 0 -> 1, 0 -> 2, 0 -> 3 with levels 1: 5, 2: 7, 3: 7 -> the first edge of the largest level (2)
    src, dst = np.array([0, 0, 0, 2]), np.array([1, 2, 3, 3])
    level = np.array([0.0, 5.0, 7.0, 7.0])
    nxt = best_neighbour(4, src, dst, level)
    assert nxt.tolist() == [2, -1, 3, -1]
    rows, cols = follow(nxt)
    assert sorted(zip(rows.tolist(), cols.tolist())) == [
        (0, 0),
        (0, 2),
        (0, 3),
        (1, 1),
        (2, 2),
        (2, 3),
        (3, 3),
    ]


@pytest.mark.parametrize("dense", [True, False])
def test_path_sums_are_sums_of_embeddings_along_brute_force_paths(dense, monkeypatch):
    if not dense:
        monkeypatch.setattr(embedding, "DENSE_PATHS_MAX", 0)
    graph = random_dag(n_ops=9, seed=5)
    env = make_env(graph=graph, topology=2, max_ops=12, max_edges=40)  # padded: rows 9..11 are padding
    obs, _ = env.reset(seed=0)
    ctx = env.unwrapped.context
    batch = stack([obs])
    enc = StaticEncoder(hidden_dim=16, n_layers=2, proj_dim=8)
    grp = group_batch(batch)
    h, b_sum, t_sum, packed = enc.path_context(batch, grp.first, grp.keys)
    b, t = brute_force_paths(graph, ctx.comp, ctx.comm)
    for v in range(graph.n_ops):
        torch.testing.assert_close(b_sum[v], h[b[v]].sum(0), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(t_sum[v], h[t[v]].sum(0), rtol=1e-5, atol=1e-5)
    assert torch.all(b_sum[graph.n_ops :] == 0) and torch.all(t_sum[graph.n_ops :] == 0)
    assert packed.valid.sum().item() == graph.n_ops


def test_paths_of_a_paper_graph_follow_the_b_level():
    env = make_env(graph="paper/llama-layer")
    obs, _ = env.reset(seed=0)
    ctx = env.unwrapped.context
    index = PathIndex.from_observation(obs["op_features"], obs["edge_index"], ctx.n_ops, ctx.n_edges)
    for v in range(ctx.n_ops):
        path = index.b_path(v)
        assert not ctx.succ[path[-1]]  # ends at an exit
        # its length is the op's b-level (DOPPLER's definition)
        length = sum(ctx.comp[u] + ctx.comm[u] for u in path[:-1]) + ctx.comp[path[-1]]
        assert length == pytest.approx(ctx.b_level[v], rel=1e-6)
