"""The static part: cached (rollouts) == recomputed (training), once per distinct graph, never stale."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agents.embedding import StaticEncoder, group_batch
from agents.policy import DopplerPolicy
from tests.agents.policy_helpers import collect, make_env, mixed_batch, stack

pytestmark = pytest.mark.usefixtures("one_thread")


def _policy(env, **kwargs) -> DopplerPolicy:
    return DopplerPolicy(
        env.observation_space, env.action_space, lambda _: 1e-3, hidden_dim=32, head_dim=32, **kwargs
    )


def test_cached_embeddings_equal_recomputed_ones():
    env, batch = mixed_batch()
    policy = _policy(env)
    static = policy.features_extractor.static
    with torch.no_grad():
        first = static(batch)  # computes and fills the cache
        assert first.cache_hits == 0 and len(first.keys) == 2
        cached = static(batch)  # every graph from the cache
        assert cached.cache_hits == 2
        cached_logits = policy.action_logits(batch)
    recomputed = static(batch)  # gradients on: recomputed, no cache
    assert recomputed.table.requires_grad
    static.use_cache = False
    with torch.no_grad():
        uncached = static(batch)
    for other in (cached, recomputed, uncached):
        torch.testing.assert_close(other.emb.detach(), first.emb, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(other.table.detach(), first.table, rtol=1e-6, atol=1e-6)
        assert torch.equal(other.group, first.group)
    static.use_cache = True
    logits = policy.action_logits(batch)  # with grad: recomputed
    torch.testing.assert_close(logits.detach(), cached_logits, rtol=1e-5, atol=1e-5)
    # observations one at a time (a rollout step) read the same rows
    with torch.no_grad():
        for i in (0, 5, len(batch["op_features"]) - 1):
            one = {k: v[i : i + 1] for k, v in batch.items()}
            torch.testing.assert_close(
                policy.action_logits(one), cached_logits[i : i + 1], rtol=1e-5, atol=1e-5
            )


def test_one_gnn_forward_per_distinct_graph():
    env, batch = mixed_batch()
    policy = _policy(env)
    stats = policy.features_extractor.static.stats
    values, log_prob, _entropy = policy.evaluate_actions(
        batch, batch["action_mask"].argmax(1), batch["action_mask"]
    )
    assert stats["graph_forwards"] == 2  # 24 observations, 2 graphs
    (log_prob.sum() + values.sum()).backward()
    gnn_grads = [p.grad for p in policy.features_extractor.static.gnn.parameters()]
    assert all(g is not None for g in gnn_grads) and any(g.abs().sum() > 0 for g in gnn_grads)
    with torch.no_grad():
        for _ in range(3):
            policy.predict_values(batch)
    assert stats["graph_forwards"] == 4  # once more per graph for the cache, then hits
    assert stats["path_builds"] == 2  # paths: once per graph, ever


def test_cache_refreshes_after_a_weight_update_and_on_load():
    env, batch = mixed_batch(n_each=4)
    policy = _policy(env)
    with torch.no_grad():
        before = policy.action_logits(batch)
    loss = policy.action_logits(batch).clamp_min(-50).sum()  # with grad (NEG slots clamped)
    policy.optimizer.zero_grad()
    loss.backward()
    policy.optimizer.step()
    with torch.no_grad():
        after = policy.action_logits(batch)
        policy.features_extractor.static.use_cache = False
        fresh = policy.action_logits(batch)
        policy.features_extractor.static.use_cache = True
    assert not torch.allclose(after, before)
    torch.testing.assert_close(after, fresh, rtol=1e-6, atol=1e-6)
    other = _policy(env)
    other.load_state_dict(policy.state_dict())
    with torch.no_grad():
        other.action_logits(batch)  # cache filled with other's own weights... then overwritten by a load
        other.load_state_dict(_policy(env).state_dict())
        reloaded = other.action_logits(batch)
        other.features_extractor.static.use_cache = False
        torch.testing.assert_close(reloaded, other.action_logits(batch), rtol=1e-6, atol=1e-6)


def test_same_graph_id_with_other_features_does_not_share_embeddings():
    env = make_env(graph="paper/chainmm")
    obs = collect(env, 4)
    altered = {k: v.copy() for k, v in obs[1].items()}
    altered["op_features"][:, 1] *= 1.5  # same graph_id and sizes, other b-levels
    batch = stack([obs[0], altered, obs[2]])
    grp = group_batch(batch)
    assert len(grp.keys) == 2 and grp.group.tolist() == [0, 1, 0]
    static = StaticEncoder(hidden_dim=16, n_layers=1, proj_dim=8)
    with torch.no_grad():
        a = static(stack([obs[0]])).table
        b = static(stack([altered])).table  # same cheap key, other inputs: a separate cache entry
        assert not torch.allclose(a, b)
        torch.testing.assert_close(static(stack([obs[3]])).table, a)
        torch.testing.assert_close(static(stack([altered])).table, b)


def test_encoder_weights_do_not_depend_on_padding_sizes():
    small = make_env(graph="paper/chainmm", topology=4)
    big = make_env(graph="paper/chainmm", topology=8, max_ops=200, max_edges=300)
    a, b = _policy(small), _policy(big)
    shapes = {k: v.shape for k, v in a.state_dict().items()}
    assert shapes == {k: v.shape for k, v in b.state_dict().items()}
    assert isinstance(b.action_space, spaces.Discrete) and b.action_space.n == 208
    assert np.isfinite(sum(float(v.float().sum()) for v in a.state_dict().values()))


def test_logits_and_values_share_one_encoding_and_match_the_separate_calls():
    env, batch = mixed_batch()
    policy = _policy(env)
    stats = policy.features_extractor.static.stats
    logits, values = policy.logits_and_values(batch)  # with grad: the GNN runs once per graph, for both
    assert stats["graph_forwards"] == 2
    assert values.shape == (logits.shape[0], 1) and logits.shape[1] == env.action_space.n
    torch.testing.assert_close(logits, policy.action_logits(batch))
    torch.testing.assert_close(values, policy.predict_values(batch))
    only_logits, none = policy.logits_and_values(batch, values=False)
    assert none is None
    torch.testing.assert_close(only_logits, logits)


def test_op_identity_features_are_fixed_per_op_id():
    from agents.gnn import op_id_features

    big = op_id_features(5000, 6)  # two seeded blocks of 4096 rows
    assert big.shape == (5000, 6) and big.dtype == np.float32
    np.testing.assert_array_equal(op_id_features(10, 6), big[:10])  # a row does not depend on n
    assert abs(float(big.mean())) < 0.05 and 0.9 < float(big.std()) < 1.1
    assert not np.allclose(big[:904], big[4096:5000])  # the second block has its own seed
    assert len(np.unique(big.round(6), axis=0)) == 5000
    assert not np.allclose(op_id_features(4, 3), op_id_features(4, 6)[:, :3])  # one table per width


def test_identity_features_tell_apart_ops_that_structure_makes_equal():
    import doppler_gym as dg

    # two parallel ops 1 and 2 with the same costs between a source and a sink: identical for the GNN
    graph = dg.DataflowGraph(src=np.array([0, 0, 1, 2]), dst=np.array([1, 2, 3, 3]), flops=np.array([1.0, 2, 2, 1]),
                             out_bytes=np.array([1.0, 1, 1, 1]), units="paper")
    env = make_env(graph=graph, topology=2)
    batch = stack(collect(env, 1))
    plain, with_ids = _policy(env), _policy(env, id_features=4)
    with torch.no_grad():
        emb = plain.features_extractor.static(batch).emb[0]
        emb_ids = with_ids.features_extractor.static(batch).emb[0]
    torch.testing.assert_close(emb[1], emb[2])
    assert not torch.allclose(emb_ids[1], emb_ids[2])
    assert (
        with_ids.features_extractor.static.gnn.input[0].in_features
        == plain.features_extractor.static.gnn.input[0].in_features + 4
    )
    with pytest.raises(ValueError, match="id_features"):
        StaticEncoder(id_features=-1)
