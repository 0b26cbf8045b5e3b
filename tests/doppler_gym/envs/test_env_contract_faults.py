"""Bad actions and options get the same answer from every registered env (issue 35, item 8): a float or
NaN or ``None`` action is a ``TypeError`` naming the env, a step after the episode ended (terminated or
truncated) is the episode-over error, and an unknown ``reset(options=...)`` key is a ``ValueError`` naming
the key and the valid keys (:func:`doppler_gym.envs.masked.reset_options`). ``Doppler-Real-v0`` runs on two
CPU devices, as in :mod:`tests.doppler_gym.envs.test_env_contract`, whose small-instance table this reuses."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from doppler_gym.envs.masked import InvalidActionWarning, reset_options
from tests.doppler_gym.envs.test_env_contract import IDS
from tests.doppler_gym.envs.test_env_masks_wrappers import make

# the reset(options=...) keys each id reads
VALID_OPTIONS: dict[str, tuple[str, ...]] = {
    "Doppler-Sim-v0": ("graph", "topology"),
    "Doppler-SimAssign-v0": ("graph", "topology"),
    "Doppler-SimVec-v0": ("graph", "topology"),
    "Doppler-Real-v0": ("graph", "topology"),
    "Doppler-Collective-v0": (),
    "Doppler-Cluster-v0": (),
    "Doppler-ClusterVec-v0": (),
}
EPISODE_OVER = r"the episode has ended \(or never started\); call reset\(\)"


def _env_name(env: gym.Env) -> str:
    return type(env.unwrapped).__name__


def _filled(env: gym.Env, value: object) -> object:
    """``value`` as an action of ``env``'s space: itself for Discrete, one per entry for MultiDiscrete."""
    if isinstance(env.action_space, spaces.Discrete) or value is None:
        return value
    return np.full(env.action_space.shape, value)


def _valid_action(env: gym.Env) -> int | np.ndarray:
    mask = env.get_wrapper_attr("action_masks")()
    if isinstance(env.action_space, spaces.Discrete):
        return int(np.flatnonzero(mask)[0])
    rows = mask.reshape(len(env.action_space.nvec), -1)
    return np.array([np.flatnonzero(row)[0] for row in rows], np.int64)


def _invalid_action(env: gym.Env) -> int | np.ndarray:
    if isinstance(env.action_space, spaces.Discrete):
        return int(env.action_space.n)
    action = np.zeros(len(env.action_space.nvec), np.int64)
    action[0] = env.action_space.nvec[0]
    return action


def test_every_registered_id_has_its_valid_options():
    assert set(IDS) == set(VALID_OPTIONS), f"add {sorted(set(IDS) ^ set(VALID_OPTIONS))} to VALID_OPTIONS"


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("bad", [1.7, np.float64(1.7), np.float32(0.5)], ids=["float", "float64", "float32"])
def test_a_float_action_is_a_type_error_naming_the_env(env_id, bad):
    env = make(env_id)
    obs, _ = env.reset(seed=0)
    with pytest.raises(TypeError, match=rf"{_env_name(env)}\.step: the action must be"):
        env.step(_filled(env, bad))
    env.step(_valid_action(env))  # the episode goes on: the bad action changed nothing


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("bad", [float("nan"), np.nan, None], ids=["nan", "np.nan", "None"])
def test_nan_and_none_actions_are_type_errors_naming_the_env(env_id, bad):
    env = make(env_id)
    env.reset(seed=0)
    with pytest.raises(TypeError, match=rf"{_env_name(env)}\.step: the action must be") as err:
        env.step(_filled(env, bad))
    assert "int()" not in str(err.value)


@pytest.mark.parametrize("env_id", IDS)
def test_a_step_after_truncation_is_the_episode_over_error(env_id):
    env = make(env_id, invalid_action="penalize", max_invalid_streak=1)
    env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InvalidActionWarning)
        *_, terminated, truncated, _ = env.step(_invalid_action(env))
    assert truncated and not terminated
    with pytest.raises(RuntimeError, match=rf"{_env_name(env)}\.step: {EPISODE_OVER}"):
        env.step(_valid_action(env))


@pytest.mark.parametrize("env_id", IDS)
def test_a_step_after_termination_is_the_episode_over_error(env_id):
    env = make(env_id)
    env.reset(seed=0)
    for _ in range(10_000):
        *_, terminated, truncated, _ = env.step(_valid_action(env))
        if terminated or truncated:
            break
    assert terminated and not truncated
    with pytest.raises(RuntimeError, match=rf"{_env_name(env)}\.step: {EPISODE_OVER}"):
        env.step(_valid_action(env))


def test_the_cluster_env_stops_at_max_steps():
    env = make("Doppler-Cluster-v0", max_steps=2)
    env.reset(seed=0)
    ends = [env.step(_valid_action(env))[3] for _ in range(2)]
    assert ends == [False, True]
    with pytest.raises(RuntimeError, match=rf"ClusterEnv\.step: {EPISODE_OVER}"):
        env.step(_valid_action(env))
    env.reset(seed=0)  # a new episode steps again
    assert env.step(_valid_action(env))[3] is False


@pytest.mark.parametrize("env_id", IDS)
def test_an_unknown_reset_option_names_the_key_and_the_valid_keys(env_id):
    env = make(env_id)
    valid = VALID_OPTIONS[env_id]
    said = ", ".join(map(repr, valid)) if valid else "none"
    with pytest.raises(ValueError, match=rf"unknown option\(s\) 'no_such_key'; valid: {said}"):
        env.reset(seed=0, options={"no_such_key": 1})
    for options in (None, {}):  # no option is always fine, and the env then steps
        env.reset(seed=0, options=options)
        env.step(_valid_action(env))


def test_reset_options_refuses_what_is_not_a_mapping():
    assert reset_options(None, ("graph",), "E.reset") == {}
    assert reset_options({"graph": 1}, ("graph",), "E.reset") == {"graph": 1}
    with pytest.raises(TypeError, match=r"E\.reset: options must be a dict or None, got list"):
        reset_options(["graph"], ("graph",), "E.reset")
    with pytest.raises(ValueError, match=r"E\.reset: unknown option\(s\) 'a', 'b'; valid: 'graph'"):
        reset_options({"b": 0, "a": 0, "graph": 0}, ("graph",), "E.reset")
