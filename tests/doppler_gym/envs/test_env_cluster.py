"""Doppler-Cluster-v0: API checks, determinism, FIFO through the env == dg.cluster.run(..., "fifo"), returns."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import doppler_gym as dg
from doppler_gym.envs.cluster import ClusterEnv
from doppler_gym.envs.registration import CLUSTER_ENV_ID


def _fifo_action(obs, max_jobs: int) -> int:
    """FIFO with backfilling: the earliest-arriving waiting job that fits, else advance."""
    fits = np.flatnonzero(obs["action_mask"][:max_jobs])
    return int(fits[0]) if fits.size else max_jobs


def _rollout(env: gym.Env, policy, seed: int = 0):
    obs, _ = env.reset(seed=seed)
    rewards, actions = [], []
    while True:
        assert (obs["action_mask"].astype(bool) == env.unwrapped.action_masks()).all()
        a = policy(obs)
        obs, r, term, trunc, info = env.step(a)
        assert not trunc
        rewards.append(r)
        actions.append(a)
        if term:
            return np.array(rewards), actions, info


def test_registered_with_a_string_entry_point():
    assert CLUSTER_ENV_ID == "Doppler-Cluster-v0"
    assert gym.spec(CLUSTER_ENV_ID).entry_point == "doppler_gym.envs.cluster:ClusterEnv"
    assert isinstance(gym.make(CLUSTER_ENV_ID).unwrapped, ClusterEnv)


def test_gymnasium_check_env():
    gym_check_env(ClusterEnv("generated:12"), skip_render_check=True)


def test_sb3_check_env():
    sb3_check_env(ClusterEnv("generated:12"), warn=True)


def test_same_seed_same_rollout():
    rng_policy = lambda seed: (lambda r: (lambda obs: int(r.choice(np.flatnonzero(obs["action_mask"])))))(  # noqa: E731
        np.random.default_rng(seed))
    a = _rollout(ClusterEnv("generated:20", seed=3), rng_policy(1))
    b = _rollout(ClusterEnv("generated:20", seed=3), rng_policy(1))
    assert a[1] == b[1]
    np.testing.assert_array_equal(a[0], b[0])
    assert a[2]["avg_jct"] == b[2]["avg_jct"]


@pytest.mark.parametrize("n_jobs", [16, 40])
def test_fifo_through_the_env_reproduces_run_fifo(n_jobs):
    env = gym.make(CLUSTER_ENV_ID, trace=f"generated:{n_jobs}", seed=0, max_jobs=48)
    rewards, _, info = _rollout(env, lambda obs: _fifo_action(obs, 48))
    ref = dg.cluster.run(env.unwrapped.trace, env.unwrapped.cluster, "fifo", seed=0)
    assert (ref.jobs["first_start"] > ref.jobs["arrival"]).sum() >= 2  # jobs did queue (2 of 16, 34 of 40)
    assert info["avg_jct"] == pytest.approx(ref.avg_jct, rel=1e-12)
    np.testing.assert_array_equal(info["result"].jobs["completion"], ref.jobs["completion"])
    # the return is minus the total JCT in hours (time_scale 3600 s)
    assert rewards.sum() == pytest.approx(-ref.jobs["jct"].sum() / 3600.0, rel=1e-9)
    assert (rewards <= 1e-12).all()


def test_return_is_minus_total_jct_for_any_policy():
    r = np.random.default_rng(0)
    env = ClusterEnv("generated:20", seed=1, time_scale=60.0)
    rewards, _, info = _rollout(env, lambda obs: int(r.choice(np.flatnonzero(obs["action_mask"]))))
    assert rewards.sum() == pytest.approx(-info["result"].jobs["jct"].sum() / 60.0, rel=1e-9)


def test_invalid_action_is_penalised_and_changes_nothing():
    env = ClusterEnv("generated:8")
    obs, _ = env.reset(seed=0)
    bad = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    obs2, r, term, trunc, info = env.step(bad)
    assert r == -0.01 and info["invalid_action"] and not term
    for k in obs:
        np.testing.assert_array_equal(obs[k], obs2[k])


def test_maskable_ppo_learns_a_few_steps():
    model = MaskablePPO("MultiInputPolicy", ClusterEnv("generated:12"), n_steps=64, batch_size=64, n_epochs=1,
                        seed=0, device="cpu")
    model.learn(total_timesteps=256)
    assert model.num_timesteps >= 256


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"trace": "nope"}, ValueError, "unknown trace 'nope'"),
    ({"trace": "generated:x"}, ValueError, "generated:N"),
    ({"trace": 3}, TypeError, "trace must be"),
    ({"trace": "generated:8", "max_jobs": 4}, ValueError, "max_jobs must be an int >= the trace's 8 jobs"),
    ({"cluster": "2x8"}, TypeError, "cluster must be"),
    ({"seed": 1.5}, TypeError, "seed must be an int"),
    ({"time_scale": 0}, ValueError, "time_scale must be"),
    ({"trace": "generated:30", "cluster": dg.cluster.Cluster.uniform(1, 4)}, ValueError, "exceeds the cluster"),
    ({"render_mode": "human"}, ValueError, "no render modes"),
])
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ClusterEnv(**kwargs)
