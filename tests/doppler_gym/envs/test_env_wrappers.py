"""PlaceOnly and SelectOnly: one decision per agent step, the other taken by the heuristic."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from doppler_gym.envs import PlacementEnv, PlaceOnly, SelectOnly
from tests.doppler_gym.envs.env_helpers import RAW, make_toy, masked_rollout, teacher_rollout


def test_place_only_spaces_and_phase():
    env = PlaceOnly(gym.make("Doppler-Sim-v0", graph="paper/chainmm", max_devices=6))
    assert env.action_space == gym.spaces.Discrete(6)
    assert env.observation_space["action_mask"].shape == (6,)
    obs, _ = env.reset(seed=0)
    base = env.unwrapped
    assert obs["phase"][0] == 1 and obs["selected_op"][0] == base.selected_op >= 0
    np.testing.assert_array_equal(obs["action_mask"], [1, 1, 1, 1, 0, 0])
    np.testing.assert_array_equal(env.action_masks(), obs["action_mask"])
    assert env.observation_space.contains(obs)


def test_place_only_selects_by_b_level_and_counts_steps():
    env = PlaceOnly(PlacementEnv(graph=make_toy(), topology=2, sim_config=RAW))
    obs, _ = env.reset(seed=0)
    assert obs["selected_op"][0] == 1  # highest b-level source
    selected = [int(obs["selected_op"][0])]
    for step in range(5):
        obs, _r, term, _trunc, info = env.step(0)  # everything on device 0
        assert term == (step == 4)
        if not term:
            selected.append(int(obs["selected_op"][0]))
    assert selected == [1, 0, 2, 4, 3]  # always the ready op of highest b-level
    np.testing.assert_array_equal(info["assignment"], [0] * 5)
    np.testing.assert_array_equal(info["order"], selected)


def test_select_only_places_by_earliest_start():
    env = SelectOnly(PlacementEnv(graph=make_toy(), topology=2, sim_config=RAW))
    assert env.action_space == gym.spaces.Discrete(5)
    obs, _ = env.reset(seed=0)
    assert obs["phase"][0] == 0
    np.testing.assert_array_equal(obs["action_mask"], [1, 1, 0, 0, 0])
    for op in (0, 1, 4, 2, 3):
        obs, _r, term, _trunc, info = env.step(op)
    assert term
    # op0 -> dev0 [0, 2) (tie, lowest id); op1 -> dev1 [0, 3) (dev0 busy until 2);
    # op4 (input op1 on dev1): dev0 max(2, 3 + 1) = 4 vs dev1 3 -> dev1 [3, 8);
    # op2 (inputs op0 on dev0, op1 on dev1): dev0 max(2, 2, 3 + 1) = 4 vs dev1 max(8, 3, 3) = 8
    #   -> dev0 [4, 8);
    # op3 (input op2 on dev0): dev0 8 vs dev1 max(8, 8 + 2) = 10 -> dev0
    np.testing.assert_array_equal(info["assignment"], [0, 1, 0, 0, 1])


@pytest.mark.parametrize("wrapper", [PlaceOnly, SelectOnly])
def test_following_the_teacher_matches_the_unwrapped_teacher(wrapper):
    reference = teacher_rollout(PlacementEnv(graph="paper/llama-block"))
    env = wrapper(gym.make("Doppler-Sim-v0", graph="paper/llama-block"))
    base = env.unwrapped
    env.reset(seed=0)
    cut = slice(base.max_ops, None) if wrapper is PlaceOnly else slice(0, base.max_ops)
    steps = 0
    while True:
        *_, term, trunc, info = env.step(int(np.argmax(base.teacher_mask()[cut])))
        steps += 1
        if term or trunc:
            break
    assert steps == base.graph.n_ops
    np.testing.assert_array_equal(info["assignment"], reference["assignment"])
    np.testing.assert_array_equal(info["order"], reference["order"])
    assert info["makespan"] == reference["makespan"]


@pytest.mark.parametrize("wrapper", [PlaceOnly, SelectOnly])
def test_wrapped_episodes_sum_shaped_rewards(wrapper):
    env = wrapper(gym.make("Doppler-Sim-v0", graph="paper/ffnn", reward="shaped"))
    _, rewards, info, steps = masked_rollout(env, np.random.default_rng(0), seed=0)
    assert steps == 180
    assert sum(rewards) == pytest.approx(-info["makespan"] / info["reference_makespan"], rel=1e-9)


@pytest.mark.parametrize("wrapper", [PlaceOnly, SelectOnly])
def test_wrapped_invalid_action_is_penalised_without_an_automatic_step(wrapper):
    env = wrapper(PlacementEnv(graph=make_toy(), topology=2, sim_config=RAW, max_devices=3))
    obs0, _ = env.reset(seed=0)
    bad = 2 if wrapper is PlaceOnly else 3  # a padding device / an op that is not ready
    obs, r, term, _trunc, info = env.step(bad)
    assert info["invalid_action"] and r == -0.01 and not term
    for k in obs:
        np.testing.assert_array_equal(obs[k], obs0[k])


def test_wrappers_need_a_placement_env():
    with pytest.raises(TypeError, match="PlacementEnv"):
        PlaceOnly(gym.make("Doppler-SimAssign-v0", graph="paper/chainmm"))
