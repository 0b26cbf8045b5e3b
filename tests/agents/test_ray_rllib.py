"""agents/examples/rllib_ppo_masked.py at a tiny size: RLlib's PPO with action masking trains on Doppler-Sim-v0."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

pytest.importorskip("ray.rllib", reason="RLlib is not installed: pip install 'doppler-gym[rllib]'")

import doppler_gym as dg  # noqa: E402
from tests.doppler_gym.parallel.ray_fixture import ray_local  # noqa: E402, F401  (fixture)

pytestmark = pytest.mark.slow  # starts Ray and trains RLlib's PPO

GRAPH = {"n_ops": 8, "levels": 3, "seed": 0}


@pytest.fixture(scope="module")
def example():
    return importlib.import_module("agents.examples.rllib_ppo_masked")


def test_masked_obs_wrapper(example):
    env = example.make_env({"graph": dg.workloads.make("random", **GRAPH), "topology": 2})
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    np.testing.assert_array_equal(obs["action_mask"].astype(bool), env.unwrapped.action_masks())
    invalid = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    with pytest.raises(ValueError):  # the premise of the training test: a masked action stops the run
        env.step(invalid)


def test_rllib_ppo_trains_with_masks(example, ray_local):  # noqa: F811
    graph = dg.workloads.make("random", **GRAPH)
    out = example.train({"graph": graph, "topology": 2}, iterations=2, batch=64, minibatch=32, epochs=1, hidden=16)
    rows = out["iterations"]
    assert [r["iteration"] for r in rows] == [1, 2]
    assert rows[-1]["env_steps"] >= 128  # two batches of 64 env steps, every sampled action valid (else raised)
    assert all(math.isfinite(r["episode_return_mean"]) and r["episode_return_mean"] < 0 for r in rows)
    assert out["greedy_makespan"] >= out["lower_bound"] * (1 - 1e-12)
    cp = dg.baselines.critical_path(graph, 2, seed=0)
    assert out["critical_path_makespan"] == pytest.approx(cp.makespan, rel=1e-9)
