"""The running jobs of a cluster simulation with their per-job values gathered once.

Every loop step of the engine reads the running jobs' work, GPUs held and speed (the next completion,
the advance of the clock, the completion test). Those change only when a job starts or leaves its GPUs,
or when speeds are refreshed, so :class:`RunningBlock` gathers them once per such change instead of
once per step; the engine drops the block at a start or release and refreshes its speeds after
``_refresh_speeds``.
"""

from __future__ import annotations

import numpy as np

EPS = 1e-9  # [solo s] slack when testing a job's progress against its work


class RunningBlock:
    """The running jobs ``idx`` (``(k,) int64``, ascending) and, gathered from the engine's ``(n,)`` arrays:
    ``work`` [solo s] ``(k,) float64``, ``gpus`` ``(k,) int64`` held, ``speed`` ``(k,) float64`` (solo s per s),
    and ``done_at`` ``(k,) float64`` [solo s]: the progress at which each counts as complete
    (``work x (1 - 1e-12) - EPS``)."""

    def __init__(self, idx: np.ndarray, work: np.ndarray, gpus_held: np.ndarray, speed: np.ndarray) -> None:
        self.idx = idx
        self.work = work[idx]
        self.gpus = gpus_held[idx]
        self.speed = speed[idx]
        self.done_at = self.work * (1 - 1e-12) - EPS

    @property
    def size(self) -> int:
        """Running jobs."""
        return int(self.idx.size)

    def refresh_speed(self, speed: np.ndarray) -> None:
        """Gather ``speed`` (``(n,) float64``) again after the engine changed some running job's speed."""
        self.speed = speed[self.idx]
