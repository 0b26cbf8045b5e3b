"""Bookkeeping: per-stage counters, the metrics log (JSON lines + TensorBoard), progress bars, JSON files."""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

NOT_SCALARS = frozenset({"graph_id"})  # metrics.jsonl fields kept out of TensorBoard (identifiers, not curves)


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
    """``metrics.jsonl`` (one JSON object per line) and, optionally, TensorBoard scalars."""

    def __init__(self, out: Path, tensorboard: bool) -> None:
        self.path = out / "metrics.jsonl"
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115  closed in close()
        self.writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(out / "tb"))

    def write(self, kind: str, stage: str, step: int, **values: Any) -> None:
        row = {"kind": kind, "stage": stage, "step": int(step), "time": round(time.time(), 3)}
        row.update({k: (float(v) if isinstance(v, (np.floating, np.integer)) else v) for k, v in values.items()})
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        if self.writer is not None:
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
