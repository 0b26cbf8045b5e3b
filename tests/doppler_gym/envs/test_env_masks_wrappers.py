"""``action_masks()`` through ``gym.make``'s wrappers (the ids' ``ActionMasks`` additional wrapper), with
``gym.make_vec``, sb3-contrib, pickling and ``gym.make(env.spec)``; and the one warning of an invalid action
(:mod:`doppler_gym.envs.masked`). Every registered id, on the small instances of test_env_contract.py."""

from __future__ import annotations

import pickle
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

from doppler_gym.envs.masked import ActionMasks, InvalidActions, InvalidActionWarning
from doppler_gym.envs.registration import ACTION_MASKS
from tests.doppler_gym.envs.test_env_contract import IDS, KWARGS, NEEDS


def make(env_id: str, **overrides: Any) -> gym.Env:
    """``gym.make(env_id)`` on the small instance (skipped with the extra to install when a module is missing)."""
    if env_id in NEEDS:
        pytest.importorskip(NEEDS[env_id], reason=f"{env_id} needs {NEEDS[env_id]}: pip install -e '.[real]'")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # make_real_env(calibrate=False) warns about units
        return gym.make(env_id, **{**KWARGS[env_id], **overrides})


def valid_action(env: gym.Env, mask: np.ndarray) -> int | np.ndarray:
    """The first valid action: the first 1 of the mask (Discrete), the first 1 of each row (MultiDiscrete)."""
    space = env.action_space
    if isinstance(space, spaces.Discrete):
        return int(np.flatnonzero(mask)[0])
    rows = mask.reshape(len(space.nvec), -1)
    return np.array([np.flatnonzero(row)[0] for row in rows], np.int64)


def invalid_action(env: gym.Env, mask: np.ndarray) -> int | np.ndarray:
    """An action the env rejects: the first masked-out index (Discrete), an entry past its range (MultiDiscrete)."""
    space = env.action_space
    if isinstance(space, spaces.Discrete):
        return int(np.flatnonzero(mask == 0)[0])
    action = np.zeros(len(space.nvec), np.int64)
    action[0] = space.nvec[0]
    return action


def observed_mask(env: gym.Env, obs: Any) -> np.ndarray:
    """``obs["action_mask"]``; for an env without that key (``Doppler-SimAssign-v0``), the env's own method."""
    if isinstance(obs, dict) and "action_mask" in obs:
        return obs["action_mask"]
    return env.unwrapped.action_masks()


# Gymnasium refuses make_vec's vector entry point for an id with additional_wrappers: the native vector id
# (Doppler-SimVec-v0) has none, and gym.make gives its env unwrapped (test_vector_env.py checks that one)
WRAPPED_IDS = [i for i in IDS if gym.spec(i).vector_entry_point is None]


@pytest.mark.parametrize("env_id", WRAPPED_IDS)
def test_action_masks_through_gym_make_equals_the_observed_mask(env_id):
    env = make(env_id)
    assert isinstance(env, ActionMasks) and env.spec.additional_wrappers[-1] == ACTION_MASKS  # outermost
    obs, _ = env.reset(seed=0)
    first = env.action_masks()
    np.testing.assert_array_equal(first, observed_mask(env, obs))
    assert first.dtype == np.int8 and first.any()
    obs, _, terminated, truncated, _ = env.step(valid_action(env, first))
    np.testing.assert_array_equal(env.action_masks(), observed_mask(env, obs))
    if not (terminated or truncated) and isinstance(env.action_space, spaces.Discrete):
        assert not np.array_equal(env.action_masks(), first), \
            "the step changed no mask entry: the comparison after the step would not tell"


@pytest.mark.parametrize("env_id", WRAPPED_IDS)
def test_action_masks_stays_outermost_over_a_time_limit_and_through_make_of_the_spec(env_id):
    env = make(env_id, max_episode_steps=1)
    assert isinstance(env, ActionMasks) and isinstance(env.env, gym.wrappers.TimeLimit)
    obs, _ = env.reset(seed=0)
    _, _, terminated, truncated, _ = env.step(valid_action(env, env.action_masks()))
    assert terminated or truncated  # the time limit (or the env) ended the one-step episode
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        again = gym.make(env.spec)  # rebuilt from the recorded spec: one ActionMasks, still outermost
    chain = []
    inner: gym.Env = again
    while isinstance(inner, gym.Wrapper):
        chain.append(type(inner))
        inner = inner.env
    assert chain[0] is ActionMasks and chain.count(ActionMasks) == 1, chain
    obs, _ = again.reset(seed=0)
    np.testing.assert_array_equal(again.action_masks(), observed_mask(again, obs))


@pytest.mark.parametrize("env_id", IDS)
def test_action_masks_through_make_vec(env_id):
    if env_id in NEEDS:
        pytest.importorskip(NEEDS[env_id])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        envs = gym.make_vec(env_id, num_envs=2, vectorization_mode="sync", **KWARGS[env_id])
    obs, _ = envs.reset(seed=0)
    masks = np.stack(envs.call("action_masks"))
    assert masks.shape[0] == 2 and masks.dtype == np.int8
    if "action_mask" in obs:
        np.testing.assert_array_equal(masks, obs["action_mask"])
    else:
        np.testing.assert_array_equal(masks[0], masks[1])  # same instance, same start
    envs.close()


def test_sb3_contrib_finds_the_masks_on_a_made_env_and_a_dummy_vec_env():
    pytest.importorskip("sb3_contrib")
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
    from stable_baselines3.common.vec_env import DummyVecEnv

    env = make("Doppler-Collective-v0")
    obs, _ = env.reset(seed=0)
    assert is_masking_supported(env)  # hasattr(env, "action_masks") on the outermost wrapper
    np.testing.assert_array_equal(get_action_masks(env), obs["action_mask"])
    venv = DummyVecEnv([lambda: make("Doppler-Collective-v0")] * 2)
    first = venv.reset()
    assert is_masking_supported(venv)
    np.testing.assert_array_equal(np.stack(venv.env_method("action_masks")), first["action_mask"])
    np.testing.assert_array_equal(get_action_masks(venv), first["action_mask"])


@pytest.mark.parametrize("env_id", WRAPPED_IDS)
def test_the_wrapper_pickles_whenever_the_env_does(env_id):
    env = make(env_id)
    try:
        pickle.dumps(env.env)
    except (TypeError, pickle.PicklingError, AttributeError) as err:
        pytest.skip(f"{env_id} does not pickle without ActionMasks either: {err}")
    obs, _ = env.reset(seed=0)
    copy = pickle.loads(pickle.dumps(env))
    assert isinstance(copy, ActionMasks)
    np.testing.assert_array_equal(copy.action_masks(), observed_mask(env, obs))


@pytest.mark.parametrize("env_id", IDS)
def test_check_env_accepts_the_made_env(env_id):
    env = make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the checker's advice: test_env_contract.py looks at it
        check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(env.action_masks(), observed_mask(env, obs))


def test_action_masks_refuses_an_env_without_masks():
    with pytest.raises(TypeError, match="no action_masks"):
        ActionMasks(gym.make("CartPole-v1"))


# ---------------------------------------------------------------------- the invalid-action warning
@pytest.mark.parametrize("env_id", IDS)
def test_the_first_invalid_action_of_an_env_warns_once(env_id, recwarn):
    warnings.simplefilter("always")  # Python's default filter would fold repeats anyway: count what is emitted
    env = make(env_id, invalid_action="penalize", invalid_penalty=-0.25, max_invalid_streak=None)
    obs, _ = env.reset(seed=0)
    recwarn.clear()
    for _ in range(3):
        *_, info = env.step(invalid_action(env, env.action_masks()))
        assert info["invalid_action"] is True
    env.reset(seed=1)
    env.step(invalid_action(env, env.action_masks()))  # a new episode of the same env: still silent
    caught = [w for w in recwarn if issubclass(w.category, InvalidActionWarning)]
    assert len(caught) == 1, [str(w.message) for w in caught]
    text = str(caught[0].message)
    assert "reward -0.25" in text and "invalid_action='raise'" in text and "action_mask" in text
    assert "truncate" not in text  # max_invalid_streak=None: nothing truncates
    other = make(env_id, invalid_action="penalize")  # another instance warns on its own first invalid action
    other.reset(seed=0)
    recwarn.clear()
    other.step(invalid_action(other, other.action_masks()))
    assert len([w for w in recwarn if issubclass(w.category, InvalidActionWarning)]) == 1


def test_valid_actions_and_raise_mode_do_not_warn(recwarn):
    warnings.simplefilter("always")
    env = make("Doppler-Collective-v0")
    obs, _ = env.reset(seed=0)
    for _ in range(5):
        obs, *_ = env.step(valid_action(env, obs["action_mask"]))
    strict = make("Doppler-Collective-v0", invalid_action="raise")
    strict.reset(seed=0)
    with pytest.raises(ValueError):
        strict.step(invalid_action(strict, strict.action_masks()))
    assert not [w for w in recwarn if issubclass(w.category, InvalidActionWarning)]


def test_the_warning_text_names_the_penalty_and_the_streak():
    rule = InvalidActions("penalize", -0.5, max_streak=7)
    with pytest.warns(InvalidActionWarning) as caught:
        rule.reject(lambda: "never built")
        rule.reject(lambda: "never built")
    assert len(caught) == 1
    assert str(caught[0].message) == rule.warning_text()
    assert "reward -0.5 (invalid_penalty)" in rule.warning_text() and "7 in a row truncate" in rule.warning_text()
