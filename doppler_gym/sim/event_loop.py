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

Speed notes (each measured; see ``benchmarks/bench_sim.py``): array indices in the loop are cast
to unsigned (``U(i)``, :mod:`doppler_gym.sim.unsigned`) so that Numba emits no negative-index
wraparound per access; events are handled by the small handlers of :mod:`doppler_gym.sim.events`,
inlined into the loop (``inline="always"``) where that leaves its time unchanged, and written out in
the loop where a helper made it slower (the heap's sift-up and pop, the finish event, ``HOP_DONE``,
the priority grants: each says so); an event appends its heap pushes and the top of the loop sifts
them up in push order (the heap that pushing them one by one gives); the FIFO restarts at index 0
whenever the clock advances (it is empty then). Numba compiles the handlers, heaps and finish
times of the other modules into this loop, as it would from one file.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from doppler_gym.sim.events import (
    ARRIVED,
    ARRIVED_GROUP,
    COMPUTED,
    DELIVERED,
    FIFO_PUSH,
    HOP_DONE,
    INPUTS_READY,
    RELEASE_FINISH,
    STARTED,
    WAVE,
    on_arrived,
    on_arrived_group,
    on_computed,
    on_delivered,
    on_started,
    send_hop,
    start_op,
)
from doppler_gym.sim.finish_times import advance, hop_end, route_end
from doppler_gym.sim.heap import heap_append, heap_pop, heap_push, less
from doppler_gym.sim.packed_layout import Meta, problem_arrays, segment, straggler_arrays
from doppler_gym.sim.unsigned import U0, U1, U


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
    """Simulate one assignment of a packed problem (arguments and result: :func:`_event_loop`).

    Two compiled copies of the event loop: one for runs with stragglers, and one in which the
    straggler code is a constant-false branch that the compiler removes, so that runs without
    stragglers execute a loop without it (the loop's speed is sensitive to its code size)."""
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
    device's or link's piecewise-constant speed profile (:mod:`doppler_gym.sim.finish_times`,
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
    succ_ptr, _, succ_edge, in_degree, comp, size, inv_speed, pair_latency, pair_inv_bw, comp_row = problem_arrays(
        meta, ints, floats
    )  # pair_latency: the route's summed hop latencies [s]; pair_inv_bw: its summed 1 / bandwidth [s/B]
    edge_src = segment(ints, meta, Meta.SRC, n_edges)
    edge_dst = segment(ints, meta, Meta.DST, n_edges)
    route_ptr = segment(ints, meta, Meta.ROUTE_PTR, n_links + 1)
    route_link = ints[meta[Meta.ROUTE_LINK] :]
    link_latency = segment(floats, meta, Meta.LATENCY, n_links)
    link_bandwidth = segment(floats, meta, Meta.BANDWIDTH, n_links)
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
        # heap_push, with the pop below through heap_pop, the event loop took 10-20% longer.
        while h_sorted < h_size:
            hi = U(h_sorted)
            t = h_time[hi]
            key = h_key[hi]
            code = h_code[hi]
            while hi != U0:
                parent = (hi - U1) >> U1
                if less(t, key, h_time[parent], h_key[parent]):
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
                            g = heap_pop(q_key, q_seq, q_op, q_base[U(d)], q_len[U(d)])
                            q_head[U(d)] += 1
                            q_len[U(d)] -= 1
                            free_streams[U(d)] -= 1
                            # Start g as start_op does, written out: through it, priority runs took 15-60% longer.
                            w = comp[U(comp_row[U(d)] + g)] * inv_speed[U(d)] * comp_factor[U(g)]
                            t = advance(s_ptr, s_seg, d, now, w) if strag else now + w
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
            hi = U0
            while True:
                child = hi + hi + U1
                if child >= m:
                    break
                if child + U1 < m:
                    child += U(less(h_time[child + U1], h_key[child + U1], h_time[child], h_key[child]))
                if less(h_time[child], h_key[child], t, key):
                    h_time[hi] = h_time[child]
                    h_key[hi] = h_key[child]
                    h_code[hi] = h_code[child]
                    hi = child
                else:
                    break
            if m != U0:
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
                                h_size = send_hop(e, ln, now, push_key + j, size[U(idx)], link_latency, link_bandwidth,
                                                   edge_factor, h_time, h_key, h_code, h_size, n_dev, strag, s_ptr,
                                                   s_seg)
                                j += 1
                            continue
                        elif given_times:
                            t = now + edge_factor[U(e)]
                        elif strag and s_pair[U(p)] != 0:  # the route crosses a slowed link
                            t = route_end(p, n_dev, now, size[U(idx)], edge_factor[U(e)], route_ptr, route_link,
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
                        h_size = heap_append(h_time, h_key, h_code, h_size, t, push_key + j, (k << 3) | ARRIVED_GROUP)
                        j += 1
                    elif t != group_t:
                        h_size = heap_append(h_time, h_key, h_code, h_size, t, push_key + j, (e << 3) | ARRIVED)
                        j += 1
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
            # Written out: as an inlined handler (29 arguments), or through send_hop and on_arrived, it made
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
                t = hop_end(ln, n_dev, now, size[U(edge_src[U(e2)])], edge_factor[U(e2)], link_latency, link_bandwidth,
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
                    t = hop_end(ln, n_dev, now, size[U(edge_src[U(e)])], edge_factor[U(e)], link_latency,
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
