"""The shipped pre-trained policy acting through Doppler-Sim-v0's int8 action masks."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from agents.pretrained import load_policy

# the shipped policy's greedy makespan on paper/chainmm, 4 devices, stepped through the env (the same with bool
# masks: the policy reads the mask's values only); update only with new shipped weights
CHAINMM_4_MAKESPAN = 1600.02


def test_greedy_actions_through_the_env_are_valid_and_the_same_with_or_without_action_masks():
    env = gym.make("Doppler-Sim-v0", graph="paper/chainmm", topology=4)
    assert env.observation_space["action_mask"].dtype == np.int8
    policy = load_policy(env)
    runs = []
    for use_masks in (True, False):  # MaskablePPO's action_masks, else the policy reads obs["action_mask"]
        obs, _ = env.reset(seed=0)
        actions = []
        while True:
            mask = env.unwrapped.action_masks()
            action, _ = policy.predict(obs, deterministic=True, action_masks=mask if use_masks else None)
            assert mask[int(action)], f"the policy chose a masked-out action {int(action)}"
            actions.append(int(action))
            obs, _, terminated, truncated, info = env.step(int(action))
            if terminated or truncated:
                break
        runs.append((actions, info["makespan"]))
    assert runs[0] == runs[1]
    assert runs[0][1] == pytest.approx(CHAINMM_4_MAKESPAN, rel=1e-9)
