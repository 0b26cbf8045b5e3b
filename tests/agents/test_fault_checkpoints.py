"""Faults around checkpoints (issue 35, items 4, 5 and 7): unreadable checkpoint and policy files give one
clear error (CLI: one ``doppler: error:`` line, exit 2); a checkpoint's recorded policy class goes through a
fixed registry, so a file never chooses what is imported; a resume after a kill leaves one metrics row
(and one TensorBoard event) per step, no orphan temporary file, and says when there is no checkpoint."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import gymnasium as gym
import pytest
import torch

from agents.policy import DopplerPolicy
from agents.pretrained import WEIGHTS_PATH, load_payload
from agents.training import (
    CHECKPOINT_NAME,
    Instance,
    MetricLog,
    TrainContext,
    Trainer,
    load_checkpoint,
    load_policy,
    policy_class_path,
    read_metrics,
    register_policy,
    registered_policy,
    save_checkpoint,
    train,
)
from agents.training.checkpoint import remove_orphan_tmp
from agents.training.metrics import rows_within
from doppler_gym.cli.main import main
from tests.agents.train_helpers import TINY_GRAPH, small_args

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["random", "--param", "n_ops=6", "--param", "levels=3", "--param", "seed=1", "--devices", "2"]
UNREGISTERED = "this:s"  # importing `this` prints the Zen of Python: never imported because a file names it


class Planted:
    """A pickled object whose unpickling would create ``path`` (a file that carries code)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


class MyPolicy(DopplerPolicy):
    """A user's policy class (registered in a test with ``register_policy``)."""


def _bad_file(tmp_path: Path, kind: str) -> Path:
    """A ``.pt`` file that is not a readable checkpoint: empty, truncated, random bytes or carrying code."""
    path = tmp_path / f"{kind}.pt"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        data = WEIGHTS_PATH.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif kind == "random":
        path.write_bytes(random.Random(0).randbytes(4096))
    else:  # code: a pickle whose loading would run open(...)
        torch.save({"format": "doppler-train-checkpoint", "x": Planted(tmp_path / "planted")}, path)
    return path


def _forged(tmp_path: Path, policy_class: object, **changes: object) -> Path:
    """The shipped checkpoint with its recorded policy class (and other entries) replaced."""
    payload = {**load_payload(), "policy_class": policy_class, **changes}
    path = tmp_path / "forged.pt"
    save_checkpoint(path, payload)
    return path


def _error_line(capsys) -> str:
    """The CLI's stderr, checked to be exactly one ``doppler: error:`` line."""
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("doppler: error: "), lines
    return lines[0]


def _env() -> gym.Env:
    """The simulator env of :data:`TINY_GRAPH` (nothing is written: the args' folder is not used)."""
    return Instance.from_args(small_args(Path("unused"), **TINY_GRAPH)).sim_env()


# ============================================================================ item 4: unreadable files
@pytest.mark.parametrize(("kind", "says"), [
    ("empty", "is empty (0 bytes)"), ("truncated", "it is truncated, corrupt or not a torch file"),
    ("random", "it is truncated, corrupt or not a torch file"), ("code", "holds objects other than tensors"),
])
def test_load_checkpoint_says_which_file_is_unreadable_and_why(tmp_path, kind, says) -> None:
    path = _bad_file(tmp_path, kind)
    with pytest.raises(ValueError, match="give a checkpoint written by `doppler train`") as err:
        load_checkpoint(path)
    assert str(path) in str(err.value) and says in str(err.value)
    assert not (tmp_path / "planted").exists()  # the pickle's code never ran


@pytest.mark.parametrize("kind", ["empty", "truncated", "random"])
def test_cli_place_and_eval_report_a_bad_policy_file_in_one_line(tmp_path, capsys, kind) -> None:
    path = str(_bad_file(tmp_path, kind))
    assert main(["place", *TINY, "--policy", path]) == 2
    assert path in _error_line(capsys)
    assert main(["eval", *TINY, "--baselines", "random", "--out", str(tmp_path / "eval"), "--policy", path]) == 2
    assert path in _error_line(capsys)


@pytest.mark.parametrize("kind", ["empty", "truncated", "random"])
def test_cli_train_reports_a_bad_init_or_resume_checkpoint_in_one_line(tmp_path, capsys, kind) -> None:
    bad = _bad_file(tmp_path, kind)
    flags = ["--episodes", "il=2", "--no-progress", "--no-tensorboard"]
    assert main(["train", *TINY, *flags, "--out", str(tmp_path / "a"), "--init", str(bad)]) == 2
    assert _error_line(capsys).startswith(f"doppler: error: init: checkpoint {str(bad)!r}")
    out = tmp_path / "b"
    out.mkdir()
    (out / CHECKPOINT_NAME).write_bytes(bad.read_bytes())
    assert main(["train", *TINY, *flags, "--out", str(out), "--resume"]) == 2
    line = _error_line(capsys)
    assert line.startswith("doppler: error: resume: checkpoint") and "start a fresh run" in line
    assert not (out / "metrics.jsonl").exists()  # refused before the run touched its folder


def test_a_checkpoint_of_another_method_or_without_weights_is_refused(tmp_path) -> None:
    path = _forged(tmp_path, "agents.policy:DopplerPolicy", agent="placeto")
    payload = torch.load(path, weights_only=True)
    del payload["policy_state"]
    save_checkpoint(path, payload)
    with pytest.raises(ValueError, match="is a placeto checkpoint: it has no policy_state"):
        load_policy(path, _env().unwrapped)


# ============================================================================ item 5: no file chooses an import
def test_a_checkpoint_naming_an_unregistered_class_is_refused_without_importing_it(tmp_path, capsys,
                                                                                   monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, "this", raising=False)  # so that its absence at the end proves no import
    path = _forged(tmp_path, UNREGISTERED)
    with pytest.raises(ValueError, match=r"not a registered policy.*register_policy\(YourPolicy\)"):
        load_policy(path, _env().unwrapped)
    assert main(["eval", *TINY, "--baselines", "random", "--out", str(tmp_path / "eval"), "--policy", str(path)]) == 2
    assert "register_policy" in _error_line(capsys)
    rc = main(["train", *TINY, "--episodes", "il=2", "--no-progress", "--no-tensorboard",
               "--out", str(tmp_path / "run"), "--init", str(path)])
    assert rc == 2 and f"init: checkpoint {str(path)!r}: the checkpoint's policy class 'this:s'" in _error_line(capsys)
    assert "this" not in sys.modules


@pytest.mark.parametrize("name", [None, 3, "os:system", "agents.policy:DopplerPolicy.__init__"])
def test_registered_policy_takes_only_registered_names(name) -> None:
    with pytest.raises(ValueError, match="not a registered policy"):
        registered_policy(name)


def test_bad_policy_kwargs_are_refused(tmp_path, capsys) -> None:
    path = _forged(tmp_path, "agents.policy:DopplerPolicy", policy_kwargs=[1, 2])
    with pytest.raises(ValueError, match="policy_kwargs must be a dict"):
        load_policy(path, _env().unwrapped)
    assert main(["place", *TINY, "--policy", str(path)]) == 2
    assert f"checkpoint {str(path)!r}: the checkpoint's policy_kwargs must be a dict" in _error_line(capsys)


def test_register_policy_lets_a_users_class_load(tmp_path) -> None:
    env = _env().unwrapped
    moved = f"old{uuid.uuid4().hex}.place:Policy"  # a name no code registered yet in this process
    path = _forged(tmp_path, moved)
    with pytest.raises(ValueError, match="register_policy"):
        load_policy(path, env)
    assert register_policy(MyPolicy, name=moved) is MyPolicy  # the name a class had before it moved
    assert type(load_policy(path, env, strict=True)) is MyPolicy
    assert register_policy(MyPolicy) is register_policy(MyPolicy) is MyPolicy  # by its own path; again is fine
    assert type(load_policy(_forged(tmp_path, policy_class_path(MyPolicy)), env)) is MyPolicy
    with pytest.raises(ValueError, match="already registered"):
        register_policy(DopplerPolicy, name=moved)
    with pytest.raises(TypeError, match="expected a policy class"):
        register_policy("agents.policy:DopplerPolicy")


def test_the_projects_checkpoints_still_load() -> None:
    env = _env().unwrapped
    assert type(load_policy(WEIGHTS_PATH, env)) is DopplerPolicy
    from agents import pretrained

    assert type(pretrained.load_policy(env)) is DopplerPolicy
    assert registered_policy("agents.policy:DopplerPolicy") is DopplerPolicy


# ============================================================================ item 7: resume after a kill
def test_metric_log_drops_rows_past_the_counters_and_purges_their_tensorboard_events(tmp_path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = MetricLog(tmp_path, tensorboard=True)
    for step in range(1, 7):
        log.write("episode", "il", step, makespan=float(step))
    for step in range(1, 10):  # imitation: more updates than episodes
        log.write("update", "il", step, loss=float(step))
    log.close()
    with open(tmp_path / "metrics.jsonl", "a", encoding="utf-8") as f:
        f.write('{"kind": "episode", "sta')  # a line cut by the kill
    log = MetricLog(tmp_path, tensorboard=True, keep=rows_within({"il": {"episodes": 4, "updates": 7}}))
    assert log.dropped == 2 + 2 + 1
    log.write("episode", "il", 5, makespan=50.0)
    log.write("update", "il", 8, loss=80.0)
    log.close()
    rows = [(r["kind"], r["step"]) for r in read_metrics(tmp_path)]
    assert rows == [("episode", s) for s in range(1, 5)] + [("update", s) for s in range(1, 8)] + [
        ("episode", 5), ("update", 8)]
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("il/makespan")] == [(1, 1), (2, 2), (3, 3), (4, 4), (5, 50)]
    assert [(e.step, e.value) for e in acc.Scalars("il/loss")] == [(s, s) for s in range(1, 8)] + [(8, 80)]


def test_remove_orphan_tmp_removes_only_files_of_dead_processes(tmp_path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    pid = int(dead.stdout)
    orphan = tmp_path / f".{CHECKPOINT_NAME}.{pid}.tmp"
    live = tmp_path / f".{CHECKPOINT_NAME}.{os.getppid()}.tmp"  # a running process's file
    other = tmp_path / ".summary.json.tmp"
    for p in (orphan, live, other):
        p.write_bytes(b"x")
    assert remove_orphan_tmp(tmp_path) == [orphan]
    assert not orphan.exists() and live.exists() and other.exists()


def test_resume_without_a_checkpoint_says_it_starts_fresh(tmp_path, capsys) -> None:
    trainer = Trainer(small_args(tmp_path, **TINY_GRAPH, resume=True))
    assert trainer.resumed is None
    assert f"resume: no checkpoint at {tmp_path / CHECKPOINT_NAME}; starting a fresh run" in capsys.readouterr().out


def _rows(out: Path) -> list[dict]:
    """The metrics of a run without their wall-clock fields."""
    return [{k: v for k, v in r.items() if k != "time"} for r in read_metrics(out)]


def test_a_killed_and_resumed_run_logs_each_step_once(tmp_path, monkeypatch, capsys) -> None:
    """A run killed two episodes after its last checkpoint (a stand-in exception; a SIGKILL in
    test_sigkill_then_resume) leaves rows and TensorBoard events past it and an orphan temporary
    checkpoint; the resumed run's log equals an uninterrupted run's, one event per step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    kw = {**TINY_GRAPH, "episodes": {"il": 8}, "imitation.envs": 2, "checkpoints.every_updates": 1,
          "logging.tensorboard": True}
    train(small_args(tmp_path / "whole", **kw))
    original = TrainContext.episode_done

    def killed_at_6(self, stage, info, **extra):
        original(self, stage, info, **extra)
        if self.progress[stage].episodes == 6:
            raise SystemExit("killed")

    parts = tmp_path / "parts"
    monkeypatch.setattr(TrainContext, "episode_done", killed_at_6)
    with pytest.raises(SystemExit):
        train(small_args(parts, **kw))
    monkeypatch.undo()
    assert load_checkpoint(parts)["progress"]["il"]["episodes"] == 4
    assert max(r["step"] for r in read_metrics(parts) if r["kind"] == "episode") == 6
    orphan = parts / f".{CHECKPOINT_NAME}.999999999.tmp"  # a pid no process has (Linux caps pids at 2**22)
    orphan.write_bytes(b"half a checkpoint")
    capsys.readouterr()

    train(small_args(parts, resume=True, **kw))
    printed = capsys.readouterr().out
    assert "rows written after its checkpoint (this run starts at episode 4)" in printed
    assert f"removed 1 temporary file(s) a killed run left in {parts}" in printed and not orphan.exists()
    assert _rows(parts) == _rows(tmp_path / "whole")
    keys = [(r["kind"], r["stage"], r["step"]) for r in read_metrics(parts)]
    assert len(keys) == len(set(keys))
    acc = EventAccumulator(str(parts / "tb"))
    acc.Reload()
    episodes = [(r["step"], r["makespan"]) for r in read_metrics(parts) if r["kind"] == "episode"]
    assert [(e.step, pytest.approx(e.value)) for e in acc.Scalars("il/makespan")] == episodes
    updates = [r["step"] for r in read_metrics(parts) if r["kind"] == "update"]
    assert [e.step for e in acc.Scalars("il/buffer")] == updates


def _episodes_past_checkpoint(out: Path) -> int:
    """Episode rows of ``out/metrics.jsonl`` past its checkpoint's counter (0 while there is none)."""
    if not (out / CHECKPOINT_NAME).is_file() or not (out / "metrics.jsonl").is_file():
        return 0
    done = load_checkpoint(out)["progress"]["il"]["episodes"]
    lines = (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()[:-1]  # the last may be half written
    rows = [json.loads(line) for line in lines]
    return sum(1 for r in rows if r["kind"] == "episode" and r["step"] > done)


def _kill_between_checkpoints(proc: subprocess.Popen, out: Path, deadline_s: float) -> None:
    """SIGKILL ``proc`` once two episode rows lie past its checkpoint. The process is stopped (SIGSTOP)
    before the check that decides, so no checkpoint can be written between that check and the kill; a
    cold start (Numba compiling in the subprocess on a loaded 2-core runner) gets ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    while proc.poll() is None and time.monotonic() < deadline:
        if _episodes_past_checkpoint(out) >= 2:
            proc.send_signal(signal.SIGSTOP)
            if _episodes_past_checkpoint(out) >= 2:
                proc.send_signal(signal.SIGKILL)
                return
            proc.send_signal(signal.SIGCONT)
        time.sleep(0.05)


@pytest.mark.slow  # about 10 s warm; a subprocess that compiles Numba's kernels cold takes longer
def test_sigkill_then_resume(tmp_path, capsys) -> None:
    """`doppler train` killed by SIGKILL between two checkpoints, then `--resume`: one row per step."""
    out = tmp_path / "run"
    flags = [*TINY, "--recipe", "doppler", "--stages", "il", "--out", str(out), "--no-progress", "--no-tensorboard",
             "--sample-decodes", "2", "--baseline-seconds", "0.2", "--set", "imitation.envs=2",
             "--set", "checkpoints.every_updates=3", "--set", "evaluation.stop_at_bound=false",
             "--set", "evaluation.every_episodes=0"]
    env = {**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    log = tmp_path / "train.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "doppler_gym.cli.main", "train", *flags,
                                 "--episodes", "il=100000"], env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        _kill_between_checkpoints(proc, out, deadline_s=600)
    finally:
        proc.kill()  # no-op once the SIGKILL was sent
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, f"the run ended by itself (rc {proc.returncode}):\n{log.read_text()}"
    done = load_checkpoint(out)["progress"]["il"]["episodes"]
    assert _episodes_past_checkpoint(out) >= 2, "the run was not killed between two checkpoints"
    assert main(["train", *flags, "--episodes", f"il={done + 4}", "--resume"]) == 0
    assert "rows written after its checkpoint" in capsys.readouterr().out
    rows = read_metrics(out)
    keys = [(r["kind"], r["stage"], r["step"]) for r in rows]
    assert len(keys) == len(set(keys))
    assert [r["step"] for r in rows if r["kind"] == "episode"] == list(range(1, done + 5))
