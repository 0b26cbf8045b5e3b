"""SB3 and sb3-contrib train a few hundred steps on vectorised envs: every update runs, the policy's
weights move, masked predictions stay valid, and a finished episode's makespan is the simulator's."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.vec_env import DummyVecEnv

import doppler_gym as dg
from doppler_gym.envs import PlaceOnly


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _vec(wrapper=None, env_id="Doppler-Sim-v0", **kwargs) -> DummyVecEnv:
    def make():
        env = gym.make(env_id, graph="paper/chainmm", **kwargs)
        return wrapper(env) if wrapper is not None else env

    return DummyVecEnv([make, make])


def _params(model) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.policy.parameters()]


def _assert_trained(
    model, before: list[torch.Tensor], total_timesteps: int, n_updates: int, loss: str = "train/loss"
) -> None:
    """``learn`` took every step, ran ``n_updates`` updates (rollouts x ``n_epochs``, counted by hand
    from the settings), logged a finite ``loss`` for the last one and changed the weights."""
    assert model.num_timesteps == total_timesteps
    logged = model.logger.name_to_value  # the last train() call's values (SB3 dumps before training)
    assert logged["train/n_updates"] == n_updates
    assert np.isfinite(logged[loss])
    after = _params(model)
    assert any(not torch.equal(b, a) for b, a in zip(before, after)), "no weight changed: nothing was trained"


def test_maskable_ppo_multi_input_policy():
    venv = _vec(reward="shaped")
    model = MaskablePPO("MultiInputPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    before = _params(model)
    model.learn(total_timesteps=256)
    _assert_trained(model, before, 256, n_updates=2)  # 256 steps / (2 envs x 64) = 2 rollouts, 1 epoch each
    # masked prediction never proposes an invalid action
    obs = venv.reset()
    for _ in range(20):
        masks = get_action_masks(venv)
        actions, _ = model.predict(obs, action_masks=masks)
        assert all(masks[i, a] for i, a in enumerate(actions))
        obs, *_ = venv.step(actions)


def test_maskable_ppo_place_only():
    venv = _vec(PlaceOnly)
    model = MaskablePPO("MultiInputPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    before = _params(model)
    model.learn(total_timesteps=256)
    _assert_trained(model, before, 256, n_updates=2)
    # one episode with the trained policy: valid devices only, and the makespan it reports is the
    # reference simulator's for the assignment it reports (chainmm: 76 ops, one decision each)
    g = dg.load_graph("paper/chainmm")
    obs, done, steps = venv.reset(), np.zeros(2, bool), 0
    while not done[0]:
        masks = get_action_masks(venv)
        actions, _ = model.predict(obs, action_masks=masks)
        assert all(masks[i, a] for i, a in enumerate(actions))
        obs, _rewards, done, infos = venv.step(actions)
        steps += 1
    assert steps == g.n_ops
    info = infos[0]
    again = dg.simulate(g, info["assignment"], topology=dg.Topology.uniform(4), config=dg.SimConfig.reference())
    assert info["makespan"] == again.makespan


@pytest.mark.parametrize("algo", [PPO, A2C])
def test_unmasked_algorithms_run_with_penalised_invalid_actions(algo):
    venv = _vec(max_invalid_streak=20)
    kwargs = {"n_steps": 64, "batch_size": 64, "n_epochs": 1} if algo is PPO else {"n_steps": 16}
    model = algo("MultiInputPolicy", venv, seed=0, device="cpu", **kwargs)
    before = _params(model)
    model.learn(total_timesteps=256)
    # 256 steps over 2 envs: PPO 2 rollouts of 64 x 1 epoch, A2C 8 rollouts of 16 x 1 update
    _assert_trained(model, before, 256, 2 if algo is PPO else 8, "train/loss" if algo is PPO else "train/policy_loss")
    infos = []
    obs = venv.reset()
    for _ in range(50):
        actions, _ = model.predict(obs)
        obs, _rewards, _dones, step_infos = venv.step(actions)
        infos += step_infos
    assert any(i.get("invalid_action") for i in infos)  # no masks: invalid actions happen and are penalised


def test_ppo_on_the_one_shot_env():
    model = PPO(
        "MultiInputPolicy",
        _vec(env_id="Doppler-SimAssign-v0"),
        n_steps=32,
        batch_size=32,
        n_epochs=1,
        seed=0,
        device="cpu",
    )
    before = _params(model)
    model.learn(total_timesteps=64)
    _assert_trained(model, before, 64, n_updates=1)  # 64 steps / (2 envs x 32) = 1 rollout
