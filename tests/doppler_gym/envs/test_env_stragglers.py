"""``Doppler-Sim-v0(stragglers=...)``: stragglers drawn per episode from the env's seed; the final makespan is
the simulator's with them; env checkers and same-seed determinism; bad options."""

from __future__ import annotations

import warnings
from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import doppler_gym as dg
from doppler_gym.sim.stragglers import Straggler, StragglerModel
from tests.doppler_gym.envs.env_helpers import masked_rollout

MODEL = StragglerModel(device_rate=1.5, link_rate=0.0, duration=(0.2, 0.5), factor=(0.2, 0.5))


def _env(**kwargs) -> gym.Env:
    return gym.make("Doppler-Sim-v0", graph="paper/chainmm", **kwargs)


def test_each_episode_draws_from_the_env_seed_and_the_makespan_is_the_simulators():
    env = _env(stragglers=MODEL)
    seen = []
    for episode in range(3):
        _, _, info, _ = masked_rollout(env, np.random.default_rng(episode), seed=100 + episode)
        drawn = info["stragglers"]
        assert drawn and all(0.0 <= s.start < info["reference_makespan"] for s in drawn)
        ctx = env.unwrapped.context
        expect = dg.simulate(ctx.graph, info["assignment"], topology=ctx.topology,
                             config=replace(ctx.config, stragglers=drawn)).makespan
        assert info["makespan"] == expect
        nominal = dg.simulate(ctx.graph, info["assignment"], topology=ctx.topology, config=ctx.config).makespan
        assert info["makespan"] >= nominal
        # the draw is the model's, with the env's np_random right after the instance was sampled
        rng = np.random.default_rng(100 + episode)
        assert drawn == MODEL.draw(ctx.topology, rng, horizon=info["reference_makespan"])
        seen.append(drawn)
    assert seen[0] != seen[1]


def test_same_seed_same_episode():
    a, b = _env(stragglers=MODEL), _env(stragglers=MODEL)
    _, ra, ia, _ = masked_rollout(a, np.random.default_rng(0), seed=7)
    _, rb, ib, _ = masked_rollout(b, np.random.default_rng(0), seed=7)
    assert ia["stragglers"] == ib["stragglers"] and ra == rb and ia["makespan"] == ib["makespan"]


def test_fixed_stragglers_and_dict_option():
    fixed = (Straggler("device", 0, 0.0, 1e9, 0.5),)
    _, _, info, _ = masked_rollout(_env(stragglers=list(fixed)), np.random.default_rng(1), seed=0)
    assert info["stragglers"] == fixed
    env = _env(stragglers={"device_rate": 1.5, "duration": (0.2, 0.5), "factor": (0.2, 0.5)})
    assert env.unwrapped.stragglers == MODEL
    _, _, info, _ = masked_rollout(_env(), np.random.default_rng(1), seed=0)
    assert info["stragglers"] == ()


def test_check_env_with_stragglers():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(_env(stragglers=MODEL).unwrapped, skip_render_check=True)


def test_bad_straggler_options():
    with pytest.raises(ValueError, match="unknown StragglerModel field"):
        _env(stragglers={"rate": 1.0})
    with pytest.raises(TypeError, match="sequence of Straggler"):
        _env(stragglers="device:0@0-1x0.5")
