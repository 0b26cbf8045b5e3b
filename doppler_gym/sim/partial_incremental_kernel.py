"""Kernels of :class:`~doppler_gym.sim.partial_incremental.IncrementalPartialMakespan`: partial makespans on the
list kernel, one placed op at a time where that is exact, the whole run elsewhere.

Where the list kernel serves the config (one stream, FIFO queues, ideal links:
:func:`~doppler_gym.sim.list_kernel.run_list`), a device serves its ops in *request order*, and requests are
made in the order of their ready times (the time an op's last input arrives; ties by SimPy's rules), so along
a device's service order the ready times do not decrease and the end times increase. Let the placed ops be
closed under predecessors and add op ``w`` on device ``d``, all of whose inputs are placed, ready at ``r``.
``w`` has no placed successor, so it changes no other op's inputs: it can only delay the ops that ``d`` serves
after it. When no placed op on ``d`` is ready at exactly ``r`` (a tie, whose order needs SimPy's rules), ``d``
serves ``w`` right after ``prev``, its last op ready before ``r``, so ``w`` runs from ``max(r, end of prev)`` (0
without ``prev``) for its duration, and then

* without an op on ``d`` ready after ``r``, nothing else changes and the makespan is the larger of the old one
  and ``w``'s end (an *append*);
* else, if ``w`` ends at or before ``next_r``, the ready time of the op ``d`` serves after ``prev``, that op
  found ``d`` idle (it started at ``next_r``, since ``prev`` ended before ``w`` did) and finds it idle still:
  nothing else changes, nor does the makespan (an *insert* into an idle gap).

The arithmetic is ``run_list``'s, operation for operation (an edge's time is ``latency + bytes / bandwidth`` of
its device pair, 0 on one device, and the factor rows are ones, which the caller checks), so the result is the
same float, bit for bit. Any other row (a tie, an op that does not fit its gap, a row that is not its slot's
last row plus one op, an op whose duration rounds to zero) runs whole on the list kernel
(:func:`~doppler_gym.sim.partial_kernel.list_row`), and the slot's state is rebuilt from its end times.

Per slot ``s`` (a caller's stream of rows, for example one env) the state is ``cache`` ``(S, n) int32`` the row
it last saw (-1 unplaced), ``valid`` ``(S,) bool``, ``ends`` ``(S, n)`` each placed op's end, ``span`` ``(S,)`` the
makespan, and each device's ops in service order: device ``d``'s are entries ``seg_ptr[s, d] : seg_ptr[s, d + 1]``
of ``seg_ready`` and ``seg_end`` ``(S, n)`` (their ready and end times); times float64 in internal units.
The static tables ``(pred_ptr (n+1,), pred_src (E,), pred_size (E,), latency (D*D,), inv_bw (D*D,), work (D, n))``
give each op's inputs (producer, its output bytes), the device-pair tables and each op's duration per device.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from doppler_gym.sim.list_kernel import alloc_list_workspace
from doppler_gym.sim.packed_layout import Meta, segment
from doppler_gym.sim.partial_kernel import list_row

NOT_INCREMENTAL = -4.0  # a row the list kernel did not serve (bad device, zero duration): the caller's to run


@njit(cache=True)
def predecessors(meta, ints, floats):
    """``(pred_ptr (n+1,) int64, pred_src (E,) int64, pred_size (E,) float64)``: op ``w``'s inputs at
    ``pred_ptr[w] : pred_ptr[w + 1]``, each its producer and the producer's output size (the packed ``SIZE``)."""
    n, n_edges = meta[Meta.N_OPS], meta[Meta.N_EDGES]
    succ_ptr = segment(ints, meta, Meta.SUCC_PTR, n + 1)
    succ_dst = segment(ints, meta, Meta.SUCC_DST, n_edges)
    size = segment(floats, meta, Meta.SIZE, n)
    pred_ptr = np.zeros(n + 1, np.int64)
    for k in range(n_edges):
        pred_ptr[succ_dst[k] + 1] += 1
    for w in range(n):
        pred_ptr[w + 1] += pred_ptr[w]
    fill = pred_ptr[:n].copy()
    pred_src = np.empty(n_edges, np.int64)
    pred_size = np.empty(n_edges, np.float64)
    for u in range(n):
        for k in range(succ_ptr[u], succ_ptr[u + 1]):
            c = succ_dst[k]
            pred_src[fill[c]] = u
            pred_size[fill[c]] = size[u]
            fill[c] += 1
    return pred_ptr, pred_src, pred_size


@njit(cache=True, inline="always")
def _ready_time(w, d, row, ends, tables):
    """When op ``w``'s last input reaches device ``d`` [internal units], as ``run_list`` computes it (0.0 for a
    source); -1.0 when an input is unplaced."""
    pred_ptr, pred_src, pred_size, latency, inv_bw, _ = tables
    n_dev = tables[5].shape[0]
    ready = 0.0 if pred_ptr[w] == pred_ptr[w + 1] else -1.0
    for j in range(pred_ptr[w], pred_ptr[w + 1]):
        u = pred_src[j]
        du = row[u]
        if du < 0:
            return -1.0
        p = du * n_dev + d
        a = ends[u] + (latency[p] + pred_size[j] * inv_bw[p])
        if a > ready:
            ready = a
    return ready


@njit(cache=True)
def _changed_op(row, cached):
    """The one op whose entry differs between ``row`` and ``cached``, newly placed; -1 for none, -2 for another
    change (more ops, or a placed op moved or removed). Any negative entry means unplaced."""
    w = -1
    for o in range(row.shape[0]):
        if row[o] != cached[o] and (row[o] >= 0 or cached[o] >= 0):
            if w >= 0 or cached[o] >= 0:
                return -2
            w = o
    return w


@njit(cache=True)
def _place(s, w, row, state, tables):
    """Add op ``w`` on ``row[w]`` to slot ``s``'s state by the rules of the module docstring; returns False (the
    state untouched) where neither applies."""
    cache, _, ends, seg_ptr, seg_ready, seg_end, span = state
    work = tables[5]
    d = row[w]
    if d >= work.shape[0]:
        return False
    ready = _ready_time(w, d, row, ends[s], tables)
    if ready < 0.0:
        return False
    lo, hi = seg_ptr[s, d], seg_ptr[s, d + 1]
    at = lo + np.searchsorted(seg_ready[s, lo:hi], ready)  # the first op on d ready at or after r
    if at < hi and seg_ready[s, at] == ready:
        return False  # a tie
    prev_end = seg_end[s, at - 1] if at > lo else 0.0
    begin = prev_end if prev_end > ready else ready
    end = begin + work[d, w]
    if end == begin or (at < hi and end > seg_ready[s, at]):
        return False
    last = seg_ptr[s, -1]
    seg_ready[s, at + 1 : last + 1] = seg_ready[s, at:last].copy()
    seg_end[s, at + 1 : last + 1] = seg_end[s, at:last].copy()
    seg_ready[s, at] = ready
    seg_end[s, at] = end
    seg_ptr[s, d + 1 :] += 1
    cache[s, w] = d
    ends[s, w] = end
    if end > span[s]:
        span[s] = end
    return True


@njit(cache=True)
def _rebuild(s, row, state, tables):
    """Slot ``s``'s state from the end times the whole run wrote into ``ends[s]`` (the unplaced ops' entries are
    not read)."""
    cache, valid, ends, seg_ptr, seg_ready, seg_end, span = state
    n_dev = tables[5].shape[0]
    seg_ptr[s, :] = 0
    for o in range(row.shape[0]):
        if row[o] >= 0:
            seg_ptr[s, row[o] + 1] += 1
    for d in range(n_dev):
        seg_ptr[s, d + 1] += seg_ptr[s, d]
    fill = seg_ptr[s, :n_dev].copy()
    span[s] = 0.0
    for o in range(row.shape[0]):  # insertion sort by end on each device (op ids run roughly in time order)
        d = row[o]
        if d < 0:
            continue
        e = ends[s, o]
        i = fill[d]
        while i > seg_ptr[s, d] and seg_end[s, i - 1] > e:
            seg_end[s, i] = seg_end[s, i - 1]
            seg_ready[s, i] = seg_ready[s, i - 1]
            i -= 1
        seg_end[s, i] = e
        seg_ready[s, i] = _ready_time(o, d, row, ends[s], tables)
        fill[d] += 1
        if e > span[s]:
            span[s] = e
    cache[s, :] = row
    valid[s] = True


@njit(cache=True)
def incremental_rows(metas, sub_ints, sub_floats, tables, assignments, slots, state, scratch, out):
    """Partial makespans of ``B`` rows [reported unit], each against its slot's state, which it updates.

    Args:
        metas, sub_ints, sub_floats: :func:`~doppler_gym.sim.partial_kernel.alloc_subproblem`'s buffers of a
            problem the list kernel serves (``n`` ops, ``D`` devices); the scratch of ``sub_ints`` is written.
        tables: the static tables of the module docstring.
        assignments: ``(B, n) int32`` device of each op, negative for an unplaced one.
        slots: ``(B,) int64`` the slot of each row, in ``[0, S)``; rows of one slot are taken in order.
        state: ``(cache, valid, ends, seg_ptr, seg_ready, seg_end, span)`` (module docstring), updated.
        scratch: ``(n,) float64`` (the whole run's start times, not read).
        out: out ``(B,) float64`` makespans [reported unit], :data:`NOT_INCREMENTAL` for a row the caller runs
            (its slot is then invalid).

    Returns:
        How many rows ran the whole list kernel (the others took one op's update, or nothing changed).
    """
    meta = metas[0]
    cache, valid, ends, _, _, _, span = state
    divisor = sub_floats[meta[Meta.DIVISOR]]
    list_ws = alloc_list_workspace(meta[Meta.N_OPS], meta[Meta.N_DEVICES])
    whole = 0
    for b in range(assignments.shape[0]):
        s = slots[b]
        row = assignments[b]
        w = _changed_op(row, cache[s]) if valid[s] else -2
        if w == -1 or (w >= 0 and _place(s, w, row, state, tables)):
            out[b] = span[s] / divisor
            continue
        whole += 1
        makespan = list_row(metas, sub_ints, sub_floats, row, list_ws, scratch, ends[s])
        if makespan < 0.0:
            valid[s] = False
            out[b] = NOT_INCREMENTAL
            continue
        _rebuild(s, row, state, tables)
        out[b] = makespan
    return whole
