"""Failures, stragglers and checkpoints: the Poisson failure model, a job's checkpointed timeline, Young's interval.

A job's work is a timeline in *solo seconds* (time at full speed on its allocation): segments of
``k`` iterations of ``t`` seconds each followed by a checkpoint of ``C`` seconds, with no checkpoint
after the last iteration. A failure rolls the job back to the end of its last completed checkpoint.

Calibration: the Llama 3 report (Meta, "The Llama 3 Herd of Models", 2024) counts 419 unexpected
interruptions in 54 days of training on 16,384 H100 GPUs, i.e. a per-GPU mean time between failures
of 16,384 x 54 d / 419 ~ 5.8 years (:data:`LLAMA3_GPU_MTBF`), one job-level interruption about every
3 hours on the full machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LLAMA3_GPU_MTBF = 16_384 * 54 * 86_400 / 419  # [s] per GPU, ~1.82e8 s (5.8 years)


@dataclass(frozen=True)
class FailureModel:
    """Each GPU fails as a Poisson process; a failure interrupts every job on that GPU.

    Args:
        gpu_mtbf: mean time between failures of one GPU [s] (``inf``: no failures). A job on ``g``
            GPUs is interrupted at rate ``g / gpu_mtbf`` while it holds them.
        restart_delay: time from a failure until the job can be scheduled again [s]; it then resumes
            from its last checkpoint (the failed GPU is repaired at once).
        straggler_mtbs: mean healthy time between slow-but-alive periods of one GPU [s] (``inf``:
            none). Alibaba's Falcon study reports such episodes from tens of seconds to ~10 hours.
        straggler_duration: mean length of a slow period [s] (exponential).
        straggler_speed: fraction of its pace a job keeps while any of its GPUs is slow, in (0, 1].
    """

    gpu_mtbf: float = math.inf  # [s]
    restart_delay: float = 0.0  # [s]
    straggler_mtbs: float = math.inf  # [s]
    straggler_duration: float = 600.0  # [s]
    straggler_speed: float = 0.5

    def __post_init__(self) -> None:
        if not (self.gpu_mtbf > 0):
            raise ValueError(f"FailureModel.gpu_mtbf must be > 0 [s] (inf = no failures), got {self.gpu_mtbf!r}")
        if not (self.restart_delay >= 0 and math.isfinite(self.restart_delay)):
            raise ValueError(f"FailureModel.restart_delay must be a finite time >= 0 [s], got {self.restart_delay!r}")
        if not (self.straggler_mtbs > 0):
            raise ValueError(f"FailureModel.straggler_mtbs must be > 0 [s] (inf = none), got {self.straggler_mtbs!r}")
        if not (0 < self.straggler_duration < math.inf):
            raise ValueError(f"FailureModel.straggler_duration must be in (0, inf) [s]: {self.straggler_duration!r}")
        if not (0 < self.straggler_speed <= 1):
            raise ValueError(f"FailureModel.straggler_speed must be in (0, 1], got {self.straggler_speed!r}")

    @classmethod
    def llama3(cls, restart_delay: float = 600.0) -> FailureModel:
        """Per-GPU MTBF calibrated on Llama 3's 419 unexpected interruptions (16,384 GPUs, 54 days)."""
        return cls(gpu_mtbf=LLAMA3_GPU_MTBF, restart_delay=restart_delay)


def young_interval(checkpoint_cost: float, mtbf: float) -> float:
    """Young's (1974) first-order optimal time between checkpoints, ``sqrt(2 C M)`` [s].

    Args:
        checkpoint_cost: ``C``, time one checkpoint takes [s].
        mtbf: ``M``, mean time between failures of the job's GPU set [s] (``gpu_mtbf / g``).
    """
    if checkpoint_cost < 0 or mtbf <= 0:
        raise ValueError(f"young_interval: need checkpoint_cost >= 0 and mtbf > 0, got {checkpoint_cost!r}, {mtbf!r}")
    return math.sqrt(2.0 * checkpoint_cost * mtbf)


def n_checkpoints(iterations: int, every: int | None) -> int:
    """Checkpoints a job takes: after every ``every`` iterations, none after the last one."""
    return 0 if every is None else (iterations - 1) // every


def total_work(iterations: int, iter_time: float, every: int | None, cost: float) -> float:
    """Solo seconds to finish: ``iterations x iter_time + n_checkpoints x cost`` [s]."""
    return iterations * iter_time + n_checkpoints(iterations, every) * cost


def rollback(progress: float, iter_time: float, every: int | None, cost: float) -> float:
    """Position [solo s] of the last completed checkpoint at or before ``progress`` (0 without one)."""
    if every is None:
        return 0.0
    seg = every * iter_time + cost
    return math.floor(progress / seg * (1 + 1e-12)) * seg


def rescale(progress: float, old_time: float, new_time: float, every: int | None, cost: float) -> float:
    """The same point of the work (iterations done, checkpoint phase) when the iteration time changes."""
    if old_time == new_time:
        return progress
    if every is None:
        return progress * new_time / old_time
    seg = every * old_time + cost
    m = math.floor(progress / seg)
    r = progress - m * seg
    r_new = r * new_time / old_time if r < every * old_time else every * new_time + (r - every * old_time)
    return m * (every * new_time + cost) + r_new
