"""Training on a graph mix: graph specs, the per-episode generator, held-out evaluation, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agents.learned_common import torch_threads
from agents.training import Instance, StateBuffer, TrainArgs, load_policy, read_metrics, train
from agents.training.evaluate import decode_graph
from agents.training.graphs import GraphMix, GraphSpec, held_out_graphs, padding_for, parse_specs
from doppler_gym import workloads
from doppler_gym.cli.main import main
from tests.agents.train_helpers import FAST

MIX = ("random:n_ops=8..14,levels=3", "chainmm:blocks=2")
EVAL = ("random:n_ops=16,levels=4", "ffnn:layers=2,blocks=2")


def mix_args(out, **overrides) -> TrainArgs:
    return TrainArgs.from_settings({**FAST, "graph": "mix", "mix.graphs": MIX, "evaluation.held_out": EVAL,
                                    "devices": 2, "out": str(out), "stages": ("il", "sim"),
                                    "episodes": {"il": 8, "sim": 4}, "rl.episodes_per_update": 2, **overrides})


def test_graph_spec_parsing_and_errors() -> None:
    spec = GraphSpec.parse("random:n_ops=8..14,levels=3,edge_prob=0.2")
    assert spec.name == "random" and spec.params == {"n_ops": (8, 14), "levels": 3, "edge_prob": 0.2}
    assert spec.seeded and spec.has_ranges
    assert not GraphSpec.parse("paper/ffnn").seeded
    assert GraphSpec.parse("random:n_ops=10,seed=4").seeded is False
    for bad, match in (("random:n_ops", "KEY=VALUE"), ("random:width=3", "unknown parameter"),
                       ("paper/ffnn:blocks=2", "only apply to workloads"), ("random:n_ops=9..3", "LO <= HI"),
                       ("nosuchgraph", "not a paper graph name")):
        with pytest.raises(ValueError, match=match):
            GraphSpec.parse(bad)
    assert [s.name for s in parse_specs("random:n_ops=10;chainmm", "x")] == ["random", "chainmm"]


def test_graph_mix_draws_new_graphs_within_the_ranges_and_reproducibly() -> None:
    specs = parse_specs(["random:n_ops=8..14,levels=3"], "graph_mix")
    mix = GraphMix(specs, max_ops=14, max_edges=1000)
    draw = [mix(np.random.default_rng(5)) for _ in range(2)]
    assert draw[0].n_ops == draw[1].n_ops and np.array_equal(draw[0].src, draw[1].src)  # same rng seed, same graph
    rng = np.random.default_rng(0)
    graphs = [mix(rng) for _ in range(20)]
    sizes = {g.n_ops for g in graphs}
    assert all(8 <= n <= 14 for n in sizes) and len(sizes) > 3
    assert len({(g.n_ops, g.n_edges, float(g.flops.sum())) for g in graphs}) == 20  # a fresh seed per draw
    small = GraphMix(specs, max_ops=9, max_edges=1000)
    assert all(small(rng).n_ops <= 9 for _ in range(5))  # too large draws are redrawn
    with pytest.raises(ValueError, match="did not fit the padding"):
        GraphMix(specs, max_ops=5, max_edges=1000)(rng)


def test_held_out_graphs_are_fixed_and_padding_covers_them() -> None:
    specs = parse_specs(EVAL, "graph_eval")
    a, b = held_out_graphs(specs, seed=0), held_out_graphs(specs, seed=0)
    assert [g.n_ops for g in a] == [16, 40] and np.array_equal(a[0].src, b[0].src)
    with pytest.raises(ValueError, match="has a range"):
        held_out_graphs(parse_specs(["random:n_ops=8..9,levels=3"], "graph_eval"), 0)
    ops, edges = padding_for(parse_specs(MIX, "graph_mix"), a, seed=0)
    assert ops >= 1.25 * 40 - 1 and edges >= max(g.n_edges for g in a)
    with pytest.raises(ValueError, match="exceeds max_ops"):
        padding_for([], a, seed=0, max_ops=20)


def test_mix_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="go together"):
        TrainArgs(graph="mix").validate()
    with pytest.raises(ValueError, match="go together"):
        TrainArgs(graph="paper/ffnn", mix={"graphs": ("chainmm",)}).validate()
    with pytest.raises(ValueError, match="real stage"):
        TrainArgs(graph="mix", mix={"graphs": ("chainmm",)}, stages=("il", "real")).validate()
    assert TrainArgs(graph="mix", mix={"graphs": "chainmm;random:n_ops=9"}).mix.graphs == ("chainmm", "random:n_ops=9")


@pytest.mark.slow
def test_training_on_a_mix_sees_many_graphs_and_reports_held_out_rows(tmp_path) -> None:
    args = mix_args(tmp_path)
    summary = train(args)
    episodes = [r for r in read_metrics(tmp_path) if r["kind"] == "episode"]
    assert len({r["graph_id"] for r in episodes}) >= 4  # a new graph per episode (chainmm:blocks=2 is one graph)
    chain = workloads.make("chainmm", blocks=2).n_ops
    assert all(8 <= r["n_ops"] <= 14 or r["n_ops"] == chain for r in episodes)  # drawn from the mix, not held out
    rows = summary["held_out"]
    assert [r["n_ops"] for r in rows] == [16, 40] and summary["n_ops"] == 16  # the first held-out is the main graph
    inst = Instance.from_args(args)
    policy = load_policy(tmp_path / "checkpoint.pt", inst.sim_env())
    for row, graph in zip(rows, inst.held_out):
        with torch_threads(args.torch_threads):  # as the summary decoded them (float sums depend on threads)
            again = decode_graph(policy, inst, graph, k=args.evaluation.sample_decodes, seed=args.seed)
        assert row["greedy"] == again["greedy"]["makespan"] and row["best_of_k"] == again["best"]["makespan"]
        assert row["greedy_ratio_to_critical_path"] == pytest.approx(row["greedy"] / row["critical_path"])
        assert row["greedy"] >= row["lower_bound"] * (1 - 1e-9)
    assert summary["makespan"] == rows[0]["greedy"]
    assert summary["held_out_mean_ratio_to_critical_path"] > 0


@pytest.mark.slow
def test_cli_trains_on_a_mix(tmp_path, capsys) -> None:
    out = tmp_path / "run"
    rc = main(["train", "mix", "--graph-mix", *MIX, "--graph-eval", *EVAL, "--devices", "2", "--learn", "plc",
               "--episodes", "il=4,sim=2", "--out", str(out), "--no-progress", "--no-tensorboard",
               "--baseline-seconds", "0.1", "--sample-decodes", "2", "--set", "imitation.envs=4",
               "--set", "rl.episodes_per_update=2", "--set", "evaluation.every_episodes=0"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "held-out graphs" in printed and "ffnn" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["learn"] == "plc" and summary["graph_mix"] == list(MIX) and len(summary["held_out"]) == 2
    rc = main(["train", "mix", "--devices", "2", "--out", str(tmp_path / "bad")])
    assert rc == 2 and "--graph-mix" in capsys.readouterr().err


def test_state_buffer_drops_graphs_no_state_refers_to(tmp_path) -> None:
    inst = Instance.from_args(mix_args(tmp_path))
    buffer = StateBuffer(8, inst.sim_env().observation_space)  # the mix's padding fits every graph below
    first_obs = []
    for seed in range(40):  # 40 graphs, one state each: the ring keeps the last 8
        env = inst.sim_env(graph=workloads.make("random", n_ops=12, levels=4, seed=seed))
        obs, _ = env.reset(seed=0)
        buffer.add(obs, env.unwrapped.action_masks(), env.unwrapped.teacher_mask())
        first_obs.append(obs)
    assert len(buffer.static_table) <= 16  # bounded, not 40
    for slot in range(8):  # slot s % 8 holds graph s: each keeps its own graph's static arrays
        static = buffer.static_table[buffer.static_idx[slot]]
        assert all(np.array_equal(static[k], first_obs[32 + slot][k]) for k in static)
    stored, _, _, _ = buffer.sample(16, np.random.default_rng(0))
    assert stored["op_features"].shape[0] == 16
