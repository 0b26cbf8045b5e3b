"""The engine's :class:`~doppler_gym.cluster.schedulers.JobView`, with its two per-job lists built on first read.

At 100,000 jobs a decision point may have tens of thousands of active jobs; building ``active`` as a
Python list and ``remaining`` for every active job cost O(active jobs) per event even when the scheduler
reads neither (LAS and Tiresias read ``active_idx`` and ``attained`` only). :class:`LiveJobView` is a
``JobView`` (same fields, same values when read) whose ``active`` is built from ``active_idx`` and whose
``remaining`` is filled by the engine's callback the first time each is read.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from doppler_gym.cluster.schedulers import JobView


class LiveJobView(JobView):
    """A :class:`JobView` built with ``active=None`` and ``remaining=None``: ``active`` is then
    ``active_idx.tolist()`` and ``remaining`` is ``fill_remaining()`` (a ``(n_jobs,) float64`` array [s]),
    each computed on its first read and kept. Give the callback with :meth:`set_remaining_source` before
    the view is handed out; a value assigned to either field is kept as given."""

    _active: list[int] | None = None
    _remaining: np.ndarray | None = None
    _fill_remaining: Callable[[], np.ndarray] | None = None

    @property  # type: ignore[override]
    def active(self) -> list[int]:
        """Waiting or running job indices, arrival order (``active_idx`` as a list, built on first read)."""
        if self._active is None:
            self._active = self.active_array().tolist()
        return self._active

    @active.setter
    def active(self, value: list[int] | None) -> None:
        self._active = value

    @property  # type: ignore[override]
    def remaining(self) -> np.ndarray:
        """``(n_jobs,) float64`` [s] solo time left (the engine fills the active jobs' entries on first read)."""
        if self._remaining is None:
            if self._fill_remaining is None:
                raise RuntimeError("LiveJobView.remaining: no source set (call set_remaining_source first)")
            self._remaining = self._fill_remaining()
        return self._remaining

    @remaining.setter
    def remaining(self, value: np.ndarray | None) -> None:
        self._remaining = value

    def set_remaining_source(self, fill: Callable[[], np.ndarray]) -> None:
        """``fill() -> (n_jobs,) float64`` computes ``remaining`` when it is first read."""
        self._fill_remaining = fill
