"""Bookkeeping: per-stage counters, the metrics log (JSON lines + TensorBoard), progress bars, JSON files."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

NOT_SCALARS = frozenset({"graph_id"})  # metrics.jsonl fields kept out of TensorBoard (identifiers, not curves)
ROW_KEYS = ("kind", "stage", "step", "time")  # the fields every row has; the others are its values


@dataclass
class StageProgress:
    """Counters of one stage (saved in every checkpoint; a resumed run continues them)."""

    episodes: int = 0
    updates: int = 0
    env_steps: int = 0
    seconds: float = 0.0  # wall-clock time spent in the stage, over all processes [s]
    allotted_seconds: float | None = None  # its share of the budget [s], fixed at its start
    allotted_for_budget: float | None = None  # the budget [min] the share was computed for
    started: bool = False
    done: bool = False
    best_makespan: float = math.inf  # best training-episode makespan seen
    extra: dict = field(default_factory=dict)  # stage-specific scalars (REINFORCE baseline, PPO timesteps)


class MetricLog:
    """``metrics.jsonl`` (one JSON object per line) and, optionally, TensorBoard scalars.

    Args:
        out: the run's folder (``out/metrics.jsonl``, ``out/tb``).
        tensorboard: also write TensorBoard scalars.
        keep: for a run that starts at given counters (fresh or resumed): which rows already in the
            file stay (:func:`rows_within`). The others (written after the checkpoint by a process that
            was killed, or by an earlier run) are dropped before the run writes, and TensorBoard hides
            their events (``purge_step`` at the first dropped step; the kept rows from that step on are
            written again). ``None`` appends to what is there.

    Attributes:
        path: the JSON lines file; ``writer`` the TensorBoard writer (or ``None``).
        dropped: the rows ``keep`` dropped (unreadable lines, e.g. one cut by a kill, included).
    """

    def __init__(self, out: Path, tensorboard: bool, keep: Callable[[dict[str, Any]], bool] | None = None) -> None:
        self.path = out / "metrics.jsonl"
        kept, dropped_steps, self.dropped = trim_metrics(self.path, keep) if keep is not None else ([], [], 0)
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115  closed in close()
        self.writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            purge = min(dropped_steps) if dropped_steps else None
            self.writer = SummaryWriter(str(out / "tb"), purge_step=purge)
            for row in kept:  # their events at or after the purge step are hidden now: write them again
                if purge is not None and row["step"] >= purge:
                    self._scalars(row["stage"], row["step"], {k: v for k, v in row.items() if k not in ROW_KEYS})

    def write(self, kind: str, stage: str, step: int, **values: Any) -> None:
        row = {"kind": kind, "stage": stage, "step": int(step), "time": round(time.time(), 3)}
        row.update({k: (float(v) if isinstance(v, (np.floating, np.integer)) else v) for k, v in values.items()})
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        self._scalars(stage, step, values)

    def _scalars(self, stage: str, step: int, values: Mapping[str, Any]) -> None:
        """TensorBoard scalars ``stage/name`` of the finite numeric ``values`` (none without a writer)."""
        if self.writer is None:
            return
        for k, v in values.items():
            if k in NOT_SCALARS:
                continue
            scalar = isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool)
            if scalar and math.isfinite(v):
                self.writer.add_scalar(f"{stage}/{k}", float(v), int(step))

    def close(self) -> None:
        self._file.close()
        if self.writer is not None:
            self.writer.close()


def rows_within(progress: Mapping[str, Mapping[str, Any]]) -> Callable[[dict[str, Any]], bool]:
    """Which ``metrics.jsonl`` rows a run that starts at these counters keeps (``MetricLog(keep=...)``).

    ``progress``: the checkpoint's per-stage counters (``{"il": {"episodes": 8, "updates": 3}, ...}``;
    empty for a fresh run). An ``update`` row is kept when its step is at most its stage's update
    count; any other row (``episode``, ``eval``: their step counts the episodes of all stages) when its
    step is at most the episodes of all stages."""
    episodes = sum(int(p.get("episodes", 0)) for p in progress.values())
    updates = {s: int(p.get("updates", 0)) for s, p in progress.items()}

    def keep(row: dict[str, Any]) -> bool:
        limit = updates.get(row["stage"], 0) if row["kind"] == "update" else episodes
        return row["step"] <= limit

    return keep


def trim_metrics(path: Path, keep: Callable[[dict[str, Any]], bool]) -> tuple[list[dict], list[int], int]:
    """Drop the rows of the JSON lines file ``path`` that ``keep`` refuses, and unreadable lines
    (rewritten atomically; untouched when all stay). Returns ``(kept rows, steps of the dropped rows,
    number of lines dropped)``; a missing file keeps nothing and drops nothing."""
    if not path.is_file():
        return [], [], 0
    kept_lines, kept, steps, dropped = [], [], [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = _parse_row(line)
        if row is not None and keep(row):
            kept_lines.append(line)
            kept.append(row)
            continue
        dropped += 1
        if row is not None:
            steps.append(row["step"])
    if dropped:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text("".join(line + "\n" for line in kept_lines), encoding="utf-8")
        os.replace(tmp, path)
    return kept, steps, dropped


def _parse_row(line: str) -> dict[str, Any] | None:
    """A metrics row, or ``None`` for a line that is not one (cut short by a kill)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return None
    ok = isinstance(row, dict) and isinstance(row.get("step"), int) and all(k in row for k in ("kind", "stage"))
    return row if ok else None


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a ``metrics.jsonl`` (or of ``DIR/metrics.jsonl``)."""
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class StageBar:
    """A tqdm bar per stage: over episodes when the stage has a count, else over its seconds."""

    def __init__(self, stage: str, episodes: int | None, prog: StageProgress, enabled: bool) -> None:
        self.by_time = episodes is None
        self.bar = None
        if not enabled:
            return
        from tqdm import tqdm

        if self.by_time:
            total = round(prog.allotted_seconds or 0)
            self.bar = tqdm(total=total, initial=min(int(prog.seconds), total), desc=stage, unit="s")
        else:
            self.bar = tqdm(total=episodes, initial=min(prog.episodes, episodes), desc=stage, unit="ep")

    def update(self, prog: StageProgress, n_episodes: int, **postfix: float) -> None:
        if self.bar is None:
            return
        if self.by_time:
            self.bar.update(max(0, min(int(prog.seconds), self.bar.total) - self.bar.n))
        else:
            self.bar.update(n_episodes)
        shown = {k: f"{v:.4g}" for k, v in postfix.items()
                 if isinstance(v, (int, float, np.floating)) and math.isfinite(v)}
        self.bar.set_postfix(ep=prog.episodes, **shown, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=json_default) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def json_default(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return str(x)
