"""Failures, stragglers and checkpoints: the Poisson failure model, a job's checkpointed timeline, Young's interval.

A job's work is a timeline in *solo seconds* (time at full speed on its allocation): segments of
``k`` iterations of ``t`` seconds each followed by a checkpoint of ``C`` seconds, with no checkpoint
after the last iteration. A failure rolls the job back to the end of its last completed checkpoint.

Whether a job can finish at all: a stretch of work between checkpoints (or the whole job, without
checkpoints) must run ``s`` solo seconds without a failure of its ``g`` GPUs; failures arrive at rate
``g / gpu_mtbf``, so a stretch expects ``exp(g s / gpu_mtbf) - 1`` restarts (:func:`expected_restarts`).
That grows so fast that a run past :data:`MAX_RESTARTS_PER_STRETCH` is refused before it starts.

Calibration: the Llama 3 report (Meta, "The Llama 3 Herd of Models", 2024) counts 419 unexpected
interruptions in 54 days of training on 16,384 H100 GPUs, i.e. a per-GPU mean time between failures
of 16,384 x 54 d / 419 ~ 5.8 years (:data:`LLAMA3_GPU_MTBF`), one job-level interruption about every
3 hours on the full machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from doppler_gym.cluster.types import checked_number

LLAMA3_GPU_MTBF = 16_384 * 54 * 86_400 / 419  # [s] per GPU, ~1.82e8 s (5.8 years)
# The most expected restarts one stretch of work between checkpoints may need: P(a stretch runs without a
# failure) >= 1/1001. Past it a run spins through failures for minutes and usually hits the event cap.
MAX_RESTARTS_PER_STRETCH = 1_000


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
        for label, what, finite in (("gpu_mtbf", "a time > 0 [s] (inf = no failures)", False),
                                    ("straggler_mtbs", "a time > 0 [s] (inf = none)", False),
                                    ("straggler_duration", "a finite time > 0 [s]", True)):
            value = checked_number(getattr(self, label), f"FailureModel.{label}", what, 0.0, strict=True, finite=finite)
            object.__setattr__(self, label, value)
        delay = checked_number(self.restart_delay, "FailureModel.restart_delay", "a finite time >= 0 [s]", 0.0)
        object.__setattr__(self, "restart_delay", delay)
        speed = checked_number(self.straggler_speed, "FailureModel.straggler_speed", "in (0, 1]", 0.0, strict=True)
        if speed > 1:
            raise ValueError(f"FailureModel.straggler_speed must be in (0, 1], got {self.straggler_speed!r}")
        object.__setattr__(self, "straggler_speed", speed)

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


def young_every(checkpoint_cost: float, gpu_mtbf: float, gpus: int, iter_time: float) -> int:
    """Young's interval for a job on ``gpus`` GPUs, in whole iterations of ``iter_time`` [s] (at least 1)."""
    return max(1, round(young_interval(checkpoint_cost, gpu_mtbf / gpus) / iter_time))


def longest_stretch(iterations: int, iter_time: float, every: int | None, cost: float) -> float:
    """[solo s] of the longest work between two checkpoints (the whole job without one): a failure
    during it loses all of it. A stretch ends with its checkpoint; the last one has none."""
    last = iterations - n_checkpoints(iterations, every) * (every or 0)  # iterations after the last checkpoint
    full = every * iter_time + cost if n_checkpoints(iterations, every) else 0.0
    return max(full, last * iter_time)


def expected_restarts(stretch: float, rate: float) -> float:
    """Expected failures before ``stretch`` solo seconds run without one, at ``rate`` failures per second
    (Poisson, each restarting the stretch): ``exp(rate x stretch) - 1`` (``inf`` past float range)."""
    x = rate * stretch
    return math.expm1(x) if x < 700 else math.inf


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
