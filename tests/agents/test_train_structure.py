"""Structural op features (agents.structure): hand-computed values, relabelling equivariance, the
policy's cached static part."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import doppler_gym as dg
from agents.structure import N_STRUCTURE, STRUCTURE_NAMES, hop_depths, structure_features


def _col(name: str) -> int:
    return STRUCTURE_NAMES.index(name)


def test_diamond_by_hand() -> None:
    # 0 -> 1 -> 3, 0 -> 2 -> 3, 3 -> 4; op 1 is the heavy branch: the critical path is 0 1 3 4
    src, dst = np.array([0, 0, 1, 2, 3]), np.array([1, 2, 3, 3, 4])
    comp = np.array([1.0, 5.0, 1.0, 1.0, 2.0])
    b = np.array([9.0, 8.0, 4.0, 3.0, 2.0])  # longest path to an exit, op included (no transfers)
    t = np.array([0.0, 1.0, 1.0, 6.0, 7.0])  # longest path from an entry, op excluded
    f = structure_features(np.stack([comp, b, t], 1), src, dst)
    assert f.shape == (5, N_STRUCTURE) and f.dtype == np.float32
    np.testing.assert_allclose(f[:, _col("depth")], [0, 1 / 3, 1 / 3, 2 / 3, 1])
    np.testing.assert_allclose(f[:, _col("height")], [1, 2 / 3, 2 / 3, 1 / 3, 0])
    np.testing.assert_allclose(f[:, _col("level")], [0, 1 / 3, 1 / 3, 2 / 3, 1])
    np.testing.assert_allclose(f[:, _col("on_cp")], [1, 1, 0, 1, 1])
    np.testing.assert_allclose(f[:, _col("slack")], [0, 0, 4 / 9, 0, 0], atol=1e-7)
    np.testing.assert_allclose(f[:, _col("in_deg")], np.log1p([0, 1, 1, 2, 1]), rtol=1e-6)
    np.testing.assert_allclose(f[:, _col("out_deg")], np.log1p([2, 1, 1, 1, 0]), rtol=1e-6)
    np.testing.assert_allclose(f[:, _col("width")], [0.2, 0.4, 0.4, 0.2, 0.2])
    np.testing.assert_allclose(f[:, _col("comp_share")], np.log1p(comp / 2.0), rtol=1e-6)
    # 2-step return probability: sum over neighbours u of 1 / (deg v deg u), degrees 2 2 2 3 1
    rw2 = [1 / (2 * 2) * 2, 1 / (2 * 2) + 1 / (2 * 3), 1 / (2 * 2) + 1 / (2 * 3), 2 / (3 * 2) + 1 / 3, 1 / 3]
    np.testing.assert_allclose(f[:, _col("rw2")], rw2, rtol=1e-6)


def test_features_follow_a_relabelling_of_the_ops() -> None:
    g = dg.workloads.make("random", n_ops=40, levels=6, seed=3)
    ctx = gym.make("Doppler-Sim-v0", graph=g, topology=2).unwrapped
    ctx.reset(seed=0)
    feats, src, dst = ctx.context.op_features, g.src, g.dst
    perm = np.random.default_rng(1).permutation(g.n_ops)  # new id of op v is perm[v]
    inv = np.argsort(perm)
    edge_order = np.random.default_rng(2).permutation(src.size)  # edge order must not matter either
    base = structure_features(feats, src, dst)
    moved = structure_features(feats[inv], perm[src][edge_order], perm[dst][edge_order])
    np.testing.assert_allclose(moved[perm], base, rtol=1e-6, atol=1e-7)
    assert base[:, _col("on_cp")].sum() >= 2  # a critical path has an entry and an exit


def test_hop_depths_on_a_long_chain_and_a_cycle() -> None:
    n = 3000
    depth, height = hop_depths(n, np.arange(n - 1), np.arange(1, n))
    np.testing.assert_array_equal(depth, np.arange(n))
    np.testing.assert_array_equal(height, np.arange(n)[::-1])
    with pytest.raises(ValueError, match="cycle"):
        hop_depths(3, np.array([0, 1, 2]), np.array([1, 2, 0]))


def test_policy_reads_them_through_its_cached_static_part() -> None:
    from agents.policy import DopplerPolicy

    env = gym.make("Doppler-Sim-v0", graph=dg.workloads.make("random", n_ops=10, levels=3, seed=0), topology=2)
    obs, _ = env.reset(seed=0)
    small = {"hidden_dim": 8, "n_layers": 1, "head_dim": 8}
    plain = DopplerPolicy(env.observation_space, env.action_space, lambda _: 1e-3, **small)
    with_s = DopplerPolicy(env.observation_space, env.action_space, lambda _: 1e-3, structure_features=1, **small)
    n_in = plain.features_extractor.static.gnn.input[0].in_features
    assert with_s.features_extractor.static.gnn.input[0].in_features == n_in + N_STRUCTURE
    static = with_s.features_extractor.static
    with torch.no_grad():
        first = with_s.action_logits(obs)
        with_s.features_extractor.clear_cache()  # embeddings recomputed, the structure taken from its cache
        again = with_s.action_logits(obs)
    torch.testing.assert_close(first, again)
    assert static.stats["structure_builds"] == 1
    # the features really enter: zeroing the structure columns of the input layer changes the scores
    with torch.no_grad():
        static.gnn.input[0].weight[:, n_in:] = 0.0
        static.proj.weight[:, -N_STRUCTURE:] = 0.0
        static.clear_cache()
        assert not torch.allclose(with_s.action_logits(obs), first)
