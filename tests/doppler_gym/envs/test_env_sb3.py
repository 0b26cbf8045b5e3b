"""SB3 and sb3-contrib train a few hundred steps on vectorised envs without error."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.vec_env import DummyVecEnv

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


def test_maskable_ppo_multi_input_policy():
    venv = _vec(reward="shaped")
    model = MaskablePPO("MultiInputPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=256)
    # masked prediction never proposes an invalid action
    obs = venv.reset()
    for _ in range(20):
        masks = get_action_masks(venv)
        actions, _ = model.predict(obs, action_masks=masks)
        assert all(masks[i, a] for i, a in enumerate(actions))
        obs, *_ = venv.step(actions)


def test_maskable_ppo_place_only():
    model = MaskablePPO(
        "MultiInputPolicy", _vec(PlaceOnly), n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu"
    )
    model.learn(total_timesteps=256)


@pytest.mark.parametrize("algo", [PPO, A2C])
def test_unmasked_algorithms_run_with_penalised_invalid_actions(algo):
    venv = _vec(max_invalid_streak=20)
    kwargs = {"n_steps": 64, "batch_size": 64, "n_epochs": 1} if algo is PPO else {"n_steps": 16}
    model = algo("MultiInputPolicy", venv, seed=0, device="cpu", **kwargs)
    model.learn(total_timesteps=256)
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
    model.learn(total_timesteps=64)
    assert np.isfinite(model.logger.name_to_value.get("train/loss", 0.0))
