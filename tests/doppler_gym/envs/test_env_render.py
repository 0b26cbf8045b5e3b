"""Render modes: ansi text and rgb_array Gantt images."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from doppler_gym.envs import PlacementEnv
from tests.doppler_gym.envs.env_helpers import masked_rollout


def _is_image(img) -> bool:
    return (
        isinstance(img, np.ndarray)
        and img.dtype == np.uint8
        and img.ndim == 3
        and img.shape[2] == 3
        and img.size > 0
    )


def test_ansi_in_every_phase():
    env = gym.make("Doppler-Sim-v0", graph="paper/chainmm", render_mode="ansi")
    env.reset(seed=0)
    text = env.render()
    assert isinstance(text, str) and "paper/chainmm" in text and "phase SEL" in text and "dev3" in text
    env.step(0)
    assert "PLC, placing op 0" in env.render()
    masked_rollout(env, np.random.default_rng(0), seed=0)
    assert "done: makespan" in env.render()


def test_rgb_array_partial_and_final():
    env = gym.make("Doppler-Sim-v0", graph="paper/chainmm", render_mode="rgb_array")
    env.reset(seed=0)
    for a in (0, 76, 1, 77):
        env.step(a)
    assert _is_image(env.render())  # estimated schedule of the two placed ops
    masked_rollout(env, np.random.default_rng(0), seed=0)
    img = env.render()
    assert _is_image(img) and img.std() > 0


def test_assign_env_render():
    env = gym.make("Doppler-SimAssign-v0", graph="paper/chainmm", render_mode="ansi")
    env.reset(seed=0)
    assert "waiting" in env.render()
    env.step(np.zeros(76, int))
    assert "makespan" in env.render()
    env = gym.make("Doppler-SimAssign-v0", graph="paper/chainmm", render_mode="rgb_array")
    env.reset(seed=0)
    assert _is_image(env.render())
    env.step(np.arange(76) % 4)
    assert _is_image(env.render())


def test_render_without_mode_warns():
    env = gym.make("Doppler-Sim-v0", graph="paper/chainmm").unwrapped
    env.reset(seed=0)
    with pytest.warns(UserWarning, match="render_mode"):
        assert env.render() is None
    with pytest.raises(ValueError, match="render_mode"):
        PlacementEnv(graph="paper/chainmm", render_mode="video")
