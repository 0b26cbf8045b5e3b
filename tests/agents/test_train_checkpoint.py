"""Checkpoints: atomic round trip, resume after an interruption, --init on another device count."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from agents.training import (
    CHECKPOINT_NAME,
    Instance,
    TrainArgs,
    TrainContext,
    Trainer,
    action_logits,
    load_checkpoint,
    load_policy,
    obs_to_tensors,
    read_metrics,
    save_checkpoint,
    train,
)
from tests.agents.train_helpers import sample_observations, small_args

pytestmark = pytest.mark.slow  # training runs, interrupted and resumed


def _logits(policy, obs) -> torch.Tensor:
    policy.set_training_mode(False)
    with torch.no_grad():
        return action_logits(policy, obs_to_tensors(obs, policy.device))


def test_checkpoint_round_trip_gives_identical_logits(tmp_path) -> None:
    args = small_args(tmp_path, episodes={"il": 8})
    trainer = Trainer(args)
    trainer.run()
    obs = sample_observations(args)
    env = Instance.from_args(args).sim_env()
    expected = _logits(trainer.policy, obs)
    for name in (CHECKPOINT_NAME, "policy_il.pt"):
        loaded = load_policy(tmp_path / name, env.unwrapped, strict=True)
        assert torch.equal(_logits(loaded, obs), expected), name
    payload = load_checkpoint(tmp_path)  # a folder means its checkpoint.pt
    assert payload["stage"] == "il" and payload["progress"]["il"]["done"]
    assert payload["optimizer_state"] is not None and payload["il_buffer"]["size"] > 0
    assert TrainArgs(**payload["args"]) == args  # the stored arguments, groups included, read back
    assert not list(tmp_path.glob(".*.tmp")), "no temporary file may be left behind"


def test_save_checkpoint_is_atomic(tmp_path, monkeypatch) -> None:
    path = tmp_path / "c.pt"
    save_checkpoint(path, {"format": "doppler-train-checkpoint", "x": 1})

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(OSError):
        save_checkpoint(path, {"format": "doppler-train-checkpoint", "x": 2})
    assert load_checkpoint(path)["x"] == 1  # the old file is intact
    assert list(tmp_path.iterdir()) == [path]


def test_resume_after_interruption_in_imitation_loses_nothing(tmp_path) -> None:
    args = small_args(tmp_path, episodes={"il": 16}, imitation={"envs": 4}, checkpoints={"interrupt_after_episodes": 8})
    first = train(args)
    assert first["interrupted"] and first["progress"]["il"]["episodes"] == 8
    assert not (tmp_path / "summary.json").exists()
    ckpt = load_checkpoint(tmp_path)
    updates_before = ckpt["progress"]["il"]["updates"]
    buffer_before = ckpt["il_buffer"]["size"]
    steps_before = max(s["step"] for s in ckpt["optimizer_state"]["state"].values())
    assert steps_before == updates_before

    trainer = Trainer(small_args(tmp_path, episodes={"il": 16}, imitation={"envs": 4}, resume=True))
    assert trainer.progress["il"].episodes == 8
    summary = trainer.run()
    il = summary["stages"]["il"]
    assert il["episodes"] == 16 and il["updates"] > updates_before
    ckpt = load_checkpoint(tmp_path)
    assert ckpt["il_buffer"]["size"] == buffer_before * 2  # the first run's states were kept
    assert max(s["step"] for s in ckpt["optimizer_state"]["state"].values()) == il["updates"]  # Adam continued
    episodes = [r["step"] for r in read_metrics(tmp_path) if r["kind"] == "episode"]
    assert episodes == list(range(1, 17))  # counters continue, nothing repeated


def test_resume_mid_ppo_continues_counters(tmp_path) -> None:
    args = small_args(tmp_path, stages=("il", "sim"), episodes={"il": 4, "sim": 12}, rl={"episodes_per_update": 4},
                      checkpoints={"interrupt_after_episodes": 8})
    assert train(args)["interrupted"]
    ckpt = load_checkpoint(tmp_path)
    assert ckpt["stage"] == "sim" and ckpt["progress"]["il"]["done"]
    assert ckpt["progress"]["sim"]["episodes"] == 4 and ckpt["progress"]["sim"]["updates"] == 1
    assert ckpt["progress"]["sim"]["extra"]["num_timesteps"] == 4 * 24

    summary = train(small_args(tmp_path, stages=("il", "sim"), episodes={"il": 4, "sim": 12},
                               rl={"episodes_per_update": 4}, resume=True))
    assert summary["stages"]["il"]["episodes"] == 4  # not rerun
    assert summary["stages"]["sim"]["episodes"] == 12 and summary["stages"]["sim"]["updates"] == 3
    ckpt = load_checkpoint(tmp_path)
    assert ckpt["progress"]["sim"]["extra"]["num_timesteps"] == 12 * 24
    episodes = [r for r in read_metrics(tmp_path) if r["kind"] == "episode"]
    expected = [("il", k) for k in range(1, 5)] + [("sim", k) for k in range(5, 17)]
    assert [(r["stage"], r["step"]) for r in episodes] == expected
    # the incumbent placement survives the interruption: the best over both processes' episodes
    assert summary["best_found"]["training_makespan"] == min(r["makespan"] for r in episodes)


def test_resume_extends_a_finished_stage_and_skips_without_checkpoint(tmp_path) -> None:
    train(small_args(tmp_path, episodes={"il": 4}))
    summary = train(small_args(tmp_path, episodes={"il": 8}, resume=True))
    assert summary["stages"]["il"]["episodes"] == 8
    fresh = tmp_path / "fresh"
    assert train(small_args(fresh, episodes={"il": 4}, resume=True))["stages"]["il"]["episodes"] == 4


def test_ctrl_c_writes_a_checkpoint_and_resume_refuses_another_instance(tmp_path, monkeypatch) -> None:
    original = TrainContext.episode_done

    def interrupt_at_6(self, stage, info, **extra):
        original(self, stage, info, **extra)
        if self.progress[stage].episodes == 6:
            raise KeyboardInterrupt

    monkeypatch.setattr(TrainContext, "episode_done", interrupt_at_6)
    with pytest.raises(KeyboardInterrupt):
        train(small_args(tmp_path, episodes={"il": 12}))
    monkeypatch.undo()
    assert load_checkpoint(tmp_path)["progress"]["il"]["episodes"] == 6
    resumed = train(small_args(tmp_path, episodes={"il": 12}, resume=True))["stages"]["il"]["episodes"]
    assert 12 <= resumed < 12 + 4  # from 6 on, in whole iterations of imitation.envs = 4 episodes
    with pytest.raises(ValueError, match="--init"):
        Trainer(small_args(tmp_path, devices=3, resume=True))


def test_init_from_a_4_device_checkpoint_on_8_devices(tmp_path) -> None:
    src = tmp_path / "four"
    four = Trainer(small_args(src, devices=4, episodes={"il": 4}))
    four.run()
    args8 = small_args(tmp_path / "eight", devices=8, stages=("sim",), episodes={"sim": 4},
                       init=str(src / "policy_il.pt"))
    trainer = Trainer(args8)
    report = trainer.init_report
    assert report["loaded"] > 0
    state4 = four.policy.state_dict()
    for name, tensor in trainer.policy.state_dict().items():
        if name not in report["skipped"]:
            assert torch.equal(tensor, state4[name]), name
    if type(four.policy).__name__ == "DopplerPolicy":  # its weights do not depend on the device count
        assert report["skipped"] == []
    summary = trainer.run()
    assert summary["n_devices"] == 8 and summary["stages"]["sim"]["episodes"] == 4
    assert max(summary["assignment"]) < 8
    assert json.loads((tmp_path / "eight" / "summary.json").read_text())["init"]["loaded"] == report["loaded"]
    assert np.isfinite(summary["makespan"])


def test_load_checkpoint_rejects_other_files(tmp_path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")
    torch.save({"x": 1}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a doppler-gym training checkpoint"):
        load_checkpoint(tmp_path / "other.pt")
    with pytest.raises(ValueError, match="checkpoint.pt"):  # a folder means its checkpoint.pt, here missing
        load_checkpoint(tmp_path)


def _rows(out) -> list[dict]:
    """The metrics of a run without their wall-clock fields."""
    return [{k: v for k, v in r.items() if k != "time"} for r in read_metrics(out)]


@pytest.mark.parametrize(("algo", "anchor"), [("ppo", 0.0), ("reinforce", 0.0), ("ppo", 1.0)])
def test_an_interrupted_and_resumed_run_equals_an_uninterrupted_one(tmp_path, algo, anchor) -> None:
    """Same seed and episode counts: the same metrics (every episode's makespan, every update's loss,
    every evaluation), the same final weights and placement, whether or not the run was cut in
    imitation and again in RL (the resumed stages continue the optimizer, buffer and RNG states, and
    rebuild the imitation anchor's teacher states)."""
    kw = {"stages": ("il", "sim"), "episodes": {"il": 4, "sim": 4}, "imitation.envs": 2, "rl.episodes_per_update": 2,
          "evaluation.every_episodes": 2, "algo": algo, "rl.anchor_coef": anchor}
    whole = Trainer(small_args(tmp_path / "whole", **kw))
    expected = whole.run()
    parts = tmp_path / "parts"
    first = train(small_args(parts, checkpoints={"interrupt_after_episodes": 2}, **kw))
    assert first["interrupted"] and first["progress"]["il"]["episodes"] == 2
    second = train(small_args(parts, resume=True, checkpoints={"interrupt_after_episodes": 4}, **kw))
    assert second["interrupted"]
    assert (second["progress"]["il"]["episodes"], second["progress"]["sim"]["episodes"]) == (4, 2)
    resumed = Trainer(small_args(parts, resume=True, **kw))
    summary = resumed.run()
    assert _rows(parts) == _rows(tmp_path / "whole")
    state = resumed.policy.state_dict()
    for name, tensor in whole.policy.state_dict().items():
        assert torch.equal(tensor, state[name]), name
    assert (summary["makespan"], summary["assignment"]) == (expected["makespan"], expected["assignment"])
    assert summary["best_found"] == expected["best_found"]
    assert summary["best_eval"]["makespan"] == expected["best_eval"]["makespan"]
