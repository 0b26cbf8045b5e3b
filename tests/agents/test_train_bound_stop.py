"""``evaluation.stop_at_bound``: the simulator stages end once the greedy decode reaches the lower bound (a proof of
optimality), on one graph only; ``reaches_bound`` and ``bound_proves_optimality`` by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import doppler_gym as dg
from agents.training import TrainArgs, read_metrics, train
from doppler_gym.sim.bounds import BOUND_RTOL, bound_proves_optimality, makespan_lower_bound, reaches_bound

pytestmark = pytest.mark.slow  # training runs to the lower bound

# A 6-op chain (random DAG with one op per level) on 2 devices: all ops on one device take exactly the
# sum of their compute times, which is the lower bound (its critical path), so the list scheduler that
# the untrained heuristic-prior policy decodes is optimal from the start.
CHAIN = {"graph": "random", "graph_params": {"n_ops": 6, "levels": 6, "seed": 1}, "devices": 2}
QUICK = {"logging.progress": False, "logging.tensorboard": False, "evaluation.baselines": ("critical_path",),
         "evaluation.sample_decodes": 2, "imitation.envs": 2, "episodes.il": 8, "episodes.sim": 8,
         "rl.episodes_per_update": 4, "evaluation.every_episodes": 2, "imitation.teacher_evals": 2_000}


def test_chain_is_optimal_on_one_device_by_hand() -> None:
    graph = dg.instances.resolve_graph("random", CHAIN["graph_params"])
    assert [list(graph.successors(v)) for v in range(6)] == [[1], [2], [3], [4], [5], []]
    config, topo = dg.instances.default_config(graph), dg.Topology.uniform(2)
    one_device = dg.simulate(graph, np.zeros(6, dtype=np.int64), topo, config=config).makespan
    by_hand = float(np.sum(graph.flops / topo.speed[0])) / config.time_divisor
    assert np.isclose(one_device, by_hand, rtol=1e-12)
    assert np.isclose(makespan_lower_bound(graph, topo, config), by_hand, rtol=1e-12)


def test_training_stops_when_the_greedy_decode_reaches_the_bound(tmp_path) -> None:
    summary = train(TrainArgs.from_settings({**CHAIN, **QUICK, "stages": ("il", "sim"), "out": str(tmp_path)}))
    evals = [r for r in read_metrics(tmp_path) if r["kind"] == "eval"]
    first = next(r for r in evals if r["greedy_makespan"] <= summary["lower_bound"] * (1 + BOUND_RTOL))
    at = summary["stopped_at_bound"]
    assert at == {"stage": "il", "episode": first["step"], "makespan": first["greedy_makespan"],
                  "checkpoint": str(tmp_path / "policy_best.pt")}
    assert evals[-1] is first  # no evaluation after the stop: the stages ended there
    assert summary["stages"]["il"]["episodes"] == first["step"] < QUICK["episodes.il"]  # no episode after it
    assert summary["stages"]["sim"]["episodes"] == 0
    assert summary["makespan"] <= summary["lower_bound"] * (1 + BOUND_RTOL)


def test_the_stop_in_ppo_keeps_the_weights_that_reached_the_bound(tmp_path) -> None:
    summary = train(TrainArgs.from_settings({**CHAIN, **QUICK, "stages": ("sim",), "out": str(tmp_path)}))
    at = summary["stopped_at_bound"]
    assert at["stage"] == "sim" and summary["stages"]["sim"]["episodes"] >= at["episode"]
    assert summary["makespan"] == at["makespan"]  # the final greedy decode is the decode that stopped it
    saved = torch.load(tmp_path / "policy_sim.pt", weights_only=True)["policy_state"]
    best = torch.load(tmp_path / "policy_best.pt", weights_only=True)["policy_state"]
    assert all(torch.equal(saved[k], best[k]) for k in best)


def test_a_real_stage_still_runs_after_the_stop(tmp_path) -> None:
    args = TrainArgs.from_settings({**CHAIN, **QUICK, "stages": ("il", "sim", "real"), "episodes.real": 4,
                                    "real.env_id": "Doppler-Sim-v0", "out": str(tmp_path)})  # the sim env stands in
    summary = train(args)
    assert summary["stopped_at_bound"]["stage"] == "il"
    assert {s: d["episodes"] for s, d in summary["stages"].items()} == {
        "il": summary["stopped_at_bound"]["episode"], "sim": 0, "real": 4}


def test_stop_at_bound_false_trains_every_episode(tmp_path) -> None:
    summary = train(TrainArgs.from_settings({**CHAIN, **QUICK, "stages": ("il", "sim"),
                                             "evaluation.stop_at_bound": False, "out": str(tmp_path)}))
    assert summary["stopped_at_bound"] is None
    assert {s: d["episodes"] for s, d in summary["stages"].items()} == {"il": 8, "sim": 8}


def test_a_mix_never_stops_at_one_graphs_bound(tmp_path) -> None:
    args = TrainArgs.from_settings({"graph": "mix", "mix.graphs": ("random:n_ops=6,levels=6,seed=1",), "devices": 2,
                                    **QUICK, "stages": ("il",), "out": str(tmp_path)})
    summary = train(args)
    assert summary["stopped_at_bound"] is None and summary["stages"]["il"]["episodes"] == 8


def test_the_bound_proves_optimality_only_with_one_stream_and_no_jitter() -> None:
    plain = dg.SimConfig()
    assert bound_proves_optimality(plain) and reaches_bound(1.0, 1.0, plain)
    assert reaches_bound(1.0 + 1e-13, 1.0, plain) and not reaches_bound(1.0 + 1e-9, 1.0, plain)
    for config in (dg.SimConfig(streams=2), dg.SimConfig(compute_jitter=0.1), dg.SimConfig(transfer_jitter=0.1)):
        assert not bound_proves_optimality(config)
        assert not reaches_bound(0.5, 1.0, config)  # even below the bound: no proof under this model


def test_cli_set_parses_yes_no_fields_and_rejects_the_rest() -> None:
    import argparse

    from agents.cli.train_cmd import args_from_namespace, register

    def cli(*argv: str) -> TrainArgs:
        parser = argparse.ArgumentParser()
        register(parser.add_subparsers())
        return args_from_namespace(parser.parse_args(["train", "paper/ffnn", "--budget-minutes", "1", *argv]))

    for text, value in (("false", False), ("False", False), ("0", False), ("true", True), ("yes", True)):
        assert cli("--set", f"evaluation.stop_at_bound={text}").evaluation.stop_at_bound is value
    with pytest.raises(ValueError, match="stop_at_bound.*true or false"):
        cli("--set", "evaluation.stop_at_bound=maybe")
    with pytest.raises(ValueError, match="evaluation.stop_at_bound must be True or False"):
        TrainArgs(evaluation={"stop_at_bound": "false"}).validate()
