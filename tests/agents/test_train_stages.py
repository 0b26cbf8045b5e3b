"""The three stages run on one policy (sim and real through the same code path), budgets, REINFORCE."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agents.training import (
    DEFAULT_EPISODES,
    STAGE_WEIGHTS,
    StageBudget,
    StageProgress,
    TrainArgs,
    Trainer,
    decode,
    read_metrics,
    summary_keys,
    train,
)
from agents.training.rl import reinforce_advantages
from tests.agents.train_helpers import FAST, TINY_GRAPH, brute_force_makespans, small_args


@pytest.mark.slow
def test_three_stages_on_chainmm(tmp_path) -> None:
    args = TrainArgs.from_settings({
        **FAST, "logging.tensorboard": True, "graph": "paper/chainmm", "devices": 4, "stages": ("il", "sim", "real"),
        "episodes": {"il": 8, "sim": 4, "real": 2}, "rl.episodes_per_update": 2, "real.env_id": "Doppler-Sim-v0",
        "out": str(tmp_path)})
    summary = train(args)
    saved = json.loads((tmp_path / "summary.json").read_text())
    for key in summary_keys():
        assert key in saved, key
    assert {s: d["episodes"] for s, d in saved["stages"].items()} == {"il": 8, "sim": 4, "real": 2}
    for d in saved["stages"].values():
        assert d["seconds"] > 0 and d["seconds_per_episode"] == pytest.approx(d["seconds"] / d["episodes"], abs=1e-3)
    assert saved["stages"]["sim"]["updates"] == 2 and saved["stages"]["real"]["updates"] == 1
    assert len(saved["assignment"]) == len(saved["order"]) == 76
    assert sorted(saved["order"]) == list(range(76))
    assert saved["makespan"] >= saved["lower_bound"] > 0
    assert set(saved["baselines"]) == {"critical_path", "random"}
    assert summary["makespan"] == saved["makespan"]
    for name in ("checkpoint.pt", "policy_il.pt", "policy_sim.pt", "policy_real.pt", "gantt.png", "metrics.jsonl"):
        assert (tmp_path / name).is_file(), name
    assert any((tmp_path / "tb").rglob("events.out.tfevents.*"))
    stages = [r["stage"] for r in read_metrics(tmp_path) if r["kind"] == "episode"]
    assert stages == ["il"] * 8 + ["sim"] * 4 + ["real"] * 2


@pytest.mark.slow
def test_reinforce_runs_and_updates_per_batch(tmp_path) -> None:
    args = small_args(tmp_path, stages=("il", "sim"), episodes={"il": 4, "sim": 8}, algo="reinforce",
                      rl={"episodes_per_update": 4}, evaluation={"every_episodes": 4})
    summary = train(args)
    evals = [r["greedy_makespan"] for r in read_metrics(tmp_path) if r["kind"] == "eval"]
    assert len(evals) == 3 and summary["best_eval"]["makespan"] == min(evals)
    best = summary["best_checkpoint"]  # policy_best.pt decoded again at the end: the same greedy placement
    assert best["greedy"] == min(evals) and best["episode"] == summary["best_eval"]["episode"]
    assert best["best_of_k"] is not None and len(best["assignment"]) == 12
    assert (tmp_path / "policy_best.pt").is_file()
    assert summary["stages"]["sim"]["episodes"] == 8 and summary["stages"]["sim"]["updates"] == 2
    rows = [r for r in read_metrics(tmp_path) if r["kind"] == "update" and r["stage"] == "sim"]
    assert len(rows) == 2 and all("loss" in r and "baseline" in r for r in rows)


def test_leave_one_out_advantages_by_hand() -> None:
    returns = [np.array([-1.0, -1.0]), np.array([-2.0, -2.0, -2.0]), np.array([-3.0])]
    loo = reinforce_advantages(returns, "batch", ema=0.0)  # baselines: mean of the others: -2.5, -2, -1.5
    np.testing.assert_allclose(loo, [1.5, 1.5, 0.0, 0.0, 0.0, -1.5])
    np.testing.assert_allclose(reinforce_advantages(returns, "ema", ema=-2.0), [1, 1, 0, 0, 0, -1])
    assert abs(reinforce_advantages(returns, "batch", 0.0)[[0, 2, 5]].sum()) < 1e-12  # totals' advantages sum to 0
    with pytest.raises(ValueError, match="2 or more"):
        reinforce_advantages(returns[:1], "batch", ema=0.0)


@pytest.mark.slow
def test_reinforce_with_a_batch_baseline_learns_the_best_placement_of_a_tiny_graph(tmp_path) -> None:
    args = small_args(tmp_path, **TINY_GRAPH, stages=("sim",), episodes={"sim": 24}, algo="reinforce",
                      reinforce={"baseline": "batch"}, rl={"episodes_per_update": 8, "lr": 1e-2, "lr_final": 1e-2})
    optimum = brute_force_makespans(args).min()
    trainer = Trainer(args)
    before = decode(trainer.policy, trainer.context.eval_env, greedy=True, seed=args.seed)["makespan"]
    summary = trainer.run()
    assert before > 5 * optimum  # the seeded untrained policy places far from the optimum ...
    assert summary["makespan"] <= 1.2 * optimum, (before, summary["makespan"], optimum)  # ... 24 episodes later near it
    assert summary["makespan"] < summary["critical_path"] / 5
    assert summary["stages"]["sim"]["updates"] == 3
    rows = [r for r in read_metrics(tmp_path) if r["kind"] == "update" and r["stage"] == "sim"]
    assert len(rows) == 3 and all(np.isfinite(r["loss"]) for r in rows)


def test_a_batch_baseline_needs_a_batch() -> None:
    with pytest.raises(ValueError, match="rl.episodes_per_update >= 2"):
        TrainArgs(algo="reinforce", reinforce={"baseline": "batch"}, rl={"episodes_per_update": 1}).validate()
    with pytest.raises(ValueError, match="'ema' or 'batch'"):
        TrainArgs(reinforce={"baseline": "mean"}).validate()


@pytest.mark.slow
def test_the_best_placement_found_in_training_is_kept_and_replays(tmp_path) -> None:
    summary = train(small_args(tmp_path, stages=("il", "sim"), episodes={"il": 8, "sim": 8},
                               rl={"episodes_per_update": 4}))
    episodes = [r for r in read_metrics(tmp_path) if r["kind"] == "episode"]
    best = summary["best_found"]
    assert best["training_makespan"] == min(r["makespan"] for r in episodes)
    assert best["makespan"] == pytest.approx(best["training_makespan"], rel=1e-12)  # replayed in the simulator
    first = next(r for r in episodes if r["makespan"] == best["training_makespan"])
    assert (best["stage"], best["episode"]) == (first["stage"], first["step"])
    assert len(best["assignment"]) == 12 and sorted(best["order"]) == list(range(12))


def test_budget_shares_follow_the_stage_weights() -> None:
    args = TrainArgs(stages=("il", "sim", "real"), budget_minutes=1.0)
    progress = {s: StageProgress() for s in args.stages}
    budget = StageBudget(args, progress)
    assert budget.target("il") is None  # a budget without episode counts: time alone ends a stage
    budget.allot("il")
    assert progress["il"].started and progress["il"].allotted_seconds == pytest.approx(60.0 * 1 / 6)
    progress["il"].seconds = 4.0  # il stopped early (by episodes): sim and real share the rest
    budget.allot("sim")
    assert progress["sim"].allotted_seconds == pytest.approx(56.0 * 3 / 5)
    progress["sim"].seconds = 30.0
    budget.allot("real")
    assert progress["real"].allotted_seconds == pytest.approx(26.0)
    progress["real"].seconds = 13.0
    assert budget.fraction("real") == pytest.approx(0.5) and not budget.over("real")
    assert budget.out_of_time("real", running=13.0) and not budget.out_of_time("real", running=12.9)
    progress["real"].seconds = 26.0
    assert budget.over("real")


def test_episode_targets_and_the_larger_fraction() -> None:
    args = TrainArgs(stages=("il", "sim"), episodes={"sim": 10})
    progress = {s: StageProgress() for s in args.stages}
    budget = StageBudget(args, progress)
    assert budget.target("il") == DEFAULT_EPISODES["il"] and budget.target("sim") == 10
    budget.allot("sim")
    assert progress["sim"].allotted_seconds is None  # no budget: episodes only
    progress["sim"].episodes = 4
    assert budget.fraction("sim") == pytest.approx(0.4)
    timed = StageBudget(TrainArgs(stages=("sim",), episodes={"sim": 10}, budget_minutes=1.0), {"sim": progress["sim"]})
    timed.allot("sim")
    progress["sim"].seconds = 45.0  # 3/4 of the time, 4/10 of the episodes: the stage is 3/4 through
    assert timed.fraction("sim") == pytest.approx(0.75)


@pytest.mark.slow
def test_a_budget_ends_the_stages(tmp_path) -> None:
    summary = train(small_args(tmp_path, stages=("il", "sim"), episodes={"il": None}, budget_minutes=0.03))
    il, sim = summary["stages"]["il"], summary["stages"]["sim"]
    assert il["allotted_seconds"] == pytest.approx(0.03 * 60 * STAGE_WEIGHTS["il"] / 4.0)
    assert il["episodes"] > 0 and il["seconds"] >= il["allotted_seconds"]
    assert sim["allotted_seconds"] == pytest.approx(max(0.03 * 60 - il["seconds"], 0.0), abs=2e-3)
    assert summary["budget_minutes"] == 0.03 and summary["budget_split"] == {"il": 0.25, "sim": 0.75}


def test_invalid_arguments_are_reported() -> None:
    with pytest.raises(ValueError, match="unknown stage"):
        TrainArgs(stages=("il", "rl")).validate()
    with pytest.raises(ValueError, match="order"):
        TrainArgs(stages=("sim", "il")).validate()
    with pytest.raises(ValueError, match="algo"):
        TrainArgs(algo="a2c").validate()
    with pytest.raises(ValueError, match="imitation.label_smoothing must be in"):
        TrainArgs(imitation={"label_smoothing": 1.0}).validate()


@pytest.mark.slow
def test_imitation_stops_at_its_episode_count_between_whole_batches(tmp_path) -> None:
    # 4 envs run in lockstep; 6 episodes asked: a batch of 4, then a batch of the 2 left (not 8 in all).
    summary = train(small_args(tmp_path, episodes={"il": 6}, imitation={"envs": 4}))
    assert summary["stages"]["il"]["episodes"] == 6
    rows = [r for r in read_metrics(tmp_path) if r["kind"] == "episode" and r["stage"] == "il"]
    assert len(rows) == 6
