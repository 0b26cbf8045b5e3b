"""PlacementEnv (Doppler-Sim-v0): the MDP by hand on a toy graph, invalid actions, episode ends."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.envs import PlacementEnv
from doppler_gym.envs.context import GRAPH_ID_MODULUS, graph_id
from tests.doppler_gym.envs.env_helpers import (
    RAW,
    TOY_B,
    TOY_COMM,
    TOY_COMP,
    TOY_SCALE,
    TOY_T,
    make_toy,
    masked_rollout,
)

N, D = 6, 3  # toy env padding: 5 ops + 1 padding op, 2 devices + 1 padding device


def toy_env(**kwargs) -> PlacementEnv:
    kwargs.setdefault("sim_config", RAW)
    return PlacementEnv(graph=make_toy(), topology=2, max_ops=N, max_devices=D, max_edges=6, **kwargs)


def sel(*ops: int) -> np.ndarray:
    m = np.zeros(N + D, bool)
    m[list(ops)] = True
    return m


def plc(*devices: int) -> np.ndarray:
    m = np.zeros(N + D, bool)
    m[[N + d for d in devices]] = True
    return m


def test_static_observation_by_hand():
    env = toy_env()
    obs, info = env.reset(seed=0)
    expected = (
        np.stack([TOY_COMP, TOY_B, TOY_T, [0, 0, 2, 2, 1], [1, 2, 1, 0, 0] * TOY_COMM], axis=1) / TOY_SCALE
    )
    np.testing.assert_allclose(obs["op_features"][:5], expected, rtol=1e-6)
    assert not obs["op_features"][5:].any()
    np.testing.assert_array_equal(obs["edge_index"], [[0, 1, 2, 1, -1, -1], [2, 2, 3, 4, -1, -1]])
    np.testing.assert_allclose(obs["edge_attr"][:, 0], [1 / 8, 1 / 8, 2 / 8, 1 / 8, 0, 0])
    assert (obs["n_ops"][0], obs["n_edges"][0], obs["n_devices"][0]) == (5, 4, 2)
    assert obs["graph_id"][0] == info["graph_id"] == graph_id(make_toy()) < GRAPH_ID_MODULUS
    assert obs["phase"][0] == 0 and obs["selected_op"][0] == -1
    np.testing.assert_array_equal(obs["op_device"], [-1] * N)
    np.testing.assert_array_equal(obs["op_state"][:, 1], [1, 1, 0, 0, 0, 0])  # ready: the sources
    assert not obs["device_features"].any()
    assert env.observation_space.contains(obs)


def test_masks_and_dynamic_features_by_hand():
    env = toy_env()
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs["action_mask"], sel(0, 1))
    np.testing.assert_array_equal(env.action_masks(), obs["action_mask"])

    obs, r, term, trunc, info = env.step(1)  # SEL op 1
    assert (r, term, trunc, info) == (0.0, False, False, {})
    np.testing.assert_array_equal(obs["action_mask"], plc(0, 1))  # device 2 is padding
    assert obs["phase"][0] == 1 and obs["selected_op"][0] == 1
    np.testing.assert_array_equal(obs["op_state"][1], [0, 1, 1])
    np.testing.assert_allclose(obs["device_features"][:2], [[0, 0, 0, 0, 0, 1, 1]] * 2)  # nothing placed yet
    assert not obs["device_features"][2].any()

    obs, *_ = env.step(N + 0)  # op 1 -> dev0: [0, 3)
    np.testing.assert_array_equal(obs["action_mask"], sel(0, 4))  # op 4 became ready, op 2 waits for op 0
    np.testing.assert_array_equal(obs["op_state"][1], [1, 0, 0])
    assert obs["op_device"][1] == 0 and not obs["device_features"].any()

    env.step(0)
    obs, *_ = env.step(N + 1)  # op 0 -> dev1: [0, 2)
    np.testing.assert_array_equal(obs["action_mask"], sel(2, 4))

    obs, *_ = env.step(2)  # op 2: inputs op1 on dev0 (ends 3), op0 on dev1 (ends 2, comm 1)
    feats = (
        np.array(
            [
                # placed work, input work, first input start, last input end, earliest start
                [3, 3, 0, 3, max(3, 3, 2 + 1)],  # dev0: free at 3
                [2, 2, 0, 2, max(2, 3 + 1, 2)],  # dev1: op1's output arrives at 4
            ]
        )
        / TOY_SCALE
    )
    np.testing.assert_allclose(obs["device_features"][:2, :5], feats, rtol=1e-6)
    np.testing.assert_allclose(obs["device_features"][:2, 5:], 1.0)


def test_episode_end_info_and_resimulation():
    env = toy_env()
    env.reset(seed=0)
    rewards = []
    for a in (1, N + 0, 0, N + 1, 2, N + 0, 4, N + 1, 3):
        obs, r, term, trunc, info = env.step(a)
        rewards.append(r)
        assert not term
    obs, r, term, trunc, info = env.step(N + 0)
    rewards.append(r)
    assert term and not trunc
    np.testing.assert_array_equal(info["assignment"], [1, 0, 0, 0, 1])
    np.testing.assert_array_equal(info["order"], [1, 0, 2, 4, 3])
    # WC run: dev0 runs op1 [0,3), op2 [3,7), op3 [7,8); dev1 runs op0 [0,2), op4 [3+1, 9)
    assert info["makespan"] == 9.0 == env.trace.makespan
    assert info["backend"] == "sim" and info["time_unit"] == "cost"
    assert info["lower_bound"] == dg.makespan_lower_bound(make_toy(), 2, RAW) == max(8.0, 15.0 / 2)
    assert info["estimated_makespan"] == 9.0
    # the default "incremental" reward: each placement adds minus the growth of the placed ops' makespan,
    # by hand from the run above (placed {1}: 3, {1,0}: 3, {1,0,2}: 7, {1,0,2,4}: 9, all: 9); selections get 0
    ref = info["reference_makespan"]
    np.testing.assert_allclose(rewards, np.array([0, -3, 0, 0, 0, -4, 0, -2, 0, 0]) / ref, rtol=1e-12, atol=0)
    assert sum(rewards) == pytest.approx(-9.0 / ref)  # the sparse reward's return
    np.testing.assert_array_equal(obs["op_device"][:5], info["assignment"])
    assert np.flatnonzero(obs["action_mask"]).tolist() == [0]  # the terminal mask marks action 0 alone
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


@pytest.mark.parametrize("queue_order", ["fifo", "priority"])
@pytest.mark.parametrize("graph", ["paper/chainmm", "paper/gdp/llama-block", "ffnn", "llama-layer"])
def test_masked_random_episodes_resimulate(graph, queue_order):
    g = dg.load_graph(graph) if graph.startswith("paper/") else dg.workloads.make(graph)
    base = dg.SimConfig.reference() if g.units == "paper" else dg.SimConfig(link_model="fifo", streams=2)
    config = dataclasses.replace(base, queue_order=queue_order)
    topo = 4 if g.units == "paper" else "p100x4"
    env = gym.make("Doppler-Sim-v0", graph=g, topology=topo, sim_config=config)
    rng = np.random.default_rng(0)
    for _ in range(2):
        observations, rewards, info, steps = masked_rollout(env, rng)
        assert steps == 2 * g.n_ops and all(r == 0.0 for r in rewards[0::2])  # selections earn nothing
        prio = np.empty(g.n_ops)
        prio[info["order"]] = np.arange(g.n_ops)
        again = dg.simulate(g, info["assignment"], env.unwrapped.topology, priorities=prio, config=config)
        assert info["makespan"] == again.makespan
        assert sorted(info["order"]) == list(range(g.n_ops))
        position = np.empty(g.n_ops, int)
        position[info["order"]] = np.arange(g.n_ops)
        assert np.all(position[g.src] < position[g.dst])  # the SEL order is topological
        assert info["makespan"] >= info["lower_bound"] * (1 - 1e-12)
        # the per-placement rewards sum to the sparse reward (exactly up to float rounding)
        assert sum(rewards) == pytest.approx(-info["makespan"] / info["reference_makespan"], rel=1e-9)
        assert all(
            env.observation_space.contains(o) for o in observations[:: max(1, len(observations) // 20)]
        )


def test_priority_mode_uses_the_sel_order(toy):
    """Under queue_order="priority" the backend gets each op's SEL position as its priority."""
    seen = {}

    class Spy(dg.envs.SimBackend):
        def execute(self, graph, topology, assignment, priorities, config):
            seen["priorities"] = priorities.copy()
            return super().execute(graph, topology, assignment, priorities, config)

    env = PlacementEnv(
        graph=toy,
        topology=2,
        sim_config=dg.SimConfig(cost_model="raw", queue_order="priority"),
        backend=Spy(),
    )
    _, _, info, _ = masked_rollout(env, np.random.default_rng(1))
    expected = np.empty(5)
    expected[info["order"]] = np.arange(5)
    np.testing.assert_array_equal(seen["priorities"], expected)


def test_multi_graph_generator_episodes():
    def random_graph(rng):
        return dg.workloads.make(
            "random",
            n_ops=int(rng.integers(10, 60)),
            levels=int(rng.integers(2, 8)),
            edge_prob=0.15,
            seed=int(rng.integers(2**31)),
        )

    env = PlacementEnv(graph=random_graph, topology="p100x4", max_ops=60, max_edges=600, max_devices=6)
    rng = np.random.default_rng(3)
    env.reset(seed=0)
    ids = set()
    for _ in range(6):
        obs, _rewards, info, steps = masked_rollout(env, rng)
        g = env.graph
        ids.add(info["graph_id"])
        # a physical graph on a GPU preset (p100x4): the roofline by default
        assert steps == 2 * g.n_ops and env.sim_config == dg.SimConfig(cost_model="roofline")
        again = dg.simulate(g, info["assignment"], env.topology, config=env.sim_config)
        assert info["makespan"] == again.makespan
        assert obs[0]["n_ops"][0] == g.n_ops and obs[0]["n_devices"][0] == 4
        assert (
            not obs[0]["action_mask"][env.max_ops + 4 :].any() and not obs[0]["op_features"][g.n_ops :].any()
        )
    assert len(ids) > 1


def test_sequence_of_graphs_and_reset_options():
    env = PlacementEnv(graph=["paper/chainmm", "paper/ffnn"], topology=[2, 4])
    assert env.max_ops == 180 and env.max_devices == 4
    names = {env.reset(seed=s)[1]["graph_name"] for s in range(8)}
    assert names == {"paper/chainmm", "paper/ffnn"}
    obs, info = env.reset(options={"graph": "paper/chainmm", "topology": 3})
    assert info["graph_name"] == "paper/chainmm" and obs["n_devices"][0] == 3
    with pytest.raises(ValueError, match="max_ops"):
        env.reset(options={"graph": "paper/llama-layer"})
    with pytest.raises(ValueError, match="unknown option"):
        env.reset(options={"graf": "x"})


@pytest.mark.parametrize("mode", ["penalize", "raise"])
def test_invalid_actions(mode):
    env = toy_env(invalid_action=mode, max_invalid_streak=3)
    obs0, _ = env.reset(seed=0)
    bad_sel = [2, 3, N - 1, N + 0, -1, 10**6]  # not ready, padding op, a device action, out of range
    if mode == "raise":
        with pytest.raises(
            ValueError,
            match=r"SEL phase: action 2 is not a ready op; valid actions are the ready op ids \[0, 1\]",
        ):
            env.step(2)
        env.step(1)
        with pytest.raises(ValueError, match=r"PLC phase \(placing op 1\).*\[6, 7\]"):
            env.step(N + 2)  # padding device
        return
    for a in bad_sel[:2]:
        obs, r, term, trunc, info = env.step(a)
        assert r == -0.01 and not term and not trunc and info["invalid_action"]
        for k in obs:
            np.testing.assert_array_equal(obs[k], obs0[k])  # state unchanged
    obs1, *_ = env.step(1)  # a valid action resets the streak
    for a in (1, N + 2, 0):  # an op in PLC, a padding device, another op
        obs, r, term, trunc, info = env.step(a)
        assert info["invalid_action"] and info["invalid_streak"] == (1, 2, 3)[[1, N + 2, 0].index(a)]
        for k in obs:
            np.testing.assert_array_equal(obs[k], obs1[k])
    assert trunc and not term  # third in a row
    with pytest.raises(RuntimeError):
        env.step(N)


def test_observations_are_safe_to_keep():
    env = toy_env()
    obs, _ = env.reset(seed=0)
    kept = {k: v.copy() for k, v in obs.items()}
    env.step(1)
    env.step(N)
    for k in obs:
        np.testing.assert_array_equal(obs[k], kept[k])
    obs["op_features"][:] = 5  # callers may modify what they got
    assert env.step(0)[0]["op_features"][0, 0] == pytest.approx(2 / 8)


def test_copy_obs_off_returns_live_arrays():
    env = toy_env(copy_obs=False)
    obs, _ = env.reset(seed=0)
    env.step(1)
    assert obs["phase"][0] == 1  # the same array, updated in place
    assert not obs["op_features"].flags.writeable


def test_constructor_errors():
    with pytest.raises(ValueError, match="max_ops"):
        PlacementEnv(graph=lambda rng: make_toy())
    with pytest.raises(ValueError, match="max_ops=3 is below"):
        PlacementEnv(graph=make_toy(), max_ops=3)
    with pytest.raises(ValueError, match="invalid_action"):
        PlacementEnv(invalid_action="ignore")
    with pytest.raises(ValueError, match="not a paper graph name"):
        PlacementEnv(graph="no-such-graph")
    with pytest.raises(TypeError, match="topology"):
        PlacementEnv(topology=2.5)
    with pytest.raises(ValueError, match="unknown reward"):
        PlacementEnv(reward="fast")
    env = PlacementEnv(
        graph=lambda rng: dg.workloads.make("random", n_ops=30, levels=3), max_ops=20, max_edges=100
    )
    with pytest.raises(ValueError, match="pads to max_ops=20"):
        env.reset(seed=0)


def test_graph_id_is_stable_across_processes():
    import subprocess
    import sys

    code = (
        "import doppler_gym as dg; from doppler_gym.envs.context import graph_id; "
        "print(graph_id(dg.load_graph('paper/ffnn')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) == graph_id(dg.load_graph("paper/ffnn"))
    assert graph_id(dg.load_graph("paper/chainmm")) != graph_id(
        dg.load_graph("paper/gdp/chainmm")
    )  # one edge differs
    assert graph_id(dg.load_graph("paper/ffnn")) == graph_id(dg.load_graph("paper/gdp/ffnn"))  # same content


def test_iterator_of_graphs():
    graphs = iter([make_toy(), "paper/chainmm"])
    env = PlacementEnv(graph=graphs, topology=2, max_ops=80, max_edges=80)
    assert env.reset(seed=0)[1]["graph_name"] == "toy"
    assert env.reset()[1]["graph_name"] == "paper/chainmm"
    with pytest.raises(RuntimeError, match="exhausted"):
        env.reset()
