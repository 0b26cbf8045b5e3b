"""A :class:`~doppler_gym.envs.rewards.Reward` evaluated for many envs at once.

The built-in rewards are arithmetic on their three numbers, so called once with ``(k,)`` float64 arrays
they return each env's reward with the same operations as ``k`` calls with floats (equal bit for bit).
Any other reward object is called once per env, with Python floats, as the single env calls it.
"""

from __future__ import annotations

import numpy as np

from doppler_gym.envs.rewards import (
    ImprovementReward,
    IncrementalReward,
    MakespanReward,
    Reward,
    ShapedReward,
    SparseReward,
)

ARRAY_REWARDS = (IncrementalReward, SparseReward, MakespanReward, ImprovementReward, ShapedReward)


def measure(reward: Reward) -> str:
    """The partial makespan ``reward`` reads: ``"simulated"`` or ``"estimate"`` (the single env's rule)."""
    return "simulated" if getattr(reward, "measure", "estimate") == "simulated" else "estimate"


def _evaluate(method, array_ok: bool, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    if array_ok:
        out = np.asarray(method(a, b, c), np.float64)
        return out if out.shape == a.shape else np.full(a.shape, out)  # a reward that ignores its arrays
    return np.array([float(method(x, y, z)) for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())], np.float64)


def step_rewards(reward: Reward, before: np.ndarray, after: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``(k,) float64``: ``reward.step(before[j], after[j], reference[j])`` for each ``j``."""
    return _evaluate(reward.step, type(reward) in ARRAY_REWARDS, before, after, reference)


def final_rewards(reward: Reward, before: np.ndarray, makespan: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``(k,) float64``: ``reward.final(before[j], makespan[j], reference[j])`` for each ``j``."""
    return _evaluate(reward.final, type(reward) in ARRAY_REWARDS, before, makespan, reference)
