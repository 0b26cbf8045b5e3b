"""The running jobs of a cluster simulation with their per-job values gathered once.

Every loop step of the engine reads the running jobs' work, GPUs held and speed (the next completion,
the advance of the clock, the completion test). Those change only when a job starts or leaves its GPUs,
or when speeds are refreshed, so :class:`RunningBlock` gathers them once per such change instead of
once per step; the engine drops the block at a start or release and refreshes its speeds after
``_refresh_speeds``. After a batched admission it builds the block from the change (the running jobs merged
with those started, less those suspended), and after completions it keeps the block less the completed jobs
(:meth:`RunningBlock.without`), instead of finding the running jobs again.
"""

from __future__ import annotations

import numpy as np

from doppler_gym.cluster.step_kernels import drop_gone, gather_block, running_in_window

EPS = 1e-9  # [solo s] slack when testing a job's progress against its work
DONE_MARGIN = 1 - 1e-12  # a job counts as complete at progress work x DONE_MARGIN - EPS


class RunningBlock:
    """The running jobs ``idx`` (``(k,) int64``, ascending) and, gathered from the engine's ``(n,)`` arrays (given
    already gathered, ``(k,)``, with ``gathered=True``, and then ``done_at`` too if known):
    ``work`` [solo s] ``(k,) float64``, ``gpus`` ``(k,) int64`` held, ``speed`` ``(k,) float64`` (solo s per s),
    and ``done_at`` ``(k,) float64`` [solo s]: the progress at which each counts as complete
    (``work x (1 - 1e-12) - EPS``)."""

    def __init__(self, idx: np.ndarray, work: np.ndarray, gpus_held: np.ndarray, speed: np.ndarray,
                 gathered: bool = False, done_at: np.ndarray | None = None) -> None:
        self.idx = idx
        if gathered:
            self.work, self.gpus, self.speed = work, gpus_held, speed
            self.done_at = self.work * DONE_MARGIN - EPS if done_at is None else done_at
        else:  # (one compiled pass)
            self.work, self.gpus, self.speed, self.done_at = gather_block(idx, work, gpus_held, speed, DONE_MARGIN, EPS)

    @classmethod
    def gather(cls, running: np.ndarray, lo: int, hi: int, work: np.ndarray, gpus_held: np.ndarray,
               speed: np.ndarray) -> RunningBlock:
        """The block of the jobs ``j`` in ``[lo, hi)`` with ``running[j]`` (``(n,) bool``), gathered from the
        ``(n,)`` arrays (:func:`~doppler_gym.cluster.step_kernels.running_in_window`, then one compiled pass)."""
        return cls(running_in_window(running, lo, hi), work, gpus_held, speed)

    def without(self, gone: np.ndarray) -> RunningBlock:
        """The block less the jobs at the positions where ``gone`` (``(k,) bool``) is true (the same values as
        gathering the rest again, as long as no remaining job's work, GPUs or speed changed)."""
        idx, work, gpus, speed, done_at = drop_gone(gone, self.idx, self.work, self.gpus, self.speed, self.done_at)
        return RunningBlock(idx, work, gpus, speed, gathered=True, done_at=done_at)

    @property
    def size(self) -> int:
        """Running jobs."""
        return int(self.idx.size)

    def refresh_speed(self, speed: np.ndarray) -> None:
        """Gather ``speed`` (``(n,) float64``) again after the engine changed some running job's speed."""
        self.speed = speed[self.idx]
