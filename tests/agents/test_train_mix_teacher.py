"""The search teacher on a mix of graphs: one cached target per graph content, the same as a fresh
search; a pooled mix; imitation on a graph and topology mix."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from agents.training import Instance, TrainArgs, train
from agents.training.graphs import GraphMix, parse_specs
from agents.training.teacher import SearchTargets, SearchTeacher, search_placement
from tests.agents.train_helpers import FAST

pytestmark = pytest.mark.slow  # a search per drawn graph, then training


def _graph(seed: int) -> dg.DataflowGraph:
    return dg.workloads.make("random", n_ops=8, levels=3, seed=seed)


def test_cache_returns_the_fresh_search_and_is_bounded() -> None:
    topo, config = dg.Topology.uniform(2), dg.SimConfig()
    targets = SearchTargets(evals=300, seed=0, size=2)
    first = targets.target(_graph(1), topo, config)
    fresh = search_placement(_graph(1), topo, config, 300, 0)
    assert first["assignment"] == fresh["assignment"] and first["makespan"] == fresh["makespan"]
    again = targets.target(_graph(1), topo, config)  # another object, the same content: a hit
    assert again is first and (targets.hits, targets.misses) == (1, 1)
    assert targets.target(_graph(1), dg.Topology.uniform(3), config) is not first  # topology in the key
    targets.target(_graph(2), topo, config)
    assert len(targets) == 2 and targets.misses == 3  # bounded: the oldest entry went
    cp = dg.baselines.run("critical_path", _graph(2), topo, config, seed=0)
    assert targets.target(_graph(2), topo, config)["makespan"] <= cp.makespan + 1e-12
    with pytest.raises(ValueError, match="size"):
        SearchTargets(10, 0, size=0)


def test_pooled_mix_draws_a_fixed_set_of_graphs() -> None:
    specs = parse_specs(["random:n_ops=6..12,levels=3"], "graph_mix")
    mix = GraphMix(specs, 64, 128, pool=3, pool_seed=5)
    rng = np.random.default_rng(0)
    seen = {dg.envs.context.graph_digest(mix(rng)) for _ in range(40)}
    assert len(seen) == 3
    twin = GraphMix(specs, 64, 128, pool=3, pool_seed=5)
    assert {dg.envs.context.graph_digest(twin.pooled(0, j)) for j in range(3)} == seen  # same seed, same pool


def test_search_teacher_follows_each_drawn_graphs_target() -> None:
    args = TrainArgs.from_settings({"graph": "mix", "mix.graphs": ("random:n_ops=6..10,levels=3",), "devices": 2,
                                    "mix.pool": 2, "imitation.teacher_evals": 300,
                                    **{k: v for k, v in FAST.items() if k != "recipe"}})
    inst = Instance.from_args(args)
    targets = SearchTargets(300, 0)
    env = SearchTeacher(inst.train_env(), targets)
    rng = np.random.default_rng(0)
    for episode in range(4):
        env.reset(seed=episode)
        done = False
        while not done:  # follow the teacher (random ties)
            _, _, done, _, info = env.step(int(rng.choice(np.flatnonzero(env.teacher_mask()))))
        ctx = env.unwrapped.context
        want = targets.target(ctx.graph, ctx.topology, ctx.config)["makespan"]
        assert info["makespan"] == pytest.approx(want, rel=1e-9)  # the target, up to a device relabelling
    assert targets.misses <= 2


def test_imitation_on_a_graph_and_topology_mix(tmp_path) -> None:
    args = TrainArgs.from_settings({
        "graph": "mix", "mix.graphs": ("random:n_ops=6..10,levels=3", "chainmm:blocks=2"),
        "evaluation.held_out": ("random:n_ops=9,levels=3",), "mix.topologies": ("2", "3"), "devices": 2,
        "mix.pool": 2, "imitation.teacher_evals": 300, "stages": ("il",), "episodes.il": 8, "out": str(tmp_path),
        **{k: v for k, v in FAST.items() if k != "recipe"}})
    summary = train(args)
    stats = summary["il_teacher_targets"]
    assert stats["misses"] <= 3 * 2 * 2  # at most (2 pooled random + 1 chainmm) graphs x 2 topologies
    assert stats["hits"] + stats["misses"] >= 8 and stats["hits"] > 0
    assert summary["reported"]["source"] in ("greedy", "best_of_k", "best_checkpoint", "best_found")
    assert summary["reported"]["makespan"] <= summary["makespan"]
    assert summary["held_out"][0]["n_ops"] == 9
