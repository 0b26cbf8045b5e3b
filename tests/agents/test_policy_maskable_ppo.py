"""DopplerPolicy: head shapes on padded mixed batches, masks, 4 -> 8 devices, MaskablePPO training."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3.common.vec_env import DummyVecEnv

import doppler_gym as dg
from agents.policy import NEG, DopplerExtractor, DopplerPolicy, PlcHead, transfer_objects
from tests.agents.policy_helpers import make_env, mixed_batch

pytestmark = pytest.mark.usefixtures("one_thread", "seeded")
SMALL = {"hidden_dim": 32, "n_layers": 2, "head_dim": 32}


def _ppo(venv, **kwargs) -> MaskablePPO:
    kwargs = {"n_steps": 64, "batch_size": 64, "n_epochs": 1, "seed": 0, "device": "cpu", **kwargs}
    return MaskablePPO(DopplerPolicy, venv, policy_kwargs=SMALL, **kwargs)


def test_heads_and_extractor_shapes_on_a_padded_mixed_batch():
    env, batch = mixed_batch()
    policy = DopplerPolicy(env.observation_space, env.action_space, lambda _: 1e-3, **SMALL)
    b = batch["op_features"].shape[0]
    n, d = env.unwrapped.max_ops, env.unwrapped.max_devices
    assert (n, d) == (180, 4)
    logits = policy.action_logits(batch)
    assert logits.shape == (b, n + d)
    mask = batch["action_mask"] > 0.5
    phase = batch["phase"][:, 0].long()
    assert torch.isfinite(logits).all() and (logits[mask] > NEG / 2).all()  # every valid action is scored
    n_ops = batch["n_ops"][:, 0].long()
    for i in range(b):
        if phase[i] == 0:
            assert (logits[i, n:] == NEG).all()  # PLC slots off in SEL
            assert (logits[i, n_ops[i] : n] == NEG).all()  # padding ops
        else:
            assert (logits[i, :n] == NEG).all()
    assert set(phase.tolist()) == {0, 1} and set(n_ops.tolist()) == {76, 180}
    every = policy.action_logits(batch, score_all=True)
    sel = phase == 0
    real = torch.arange(n) < n_ops[:, None]
    assert (every[sel][:, :n][real[sel]] > NEG / 2).all()
    values, log_prob, entropy = policy.evaluate_actions(
        batch, logits.masked_fill(~mask, -1e9).argmax(1), mask
    )
    assert values.shape == (b, 1) and log_prob.shape == (b,) and entropy.shape == (b,)
    assert torch.isfinite(log_prob).all() and (entropy >= 0).all()
    extractor = policy.features_extractor
    assert isinstance(extractor, DopplerExtractor)
    assert extractor(batch).shape == (b, extractor.features_dim)


def test_scores_are_bounded_by_logit_clip(tmp_path):
    env, batch = mixed_batch(4)
    mask = batch["action_mask"] > 0.5
    clipped = DopplerPolicy(env.observation_space, env.action_space, lambda _: 1e-3, **SMALL)
    raw = DopplerPolicy(env.observation_space, env.action_space, lambda _: 1e-3, logit_clip=None, **SMALL)
    raw.load_state_dict(clipped.state_dict())
    with torch.no_grad():
        for policy in (clipped, raw):  # heads scaled up, as imitation drove them
            policy.sel_head.tail[-1].weight.mul_(1e4)
            policy.plc_head.tail[-1].weight.mul_(1e4)
    lc, lr = clipped.action_logits(batch), raw.action_logits(batch)
    assert lr[mask].abs().max() > 100  # unbounded without the clip
    assert lc[mask].abs().max() <= 10.0
    assert torch.allclose(lc[mask], 10.0 * torch.tanh(lr[mask] / 10.0), atol=1e-4)
    assert (lc[~mask] == NEG).all()
    raw.save(tmp_path / "raw.pt")  # the clip (or its absence) is part of the saved policy
    clipped.save(tmp_path / "clipped.pt")
    with torch.no_grad():
        assert DopplerPolicy.load(tmp_path / "raw.pt", device="cpu").action_logits(batch)[mask].abs().max() > 100
        assert DopplerPolicy.load(tmp_path / "clipped.pt", device="cpu").action_logits(batch)[mask].abs().max() <= 10.0
    with pytest.raises(ValueError, match="logit_clip must be > 0"):
        DopplerPolicy(env.observation_space, env.action_space, lambda _: 1e-3, logit_clip=0.0, **SMALL)


def test_plc_affinity_is_the_bilinear_match_with_the_ops_on_each_device():
    torch.manual_seed(0)
    d, n_dev = 8, 4
    plain, head = PlcHead(d), PlcHead(d, affinity=True)
    assert plain.query is None
    query = {k: v for k, v in head.state_dict().items() if k.startswith("query")}
    head.load_state_dict({**plain.state_dict(), **query})
    op, devsum, dev_in = torch.randn(2, d), torch.randn(2, n_dev, d), torch.randn(2, n_dev, 15)
    valid = torch.tensor([[True] * 4, [True, True, True, False]])
    got = head(op, devsum, dev_in, valid) - plain(op, devsum, dev_in, valid)
    for b in range(2):  # by hand: (Q op) . (devsum_d - mean over the real devices) * sqrt(d)
        m = valid[b]
        rel = devsum[b][m] - devsum[b][m].mean(0)
        want = rel @ head.query.weight.matmul(op[b]) * d**0.5
        torch.testing.assert_close(got[b][m], want, rtol=1e-5, atol=1e-5)
    perm = torch.tensor([2, 0, 3, 1])  # one scorer shared across devices: permuting devices permutes scores
    full = torch.ones(2, n_dev, dtype=torch.bool)
    permuted = head(op, devsum[:, perm], dev_in[:, perm], full)
    torch.testing.assert_close(permuted, head(op, devsum, dev_in, full)[:, perm])


def test_policy_options_survive_save_transfer_and_load(tmp_path):
    env4, env8 = make_env(topology=4), make_env(topology=8)
    policy = DopplerPolicy(env4.observation_space, env4.action_space, lambda _: 1e-3, plc_affinity=True, id_features=4,
                           **SMALL)
    policy.save(tmp_path / "policy.pt")
    alone = DopplerPolicy.load(tmp_path / "policy.pt", device="cpu")
    assert alone.plc_head.query is not None and alone.features_extractor.static.id_features == 4
    moved = policy.transfer_to(env8)
    assert moved.plc_head.query is not None and moved.features_extractor.static.id_features == 4
    model = MaskablePPO(DopplerPolicy, DummyVecEnv([lambda: env4]), policy_kwargs={**SMALL, "plc_affinity": True},
                        n_steps=8, batch_size=8, seed=0, device="cpu")
    model.save(tmp_path / "m.zip")
    loaded = MaskablePPO.load(tmp_path / "m.zip", device="cpu")
    assert loaded.policy.plc_affinity and loaded.policy.plc_head.query is not None


def test_imitation_cross_entropy_on_teacher_masks_trains():
    env = make_env(graph="paper/chainmm")
    policy = DopplerPolicy(env.observation_space, env.action_space, lambda _: 3e-3, **SMALL)
    obs, teacher = [], []
    o, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(64):
        obs.append(o)
        t = env.unwrapped.teacher_mask()
        teacher.append(t)
        o, *_ = env.step(int(rng.choice(np.flatnonzero(t))))
    batch = {k: torch.as_tensor(np.stack([x[k] for x in obs])).float() for k in obs[0]}
    target = torch.as_tensor(np.stack(teacher)).bool()
    valid = batch["action_mask"] > 0.5

    def loss() -> torch.Tensor:
        logp = torch.log_softmax(policy.action_logits(batch).masked_fill(~valid, -1e9), dim=1)
        return -torch.logsumexp(logp.masked_fill(~target, -1e9), dim=1).mean()

    first = loss()
    for _ in range(30):
        value = loss()
        policy.optimizer.zero_grad()
        value.backward()
        policy.optimizer.step()
    assert loss().item() < 0.5 * first.item()


def _greedy_makespan(model: MaskablePPO, env) -> float:
    obs, _ = env.reset(seed=0)
    while True:
        action, _ = model.predict(obs, action_masks=env.unwrapped.action_masks(), deterministic=True)
        obs, _, terminated, truncated, info = env.step(int(action))
        if terminated or truncated:
            return info["makespan"]


@pytest.mark.slow
def test_maskable_ppo_learns_the_best_placement_of_a_tiny_graph():
    graph = dg.workloads.make("random", n_ops=6, levels=3, seed=1)
    every = np.array(list(itertools.product(range(2), repeat=graph.n_ops)))  # all 64 placements on 2 devices
    optimum = dg.simulate_batch(graph, every, topology=dg.Topology.uniform(2)).min()
    venv = DummyVecEnv([lambda: make_env(graph=graph, topology=2)] * 2)
    model = _ppo(venv, n_steps=48, batch_size=48, n_epochs=4, learning_rate=3e-3, gamma=1.0, gae_lambda=1.0)
    env = make_env(graph=graph, topology=2)
    before = _greedy_makespan(model, env)
    model.learn(total_timesteps=96)  # 8 episodes of 12 steps
    after = _greedy_makespan(model, env)
    assert before > 5 * optimum  # the seeded untrained policy places far from the optimum
    assert after <= 1.2 * optimum, (before, after, optimum)


@pytest.mark.slow
def test_maskable_ppo_trains_on_chainmm_and_predict_respects_masks():
    venv = DummyVecEnv([lambda: make_env(graph="paper/chainmm")] * 2)
    model = _ppo(venv, n_steps=80, batch_size=80, n_epochs=2)
    model.learn(total_timesteps=320)
    assert np.isfinite(model.logger.name_to_value["train/loss"])
    assert model.policy.features_extractor.static.stats["cache_hits"] > 0
    obs = venv.reset()
    for step in range(300):
        masks = get_action_masks(venv)
        actions, _ = model.predict(obs, action_masks=masks, deterministic=step % 2 == 0)
        assert all(masks[i, a] for i, a in enumerate(actions))
        if step % 3 == 0:  # without action_masks the policy applies obs["action_mask"] itself
            unmasked, _ = model.predict(obs)
            assert all(masks[i, a] for i, a in enumerate(unmasked))
        obs, _, _, infos = venv.step(actions)
        assert not any(info.get("invalid_action") for info in infos)


def test_envs_with_different_graphs_in_one_vec_env():
    kw = {"max_ops": 180, "max_edges": 208}
    venv = DummyVecEnv(
        [lambda: make_env(graph="paper/chainmm", **kw), lambda: make_env(graph="paper/ffnn", **kw)]
    )
    model = _ppo(venv)
    model.learn(total_timesteps=128)
    assert model.policy.features_extractor.static.stats["graph_forwards"] >= 2


def test_four_device_policy_runs_on_eight_devices(tmp_path):
    venv4 = DummyVecEnv([lambda: make_env(graph="paper/chainmm", topology=4)])
    model = _ppo(venv4)
    model.learn(total_timesteps=64)
    env8 = make_env(graph="paper/chainmm", topology=8)
    venv8 = DummyVecEnv([lambda: env8])

    # 1) transfer_to: a policy for the 8-device spaces with the same weights
    policy8 = model.policy.transfer_to(venv8)
    assert policy8.action_space.n == 76 + 8
    for (k, a), (_, b) in zip(model.policy.state_dict().items(), policy8.state_dict().items()):
        assert torch.equal(a, b), k
    obs, _ = env8.reset(seed=0)
    used = set()
    while True:
        action, _ = policy8.predict(obs, action_masks=env8.unwrapped.action_masks())
        obs, _, terminated, truncated, info = env8.step(int(action))
        assert not info.get("invalid_action")
        if terminated or truncated:
            break
    used = set(info["assignment"].tolist())
    assert used <= set(range(8)) and info["makespan"] > 0

    # 2) a saved 4-device checkpoint loads onto the 8-device env and keeps training
    path = tmp_path / "ppo4.zip"
    model.save(path)
    model8 = MaskablePPO.load(path, env=venv8, custom_objects=transfer_objects(venv8), device="cpu")
    assert model8.action_space.n == 84
    for (k, a), (_, b) in zip(model.policy.state_dict().items(), model8.policy.state_dict().items()):
        assert torch.equal(a, b), k
    model8.learn(total_timesteps=64)
    obs8 = venv8.reset()
    masks = get_action_masks(venv8)
    actions, _ = model8.predict(obs8, action_masks=masks)
    assert masks[0, actions[0]]


def test_checkpoint_round_trip_gives_the_same_logits(tmp_path):
    env, batch = mixed_batch(n_each=3)
    venv = DummyVecEnv([lambda: env])
    model = _ppo(venv)
    path = tmp_path / "m.zip"
    model.save(path)
    loaded = MaskablePPO.load(path, device="cpu")
    with torch.no_grad():
        torch.testing.assert_close(loaded.policy.action_logits(batch), model.policy.action_logits(batch))
    policy_path = tmp_path / "policy.pt"
    model.policy.save(policy_path)
    alone = DopplerPolicy.load(policy_path, device="cpu")
    with torch.no_grad():
        torch.testing.assert_close(alone.action_logits(batch), model.policy.action_logits(batch))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_policy_on_cuda_matches_cpu():
    env, batch = mixed_batch(n_each=4)
    policy = DopplerPolicy(env.observation_space, env.action_space, lambda _: 1e-3, **SMALL)
    with torch.no_grad():
        cpu = policy.action_logits(batch)
        policy = policy.to("cuda")
        cuda_batch = {k: v.cuda() for k, v in batch.items()}
        first = policy.action_logits(cuda_batch)  # fills the cache on the GPU
        cached = policy.action_logits(cuda_batch)
    torch.testing.assert_close(first, cached)
    torch.testing.assert_close(first.cpu(), cpu, rtol=1e-4, atol=1e-4)
    venv = DummyVecEnv([lambda: make_env(graph="paper/chainmm")] * 2)
    model = _ppo(venv, device="cuda")
    model.learn(total_timesteps=128)
    assert np.isfinite(model.logger.name_to_value["train/loss"])
