"""Doppler-Real-v0: PlacementEnv with a RealBackend, calibrated to seconds."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs_real
from envs_real import RealBackend, make_real_env
from envs_real import materialize as materialize_mod
from tests.envs_real.real_helpers import small_ffnn


def rollout(env, seed=0):
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    total = 0.0
    while True:
        mask = env.get_wrapper_attr("action_masks")()
        _, r, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        total += r
        if term or trunc:
            return total, r, info


def test_registered_and_runs_a_real_episode():
    assert envs_real.ENV_ID in gym.registry
    g = small_ffnn().graph
    env = gym.make("Doppler-Real-v0", graph=g, devices="cpu:2", repeats=1, warmup=0, calibration_reps=2)
    _, last, info = rollout(env)
    assert info["backend"] == "real" and info["time_unit"] == "s"
    assert info["error"] is None and info["real"]["device_kind"] == "cpu"
    assert info["makespan"] == pytest.approx(info["real"]["real_makespan_s"])
    assert info["reference_makespan"] > 0 and np.isfinite(last)
    cal = env.unwrapped.calibration
    assert env.unwrapped.graph is cal.graph and env.unwrapped.topology is cal.topology


def test_failed_run_gives_the_failure_reward(monkeypatch):
    g = small_ffnn().graph
    be = RealBackend("cpu:2", repeats=1, warmup=0)
    env = make_real_env(g, backend=be, failure_reward=-5.0, calibration_reps=2)

    def boom(operands, eq):
        raise RuntimeError("bad shape")

    monkeypatch.setitem(materialize_mod.TORCH_OPS, "relu", boom)
    _, last, info = rollout(env)
    assert last == -5.0 and "bad shape" in info["error"] and info["real"]["error_kind"] == "op_failed"


def test_uncalibrated_env_warns_about_units():
    g = small_ffnn().graph
    be = RealBackend("cpu:2", repeats=1, warmup=0)
    with pytest.warns(RuntimeWarning, match="units"):
        env = make_real_env(g, backend=be, calibrate=False, topology=2)
    _, _, info = rollout(env)
    assert info["error"] is None
    with pytest.raises(ValueError, match="one graph"):
        make_real_env([g, g], backend=be)


def test_real_env_passes_gymnasium_and_sb3_checkers():
    import warnings

    from gymnasium.utils.env_checker import check_env as gym_check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make("Doppler-Real-v0", graph=small_ffnn().graph, devices="cpu:2", repeats=1, warmup=0,
                   calibration_reps=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the checkers' advice on unbounded boxes and Dict spaces
        gym_check_env(env.unwrapped, skip_render_check=True)
        sb3_check_env(env.unwrapped, warn=False)
