"""Reward classes: final values, the shaped reward's telescoping identity, the name registry."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.envs import (
    PlacementEnv,
    ShapedReward,
    make_reward,
    register_reward,
    reward_names,
    unregister_reward,
)
from doppler_gym.envs.rewards import Reward
from tests.doppler_gym.envs.env_helpers import RAW, make_toy, masked_rollout


def rollout(reward, graph="paper/ffnn", seed=0, **kwargs):
    env = PlacementEnv(graph=graph, reward=reward, **kwargs)
    _, rewards, info, _ = masked_rollout(env, np.random.default_rng(seed), seed=seed)
    return np.array(rewards), info


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sparse", lambda ms, ref: -ms / ref),
        ("makespan", lambda ms, ref: -ms),
        ("improvement", lambda ms, ref: (ref - ms) / ref),
    ],
)
def test_terminal_rewards(name, expected):
    rewards, info = rollout(name)
    assert np.all(rewards[:-1] == 0.0)
    assert rewards[-1] == pytest.approx(expected(info["makespan"], info["reference_makespan"]), rel=1e-12)


@pytest.mark.parametrize("graph", ["paper/chainmm", "paper/llama-layer", "llama-block"])
def test_shaped_rewards_telescope_to_the_sparse_reward(graph):
    for seed in range(3):
        shaped, info = rollout("shaped", graph=graph, seed=seed)
        sparse, info_sparse = rollout("sparse", graph=graph, seed=seed)
        assert info["makespan"] == info_sparse["makespan"]  # same seed, same episode
        # sum of r_t = sparse + phi(terminal) - phi(initial) = sparse (phi(terminal) = phi(initial) = 0)
        assert shaped.sum() == pytest.approx(sparse[-1], rel=1e-9, abs=1e-12)
        assert np.all(shaped[0::2] == 0.0)  # SEL steps do not change the estimate
        assert np.all(shaped[1:-1:2] <= 0.0)  # placements can only raise the estimated makespan


def _induced(graph: dg.DataflowGraph, ops: np.ndarray) -> dg.DataflowGraph:
    """The subgraph of ``ops`` (sorted ids, closed under predecessors) and the edges among them, ids kept in order."""
    new_id = np.full(graph.n_ops, -1)
    new_id[ops] = np.arange(ops.size)
    keep = (new_id[graph.src] >= 0) & (new_id[graph.dst] >= 0)
    return dg.DataflowGraph(src=new_id[graph.src[keep]], dst=new_id[graph.dst[keep]], flops=graph.flops[ops],
                            out_bytes=graph.out_bytes[ops], name="prefix", units=graph.units)


@pytest.mark.parametrize("graph", ["paper/chainmm", "paper/ffnn"])
def test_incremental_rewards_are_the_simulated_growth_of_the_placed_prefix(graph):
    """Each placement earns minus the growth of the makespan of the ops placed so far, simulated on their own
    (the induced subgraph through dg.simulate, an independent run); selections earn 0; the sum is the sparse
    reward (the default reward)."""
    env = PlacementEnv(graph=graph)
    assert env.reward.name == "incremental"
    env.reset(seed=7)
    g, topo, config = env.context.graph, env.context.topology, env.context.config
    rng = np.random.default_rng(7)
    ref = env.context.reference_makespan
    assignment, before, total, steps = np.full(g.n_ops, -1), 0.0, 0.0, 0
    while True:
        action = int(rng.choice(np.flatnonzero(env.action_masks())))
        op = env.selected_op
        _, r, terminated, _, info = env.step(action)
        total += r
        steps += 1
        if op < 0:
            assert r == 0.0
            continue
        assignment[op] = action - env.max_ops
        ops = np.flatnonzero(assignment >= 0)
        after = dg.simulate(_induced(g, ops), assignment[ops], topo, config=config).makespan
        assert r == pytest.approx(-(after - before) / ref, rel=1e-9, abs=1e-12), steps
        before = after
        if terminated:
            break
    assert total == pytest.approx(-info["makespan"] / ref, rel=1e-9)


def test_shaped_rewards_follow_the_estimate():
    env = PlacementEnv(graph="paper/ffnn", reward="shaped")
    rng = np.random.default_rng(5)
    env.reset(seed=5)
    ref = env.context.reference_makespan
    before = env.estimated_makespan
    assert before == 0.0
    while True:
        _, r, terminated, _, info = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
        if terminated:  # phi(terminal) = 0: the final step pays the sparse reward minus phi(before)
            assert r == pytest.approx((before - info["makespan"]) / ref, rel=1e-12)
            assert info["estimated_makespan"] == env.estimated_makespan
            break
        assert r == pytest.approx((before - env.estimated_makespan) / ref, rel=1e-12, abs=1e-15)
        before = env.estimated_makespan


def test_shaped_reward_step_values_by_hand():
    env = PlacementEnv(graph=make_toy(), topology=2, sim_config=RAW, reward=ShapedReward(gamma=0.5))
    env.reset(seed=0)
    ref = env.context.reference_makespan
    n = env.max_ops
    rewards = [env.step(a)[1] for a in (1, n + 0, 0, n + 1)]
    # estimated makespan 0 -> 3 (op1 on dev0) -> 3 (op0 on dev1 ends at 2)
    assert rewards == pytest.approx([0.0, (0 - 0.5 * 3) / ref, (3 - 0.5 * 3) / ref, (3 - 0.5 * 3) / ref])


def test_shaped_reward_final_step():
    r = ShapedReward()
    assert r.final(before=4.0, makespan=10.0, reference=8.0) == pytest.approx(-10 / 8 + 4 / 8)
    with pytest.raises(ValueError, match="gamma"):
        ShapedReward(gamma=0.0)


def test_invalid_penalty_is_independent_of_the_reward():
    env = PlacementEnv(graph=make_toy(), topology=2, sim_config=RAW, reward="makespan", invalid_penalty=-0.5)
    env.reset(seed=0)
    assert env.step(3)[1] == -0.5


BUILT_IN = ("improvement", "incremental", "makespan", "shaped", "sparse")


@pytest.fixture
def registered():
    """Register rewards for one test: ``registered(name, factory)``; all are removed afterwards,
    so the process-wide registry is the built-in one again for the next test."""
    names = []

    def add(name, factory):
        register_reward(name, factory)
        names.append(name)

    yield add
    for name in names:
        unregister_reward(name)
    assert reward_names() == BUILT_IN


def test_registry(registered):
    assert reward_names() == BUILT_IN
    assert all(make_reward(n).name == n for n in reward_names())
    obj = ShapedReward(0.9)
    assert make_reward(obj) is obj
    with pytest.raises(
        ValueError, match="unknown reward 'nope'; valid names: improvement, incremental, makespan, shaped, sparse"
    ):
        make_reward("nope")
    with pytest.raises(TypeError):
        make_reward(3)

    class Ratio(Reward):
        name = "test-ratio"

        def final(self, before, makespan, reference):
            return reference / makespan

    registered("test-ratio", Ratio)
    assert reward_names() == (*BUILT_IN, "test-ratio")
    rewards, info = rollout("test-ratio", graph="paper/chainmm")
    assert rewards[-1] == pytest.approx(info["reference_makespan"] / info["makespan"])


def test_unregister_removes_only_what_was_registered():
    class Half(Reward):
        name = "test-half"

        def final(self, before, makespan, reference):
            return -makespan / 2

    register_reward("test-half", Half)
    try:
        assert make_reward("test-half").name == "test-half"
    finally:
        unregister_reward("test-half")
    assert reward_names() == BUILT_IN
    with pytest.raises(ValueError, match="unknown reward 'test-half'"):
        make_reward("test-half")
    with pytest.raises(ValueError, match="'test-half' is not registered"):
        unregister_reward("test-half")
    with pytest.raises(ValueError, match="'sparse' is built in"):
        unregister_reward("sparse")
    assert reward_names() == BUILT_IN
