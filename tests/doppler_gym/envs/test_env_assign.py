"""AssignEnv (Doppler-SimAssign-v0): one-shot assignment."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.envs import AssignEnv, PlacementEnv
from tests.doppler_gym.envs.env_helpers import RAW, make_toy

INFO_KEYS = {"makespan", "assignment", "order", "reference_makespan", "lower_bound", "backend"}


def test_one_step_episode_and_info():
    env = gym.make("Doppler-SimAssign-v0", graph="paper/ffnn")
    obs, info = env.reset(seed=0)
    assert set(obs) == {
        "op_features",
        "edge_index",
        "edge_attr",
        "n_ops",
        "n_edges",
        "n_devices",
        "graph_id",
        "device_static",
    }
    assert env.action_space == gym.spaces.MultiDiscrete([4] * 180)
    action = np.random.default_rng(0).integers(0, 4, 180)
    obs, r, term, trunc, info = env.step(action)
    assert term and not trunc and set(info) >= INFO_KEYS and info["backend"] == "sim"
    g = env.unwrapped.graph
    assert (
        info["makespan"]
        == dg.simulate(g, action, dg.Topology.uniform(4), config=dg.SimConfig.reference()).makespan
    )
    assert r == pytest.approx(-info["makespan"] / info["reference_makespan"])
    with pytest.raises(RuntimeError, match="reset"):
        env.step(action)


def test_static_observation_matches_the_placement_env():
    a_obs, _ = AssignEnv(graph="paper/chainmm").reset(seed=0)
    p_obs, _ = PlacementEnv(graph="paper/chainmm").reset(seed=0)
    for k in ("op_features", "edge_index", "edge_attr", "n_ops", "n_edges", "n_devices", "graph_id"):
        np.testing.assert_array_equal(a_obs[k], p_obs[k])


def test_devices_beyond_the_topology_are_taken_modulo_and_padding_ignored():
    env = AssignEnv(graph=make_toy(), topology=2, sim_config=RAW, max_ops=7, max_devices=4)
    env.reset(seed=0)
    _obs, _r, _term, _trunc, info = env.step(np.array([3, 2, 1, 0, 3, 3, 3]))
    np.testing.assert_array_equal(info["assignment"], [1, 0, 1, 0, 1])
    assert info["remapped"] == 3
    mask = env.action_masks().reshape(7, 4)
    np.testing.assert_array_equal(mask[:5], [[1, 1, 0, 0]] * 5)
    np.testing.assert_array_equal(mask[5:], [[1, 0, 0, 0]] * 2)
    env.reset()
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(5, int))
    with pytest.raises(ValueError, match="outside"):
        env.step(np.array([4, 0, 0, 0, 0, 0, 0]))


def test_order_is_by_b_level_and_topological():
    env = AssignEnv(
        graph=make_toy(), topology=2, sim_config=dg.SimConfig(cost_model="raw", queue_order="priority")
    )
    env.reset(seed=0)
    *_, info = env.step(np.zeros(5, int))
    np.testing.assert_array_equal(info["order"], [1, 0, 2, 4, 3])  # b-levels [10, 11, 7, 1, 5]


@pytest.mark.parametrize("reward", ["sparse", "makespan", "improvement", "shaped"])
def test_reward_classes(reward):
    env = AssignEnv(graph="paper/chainmm", reward=reward)
    env.reset(seed=0)
    *_, info = env.step(np.zeros(76, int))
    ms, ref = info["makespan"], info["reference_makespan"]
    expected = {"sparse": -ms / ref, "makespan": -ms, "improvement": (ref - ms) / ref, "shaped": -ms / ref}[
        reward
    ]
    env.reset(seed=0)
    assert env.step(np.zeros(76, int))[1] == pytest.approx(expected)


def test_same_makespan_as_the_placement_env_in_fifo_mode():
    """FIFO queues ignore priorities, so an assignment runs the same in both envs."""
    placement = PlacementEnv(graph="paper/llama-layer")
    placement.reset(seed=0)
    while True:
        *_, term, _, info = placement.step(int(np.argmax(placement.teacher_mask())))
        if term:
            break
    env = AssignEnv(graph="paper/llama-layer")
    _, reset_info = env.reset(seed=0)
    *_, info2 = env.step(info["assignment"])
    assert info2["makespan"] == info["makespan"]
    assert info2["reference_makespan"] == info["reference_makespan"] == reset_info["reference_makespan"]
