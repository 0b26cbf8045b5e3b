"""``doppler train`` and ``doppler eval --policy``."""

from __future__ import annotations

import json

import pytest

from agents.training import summary_keys
from doppler_gym.cli.main import main

pytestmark = pytest.mark.slow  # `doppler train` end to end

SMALL = ["random", "--param", "n_ops=12", "--param", "levels=4", "--param", "seed=1", "--devices", "2"]


def test_train_then_eval_policy(tmp_path, capsys) -> None:
    out = tmp_path / "run"
    rc = main(["train", *SMALL, "--stages", "il,sim", "--episodes", "il=8,sim=4", "--out", str(out),
               "--seed", "3", "--no-progress", "--no-tensorboard", "--baseline-seconds", "0.2",
               "--sample-decodes", "2", "--set", "imitation.envs=4", "--set", "evaluation.every_episodes=0",
               "--il-teacher", "search", "--set", "imitation.teacher_evals=500"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "learned policy (greedy)" in printed and "critical_path" in printed
    assert "best placement found in training" in printed and "imitation teacher (local search" in printed
    summary = json.loads((out / "summary.json").read_text())
    for key in (*summary_keys(), "lower_bound", "baselines", "stages"):
        assert key in summary, key
    assert set(summary["baselines"]) == {"critical_path", "heft", "random", "local_search"}
    for stage in ("il", "sim"):
        assert {"episodes", "seconds", "seconds_per_episode"} <= set(summary["stages"][stage])
    assert summary["stages"]["il"]["episodes"] == 8 and summary["seed"] == 3
    assert summary["il_teacher"]["evals"] == 500 and summary["il_teacher"]["makespan"] <= summary["critical_path"]

    rc = main(["eval", *SMALL, "--baselines", "critical_path,random", "--budget-seconds", "0.2",
               "--policy", str(out / "checkpoint.pt"), "--out", str(tmp_path / "eval")])
    assert rc == 0
    table = json.loads((tmp_path / "eval" / "eval.json").read_text())
    rows = {r["name"]: r for r in table["rows"]}
    assert set(rows) == {"critical_path", "random", "policy"}
    assert rows["policy"]["makespan"] == summary["makespan"]
    assert "greedy decode" in rows["policy"]["note"]


def test_train_reports_bad_arguments(tmp_path, capsys) -> None:
    rc = main(["train", *SMALL, "--stages", "il,rl", "--out", str(tmp_path)])
    assert rc == 2 and "unknown stage" in capsys.readouterr().err
    rc = main(["train", *SMALL, "--episodes", "il=x", "--out", str(tmp_path)])
    assert rc == 2 and "--episodes" in capsys.readouterr().err
    rc = main(["eval", *SMALL, "--policy", str(tmp_path / "none.pt"), "--baselines", "random"])
    assert rc == 2 and "does not exist" in capsys.readouterr().err
