"""Pure admission steps of a preemptive scheduler's decision: which jobs of a priority order fit, and how spare
GPUs are handed out to elastic jobs.

:class:`~doppler_gym.cluster.simulation.ClusterSimulation` applies what these return (it preempts and
starts the jobs); they read only the arrays and callables they are given.

- :func:`greedy_changes`: on one GPU type, the jobs of an order admitted greedily (each job that fits the
  GPUs left, in order), compiled, as the jobs to suspend and the jobs to start; it reads only the part of the
  order it needs.
- :func:`grow`: the spare GPUs of each type, one at a time, to the admitted job that gains most from one more.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np
from numba import njit


@njit(cache=True)
def greedy_changes(order, need, n_gpus, running, is_running, scratch):
    """The greedy admission on ``n_gpus`` GPUs of one type (in order, each job whose ``need`` fits the GPUs left),
    as changes: ``(start, stop)``, the admitted jobs not running (``(a,) int64``, in ``order``) and the running jobs not
    admitted (``(b,) int64``, in ``running``'s order). ``order``: ``(k,) int64`` job indices; ``need``:
    ``(n,) int64`` GPUs per job (each >= 1); ``running``: ``(r,) int64`` the running jobs; ``is_running``:
    ``(n,) bool``; ``scratch``: ``(n,) bool``, all False on entry and on return. Reads the order up to the job
    that fills the last GPU (or to its end)."""
    admitted = np.empty(min(order.size, n_gpus), dtype=np.int64)
    m, left = 0, n_gpus
    for j in order:
        if left == 0:
            break
        if need[j] <= left:
            admitted[m] = j
            m += 1
            left -= need[j]
            scratch[j] = True
    start = np.empty(m, dtype=np.int64)
    a = 0
    for p in range(m):
        if not is_running[admitted[p]]:
            start[a] = admitted[p]
            a += 1
    stop = np.empty(running.size, dtype=np.int64)
    b = 0
    for j in running:
        if not scratch[j]:
            stop[b] = j
            b += 1
    for p in range(m):
        scratch[admitted[p]] = False
    return start[:a], stop[:b]


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
