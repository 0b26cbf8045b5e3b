"""Memory in Doppler-Sim-v0: the device_memory observation, and the OOM penalty under memory="enforce"."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import doppler_gym as dg
from doppler_gym.envs import PlacementEnv
from doppler_gym.sim.config import SimConfig
from tests.doppler_gym.envs.env_helpers import masked_rollout

ENFORCE = SimConfig(memory="enforce")


@pytest.fixture(scope="module")
def graph():
    return dg.workloads.make("ffnn", batch=8, d_in=16, hidden=16, layers=2, blocks=2)


@pytest.fixture(scope="module")
def tight(graph):
    """Two devices whose memory is 90% of the peak of everything on one device."""
    single = dg.simulate(graph, np.zeros(graph.n_ops, np.int64), topology=dg.Topology.uniform(2),
                         config=SimConfig(memory="track"))
    return dg.Topology.uniform(2, memory=0.9 * single.peak_memory[0])


def place(env: PlacementEnv, devices: np.ndarray) -> tuple[list, float, dict]:
    """Run an episode placing op v on devices[v] (SEL: the lowest ready op); returns the
    observations, the return (the sum of the rewards) and the final info."""
    obs, _ = env.reset(seed=0)
    seen, total = [obs], 0.0
    while True:
        v = int(np.flatnonzero(obs["action_mask"][: env.max_ops])[0])
        obs, reward, *_ = env.step(v)
        total += reward
        seen.append(obs)
        obs, reward, term, trunc, info = env.step(env.max_ops + int(devices[v]))
        total += reward
        seen.append(obs)
        if term or trunc:
            return seen, total, info


def test_checkers_pass_with_memory(graph, tight):
    env = PlacementEnv(graph=graph, topology=tight, sim_config=ENFORCE)
    assert "device_memory" in env.observation_space.spaces
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gym_check_env(env, skip_render_check=True)
        sb3_check_env(PlacementEnv(graph=graph, topology=tight, sim_config=ENFORCE))


def test_default_env_has_no_memory_key_and_is_feasible():
    env = gym.make("Doppler-Sim-v0", graph="paper/chainmm")
    assert "device_memory" not in env.observation_space.spaces
    _, _, info, _ = masked_rollout(env, np.random.default_rng(0), seed=0)
    assert info["feasible"] is True and "oom" not in info


def test_device_memory_is_the_persistent_footprint_placed(graph, tight):
    env = PlacementEnv(graph=graph, topology=tight, sim_config=SimConfig(memory="track"))
    devices = np.arange(graph.n_ops) % 2
    seen, _, _ = place(env, devices)
    cap = tight.memory
    placed = np.zeros(graph.n_ops, bool)
    for k in range(0, len(seen) - 1, 2):  # seen[k]: SEL observation, seen[k + 1]: PLC of the selected op
        sel, plc = seen[k]["device_memory"], seen[k + 1]["device_memory"]
        used = np.bincount(devices[placed], weights=graph.persistent_bytes[placed], minlength=2)
        np.testing.assert_allclose(sel[:2, 0], used / cap, rtol=1e-6)
        np.testing.assert_allclose(sel[:2, 1], used / cap, rtol=1e-6)
        v = int(seen[k + 1]["selected_op"][0])
        np.testing.assert_allclose(plc[:2, 1], (used + graph.persistent_bytes[v]) / cap, rtol=1e-6)
        np.testing.assert_array_equal(plc[:2, 2], [1.0, 1.0])
        placed[v] = True
    final = seen[-1]["device_memory"]
    np.testing.assert_allclose(final[:2, 0].sum() * cap[0], graph.persistent_bytes.sum(), rtol=1e-6)


@pytest.mark.parametrize("penalty", [-1.0, -5.0])
def test_oom_penalty_and_reason(graph, tight, penalty):
    env = PlacementEnv(graph=graph, topology=tight, sim_config=ENFORCE, oom_penalty=penalty)
    single = np.zeros(graph.n_ops, np.int64)
    _, reward, info = place(env, single)
    tr = dg.simulate(graph, single, topology=tight, config=ENFORCE)
    assert not tr.feasible and info["feasible"] is False
    v = tr.memory_violation
    assert info["oom"] == {"device": 0, "time": v.time, "peak_bytes": v.peak, "capacity_bytes": v.capacity,
                           "excess_bytes": v.excess}
    np.testing.assert_array_equal(info["peak_memory"], tr.peak_memory)
    assert reward == pytest.approx(-tr.makespan / info["reference_makespan"] + penalty)
    spread = np.arange(graph.n_ops) % 2
    _, reward, info = place(env, spread)
    tr = dg.simulate(graph, spread, topology=tight, config=ENFORCE)
    assert tr.feasible and info["feasible"] is True and info["oom"] is None
    assert reward == pytest.approx(-tr.makespan / info["reference_makespan"])


def test_same_seed_same_memory_observations(graph, tight):
    a = masked_rollout(PlacementEnv(graph=graph, topology=tight, sim_config=ENFORCE), np.random.default_rng(3), 5)
    b = masked_rollout(PlacementEnv(graph=graph, topology=tight, sim_config=ENFORCE), np.random.default_rng(3), 5)
    for x, y in zip(a[0], b[0]):
        np.testing.assert_array_equal(x["device_memory"], y["device_memory"])
    assert a[1] == b[1] and a[2]["feasible"] == b[2]["feasible"]


def test_bad_oom_penalty():
    with pytest.raises(ValueError, match="oom_penalty must be a finite number"):
        PlacementEnv(oom_penalty=float("nan"))
