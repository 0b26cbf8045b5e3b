"""Kernels of :class:`~doppler_gym.sim.partial_incremental.IncrementalPartialMakespan`: partial makespans on the
list kernel, each row that adds one op to its slot's last row resumed from that row's run, the others run whole.

Where the list kernel serves the config (one stream, FIFO queues, ideal links:
:func:`~doppler_gym.sim.list_kernel.run_list`), a device serves its ops in *request order*, and requests are
made in the order of (ready time, SimPy's tie rule). Let the placed ops be closed under predecessors and add op
``w``, all of whose inputs are placed and none of whose consumers is: ``w`` changes none of the requests made
before its own, so :func:`~doppler_gym.sim.list_kernel.resume_list` takes the slot's last run up to ``w``'s
request and, unless ``w`` fits an idle stretch of its device (then it only shifts the later requests by one),
runs the rest (the argument is in its docstring), bit for bit the run of the whole row. Any other
row (the first of a slot, a moved op, several new ops, an op whose inputs are not all placed or with a placed
consumer, a last run that left a placed op unrequested) runs whole on the list kernel
(:func:`~doppler_gym.sim.partial_kernel.list_row_in`), in the slot's own workspace, which then holds that run.

Per slot ``s`` (a caller's stream of rows, for example one env) the state is ``cache`` ``(S, n) int32`` the row it
last saw (-1 unplaced), ``valid`` ``(S,) bool`` (it holds that row's run), ``degree`` and ``devices`` ``(S, n)
int32`` the run's in-degrees and devices (``E + 1`` and 0 for an unplaced op, as ``list_row_in`` writes them),
``placed`` and ``requested`` ``(S,) int64`` the placed ops and the requests the run made, ``span`` ``(S,)`` its
makespan [reported unit], and the run's list-kernel workspace
(:func:`~doppler_gym.sim.list_kernel.alloc_list_workspace`) as rows ``s`` of ``ws_state`` ``(S, 5n) int64``,
``ws_scratch`` ``(S, 3n + D + 1) int64`` and ``ws_ftimes`` ``(S, 2n + D) float64``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from doppler_gym.sim.compiled_step import compiled_step
from doppler_gym.sim.list_kernel import requests_made, resume_list
from doppler_gym.sim.packed_layout import Meta, problem_arrays, segment
from doppler_gym.sim.partial_kernel import list_row_in

NOT_INCREMENTAL = -4.0  # a row the list kernel did not serve (bad device, zero duration): the caller's to run


@njit(cache=True)
def predecessors(meta, ints):
    """``(pred_ptr (n+1,), pred_src (E,), pred_slot (E,))`` int64: op ``w``'s inputs at ``pred_ptr[w] : pred_ptr[w +
    1]``, each its producer and the producer's CSR slot of the edge (in CSR order)."""
    n, n_edges = meta[Meta.N_OPS], meta[Meta.N_EDGES]
    succ_ptr = segment(ints, meta, Meta.SUCC_PTR, n + 1)
    succ_dst = segment(ints, meta, Meta.SUCC_DST, n_edges)
    pred_ptr = np.zeros(n + 1, np.int64)
    for k in range(n_edges):
        pred_ptr[succ_dst[k] + 1] += 1
    for w in range(n):
        pred_ptr[w + 1] += pred_ptr[w]
    fill = pred_ptr[:n].copy()
    pred_src = np.empty(n_edges, np.int64)
    pred_slot = np.empty(n_edges, np.int64)
    for u in range(n):
        for k in range(succ_ptr[u], succ_ptr[u + 1]):
            c = succ_dst[k]
            pred_src[fill[c]] = u
            pred_slot[fill[c]] = k
            fill[c] += 1
    return pred_ptr, pred_src, pred_slot


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
def _extends(w, row, n_dev, succ_ptr, succ_dst, preds):
    """Whether newly placed op ``w`` on ``row[w]`` is a sink of the placed ops with all its inputs placed (what
    :func:`~doppler_gym.sim.list_kernel.resume_list` needs), on a device in ``[0, D)``."""
    pred_ptr, pred_src, _ = preds
    fits = row[w] < n_dev
    for j in range(pred_ptr[w], pred_ptr[w + 1]):
        fits &= row[pred_src[j]] >= 0
    for k in range(succ_ptr[w], succ_ptr[w + 1]):
        fits &= row[succ_dst[k]] < 0
    return fits


@compiled_step
def _resume(s, w, row, problem, factors, plain, n_dev, divisor, preds, state):
    """Slot ``s``'s run with op ``w`` added on ``row[w]`` (:func:`~doppler_gym.sim.list_kernel.resume_list`, on
    ``problem``, :func:`~doppler_gym.sim.packed_layout.problem_arrays`' tuple, ``factors``, the ``(comp_factor,
    edge_factor)`` rows, and ``n_dev`` devices); returns the makespan [reported unit], or ``NOT_INCREMENTAL`` (the
    slot then invalid), and whether the later requests ran again (``w`` did not fit an idle stretch of its
    device). Compiled without reference counting (:mod:`doppler_gym.sim.compiled_step`): 64-row calls of the
    vector env took 72 us inlined, 50 us so."""
    cache, valid, degree, devices, placed, requested, span, ws_state, ws_scratch, ws_ftimes = state
    succ_ptr, succ_dst, succ_edge, in_degree, comp, size, inv_speed, pair_latency, pair_inv_bw, comp_row = problem
    ws = (ws_state[s], ws_scratch[s], ws_ftimes[s])
    degree[s, w] = in_degree[w]
    devices[s, w] = row[w]
    cache[s, w] = row[w]
    makespan, drained = resume_list(
        succ_ptr, succ_dst, succ_edge, degree[s], comp, size, inv_speed, pair_latency, pair_inv_bw, comp_row,
        factors[0], factors[1], plain, devices[s], n_dev, preds, w, requested[s], ws,
    )
    if makespan < 0.0:
        valid[s] = False
        return NOT_INCREMENTAL, drained
    placed[s] += 1
    requested[s] = requests_made(ws)
    span[s] = makespan / divisor
    return span[s], drained


@njit(cache=True)
def _run_whole(s, row, meta, ints, floats, state):
    """Slot ``s``'s run of ``row`` from the start (:func:`~doppler_gym.sim.partial_kernel.list_row_in`), kept in
    the slot; returns the makespan [reported unit], or ``NOT_INCREMENTAL`` (the slot then invalid)."""
    cache, valid, degree, devices, placed, requested, span, ws_state, ws_scratch, ws_ftimes = state
    ws = (ws_state[s], ws_scratch[s], ws_ftimes[s])
    none = ws_ftimes[s, 0:0]
    makespan = list_row_in(meta, ints, floats, row, degree[s], devices[s], ws, none, none)
    if makespan < 0.0:
        valid[s] = False
        return NOT_INCREMENTAL
    count = 0
    for o in range(row.shape[0]):
        count += row[o] >= 0
    placed[s] = count
    requested[s] = requests_made(ws) if count > 0 else 0  # nothing placed: list_row_in runs nothing
    span[s] = makespan
    cache[s, :] = row
    valid[s] = True
    return makespan


@njit(cache=True)
def incremental_rows(meta, ints, floats, preds, assignments, slots, state, out):
    """Partial makespans of ``B`` rows [reported unit], each against its slot's state, which it updates.

    Args:
        meta, ints, floats: the packed problem (read-only, as :func:`~doppler_gym.sim.packing.pack` makes it), one
            the list kernel serves (``n`` ops, ``E`` edges, ``D`` devices).
        preds: :func:`predecessors` of the problem.
        assignments: ``(B, n) int32`` device of each op, negative for an unplaced one.
        slots: ``(B,) int64`` the slot of each row, in ``[0, S)``; rows of one slot are taken in order.
        state: ``(cache, valid, degree, devices, placed, requested, span, ws_state, ws_scratch, ws_ftimes)``
            (module docstring), updated.
        out: out ``(B,) float64`` makespans [reported unit], :data:`NOT_INCREMENTAL` for a row the caller runs
            (its slot is then invalid).

    Returns:
        ``(whole, resumed, drained, failed)``: how many rows ran the whole list kernel, how many resumed their slot's
        run (the others repeat their slot's row), how many of those ran the requests after the new op's again, and
        how many rows are negative in ``out`` (the caller's to run); ``(0, 0, 0, -1)``, nothing done, where a slot
        lies outside ``[0, S)``.
    """
    n_slots = state[1].shape[0]
    for b in range(slots.shape[0]):
        if slots[b] < 0 or slots[b] >= n_slots:
            return 0, 0, 0, -1
    cache, valid, _, _, placed, requested, span, _, _, _ = state
    n, n_edges, n_dev = meta[Meta.N_OPS], meta[Meta.N_EDGES], meta[Meta.N_DEVICES]
    problem = problem_arrays(meta, ints, floats)
    succ_ptr, succ_dst = problem[0], problem[1]
    factors = (segment(floats, meta, Meta.COMP_FACTOR_ROW, n), segment(floats, meta, Meta.EDGE_FACTOR_ROW, n_edges))
    plain = meta[Meta.PLAIN] != 0
    divisor = floats[meta[Meta.DIVISOR]]
    whole = 0
    resumed = 0
    drained = 0
    failed = 0
    for b in range(assignments.shape[0]):
        s = slots[b]
        row = assignments[b]
        w = _changed_op(row, cache[s]) if valid[s] else -2
        if w == -1:
            out[b] = span[s]
        elif (w >= 0 and requested[s] == placed[s]  # the last run requested every placed op
              and _extends(w, row, n_dev, succ_ptr, succ_dst, preds)):
            resumed += 1
            out[b], again = _resume(s, w, row, problem, factors, plain, n_dev, divisor, preds, state)
            drained += again
        else:
            whole += 1
            out[b] = _run_whole(s, row, meta, ints, floats, state)
        failed += out[b] < 0.0
    return whole, resumed, drained, failed
