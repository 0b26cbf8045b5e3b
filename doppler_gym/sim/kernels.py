"""Numba event loop of the work-conserving runtime, over plain arrays (no gym, no torch).

:func:`run_packed` and :func:`run_many` hand the models without contention (one stream per device,
FIFO queues, ideal point-to-point links; :meth:`SimConfig.reference` among them) to the exact list
kernel of :mod:`doppler_gym.sim.list_kernel`, about twice as fast; the event loop :func:`run`
simulates every model, and is the fallback for ops of zero duration.

Semantics follow SimPy, so that :meth:`SimConfig.reference` reproduces the DOPPLER authors'
SimPy simulator exactly, same-time event order included. SimPy processes events by
``(time, priority, event id)`` and an event scheduled with zero delay lands after every event
already due now. So within one timestamp, processing is breadth-first in *waves*: wave 0 are
the future events that fall due now (heap order), wave ``k+1`` the zero-delay events that wave
``k`` scheduled, in scheduling order. The loop keeps

* a binary heap of future events keyed by ``(time, key)``, and
* a FIFO of zero-delay events, processed after the heap's events at ``now``.

The SimPy processes of an op ``o`` on device ``d`` and of an edge ``e`` give this chain:
``INPUTS_READY(o)`` (its AllOf fired): request a stream of ``d``; a grant *starts* ``o`` ->
after its compute time ``COMPUTED(o)``: the stream is freed at once, then the device's release
(grants the next waiting op) and ``o``'s finish event follow as two adjacent zero-delay events
(fused here as ``RELEASE_FINISH``); the finish starts one transfer per out-edge in edge-id order;
``ARRIVED(e)`` after the transfer time (0 on one device), then ``DELIVERED(e)``, whose last one
for a consumer fires the consumer's ``INPUTS_READY``.

Events whose only effects are invisible to the events processed before them run *virtually*
(at scheduling time, with the FIFO position they would have had): the start of an op (its
only effect is a heap push, keyed by that position), and each transfer's arrival and delivery
except the consumer's last one (they only count down). Every FIFO event carries its *virtual
position* ``v``: SimPy's processing order. Heap keys are ``v * 2**31 + 2**30 + j`` for the
``j``-th push of the event at ``v``, and ``p * 2**31 + c`` for the ``c``-th push of a wave-0 event,
where ``p`` is the virtual position count when ``now`` advanced: exactly SimPy's event-id order.

A FIFO entry is one int64: ``v << 32 | index << 3 | kind``.

Speed notes (each measured; see ``benchmarks/bench_sim.py``): array indices in the loop are cast
to unsigned (``U(i)``) so that Numba emits no negative-index wraparound per access; events are
handled by small handlers inlined into the loop (``inline="always"``) where that leaves its time
unchanged, and written out in the loop where a helper made it slower (the heap's sift-up and pop,
the finish event, ``HOP_DONE``, the priority grants: each says so); an event appends its heap
pushes and the top of the loop sifts them up in push order (the heap that pushing them one by one
gives); the FIFO restarts at index 0 whenever the clock advances (it is empty then); single calls
go through :func:`run_packed` (five arguments, device range checked inside) and leave times
undivided for :class:`~doppler_gym.sim.trace.Trace` to divide lazily.
"""

from __future__ import annotations

import contextlib
import hashlib
from enum import IntEnum
from pathlib import Path

import numpy as np
from numba import njit, prange

from doppler_gym.sim import list_kernel
from doppler_gym.sim.list_kernel import alloc_list_workspace, run_list

INPUTS_READY = 0
STARTED = 1  # only for ops of zero duration; others start virtually
COMPUTED = 2
RELEASE_FINISH = 3
ARRIVED = 4
DELIVERED = 5
HOP_DONE = 6
ARRIVED_GROUP = 7  # all transfers of one producer that arrive at the same time (ideal links)

WAVE = np.int64(1) << 31  # heap-key stride per virtual FIFO position
FIFO_PUSH = np.int64(1) << 30  # offset of pushes made by FIFO events within a stride


class Meta(IntEnum):
    """Slots of a packed problem's ``meta`` array, ``(len(Meta),) int64``: sizes and flags, then
    the offset of each array packed into ``ints`` (int32) and ``floats`` (float64).

    :func:`doppler_gym.sim.packing.pack` writes them; the kernels read them (Numba folds a member
    to its value: ``meta[Meta.N_OPS]`` compiles as ``meta[0]``). Shapes: ``n`` ops, ``E`` edges,
    ``D`` devices, pairs ``a * D + b`` of devices, ``H`` links over all routes.
    """

    # sizes and flags (a flag is 0 or 1)
    N_OPS = 0
    N_EDGES = 1
    N_DEVICES = 2
    STREAMS = 3  # ops a device runs at once
    MAX_HOPS = 4  # links on the longest route
    LINK_FIFO = 5  # link_model "fifo": each link carries one transfer at a time, hop by hop
    PRIORITY_QUEUES = 6  # 1: queue_order "priority", device queues ordered by the PRIORITY_ROW; 2: "fixed", the
    # PRIORITY_ROW holds each op's rank on its device (0, 1, ...) and a device starts only its next rank
    EDGE_TIMES = 7  # the EDGE_FACTOR_ROW holds each edge's transfer time, same-device ones too (teccl)
    LIST_KERNEL = 8  # the list kernel applies: one stream, FIFO queues, ideal p2p links, every op with work
    PLAIN = 9  # no jitter, and one latency and one 1/bandwidth for every pair of distinct devices
    EXACT_DEVICES = 10  # run_packed: the assignment must use device N_DEVICES - 1 (topology=None)
    # offsets into ints
    SUCC_PTR = 11  # (n+1,) CSR out-edges by producer (SimPy's transfer order)
    SUCC_DST = 12  # (E,) consumer of each CSR slot
    SUCC_EDGE = 13  # (E,) edge id of each CSR slot
    SRC = 14  # (E,) producer of each edge
    DST = 15  # (E,) consumer of each edge
    IN_DEGREE = 16  # (n,) inputs of each op
    ROUTE_PTR = 17  # (D*D+1,) CSR routes by device pair
    ROUTE_LINK = 18  # (H,) links of each route, in order (link a -> b is a * D + b)
    # offsets into floats
    COMP = 19  # (n,) work of each op [FLOP, or time units with raw costs]
    SIZE = 20  # (n,) output size of each op [B, or time units with raw costs]
    INV_SPEED = 21  # (D,) 1 / device speed [s/FLOP]
    LATENCY = 22  # (D*D,) link latency [s]
    BANDWIDTH = 23  # (D*D,) link bandwidth [B/s] (inf where there is no link)
    PAIR_LATENCY = 24  # (D*D,) summed hop latencies of the route [s]
    PAIR_INV_BW = 25  # (D*D,) summed 1 / bandwidth of the route [s/B]
    DIVISOR = 26  # (1,) time divisor: internal units per reported unit
    PRIORITY_ROW = 27  # (n,) run_packed's device-queue priorities (zeros by default)
    COMP_FACTOR_ROW = 28  # (n,) run_packed's compute-time multipliers (ones by default)
    EDGE_FACTOR_ROW = 29  # (E,) run_packed's transfer-time multipliers (ones), or times with EDGE_TIMES
    # stragglers (doppler_gym.sim.stragglers): resource r is device r < D or link r - D; R = D + D*D
    STRAGGLERS = 30  # flag: some device or link has a slowdown (the event loop integrates over its profile)
    STRAG_PTR = 31  # offset into ints: (R+1,) CSR segments of each resource's speed profile (empty without)
    STRAG_PAIR = 32  # offset into ints: (D*D,) 1 where the route of the pair crosses a slowed link
    STRAG_SEG = 33  # offset into floats: (3K,) segment starts, ends [internal time], speed factors


# ---------------------------------------------------------------- binary heaps on flat arrays
@njit(cache=True, inline="always")
def _less(t1, s1, t2, s2):
    # Bitwise, not short-circuit: compiles to flag arithmetic instead of unpredictable branches.
    return (t1 < t2) | ((t1 == t2) & (s1 < s2))


U = np.uint64  # U(i): an index known to be >= 0 (no wraparound code)
_U0 = np.uint64(0)
_U1 = np.uint64(1)


# Heap indices are unsigned: Numba then skips the negative-index wraparound on every access.
@njit(cache=True, inline="always")
def _heap_push(h_time, h_key, h_code, base, size, t, key, code):
    """Insert ``(t, key) -> code`` into the heap at ``h_*[base:base+size]``."""
    b = np.uint64(base)
    i = np.uint64(size)
    while i != _U0:
        parent = (i - _U1) >> _U1
        p = b + parent
        if _less(t, key, h_time[p], h_key[p]):
            q = b + i
            h_time[q] = h_time[p]
            h_key[q] = h_key[p]
            h_code[q] = h_code[p]
            i = parent
        else:
            break
    q = b + i
    h_time[q] = t
    h_key[q] = key
    h_code[q] = code


@njit(cache=True, inline="always")
def _heap_pop(h_time, h_key, h_code, base, size):
    """Remove the smallest entry of the heap at ``base`` (``size`` entries); returns its code."""
    b = np.uint64(base)
    top = h_code[b]
    m = np.uint64(size - 1)
    q = b + m
    t = h_time[q]
    key = h_key[q]
    code = h_code[q]
    i = _U0
    while True:
        child = i + i + _U1
        if child >= m:
            break
        c = b + child
        if child + _U1 < m:
            right = U(_less(h_time[c + _U1], h_key[c + _U1], h_time[c], h_key[c]))  # branch-free
            c += right
            child += right
        if _less(h_time[c], h_key[c], t, key):
            q = b + i
            h_time[q] = h_time[c]
            h_key[q] = h_key[c]
            h_code[q] = h_code[c]
            i = child
        else:
            break
    if m != _U0:
        q = b + i
        h_time[q] = t
        h_key[q] = key
        h_code[q] = code
    return top


@njit(cache=True)
def value_range(values):
    """``(min, max)`` of a 1-D integer array in one pass (``(0, -1)`` when empty)."""
    if values.shape[0] == 0:
        return 0, -1
    low = values[0]
    high = values[0]
    for x in values:
        if x < low:
            low = x
        elif x > high:
            high = x
    return low, high


# ---------------------------------------------------------------- workspace
@njit(cache=True)
def alloc_workspace(meta):
    """Scratch arrays for :func:`run`; reusable across runs of the same packed problem.

    Two allocations (one 8-byte, one 4-byte buffer) carved into views: an allocation costs
    about as much as simulating a few ops of a paper graph.
    """
    n, n_edges, n_dev = meta[Meta.N_OPS], meta[Meta.N_EDGES], meta[Meta.N_DEVICES]
    n_links = n_dev * n_dev
    hops = meta[Meta.MAX_HOPS]
    n_fifo = 4 * n + (2 + hops) * n_edges + 1
    n_heap = n + n_edges + 1
    n_lq = max(1, n_edges * hops)
    w64 = np.empty(n_fifo + 3 * n_heap + 3 * n, np.int64)
    w32 = np.empty(4 * n_dev + 4 * n_links + 1 + n_lq + n_edges + n, np.int32)
    o = 0
    fifo = w64[o : o + n_fifo]
    o += n_fifo
    heap_time = w64[o : o + n_heap].view(np.float64)
    o += n_heap
    heap_key = w64[o : o + n_heap]
    o += n_heap
    heap_code = w64[o : o + n_heap]
    o += n_heap
    q_key = w64[o : o + n].view(np.float64)  # device queues: priority
    o += n
    q_seq = w64[o : o + n]  # device queues: request order
    o += n
    q_op = w64[o : o + n]
    o = 0
    dev_i32 = w32[o : o + 4 * n_dev]  # q_base, q_head, q_len, free_streams
    o += 4 * n_dev
    link_i32 = w32[o : o + 4 * n_links + 1]  # l_base (n_links+1), l_head, l_tail, l_busy
    o += 4 * n_links + 1
    l_queue = w32[o : o + n_lq]
    o += n_lq
    edge_i32 = w32[o : o + n_edges]  # current hop of each transfer
    o += n_edges
    missing = w32[o : o + n]
    return (fifo, heap_time, heap_key, heap_code, q_key, q_seq, q_op, dev_i32, link_i32, l_queue, edge_i32, missing)


@njit(cache=True, inline="always")
def _segment(values, meta, slot, length):
    """``values[meta[slot] : meta[slot] + length]``: one of the arrays packed into ``ints``/``floats``."""
    o = meta[slot]
    return values[o : o + length]


@njit(cache=True)
def problem_arrays(meta, ints, floats):
    """The packed problem's graph, op and device-pair arrays, in the order of the first arguments of
    :func:`~doppler_gym.sim.list_kernel.run_list` (:func:`run` reads them too)."""
    n, n_edges, n_pairs = meta[Meta.N_OPS], meta[Meta.N_EDGES], meta[Meta.N_DEVICES] * meta[Meta.N_DEVICES]
    succ_ptr = _segment(ints, meta, Meta.SUCC_PTR, n + 1)
    succ_dst = _segment(ints, meta, Meta.SUCC_DST, n_edges)
    succ_edge = _segment(ints, meta, Meta.SUCC_EDGE, n_edges)
    in_degree = _segment(ints, meta, Meta.IN_DEGREE, n)
    comp = _segment(floats, meta, Meta.COMP, n)
    size = _segment(floats, meta, Meta.SIZE, n)
    inv_speed = _segment(floats, meta, Meta.INV_SPEED, meta[Meta.N_DEVICES])
    pair_latency = _segment(floats, meta, Meta.PAIR_LATENCY, n_pairs)
    pair_inv_bw = _segment(floats, meta, Meta.PAIR_INV_BW, n_pairs)
    return succ_ptr, succ_dst, succ_edge, in_degree, comp, size, inv_speed, pair_latency, pair_inv_bw


# ---------------------------------------------------------------- stragglers: piecewise-constant speeds
@njit(cache=True)
def straggler_arrays(meta, ints, floats):
    """``(ptr (R+1,), pair (D*D,), seg (3K,))`` of the packed straggler profiles (empty arrays when
    ``meta[Meta.STRAGGLERS]`` is 0); shapes and units at :class:`Meta`."""
    n_dev = meta[Meta.N_DEVICES]
    on = meta[Meta.STRAGGLERS] != 0
    ptr = _segment(ints, meta, Meta.STRAG_PTR, n_dev + n_dev * n_dev + 1 if on else 0)
    pair = _segment(ints, meta, Meta.STRAG_PAIR, n_dev * n_dev if on else 0)
    seg = _segment(floats, meta, Meta.STRAG_SEG, 3 * ptr[n_dev + n_dev * n_dev] if on else 0)
    return ptr, pair, seg


@njit(cache=True)
def _advance(s_ptr, s_seg, r, t, w):
    """When work ``w`` (its time at full speed) started at ``t`` on resource ``r`` ends: the ``T``
    with ``integral_t^T speed_r = w``, over the segments of ``r`` (sorted, disjoint; full speed
    between them). ``t + w`` exactly when no segment starts before ``t + w``. Not inlined: the event
    loop calls it only with stragglers, and five inlined copies of its loop slowed runs without them."""
    n_seg = s_seg.shape[0] // 3
    if w == 0.0:
        return t
    for k in range(s_ptr[U(r)], s_ptr[U(r + 1)]):
        e = s_seg[U(n_seg + k)]
        if e <= t:
            continue
        s = s_seg[U(k)]
        if s > t:  # full speed until the segment starts
            if w <= s - t:
                return t + w
            w -= s - t
            t = s
        f = s_seg[U(2 * n_seg + k)]
        cap = (e - t) * f  # work done by the segment's end
        if w <= cap:
            return t + w / f
        w -= cap
        t = e
    return t + w


@njit(cache=True, inline="always")
def _hop_end(ln, n_dev, now, nbytes, factor, link_latency, link_bandwidth, strag, s_ptr, s_seg):
    """When a hop over link ``ln`` that starts ``now`` with ``nbytes`` (time multiplier ``factor``)
    is done: ``now + (latency + nbytes / bandwidth) * factor``; on a slowed link its bytes serialise
    over the link's profile and arrive ``latency * factor`` later."""
    if strag and s_ptr[U(n_dev + ln + 1)] > s_ptr[U(n_dev + ln)]:
        return _advance(s_ptr, s_seg, n_dev + ln, now, nbytes / link_bandwidth[U(ln)] * factor) + (
            link_latency[U(ln)] * factor
        )
    return now + (link_latency[U(ln)] + nbytes / link_bandwidth[U(ln)]) * factor


@njit(cache=True)
def _route_end(p, n_dev, t, nbytes, factor, route_ptr, route_link, link_latency, link_bandwidth, s_ptr, s_seg):
    """When a transfer over the route of pair ``p`` that leaves at ``t`` arrives, with ideal links:
    its hops one after another (store-and-forward), each by :func:`_hop_end`."""
    for h in range(route_ptr[U(p)], route_ptr[U(p + 1)]):
        t = _hop_end(route_link[U(h)], n_dev, t, nbytes, factor, link_latency, link_bandwidth, True, s_ptr, s_seg)
    return t


# ---------------------------------------------------------------- event handlers of the event loop
# Each handles one event (or one step of one) of :func:`run` at time ``now`` and returns the loop
# counters it moved: ``f_tail`` (end of the FIFO), ``v_next`` (next virtual FIFO position), ``h_size``
# (heap entries; new ones are appended, and the top of the loop sifts them up in push order).
# Inlined into the loop, these leave its time unchanged (within the noise of interleaved runs).


@njit(cache=True, inline="always")
def _push(h_time, h_key, h_code, h_size, t, key, code):
    """Append ``(t, key) -> code`` to the heap arrays (sifted up at the top of :func:`run`'s loop);
    returns the new size."""
    h_time[U(h_size)] = t
    h_key[U(h_size)] = key
    h_code[U(h_size)] = code
    return h_size + 1


@njit(cache=True, inline="always")
def _start_op(
    g, d, now, comp, inv_speed, comp_factor, start, fifo, f_tail, v_next, h_time, h_key, h_code, h_size, strag, s_ptr,
    s_seg,
):
    """Op ``g`` got a stream of device ``d``: start it virtually (its only effect is scheduling its
    ``COMPUTED``, keyed by ``v_next``), except an op of zero duration, whose ``STARTED`` stays a real
    zero-delay event; with stragglers (``strag``) its work runs over ``d``'s speed profile.
    Returns ``(f_tail, v_next, h_size)``."""
    w = comp[U(g)] * inv_speed[U(d)] * comp_factor[U(g)]
    t = _advance(s_ptr, s_seg, d, now, w) if strag else now + w
    if t == now:
        fifo[U(f_tail)] = (v_next << 32) | (g << 3) | STARTED
        f_tail += 1
    else:
        start[U(g)] = now
        h_size = _push(h_time, h_key, h_code, h_size, t, v_next * WAVE + FIFO_PUSH, (g << 3) | COMPUTED)
    return f_tail, v_next + 1, h_size


@njit(cache=True, inline="always")
def _send_hop(
    e, ln, now, key, nbytes, link_latency, link_bandwidth, edge_factor, h_time, h_key, h_code, h_size, n_dev, strag,
    s_ptr, s_seg,
):
    """Transfer ``e`` (``nbytes``) takes link ``ln`` now: its ``HOP_DONE`` is due after the link's
    latency and ``nbytes`` / bandwidth (:func:`_hop_end`). Returns ``h_size``."""
    t = _hop_end(ln, n_dev, now, nbytes, edge_factor[U(e)], link_latency, link_bandwidth, strag, s_ptr, s_seg)
    return _push(h_time, h_key, h_code, h_size, t, key, (e << 3) | HOP_DONE)


@njit(cache=True, inline="always")
def _on_computed(o, now, assignment, end, free_streams, fifo, f_tail, v_next):
    """Op ``o`` is computed: its stream is free at once; the device's release (which grants the next
    waiting op) and ``o``'s finish follow as two adjacent zero-delay events, one ``RELEASE_FINISH``
    entry. Returns ``(f_tail, v_next)``."""
    end[U(o)] = now
    free_streams[U(assignment[U(o)])] += 1
    fifo[U(f_tail)] = (v_next << 32) | (o << 3) | RELEASE_FINISH
    return f_tail + 1, v_next + 2  # the release and the finish event


@njit(cache=True, inline="always")
def _on_arrived_group(
    k0, now, n_dev, given_times, assignment, succ_ptr, succ_edge, edge_src, edge_dst, end, size, pair_latency,
    pair_inv_bw, edge_factor, edge_end, missing, fifo, f_tail, v_next, strag, s_pair, route_ptr, route_link,
    link_latency, link_bandwidth, s_ptr, s_seg,
):
    """The transfers of one producer from CSR slot ``k0`` on that arrive now. Same-time arrivals pushed
    by one finish event are adjacent in SimPy's order (consecutive keys), so they are processed here
    in edge order; a consumer's last input queues its ``DELIVERED``. Returns ``(f_tail, v_next)``."""
    u = edge_src[U(succ_edge[U(k0)])]
    a = assignment[U(u)]
    for k in range(k0, succ_ptr[U(u + 1)]):
        e = succ_edge[U(k)]
        c = edge_dst[U(e)]
        b = assignment[U(c)]
        if a == b and not (given_times and edge_factor[U(e)] > 0.0):
            continue
        p = a * n_dev + b
        if given_times:
            t = end[U(u)] + edge_factor[U(e)]
        elif strag and s_pair[U(p)] != 0:  # as the finish event timed it
            t = _route_end(p, n_dev, end[U(u)], size[U(u)], edge_factor[U(e)], route_ptr, route_link, link_latency,
                           link_bandwidth, s_ptr, s_seg)
        else:
            t = end[U(u)] + (pair_latency[U(p)] + size[U(u)] * pair_inv_bw[U(p)]) * edge_factor[U(e)]
        if t == now:
            f_tail, v_next = _on_arrived(e, now, edge_dst, edge_end, missing, fifo, f_tail, v_next)
    return f_tail, v_next


@njit(cache=True, inline="always")
def _on_arrived(e, now, edge_dst, edge_end, missing, fifo, f_tail, v_next):
    """Transfer ``e`` arrived: a consumer's last input queues its ``DELIVERED``. Returns ``(f_tail, v_next)``."""
    edge_end[U(e)] = now
    c = edge_dst[U(e)]
    missing[U(c)] -= 1
    if missing[U(c)] == 0:
        fifo[U(f_tail)] = (v_next << 32) | (e << 3) | DELIVERED
        f_tail += 1
        v_next += 1
    return f_tail, v_next


@njit(cache=True, inline="always")
def _on_delivered(e, edge_dst, fifo, f_tail, v_next):
    """The last input of ``e``'s consumer was delivered: its ``INPUTS_READY`` follows. Returns ``(f_tail, v_next)``."""
    fifo[U(f_tail)] = (v_next << 32) | (edge_dst[U(e)] << 3) | INPUTS_READY
    return f_tail + 1, v_next + 1


@njit(cache=True, inline="always")
def _on_started(o, now, start, fifo, f_tail, v_next):
    """Op ``o`` of zero duration started: its ``COMPUTED`` follows. Returns ``(f_tail, v_next)``."""
    start[U(o)] = now
    fifo[U(f_tail)] = (v_next << 32) | (o << 3) | COMPUTED
    return f_tail + 1, v_next + 1


# ---------------------------------------------------------------- the event loop
@njit(cache=True)
def run(meta, ints, floats, priority, comp_factor, edge_factor, assignment, times, ws):
    """Simulate one assignment of a packed problem (arguments and result: :func:`_event_loop`).

    Two compiled copies of the event loop: one for runs with stragglers, and one in which the
    straggler code is a constant-false branch that the compiler removes, so that runs without
    stragglers execute the loop they had before (the loop's speed is sensitive to its code size)."""
    if meta[Meta.STRAGGLERS] != 0:
        return _run_stragglers(meta, ints, floats, priority, comp_factor, edge_factor, assignment, times, ws)
    return _run_steady(meta, ints, floats, priority, comp_factor, edge_factor, assignment, times, ws)


@njit(cache=True)
def _run_steady(meta, ints, floats, priority, comp_factor, edge_factor, assignment, times, ws):
    return _event_loop(meta, ints, floats, priority, comp_factor, edge_factor, assignment, times, ws, False)


@njit(cache=True)
def _run_stragglers(meta, ints, floats, priority, comp_factor, edge_factor, assignment, times, ws):
    return _event_loop(meta, ints, floats, priority, comp_factor, edge_factor, assignment, times, ws, True)


@njit(cache=True, inline="always")
def _event_loop(meta, ints, floats, priority, comp_factor, edge_factor, assignment, times, ws, strag):
    """Simulate one assignment of a packed problem.

    Args:
        meta: ``(len(Meta),) int64`` sizes, flags and offsets into ``ints``/``floats``.
        ints: ``int32`` CSR out-edges, edge endpoints, in-degrees, route tables.
        floats: ``float64`` op costs, output sizes, device speeds, link latency/bandwidth.
        priority: ``(n,) float64`` device-queue priorities (lower first; used in priority mode); in fixed
            mode each op's rank on its device (``0, 1, ...``, :mod:`doppler_gym.sim.fixed_order`).
        comp_factor: ``(n,) float64`` multipliers of compute times (jitter; ones without).
        edge_factor: ``(E,) float64`` multipliers of transfer times; with ``meta[Meta.EDGE_TIMES]``
            the transfer time of each edge itself (internal units, jitter included), read in place
            of the route tables (ideal links only); in that mode a same-device edge with a positive
            time waits for it too (a collective op's output, :mod:`doppler_gym.sim.multicast`).
        assignment: ``(n,) int32`` device of each op, validated to lie in ``[0, D)``.
        times: out ``(2n + 2E,) float64``: op start, op end, edge transfer start (NaN when
            nothing moves), edge arrival; in internal units (not divided by the time divisor:
            batches keep makespans only, and :class:`~doppler_gym.sim.trace.Trace` divides lazily).
        ws: workspace from :func:`alloc_workspace`.
        strag: ``meta[Meta.STRAGGLERS] != 0``, passed as a constant by :func:`run`'s two copies.

    With ``meta[Meta.STRAGGLERS]`` an op's end and each hop's end integrate their work over the
    device's or link's piecewise-constant speed profile (:func:`_advance`, :func:`_hop_end`,
    :mod:`doppler_gym.sim.stragglers`); without, the times are the formulas above, unchanged.

    Returns:
        The makespan (largest op end), divided by the time divisor; ``-2.0`` in fixed mode when the
        order deadlocks (a device's next op can never become ready).
    """
    n, n_edges, n_dev = meta[Meta.N_OPS], meta[Meta.N_EDGES], meta[Meta.N_DEVICES]
    n_links = n_dev * n_dev
    link_fifo = meta[Meta.LINK_FIFO] != 0
    given_times = meta[Meta.EDGE_TIMES] != 0
    use_priority = meta[Meta.PRIORITY_QUEUES] != 0
    succ_ptr, _, succ_edge, in_degree, comp, size, inv_speed, pair_latency, pair_inv_bw = problem_arrays(
        meta, ints, floats
    )  # pair_latency: the route's summed hop latencies [s]; pair_inv_bw: its summed 1 / bandwidth [s/B]
    edge_src = _segment(ints, meta, Meta.SRC, n_edges)
    edge_dst = _segment(ints, meta, Meta.DST, n_edges)
    route_ptr = _segment(ints, meta, Meta.ROUTE_PTR, n_links + 1)
    route_link = ints[meta[Meta.ROUTE_LINK] :]
    link_latency = _segment(floats, meta, Meta.LATENCY, n_links)
    link_bandwidth = _segment(floats, meta, Meta.BANDWIDTH, n_links)
    divisor = floats[meta[Meta.DIVISOR]]
    # strag: a compile-time constant (run's two copies): integrate over the speed profiles of slowed devices and
    # links (empty arrays without)
    s_ptr, s_pair, s_seg = straggler_arrays(meta, ints, floats)

    fifo, h_time, h_key, h_code, q_key, q_seq, q_op, dev_i32, link_i32, l_queue, edge_hop, missing = ws
    start = times[0:n]
    end = times[n : 2 * n]
    edge_start = times[2 * n : 2 * n + n_edges]
    edge_end = times[2 * n + n_edges : 2 * n + 2 * n_edges]

    # Device queues: op o waits at most once, in its device's segment of q_*.
    q_base = dev_i32[0:n_dev]
    q_head = dev_i32[n_dev : 2 * n_dev]  # FIFO mode: consumed entries; priority/fixed modes: ops started
    q_len = dev_i32[2 * n_dev : 3 * n_dev]  # FIFO mode: appended; priority mode: heap size
    free_streams = dev_i32[3 * n_dev : 4 * n_dev]
    q_len[:] = 0
    for o in range(n):
        q_len[assignment[o]] += 1
    acc = 0
    for d in range(n_dev):
        q_base[d] = acc
        acc += q_len[d]
        q_len[d] = 0
        q_head[d] = 0
        free_streams[d] = meta[Meta.STREAMS]

    # Link queues (fifo link model): each transfer waits at most once per hop of its route.
    l_base = link_i32[0 : n_links + 1]
    l_head = link_i32[n_links + 1 : 2 * n_links + 1]
    l_tail = link_i32[2 * n_links + 1 : 3 * n_links + 1]
    l_busy = link_i32[3 * n_links + 1 : 4 * n_links + 1]
    if link_fifo:
        l_base[:] = 0
        for e in range(n_edges):
            a = assignment[edge_src[e]]
            b = assignment[edge_dst[e]]
            if a != b:
                p = a * n_dev + b
                for h in range(route_ptr[p], route_ptr[p + 1]):
                    l_base[route_link[h] + 1] += 1
        for ln in range(n_links):
            l_base[ln + 1] += l_base[ln]
            l_head[ln] = 0
            l_tail[ln] = 0
            l_busy[ln] = 0

    f_head = 0
    f_tail = 0
    v_next = 0  # next virtual FIFO position
    for o in range(n):
        missing[o] = in_degree[o]
        end[o] = 0.0
        if in_degree[o] == 0:
            fifo[f_tail] = (v_next << 32) | (o << 3) | INPUTS_READY
            f_tail += 1
            v_next += 1
    for e in range(n_edges):
        edge_start[e] = np.nan
        edge_end[e] = np.nan

    h_size = 0
    now = 0.0
    wave0_next = 0  # heap key of the next push by a wave-0 event at `now`
    grants_pending = False  # priority mode: some device may have a free stream and waiting ops
    makespan = 0.0
    h_sorted = 0  # h_*[:h_sorted] is a heap; the entries after it were appended by the last event
    while True:
        # Sift up the entries the last event appended, in push order: exactly the heap that
        # pushing them one by one gives (a sift-up only moves the entry's ancestors). Written out: through
        # _heap_push, with the pop below through _heap_pop, the event loop took 10-20% longer.
        while h_sorted < h_size:
            hi = U(h_sorted)
            t = h_time[hi]
            key = h_key[hi]
            code = h_code[hi]
            while hi != _U0:
                parent = (hi - _U1) >> _U1
                if _less(t, key, h_time[parent], h_key[parent]):
                    h_time[hi] = h_time[parent]
                    h_key[hi] = h_key[parent]
                    h_code[hi] = h_code[parent]
                    hi = parent
                else:
                    break
            h_time[hi] = t
            h_key[hi] = key
            h_code[hi] = code
            h_sorted += 1
        if f_head < f_tail and (h_size == 0 or h_time[0] != now):
            code = fifo[U(f_head)]
            f_head += 1
            push_key = (code >> 32) * WAVE + FIFO_PUSH
        else:
            if h_size == 0 or h_time[0] != now:  # nothing is due now
                if grants_pending:
                    # Priority mode: every event due now is done; fill free streams, lowest value first.
                    grants_pending = False
                    for d in range(n_dev):
                        while free_streams[U(d)] > 0 and q_len[U(d)] > 0:
                            if meta[Meta.PRIORITY_QUEUES] == 2 and q_key[U(q_base[U(d)])] != q_head[U(d)]:
                                break  # fixed order (ranks as priorities): the device's next op is not ready, it waits
                            g = _heap_pop(q_key, q_seq, q_op, q_base[U(d)], q_len[U(d)])
                            q_head[U(d)] += 1
                            q_len[U(d)] -= 1
                            free_streams[U(d)] -= 1
                            # Start g as _start_op does, written out: through it, priority runs took 15-60% longer.
                            w = comp[U(g)] * inv_speed[U(d)] * comp_factor[U(g)]
                            t = _advance(s_ptr, s_seg, d, now, w) if strag else now + w
                            if t == now:
                                fifo[U(f_tail)] = (v_next << 32) | (g << 3) | STARTED
                                f_tail += 1
                            else:
                                start[U(g)] = now
                                h_time[U(h_size)] = t
                                h_key[U(h_size)] = v_next * WAVE + FIFO_PUSH
                                h_code[U(h_size)] = (g << 3) | COMPUTED
                                h_size += 1
                            v_next += 1
                    continue
                if h_size == 0:
                    break
                now = h_time[0]  # advance the clock to the next future event and process it
                f_head = 0  # the FIFO is empty here: reuse its start (it stays in cache on big graphs)
                f_tail = 0
                wave0_next = v_next * WAVE
            # Pop the heap's smallest entry (written out, as the sift-up above).
            code = h_code[0]
            h_size -= 1
            h_sorted = h_size
            m = U(h_size)
            t = h_time[m]
            key = h_key[m]
            last = h_code[m]
            hi = _U0
            while True:
                child = hi + hi + _U1
                if child >= m:
                    break
                if child + _U1 < m:
                    child += U(_less(h_time[child + _U1], h_key[child + _U1], h_time[child], h_key[child]))
                if _less(h_time[child], h_key[child], t, key):
                    h_time[hi] = h_time[child]
                    h_key[hi] = h_key[child]
                    h_code[hi] = h_code[child]
                    hi = child
                else:
                    break
            if m != _U0:
                h_time[hi] = t
                h_key[hi] = key
                h_code[hi] = last
            push_key = wave0_next
        kind = code & 7
        idx = (code >> 3) & 0x1FFFFFFF

        if kind == INPUTS_READY or kind == RELEASE_FINISH:  # noqa: SIM109  (two integer compares in Numba)
            d = assignment[U(idx)]
            if kind == INPUTS_READY:  # request a stream of d: join its queue
                if use_priority:
                    _heap_push(q_key, q_seq, q_op, q_base[U(d)], q_len[U(d)], priority[U(idx)], code >> 32, idx)
                else:
                    q_op[U(q_base[U(d)] + q_len[U(d)])] = idx
                q_len[U(d)] += 1
            if use_priority:
                grants_pending = True  # granted by priority once the instant's events are done
            elif free_streams[U(d)] > 0 and q_len[U(d)] > q_head[U(d)]:
                # Grant the oldest waiting op (SimPy's Resource._trigger_put).
                g = q_op[U(q_base[U(d)] + q_head[U(d)])]
                q_head[U(d)] += 1
                free_streams[U(d)] -= 1
                f_tail, v_next, h_size = _start_op(
                    g, d, now, comp, inv_speed, comp_factor, start, fifo, f_tail, v_next, h_time, h_key, h_code, h_size,
                    strag, s_ptr, s_seg,
                )
            if kind == RELEASE_FINISH:
                # The finish event sits right after the release, at virtual position v + 1: one transfer per
                # out-edge in CSR order (SimPy's). Zero-delay arrivals count down at once (a consumer's last
                # one is a real ARRIVED); delayed ones of one arrival time form one ARRIVED_GROUP entry; with
                # FIFO links each transfer queues for its first hop. Written out here, not as a handler: that
                # needs 33 arguments, and CPython passes over 30 as one *args tuple, which Numba does not
                # inline (grouping the arrays into tuples made the event loop 10-100% slower).
                push_key += WAVE
                a = assignment[U(idx)]
                j = 0
                group_k = -1
                group_t = 0.0
                for k in range(succ_ptr[U(idx)], succ_ptr[U(idx + 1)]):
                    e = succ_edge[U(k)]
                    c = edge_dst[U(e)]
                    b = assignment[U(c)]
                    if a == b and not (given_times and edge_factor[U(e)] > 0.0):
                        t = now
                    else:
                        p = a * n_dev + b
                        edge_start[U(e)] = now
                        if link_fifo:
                            ln = route_link[U(route_ptr[U(p)])]
                            edge_hop[U(e)] = 0
                            if l_busy[U(ln)]:
                                edge_start[U(e)] = np.nan
                                l_queue[U(l_base[U(ln)] + l_tail[U(ln)])] = e
                                l_tail[U(ln)] += 1
                            else:
                                l_busy[U(ln)] = 1
                                h_size = _send_hop(e, ln, now, push_key + j, size[U(idx)], link_latency, link_bandwidth,
                                                   edge_factor, h_time, h_key, h_code, h_size, n_dev, strag, s_ptr,
                                                   s_seg)
                                j += 1
                            continue
                        elif given_times:
                            t = now + edge_factor[U(e)]
                        elif strag and s_pair[U(p)] != 0:  # the route crosses a slowed link
                            t = _route_end(p, n_dev, now, size[U(idx)], edge_factor[U(e)], route_ptr, route_link,
                                           link_latency, link_bandwidth, s_ptr, s_seg)
                        else:
                            t = now + (pair_latency[U(p)] + size[U(idx)] * pair_inv_bw[U(p)]) * edge_factor[U(e)]
                    if t == now:
                        # Zero-delay arrival: virtual unless it is the consumer's last input.
                        if missing[U(c)] == 1:
                            fifo[U(f_tail)] = (v_next << 32) | (e << 3) | ARRIVED
                            f_tail += 1
                            v_next += 1
                        else:
                            missing[U(c)] -= 1
                            edge_end[U(e)] = now
                    elif group_k < 0:  # first delayed transfer of idx: a group entry
                        group_k = k
                        group_t = t
                        h_size = _push(h_time, h_key, h_code, h_size, t, push_key + j, (k << 3) | ARRIVED_GROUP)
                        j += 1
                    elif t != group_t:
                        h_size = _push(h_time, h_key, h_code, h_size, t, push_key + j, (e << 3) | ARRIVED)
                        j += 1
        elif kind == COMPUTED:
            makespan = now  # the clock never goes back: the last op to end ends last
            f_tail, v_next = _on_computed(idx, now, assignment, end, free_streams, fifo, f_tail, v_next)
        elif kind == ARRIVED_GROUP:
            f_tail, v_next = _on_arrived_group(
                idx, now, n_dev, given_times, assignment, succ_ptr, succ_edge, edge_src, edge_dst, end, size,
                pair_latency, pair_inv_bw, edge_factor, edge_end, missing, fifo, f_tail, v_next, strag, s_pair,
                route_ptr, route_link, link_latency, link_bandwidth, s_ptr, s_seg,
            )
        elif kind == ARRIVED:
            f_tail, v_next = _on_arrived(idx, now, edge_dst, edge_end, missing, fifo, f_tail, v_next)
        elif kind == DELIVERED:
            f_tail, v_next = _on_delivered(idx, edge_dst, fifo, f_tail, v_next)
        elif kind == STARTED:
            f_tail, v_next = _on_started(idx, now, start, fifo, f_tail, v_next)
        else:  # HOP_DONE (always from the heap): transfer idx finished its current hop
            # Written out: as an inlined handler (29 arguments), or through _send_hop and _on_arrived, it made
            # runs with FIFO links 2-80% slower.
            e = idx
            p = assignment[U(edge_src[U(e)])] * n_dev + assignment[U(edge_dst[U(e)])]
            h = route_ptr[U(p)] + edge_hop[U(e)]
            ln = route_link[U(h)]
            if l_head[U(ln)] < l_tail[U(ln)]:  # the link serves its next waiting transfer
                e2 = l_queue[U(l_base[U(ln)] + l_head[U(ln)])]
                l_head[U(ln)] += 1
                if np.isnan(edge_start[U(e2)]):
                    edge_start[U(e2)] = now
                t = _hop_end(ln, n_dev, now, size[U(edge_src[U(e2)])], edge_factor[U(e2)], link_latency, link_bandwidth,
                             strag, s_ptr, s_seg)
                h_time[U(h_size)] = t  # appended; sifted up at the top of the loop
                h_key[U(h_size)] = push_key
                h_code[U(h_size)] = (e2 << 3) | HOP_DONE
                h_size += 1
                push_key += 1
            else:
                l_busy[U(ln)] = 0
            if h + 1 < route_ptr[U(p + 1)]:  # on to the next hop
                edge_hop[U(e)] += 1
                ln = route_link[U(h + 1)]
                if l_busy[U(ln)]:
                    l_queue[U(l_base[U(ln)] + l_tail[U(ln)])] = e
                    l_tail[U(ln)] += 1
                else:
                    l_busy[U(ln)] = 1
                    t = _hop_end(ln, n_dev, now, size[U(edge_src[U(e)])], edge_factor[U(e)], link_latency,
                                 link_bandwidth, strag, s_ptr, s_seg)
                    h_time[U(h_size)] = t  # appended; sifted up at the top of the loop
                    h_key[U(h_size)] = push_key
                    h_code[U(h_size)] = (e << 3) | HOP_DONE
                    h_size += 1
                    push_key += 1
            else:  # arrived
                edge_end[U(e)] = now
                c = edge_dst[U(e)]
                missing[U(c)] -= 1
                if missing[U(c)] == 0:
                    fifo[U(f_tail)] = (v_next << 32) | (e << 3) | DELIVERED
                    f_tail += 1
                    v_next += 1
            wave0_next = push_key

    if meta[Meta.PRIORITY_QUEUES] == 2 and q_head[:n_dev].sum() != n:
        return -2.0  # fixed order: some device's next op can never become ready (a deadlock)
    if divisor != 1.0:
        makespan /= divisor
    return makespan


@njit(cache=True)
def run_packed(meta, ints, floats, assignment, times):
    """One assignment of a packed problem on a fresh workspace, the per-op rows taken from ``floats``
    (``Meta.PRIORITY_ROW``, ``Meta.COMP_FACTOR_ROW``, ``Meta.EDGE_FACTOR_ROW``): five arguments,
    since Numba's dispatch costs about as much per argument as simulating an op. Runs the list
    kernel where ``meta[Meta.LIST_KERNEL]`` allows it (the event loop :func:`run` when an op's
    duration rounds to zero there), else :func:`run`. ``times`` stay in internal units
    (:class:`~doppler_gym.sim.trace.Trace` divides them when first read); the returned makespan
    is divided. ``assignment`` (int32 or int64) is checked first: ``-1.0`` is returned, nothing
    simulated, when a device lies outside ``[0, D)`` (or, with ``meta[Meta.EXACT_DEVICES]``, when
    device ``D - 1`` is unused)."""
    n, n_edges, n_dev = meta[Meta.N_OPS], meta[Meta.N_EDGES], meta[Meta.N_DEVICES]
    low, high = value_range(assignment)
    if low < 0 or high >= n_dev or (meta[Meta.EXACT_DEVICES] != 0 and high + 1 != n_dev):
        return -1.0  # not this problem's devices: the caller checks and reports
    comp_factor = _segment(floats, meta, Meta.COMP_FACTOR_ROW, n)
    edge_factor = _segment(floats, meta, Meta.EDGE_FACTOR_ROW, n_edges)
    if meta[Meta.LIST_KERNEL] != 0:
        makespan = run_list(
            *problem_arrays(meta, ints, floats), comp_factor, edge_factor, meta[Meta.PLAIN] != 0, assignment, n_dev,
            times[0:n], times[n : 2 * n], times[2 * n : 2 * n + n_edges], times[2 * n + n_edges :],
            alloc_list_workspace(n, n_dev),
        )
        if makespan >= 0.0:
            return makespan / floats[meta[Meta.DIVISOR]]
    priority = _segment(floats, meta, Meta.PRIORITY_ROW, n)
    return run(meta, ints, floats, priority, comp_factor, edge_factor, assignment, times, alloc_workspace(meta))


@njit(cache=True, parallel=True)
def run_many(meta, ints, floats, priority, comp_factor, edge_factor, assignments, makespans):
    """Run ``B`` assignments in parallel (``prange`` over chunks, one workspace per chunk).

    ``priority`` is ``(P, n)`` and the factors ``(J, n)``/``(J, E)`` with ``P, J`` in ``{1, B}``:
    row ``b % P`` serves assignment ``b``. Fills ``makespans`` ``(B,)``. Uses the list kernel
    where ``meta[Meta.LIST_KERNEL]`` allows it, as :func:`run_packed` does.
    """
    n_batch = assignments.shape[0]
    n_chunks = min(n_batch, 64)
    n, n_dev = meta[Meta.N_OPS], meta[Meta.N_DEVICES]
    n_times = 2 * n + 2 * meta[Meta.N_EDGES]
    use_list = meta[Meta.LIST_KERNEL] != 0
    plain = meta[Meta.PLAIN] != 0
    divisor = floats[meta[Meta.DIVISOR]]
    for c in prange(n_chunks):
        problem = problem_arrays(meta, ints, floats)
        list_ws = alloc_list_workspace(n if use_list else 0, n_dev)
        none = np.empty(0, np.float64)
        ws = alloc_workspace(meta)  # the event loop's (a few kB per chunk: cheaper than deciding)
        times = np.empty(n_times, np.float64)
        for b in range(c, n_batch, n_chunks):
            jr = b % comp_factor.shape[0]
            makespan = -1.0
            if use_list:
                makespan = run_list(
                    *problem, comp_factor[jr], edge_factor[jr], plain, assignments[b], n_dev, none, none, none, none,
                    list_ws,
                )
            if makespan >= 0.0:
                makespans[b] = makespan / divisor
            else:  # the event loop: another model, or a duration that rounds to zero
                makespans[b] = run(
                    meta, ints, floats, priority[b % priority.shape[0]], comp_factor[jr], edge_factor[jr],
                    assignments[b], times, ws,
                )


LIST_KERNEL_DIGEST_FILE = "kernels.list_kernel.sha256"  # beside the Numba cache of this module


def list_kernel_digest_path() -> Path | None:
    """Where :func:`refresh_stale_cache` keeps the digest of ``list_kernel.py`` (``None`` when Numba's
    JIT is disabled: nothing is cached)."""
    stats = getattr(run_packed, "stats", None)  # a Numba dispatcher's public compile statistics
    return None if stats is None else Path(stats.cache_path) / LIST_KERNEL_DIGEST_FILE


def refresh_stale_cache() -> None:
    """Drop the cached machine code of :func:`run_packed` and :func:`run_many` when ``list_kernel.py`` changed.

    Numba checks a cached function against its own source file only, and these two compile
    :func:`~doppler_gym.sim.list_kernel.run_list` (another file) into themselves: after an edit of
    ``list_kernel.py`` they would run the old list kernel. A digest of that file, kept beside the
    cache, tells; on a change each is recompiled through Numba's ``Dispatcher.recompile`` (with no
    signature compiled yet in this process, that only empties its cache). Call it before either
    runs: :mod:`doppler_gym.sim` does, once, when it is imported.
    """
    marker = list_kernel_digest_path()
    if marker is None:
        return
    digest = hashlib.sha256(Path(list_kernel.__file__).read_bytes()).hexdigest()
    with contextlib.suppress(OSError):
        if marker.read_text() == digest:
            return
    for dispatcher in (run_packed, run_many):
        dispatcher.recompile()
    with contextlib.suppress(OSError):  # a read-only cache directory holds no cache to go stale
        marker.write_text(digest)
