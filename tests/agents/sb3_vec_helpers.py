"""Shared checks of the batched SB3 vec envs (``test_sb3_vec_env.py``, ``test_sb3_cluster_vec_env.py``): a batched
``VecEnv`` against SB3's ``DummyVecEnv`` over single envs (the reference), SB3's and sb3-contrib's expectations
of a ``VecEnv``, and a short MaskablePPO run on it. Import after ``pytest.importorskip`` of the SB3 packages."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import sb3_contrib
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecMonitor
from stable_baselines3.common.vec_env.util import obs_space_info

from doppler_gym.envs.masked import InvalidActionWarning


def same(got: object, want: object, where: str) -> None:
    """Equal values, recursing into dicts: arrays by dtype and entries, a ``ClusterResult`` by its summary, anything
    else by ``==``."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for key in want:
            same(got[key], want[key], f"{where}[{key!r}]")
    elif isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype, f"{where}: {got!r:.80} vs {want!r:.80}"
        np.testing.assert_array_equal(got, want, err_msg=where)
    elif hasattr(want, "summary"):  # a ClusterResult: compared by its metrics
        assert got.summary() == want.summary(), where
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def step_beside_dummy(venv: VecEnv, dummy: DummyVecEnv, steps: int, p_invalid: float) -> dict[str, int]:
    """Seed both with 21, reset and step them side by side with the same actions (a random valid action per env,
    or with probability ``p_invalid`` any action in ``[-1, A]``), asserting equal masks, observations, float32
    rewards, dones, infos and ``reset_infos`` at every step. Returns ``{"dones", "truncations"}`` counts."""
    n = dummy.num_envs
    venv.seed(21)
    dummy.seed(21)
    obs, want_obs = venv.reset(), dummy.reset()
    same(obs, want_obs, "reset obs")
    same(venv.reset_infos, dummy.reset_infos, "reset_infos")
    rng = np.random.default_rng(0)
    seen = {"dones": 0, "truncations": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InvalidActionWarning)
        for t in range(steps):
            masks = get_action_masks(dummy)
            np.testing.assert_array_equal(get_action_masks(venv), masks)
            actions = np.array([int(rng.integers(-1, masks.shape[1] + 1)) if rng.random() < p_invalid
                                else int(rng.choice(np.flatnonzero(m))) for m in masks])
            obs, rewards, dones, infos = venv.step(actions)
            w_obs, w_rewards, w_dones, w_infos = dummy.step(actions)
            same(obs, w_obs, f"step {t} obs")
            assert rewards.dtype == w_rewards.dtype == np.float32
            np.testing.assert_array_equal(rewards, w_rewards, err_msg=f"step {t}")
            np.testing.assert_array_equal(dones, w_dones, err_msg=f"step {t}")
            assert len(infos) == n
            for i in range(n):
                same(infos[i], w_infos[i], f"step {t} info {i}")
            same(venv.reset_infos, dummy.reset_infos, f"step {t} reset_infos")
            seen["dones"] += int(dones.sum())
            seen["truncations"] += sum(info["TimeLimit.truncated"] for info in w_infos)
    return seen


def check_vec_env_interface(venv: VecEnv, single: gym.Env, other_method: str) -> None:
    """SB3's and sb3-contrib's expectations of ``venv`` (``N >= 3`` envs like ``single``): the single env's spaces,
    observations of ``obs_space_info``'s shapes and dtypes, masks through ``get_action_masks`` equal to
    ``obs["action_mask"]``, ``render_mode`` ``None``, a callable ``action_masks`` attribute, no wrappers, and an
    ``AttributeError`` for ``env_method(other_method)`` and an unknown attribute."""
    n = venv.num_envs
    assert venv.observation_space == single.observation_space and venv.action_space == single.action_space
    obs = venv.reset()
    keys, shapes, dtypes = obs_space_info(venv.observation_space)
    assert set(obs) == set(keys)
    for key in keys:
        assert obs[key].shape == (n, *shapes[key]) and obs[key].dtype == dtypes[key], key
    assert is_masking_supported(venv)
    masks = get_action_masks(venv)
    assert masks.shape == (n, single.action_space.n) and masks.dtype == np.int8
    np.testing.assert_array_equal(masks, obs["action_mask"])
    np.testing.assert_array_equal(venv.action_masks(), masks)
    assert venv.get_attr("render_mode", indices=[1, 2]) == [None, None]
    np.testing.assert_array_equal(venv.get_attr("action_masks", indices=2)[0](), masks[2])
    assert venv.env_is_wrapped(VecMonitor) == [False] * n
    with pytest.raises(AttributeError, match="only action_masks"):
        venv.env_method(other_method)
    with pytest.raises(AttributeError, match="no public attribute"):
        venv.get_attr("not_there")


def check_maskable_ppo_runs(venv: VecEnv, **ppo_kwargs: Any) -> None:
    """MaskablePPO (``MultiInputPolicy``, one 32-unit layer, ``ppo_kwargs`` added) learns 512 steps on ``venv``
    (under ``VecMonitor``), and its masked predictions are valid actions."""
    venv = VecMonitor(venv)
    model = sb3_contrib.MaskablePPO("MultiInputPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0,
                                    policy_kwargs={"net_arch": [32]}, device="cpu", **ppo_kwargs)
    model.learn(total_timesteps=512)
    assert model.num_timesteps >= 512
    obs = venv.reset()
    actions, _ = model.predict(obs, action_masks=get_action_masks(venv), deterministic=True)
    masks = get_action_masks(venv)
    assert all(masks[i, a] == 1 for i, a in enumerate(actions))  # masked predictions are valid actions
