"""The real-system stage through ``Doppler-Real-v0`` on two CPU workers, at a tiny size."""

from __future__ import annotations

import math

import pytest

from agents.training import TrainArgs, load_checkpoint, read_metrics, train
from tests.agents.train_helpers import FAST

pytest.importorskip("envs_real", reason="the real backend (envs_real) is not installed")

pytestmark = pytest.mark.slow  # training on CPU worker processes

# A 2-layer, 16-wide feed-forward block: each op is a 16 x 16 matmul, milliseconds on a CPU.
TINY_FFNN = {"batch": 16, "d_in": 16, "hidden": 16, "layers": 2, "blocks": 1}
CPU_WORKERS = {"devices": "cpu:2", "repeats": 1, "warmup": 0, "calibration_reps": 2, "timeout_s": 60.0}


@pytest.mark.parametrize("anchor", [0.0, 1.0])
def test_the_real_stage_trains_on_cpu_workers(tmp_path, capsys, anchor) -> None:
    """Also with the imitation anchor: its teacher episodes come from the simulator, the RL from the workers."""
    args = TrainArgs.from_settings({
        **FAST, "imitation.envs": 2, "graph": "ffnn", "graph_params": TINY_FFNN, "devices": 2, "stages": ("il", "real"),
        "episodes": {"il": 2, "real": 2}, "rl.episodes_per_update": 2, "real.env_kwargs": CPU_WORKERS,
        "out": str(tmp_path), "rl.anchor_coef": anchor})
    assert args.real.env_id == "Doppler-Real-v0"
    summary = train(args)
    assert summary["stages"]["real"]["episodes"] == 2 and summary["stages"]["real"]["updates"] == 1
    real = [r for r in read_metrics(tmp_path) if r["kind"] == "episode" and r["stage"] == "real"]
    assert [r["step"] for r in real] == [3, 4]
    updates = [r for r in read_metrics(tmp_path) if r["kind"] == "update" and r["stage"] == "real"]
    assert len(updates) == 1 and ("anchor_cross_entropy" in updates[0]) == (anchor > 0)
    for r in real:  # measured runs: wall-clock seconds against the calibrated critical-path reference
        assert 0 < r["makespan"] < 60 and math.isfinite(r["ratio_to_critical_path"])
    measured = summary["real"]  # the final greedy placement, run again on the real system
    assert measured["error"] is None and measured["time_unit"] == "s" and 0 < measured["makespan"] < 60
    assert measured["makespan"] == measured["real"]["real_makespan_s"] and measured["real"]["device_kind"] == "cpu"
    assert measured["simulated"] > 0  # the calibrated simulator's prediction of the same placement [s]
    from agents.cli.train_cmd import print_summary

    print_summary(summary)
    assert f"real system: the final greedy placement measured {measured['makespan']:.6g} s" in capsys.readouterr().out
    assert load_checkpoint(tmp_path / "policy_real.pt")["progress"]["real"]["done"]
