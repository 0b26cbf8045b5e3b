"""The engine's :class:`~doppler_gym.cluster.schedulers.JobView`, with its per-job and per-GPU lists built on first
read.

At 100,000 jobs a decision point may have tens of thousands of active jobs; building ``active`` as a
Python list and ``remaining`` for every active job cost O(active jobs) per event even when the scheduler
reads neither (LAS and Tiresias read ``active_idx`` and ``attained`` only). :class:`LiveJobView` is a
``JobView`` (same fields, same values when read) whose ``active`` is built from ``active_idx`` and whose
``remaining`` and ``occupants`` come from the engine's callbacks the first time each is read (``occupants``:
the GPU pool's per-GPU lists, brought up to date only when read).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from doppler_gym.cluster.schedulers import JobView


class LiveJobView(JobView):
    """A :class:`JobView` built with ``active=None``, ``remaining=None`` and ``occupants=None``: ``active`` is then
    ``active_idx.tolist()``, ``remaining`` is ``fill_remaining()`` (a ``(n_jobs,) float64`` array [s]) and
    ``occupants`` is ``read_occupants()`` (``n_gpus`` lists of job indices), each computed on its first read and
    kept. Give the callbacks with :meth:`set_remaining_source` and :meth:`set_occupants_source` before the view
    is handed out; a value assigned to any of these fields is kept as given (``occupants`` with no source: None)."""

    _active: list[int] | None = None
    _remaining: np.ndarray | None = None
    _fill_remaining: Callable[[], np.ndarray] | None = None
    _occupants: list[list[int]] | None = None
    _read_occupants: Callable[[], list[list[int]]] | None = None

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
    def occupants(self) -> list[list[int]] | None:
        """``(n_gpus,)`` lists of the jobs on each GPU (the engine's, brought up to date on first read)."""
        if self._occupants is None and self._read_occupants is not None:
            self._occupants = self._read_occupants()
        return self._occupants

    @occupants.setter
    def occupants(self, value: list[list[int]] | None) -> None:
        self._occupants = value

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

    def set_occupants_source(self, read: Callable[[], list[list[int]]]) -> None:
        """``read() -> list[list[int]]`` gives ``occupants`` (the engine's, up to date) when it is first read."""
        self._read_occupants = read
