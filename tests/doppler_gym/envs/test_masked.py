"""The pieces of the env contract (doppler_gym.envs.masked): action coercion, mask space, invalid-action policy."""

from __future__ import annotations

import numpy as np
import pytest

from doppler_gym.envs.masked import (
    MASK_DTYPE,
    InvalidActions,
    action_array,
    action_index,
    episode_over_error,
    mask_space,
)


@pytest.mark.parametrize("action", [3, np.int64(3), np.uint8(3), np.array(3), np.array([3]), np.array([[3]], np.int32)])
def test_action_index_takes_one_integer(action):
    index = action_index(action, "Env.step", "an op id")
    assert index == 3 and type(index) is int


@pytest.mark.parametrize("action", [1.5, np.float32(3.0), "3", None, True, np.bool_(True), np.array([1, 2]),
                                    np.array([1.0]), np.array([], np.int64)])
def test_action_index_rejects_anything_else(action):
    with pytest.raises(TypeError, match=r"Env.step: the action must be one integer \(an op id\), got"):
        action_index(action, "Env.step", "an op id")


def test_action_array():
    out = action_array([1, 2, 3], (3,), "Env.step", "one device per op")
    assert out.dtype == np.int64 and out.tolist() == [1, 2, 3]
    arr = np.array([1, 2], np.int32)
    assert action_array(arr, (2,), "Env.step", "x") is not arr  # a fresh array: the env may modify it
    with pytest.raises(TypeError, match="integer array"):
        action_array(np.zeros(3), (3,), "Env.step", "one device per op")
    with pytest.raises(ValueError, match=r"shape \(3,\).*got shape \(2,\)"):
        action_array([1, 2], (3,), "Env.step", "one device per op")


def test_mask_space_is_int8():
    space = mask_space(5)
    assert space.dtype == MASK_DTYPE == np.int8 and space.shape == (5,)
    assert space.contains(np.ones(5, np.int8)) and not space.contains(np.full(5, 2, np.int8))


def test_episode_over_error_names_reset():
    err = episode_over_error("Env.step")
    assert isinstance(err, RuntimeError) and str(err).endswith("call reset()") and str(err).startswith("Env.step")


def test_penalize_counts_the_streak_and_truncates():
    rule = InvalidActions("penalize", -0.5, max_streak=3)
    results = [rule.reject(lambda: "never built") for _ in range(3)]
    assert [r.reward for r in results] == [-0.5] * 3
    assert [r.truncated for r in results] == [False, False, True]
    assert [r.info for r in results] == [{"invalid_action": True, "invalid_streak": k} for k in (1, 2, 3)]
    rule.accept()
    assert rule.reject(lambda: "").info["invalid_streak"] == 1
    rule.reset()
    assert rule.streak == 0


def test_no_streak_limit():
    rule = InvalidActions("penalize", max_streak=None)
    assert not any(rule.reject(lambda: "").truncated for _ in range(1000))


def test_raise_mode_raises_the_message_and_keeps_the_streak():
    rule = InvalidActions("raise")
    with pytest.raises(ValueError, match="action 7 is not valid"):
        rule.reject(lambda: "action 7 is not valid")
    assert rule.streak == 0


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"mode": "ignore"}, "invalid_action must be one of"),
    ({"penalty": float("nan")}, "invalid_penalty must be a finite number"),
    ({"penalty": "low"}, "invalid_penalty must be a finite number"),
    ({"max_streak": 0}, "max_invalid_streak must be an integer >= 1"),
    ({"max_streak": 2.5}, "max_invalid_streak must be an integer >= 1"),
])
def test_bad_arguments_name_the_env_keyword(kwargs, match):
    with pytest.raises(ValueError, match=match):
        InvalidActions(**kwargs)
