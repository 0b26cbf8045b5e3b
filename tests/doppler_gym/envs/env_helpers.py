"""Shared fixtures of the env tests: a hand-checked toy graph and a masked random rollout."""

from __future__ import annotations

import numpy as np

import doppler_gym as dg

# Toy graph (raw costs = times): 0 -> 2, 1 -> 2, 2 -> 3, 1 -> 4.
#   comp = [2, 3, 4, 1, 5], comm = [1, 1, 2, 1, 1]
#   b-level: b3 = 1, b4 = 5, b2 = 4 + 2 + 1 = 7, b0 = 2 + 1 + 7 = 10, b1 = 3 + 1 + max(7, 5) = 11
#   t-level: t0 = 2, t1 = 3, t2 = 4 + 2 + max(2, 3) = 9, t3 = 1 + 1 + 9 = 11, t4 = 5 + 1 + 3 = 9
#   compute-only critical path: 1 -> 2 -> 3 = 3 + 4 + 1 = 8 (and 1 -> 4 = 8): the feature scale
TOY_COMP = np.array([2.0, 3.0, 4.0, 1.0, 5.0])
TOY_COMM = np.array([1.0, 1.0, 2.0, 1.0, 1.0])
TOY_B = np.array([10.0, 11.0, 7.0, 1.0, 5.0])
TOY_T = np.array([2.0, 3.0, 9.0, 11.0, 9.0])
TOY_SCALE = 8.0
RAW = dg.SimConfig(cost_model="raw")  # costs are times, reported as they are (no 1e10 divisor)


def make_toy() -> dg.DataflowGraph:
    return dg.DataflowGraph(
        src=[0, 1, 2, 1], dst=[2, 2, 3, 4], flops=TOY_COMP, out_bytes=TOY_COMM, name="toy", units="paper"
    )


def masked_rollout(env, rng: np.random.Generator, seed: int | None = None, options: dict | None = None):
    """One episode with uniformly random valid actions; returns (obs list, rewards, last info, steps)."""
    obs, info = env.reset(seed=seed, options=options)
    observations, rewards = [obs], []
    while True:
        mask = env.get_wrapper_attr("action_masks")()
        action = int(rng.choice(np.flatnonzero(mask)))
        obs, reward, terminated, truncated, info = env.step(action)
        observations.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            return observations, rewards, info, len(rewards)


def teacher_rollout(env) -> dict:
    """Follow the teacher, ties to the lowest action id; the final info."""
    env.reset(seed=0)
    while True:
        *_, terminated, truncated, info = env.step(int(np.argmax(env.teacher_mask())))
        if terminated or truncated:
            return info
