"""Compiled (Numba) per-event step of the cluster engine over its running jobs: the advance of their progress
and accounts in one pass (where NumPy gathers and scatters each array separately). The same float64
operations, element by element, as the NumPy expressions they replace (no fast-math): bit-identical."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def advance(idx, speed, gpus, dt, progress, attained, held):
    """Running jobs ``idx`` (``(k,) int64``) at ``speed`` (``(k,) float64``, solo s per s) on ``gpus``
    (``(k,) int64``) advance ``dt`` [s]: ``progress[idx] += speed * dt`` [solo s], ``attained[idx] += gpus * dt``
    [GPU s], ``held[idx] += dt`` [s] (``(n,) float64`` each, updated in place). Returns the new
    ``progress[idx]`` (``(k,) float64``)."""
    out = np.empty(idx.size, dtype=np.float64)
    for p in range(idx.size):
        i = idx[p]
        value = progress[i] + speed[p] * dt
        progress[i] = value
        out[p] = value
        attained[i] += gpus[p] * dt
        held[i] += dt
    return out


@njit(cache=True, error_model="numpy")
def earliest_end(now, idx, work, progress, speed):
    """[s] the earliest of ``now + (work - progress[idx]) / speed`` over the running jobs ``idx`` (``(k,) int64``;
    ``work``, ``speed``: ``(k,) float64`` [solo s], [solo s per s]; ``progress``: ``(n,) float64`` [solo s]); a
    zero speed gives ``inf`` (or NaN for no work left), and a NaN is returned as NumPy's ``min`` would;
    ``inf`` for ``k = 0``."""
    best = np.inf
    for p in range(idx.size):
        end = now + (work[p] - progress[idx[p]]) / speed[p]
        if np.isnan(end):
            return end
        best = min(best, end)
    return best


@njit(cache=True, error_model="numpy")
def finished(now, progress, done_at, work, speed):
    """The positions of the running jobs (``(k,)`` arrays: ``progress`` [solo s] now, ``done_at``, ``work``
    [solo s], ``speed`` [solo s per s]) whose progress reached ``done_at``, or (moving, ``speed > 0``) whose
    completion ``now + (work - progress) / speed`` the clock at ``now`` [s] cannot tell from ``now``:
    ``(finished, unresolved)``, ascending ``int64`` positions (the unresolved ones are among the finished)."""
    done = np.empty(progress.size, dtype=np.int64)
    unresolved = np.empty(progress.size, dtype=np.int64)
    d = u = 0
    for p in range(progress.size):
        if progress[p] >= done_at[p]:
            done[d] = p
            d += 1
        elif speed[p] > 0 and now + (work[p] - progress[p]) / speed[p] <= now:
            done[d] = p
            d += 1
            unresolved[u] = p
            u += 1
    return done[:d], unresolved[:u]


@njit(cache=True)
def running_in_window(mask, lo, hi):
    """The jobs ``j`` in ``[lo, hi)`` with ``mask[j]`` (``(n,) bool``), ascending: a ``(k,) int64`` array."""
    idx = np.empty(hi - lo, dtype=np.int64)
    k = 0
    for j in range(lo, hi):
        if mask[j]:
            idx[k] = j
            k += 1
    return idx[:k].copy()


@njit(cache=True)
def mark_started(jobs, requested, now, running_code, gpus_held, status, running, speed, first_start, suspended):
    """The per-job records of the jobs ``jobs`` (``(m,) int64``) started on their ``requested`` GPUs at ``now``
    [s] (``(n,)`` arrays, updated in place): ``gpus_held``, ``status = running_code``, the ``running`` mask,
    ``speed`` 1, ``first_start`` if not set (NaN), ``suspended`` cleared."""
    for i in jobs:
        gpus_held[i] = requested[i]
        status[i] = running_code
        running[i] = True
        speed[i] = 1.0
        if np.isnan(first_start[i]):
            first_start[i] = now
        suspended[i] = False


@njit(cache=True)
def mark_suspended(jobs, waiting_code, gpus_held, status, running, speed, suspended, stall_end):
    """The per-job records of the running jobs ``jobs`` (``(m,) int64``) suspended (``(n,)`` arrays, updated in
    place): no GPUs held, ``status = waiting_code``, out of the ``running`` mask, ``speed`` 0, ``suspended``,
    no restore pending (``stall_end`` 0)."""
    for i in jobs:
        gpus_held[i] = 0
        status[i] = waiting_code
        running[i] = False
        speed[i] = 0.0
        suspended[i] = True
        stall_end[i] = 0.0


@njit(cache=True)
def merge_running(old, stop, start):
    """The running jobs after an admission, ascending (``(r - b + a,) int64``): ``old`` (``(r,) int64``, ascending)
    less ``stop`` (``(b,) int64``, a subset of ``old`` in its order) plus ``start`` (``(a,) int64``, none in
    ``old``, any order)."""
    added = np.sort(start)
    out = np.empty(old.size - stop.size + added.size, dtype=np.int64)
    j = k = o = 0
    for x in old:
        if j < stop.size and stop[j] == x:
            j += 1
            continue
        while k < added.size and added[k] < x:
            out[o] = added[k]
            o += 1
            k += 1
        out[o] = x
        o += 1
    while k < added.size:
        out[o] = added[k]
        o += 1
        k += 1
    return out


@njit(cache=True)
def update_active(old, changed, status, last_active, mask):
    """The active jobs after some changed status (``(k,) int64``, ascending): ``old`` (``(m,) int64``, ascending,
    distinct) less the jobs of ``changed`` (``(c,) int64``, any order, repeats allowed), plus those of
    ``changed`` whose ``status`` (``(n,) int8``) is at most ``last_active`` (the engine's ``RUNNING``: WAITING and
    RUNNING are active). ``mask``: ``(n,) bool`` scratch over job indices, all False on entry and on return."""
    for j in changed:
        mask[j] = True
    ch = np.sort(changed)
    out = np.empty(old.size + ch.size, dtype=np.int64)
    o = k = 0
    for x in old:
        if mask[x]:
            continue
        while k < ch.size and ch[k] < x:
            if status[ch[k]] <= last_active and (k == 0 or ch[k] != ch[k - 1]):
                out[o] = ch[k]
                o += 1
            k += 1
        out[o] = x
        o += 1
    while k < ch.size:
        if status[ch[k]] <= last_active and (k == 0 or ch[k] != ch[k - 1]):
            out[o] = ch[k]
            o += 1
        k += 1
    for j in changed:
        mask[j] = False
    return out[:o]


@njit(cache=True)
def gather_block(idx, work, gpus_held, speed, margin, eps):
    """The running jobs ``idx`` (``(k,) int64``) gathered from the ``(n,)`` arrays ``work`` [solo s], ``gpus_held``
    and ``speed`` in one pass, with the progress at which each counts as complete: ``(work, gpus, speed,
    done_at)``, ``(k,)`` arrays, ``done_at = work * margin - eps`` [solo s] (the same float64 operations as
    NumPy's)."""
    k = idx.size
    w = np.empty(k, dtype=np.float64)
    g = np.empty(k, dtype=np.int64)
    s = np.empty(k, dtype=np.float64)
    d = np.empty(k, dtype=np.float64)
    for p in range(k):
        j = idx[p]
        w[p] = work[j]
        g[p] = gpus_held[j]
        s[p] = speed[j]
        d[p] = w[p] * margin - eps
    return w, g, s, d


@njit(cache=True)
def drop_gone(gone, idx, work, gpus, speed, done_at):
    """The block's ``(k,)`` arrays (``idx``, ``work``, ``gpus``, ``speed``, ``done_at``) less the positions where
    ``gone`` (``(k,) bool``) is true, in one pass: five ``(k - gone.sum(),)`` arrays, in order."""
    keep = gone.size - np.count_nonzero(gone)
    i2 = np.empty(keep, dtype=np.int64)
    w = np.empty(keep, dtype=np.float64)
    g = np.empty(keep, dtype=np.int64)
    s = np.empty(keep, dtype=np.float64)
    d = np.empty(keep, dtype=np.float64)
    o = 0
    for p in range(gone.size):
        if not gone[p]:
            i2[o], w[o], g[o], s[o], d[o] = idx[p], work[p], gpus[p], speed[p], done_at[p]
            o += 1
    return i2, w, g, s, d


@njit(cache=True)
def reuse_cross_bytes(jobs, spans, requested, last_gpus, last_cross, cross_bytes):
    """For each job of ``jobs`` (``(m,) int64``) started on as many GPUs as at its last start (``last_gpus ==
    requested``, ``(n,) int64``): ``cross_bytes`` [B] (``(n,) float64``, updated) is its ``last_cross`` if its GPUs
    span nodes (``spans``: ``(m,) bool``), else 0. Returns the positions in ``jobs`` of the others (``int64``,
    ascending): those need their iteration time set."""
    other = np.empty(jobs.size, dtype=np.int64)
    m = 0
    for p in range(jobs.size):
        i = jobs[p]
        if last_gpus[i] == requested[i]:
            cross_bytes[i] = last_cross[i] if spans[p] else 0.0
        else:
            other[m] = p
            m += 1
    return other[:m]
