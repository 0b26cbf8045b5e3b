"""Pure admission steps of a preemptive scheduler's decision: which jobs of a priority order fit, and how spare
GPUs are handed out to elastic jobs.

:class:`~doppler_gym.cluster.simulation.ClusterSimulation` applies what these return (it preempts and
starts the jobs); they read only the arrays and callables they are given.

- :func:`greedy_prefix`: on one GPU type, the jobs of an order admitted greedily (each job that fits the
  GPUs left, in order), in NumPy, reading only the part of the order it needs.
- :func:`first_fitting`: the next job of an order that fits a number of GPUs (chunked search).
- :func:`grow`: the spare GPUs of each type, one at a time, to the admitted job that gains most from one more.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np


def greedy_prefix(jobs: np.ndarray, need: np.ndarray, n_gpus: int) -> np.ndarray:
    """The jobs of the order ``jobs`` (``(k,) int64`` job indices) admitted greedily on ``n_gpus`` GPUs: in
    order, each job whose ``need`` (``(n,) int64`` GPUs per job, each >= 1) fits the GPUs left. ``(m,) int64``,
    in order. The prefix that fits is taken at once (a cumulative sum over the first ``n_gpus + 1`` jobs only:
    every job needs a GPU at least), then each later job that fits (:func:`first_fitting`)."""
    total = np.cumsum(need[jobs[:n_gpus + 1]])
    pos = int(np.searchsorted(total, n_gpus, side="right"))  # jobs[:pos] fit, in order
    chosen = [jobs[:pos]]
    left = n_gpus - (int(total[pos - 1]) if pos else 0)
    while left > 0 and pos < len(jobs):
        pos = first_fitting(need, jobs, pos, left)
        if pos < 0:
            break
        chosen.append(jobs[pos:pos + 1])
        left -= int(need[jobs[pos]])
        pos += 1
    return np.concatenate(chosen)


def first_fitting(need: np.ndarray, jobs: np.ndarray, pos: int, left: int, chunk: int = 256) -> int:
    """The first position ``p >= pos`` of ``jobs`` (``(k,) int64``) with ``need[jobs[p]] <= left`` (``need``:
    ``(n,)`` GPUs per job), or -1; searched in chunks that double from ``chunk``, so a job found near ``pos``
    costs O(distance), not O(k)."""
    while pos < len(jobs):
        fits = np.flatnonzero(need[jobs[pos:pos + chunk]] <= left)
        if fits.size:
            return pos + int(fits[0])
        pos += chunk
        chunk *= 2
    return -1


def grow(placed: dict[int, str], size: dict[int, int], room: dict[str, int],
         speedup: Callable[[int, int, str], float]) -> None:
    """Give the spare GPUs of each type (``room``: ``{type: GPUs}``, updated) one at a time to the job of ``placed``
    (``{job: its GPU type}``, in admission order) on that type with the largest ``speedup(job, GPUs, type)``
    (t(k) / t(k + 1)) above 1; ``size`` (``{job: GPUs}``) is updated. Ties go to the job placed first."""
    heap = [(-speedup(i, size[i], t), pos, i) for pos, (i, t) in enumerate(placed.items())]
    heapq.heapify(heap)
    while heap:
        g, pos, i = heapq.heappop(heap)
        if -g <= 1.0 + 1e-12:
            break
        t = placed[i]
        if room[t] <= 0:
            continue  # its type is full: the job stops growing
        size[i] += 1
        room[t] -= 1
        heapq.heappush(heap, (-speedup(i, size[i], t), pos, i))
