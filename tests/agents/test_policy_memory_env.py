"""DopplerPolicy on Doppler-Sim-v0 with memory tracked: the extra device_memory key is ignored, training
runs, and the OOM penalty reaches the rollout's rewards."""

from __future__ import annotations

import numpy as np
import pytest
from sb3_contrib import MaskablePPO
from stable_baselines3.common.vec_env import DummyVecEnv

import doppler_gym as dg
from agents.policy import DopplerPolicy
from doppler_gym.envs import PlacementEnv

pytestmark = pytest.mark.usefixtures("one_thread", "seeded")
SMALL = {"hidden_dim": 32, "n_layers": 2, "head_dim": 32}


def test_maskable_ppo_trains_on_a_memory_enforcing_env():
    g = dg.workloads.make("ffnn", batch=8, d_in=16, hidden=16, layers=1, blocks=2)
    total = float(g.persistent_bytes.sum())
    topo = dg.Topology.uniform(2, memory=0.75 * total)  # everything on one device runs out
    env = PlacementEnv(graph=g, topology=topo, sim_config=dg.SimConfig(memory="enforce"), oom_penalty=-3.0)
    assert "device_memory" in env.observation_space.spaces
    model = MaskablePPO(DopplerPolicy, DummyVecEnv([lambda: env]), policy_kwargs=SMALL, n_steps=64, batch_size=64,
                        n_epochs=1, seed=0, device="cpu")
    model.learn(64)
    obs, _ = env.reset(seed=0)
    done, info, total = False, {}, 0.0
    while not done:
        action, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=True)
        obs, reward, done, _, info = env.step(int(action))
        total += reward
    tr = dg.simulate(g, info["assignment"], topology=topo, config=dg.SimConfig(memory="enforce"))
    assert info["feasible"] == tr.feasible
    # the default per-placement reward sums to the sparse reward, the OOM penalty added at the end
    expected = -tr.makespan / info["reference_makespan"] + (0.0 if tr.feasible else -3.0)
    assert total == pytest.approx(expected)
    assert np.isfinite(total)
