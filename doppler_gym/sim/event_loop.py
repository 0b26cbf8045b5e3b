"""The event loop of the work-conserving runtime, over plain arrays (no gym, no torch): it simulates
every model (:mod:`doppler_gym.sim.dispatch` picks it or the list kernel).

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

Speed notes (each measured, old and new loop interleaved in one process): array indices in the loop
are cast to unsigned (``U(i)``, :mod:`doppler_gym.sim.unsigned`) so that Numba emits no negative-index
wraparound per access. The loop's steps live in other modules: its setup in
:mod:`doppler_gym.sim.event_state`, the small handlers and the heap's sift-up in
:mod:`doppler_gym.sim.events`, inlined (``inline="always"``: that left the loop's time unchanged), and
the larger steps compiled on their own without reference counting
(:data:`~doppler_gym.sim.compiled_step.compiled_step`): the heap's pop and the priority grants in
:mod:`doppler_gym.sim.events`, the finish event and ``HOP_DONE`` in :mod:`doppler_gym.sim.transfer_events`.
Numba counts references around every array argument of a function with loops, inlined or not: the pop
made the loop 8-65 % slower inlined, the grants 1.5-2.6x; as steps without counts, the loop's time is
unchanged with ideal and FIFO links (0.95-1.04x of the steps written out in it), and priority runs take
8-15 % and straggler runs 20-30 % less time. The transfer steps read their arrays in groups (tuples
built once per run), which also keeps their calls under 30 arguments (CPython passes more as one
``*args`` tuple). An event appends its heap pushes and the top of the loop sifts them up in push order
(the heap that pushing them one by one gives); the FIFO restarts at index 0 whenever the clock advances
(it is empty then).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from doppler_gym.sim.event_state import (
    device_queues,
    initial_events,
    link_arrays,
    link_queues,
    reset_device_queues,
    reset_link_queues,
    time_views,
)
from doppler_gym.sim.events import (
    ARRIVED,
    ARRIVED_GROUP,
    COMPUTED,
    DELIVERED,
    FIFO_PUSH,
    INPUTS_READY,
    RELEASE_FINISH,
    STARTED,
    WAVE,
    grant_by_priority,
    on_arrived,
    on_arrived_group,
    on_computed,
    on_delivered,
    on_started,
    pop_event,
    sift_up_appended,
    start_op,
)
from doppler_gym.sim.heap import heap_push
from doppler_gym.sim.packed_layout import Meta, problem_arrays, straggler_arrays
from doppler_gym.sim.transfer_events import finish_on_fifo_links, finish_on_ideal_links, hop_done
from doppler_gym.sim.unsigned import U


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


@njit(cache=True)
def run(meta, ints, floats, priority, comp_factor, edge_factor, assignment, times, ws):
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

    With ``meta[Meta.STRAGGLERS]`` an op's end and each hop's end integrate their work over the
    device's or link's piecewise-constant speed profile (:mod:`doppler_gym.sim.finish_times`,
    :mod:`doppler_gym.sim.stragglers`); without, the times are the formulas above, unchanged.

    Two compiled copies of the event loop (:func:`_event_loop`): one for runs with stragglers, and one in
    which the straggler code is a constant-false branch that the compiler removes, so that runs without
    stragglers execute a loop without it (the loop's speed is sensitive to its code size).

    Returns:
        The makespan (largest op end), divided by the time divisor; ``-2.0`` in fixed mode when the
        order deadlocks (a device's next op can never become ready).
    """
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
    """The event loop of :func:`run` (its arguments and result); ``strag``: ``meta[Meta.STRAGGLERS] != 0``,
    passed as a compile-time constant by :func:`run`'s two copies."""
    n_dev = meta[Meta.N_DEVICES]
    link_fifo = meta[Meta.LINK_FIFO] != 0
    given_times = meta[Meta.EDGE_TIMES] != 0
    use_priority = meta[Meta.PRIORITY_QUEUES] != 0
    succ_ptr, _, succ_edge, in_degree, comp, size, inv_speed, pair_latency, pair_inv_bw, comp_row = problem_arrays(
        meta, ints, floats
    )  # pair_latency: the route's summed hop latencies [s]; pair_inv_bw: its summed 1 / bandwidth [s/B]
    edge_src, edge_dst, route_ptr, route_link, link_latency, link_bandwidth = link_arrays(meta, ints, floats)
    # strag: a compile-time constant (run's two copies): integrate over the speed profiles of slowed devices and
    # links (empty arrays without)
    s_ptr, s_pair, s_seg = straggler_arrays(meta, ints, floats)
    fifo, h_time, h_key, h_code, q_key, q_seq, q_op, dev_i32, link_i32, l_queue, edge_hop, missing = ws
    start, end, edge_start, edge_end = time_views(times, meta[Meta.N_OPS], meta[Meta.N_EDGES])
    q_base, q_head, q_len, free_streams = device_queues(dev_i32, n_dev)
    l_base, l_head, l_tail, l_busy = link_queues(link_i32, n_dev * n_dev)
    reset_device_queues(assignment, meta[Meta.STREAMS], q_base, q_head, q_len, free_streams)
    if link_fifo:
        reset_link_queues(assignment, edge_src, edge_dst, route_ptr, route_link, n_dev, l_base, l_head, l_tail, l_busy)
    f_tail = initial_events(in_degree, missing, end, edge_start, edge_end, fifo)
    f_head = 0
    v_next = f_tail  # next virtual FIFO position
    heap = (h_time, h_key, h_code)  # the groups of arrays that the transfer steps read
    routes = (route_ptr, route_link, link_latency, link_bandwidth)
    profiles = (s_ptr, s_pair, s_seg)
    link_q = (l_base, l_head, l_tail, l_busy, l_queue)

    h_size = 0
    now = 0.0
    wave0_next = 0  # heap key of the next push by a wave-0 event at `now`
    grants_pending = False  # priority mode: some device may have a free stream and waiting ops
    makespan = 0.0
    h_sorted = 0  # h_*[:h_sorted] is a heap; the entries after it were appended by the last event
    while True:
        h_sorted = sift_up_appended(h_time, h_key, h_code, h_sorted, h_size)
        if f_head < f_tail and (h_size == 0 or h_time[0] != now):
            code = fifo[U(f_head)]
            f_head += 1
            push_key = (code >> 32) * WAVE + FIFO_PUSH
        else:
            if h_size == 0 or h_time[0] != now:  # nothing is due now
                if grants_pending:  # priority mode: every event due now is done; fill free streams
                    grants_pending = False
                    f_tail, v_next, h_size = grant_by_priority(
                        now, meta[Meta.PRIORITY_QUEUES] == 2, free_streams, q_len, q_key, q_seq, q_op, q_base, q_head,
                        comp, comp_row, inv_speed, comp_factor, start, fifo, f_tail, v_next, h_time, h_key, h_code,
                        h_size, strag, s_ptr, s_seg,
                    )
                    continue
                if h_size == 0:
                    break
                now = h_time[0]  # advance the clock to the next future event and process it
                f_head = 0  # the FIFO is empty here: reuse its start (it stays in cache on big graphs)
                f_tail = 0
                wave0_next = v_next * WAVE
            code, h_size = pop_event(h_time, h_key, h_code, h_size)
            h_sorted = h_size
            push_key = wave0_next
        kind = code & 7
        idx = (code >> 3) & 0x1FFFFFFF

        if kind == INPUTS_READY or kind == RELEASE_FINISH:  # noqa: SIM109  (two integer compares in Numba)
            d = assignment[U(idx)]
            if kind == INPUTS_READY:  # request a stream of d: join its queue
                if use_priority:
                    heap_push(q_key, q_seq, q_op, q_base[U(d)], q_len[U(d)], priority[U(idx)], code >> 32, idx)
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
                f_tail, v_next, h_size = start_op(
                    g, d, now, comp, inv_speed, comp_row, comp_factor, start, fifo, f_tail, v_next, h_time, h_key,
                    h_code, h_size, strag, s_ptr, s_seg,
                )
            if kind == RELEASE_FINISH:  # the finish event, right after the release (virtual position v + 1)
                if link_fifo:
                    f_tail, v_next, h_size = finish_on_fifo_links(
                        idx, now, push_key + WAVE, n_dev, given_times, assignment, succ_ptr, succ_edge, edge_dst,
                        edge_factor, size, routes, profiles, strag, link_q, edge_hop, edge_start, edge_end, missing,
                        fifo, f_tail, v_next, heap, h_size,
                    )
                else:
                    f_tail, v_next, h_size = finish_on_ideal_links(
                        idx, now, push_key + WAVE, n_dev, given_times, assignment, succ_ptr, succ_edge, edge_dst,
                        edge_factor, size, pair_latency, pair_inv_bw, routes, profiles, strag, edge_start, edge_end,
                        missing, fifo, f_tail, v_next, heap, h_size,
                    )
        elif kind == COMPUTED:
            makespan = now  # the clock never goes back: the last op to end ends last
            f_tail, v_next = on_computed(idx, now, assignment, end, free_streams, fifo, f_tail, v_next)
        elif kind == ARRIVED_GROUP:
            f_tail, v_next = on_arrived_group(
                idx, now, n_dev, given_times, assignment, succ_ptr, succ_edge, edge_src, edge_dst, end, size,
                pair_latency, pair_inv_bw, edge_factor, edge_end, missing, fifo, f_tail, v_next, strag, s_pair,
                route_ptr, route_link, link_latency, link_bandwidth, s_ptr, s_seg,
            )
        elif kind == ARRIVED:
            f_tail, v_next = on_arrived(idx, now, edge_dst, edge_end, missing, fifo, f_tail, v_next)
        elif kind == DELIVERED:
            f_tail, v_next = on_delivered(idx, edge_dst, fifo, f_tail, v_next)
        elif kind == STARTED:
            f_tail, v_next = on_started(idx, now, start, fifo, f_tail, v_next)
        else:  # HOP_DONE (always from the heap): transfer idx finished its current hop
            f_tail, v_next, h_size, wave0_next = hop_done(
                idx, now, push_key, n_dev, assignment, edge_src, edge_dst, size, edge_factor, routes, profiles, strag,
                link_q, edge_hop, edge_start, edge_end, missing, fifo, f_tail, v_next, heap, h_size,
            )

    if meta[Meta.PRIORITY_QUEUES] == 2 and q_head.sum() != meta[Meta.N_OPS]:
        return -2.0  # fixed order: some device's next op can never become ready (a deadlock)
    divisor = floats[meta[Meta.DIVISOR]]
    if divisor != 1.0:
        makespan /= divisor
    return makespan
