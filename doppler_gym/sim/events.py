"""The events of the event loop (:mod:`doppler_gym.sim.event_loop`): their kinds, heap keys, handlers,
and the loop's heap steps.

Each handler handles one event (or one step of one) at time ``now`` and returns the loop counters it
moved: ``f_tail`` (end of the FIFO), ``v_next`` (next virtual FIFO position), ``h_size`` (heap
entries; new ones are appended, and the top of the loop sifts them up in push order,
:func:`sift_up_appended`). The small handlers are inlined into the loop (``inline="always"``: they
leave its time unchanged, within the noise of interleaved runs); the larger steps (:func:`pop_event`,
:func:`grant_by_priority`, and the transfer steps of :mod:`doppler_gym.sim.transfer_events`) are
compiled on their own without reference counting (:mod:`doppler_gym.sim.compiled_step`), which
measured faster.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from doppler_gym.sim.compiled_step import compiled_step
from doppler_gym.sim.finish_times import advance, hop_end, route_end
from doppler_gym.sim.heap import heap_append, heap_pop, heap_push
from doppler_gym.sim.unsigned import U

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



@njit(cache=True, inline="always")
def start_op(
    g, d, now, comp, inv_speed, comp_row, comp_factor, start, fifo, f_tail, v_next, h_time, h_key, h_code, h_size,
    strag, s_ptr, s_seg,
):
    """Op ``g`` got a stream of device ``d``: start it virtually (its only effect is scheduling its
    ``COMPUTED``, keyed by ``v_next``), except an op of zero duration, whose ``STARTED`` stays a real
    zero-delay event; with stragglers (``strag``) its work runs over ``d``'s speed profile.
    Returns ``(f_tail, v_next, h_size)``."""
    w = comp[U(comp_row[U(d)] + g)] * inv_speed[U(d)] * comp_factor[U(g)]
    t = advance(s_ptr, s_seg, d, now, w) if strag else now + w
    if t == now:
        fifo[U(f_tail)] = (v_next << 32) | (g << 3) | STARTED
        f_tail += 1
    else:
        start[U(g)] = now
        h_size = heap_append(h_time, h_key, h_code, h_size, t, v_next * WAVE + FIFO_PUSH, (g << 3) | COMPUTED)
    return f_tail, v_next + 1, h_size


@njit(cache=True, inline="always")
def send_hop(
    e, ln, now, key, nbytes, link_latency, link_bandwidth, edge_factor, h_time, h_key, h_code, h_size, n_dev, strag,
    s_ptr, s_seg,
):
    """Transfer ``e`` (``nbytes``) takes link ``ln`` now: its ``HOP_DONE`` is due after the link's
    latency and ``nbytes`` / bandwidth (:func:`~doppler_gym.sim.finish_times.hop_end`). Returns ``h_size``."""
    t = hop_end(ln, n_dev, now, nbytes, edge_factor[U(e)], link_latency, link_bandwidth, strag, s_ptr, s_seg)
    return heap_append(h_time, h_key, h_code, h_size, t, key, (e << 3) | HOP_DONE)


@njit(cache=True, inline="always")
def on_computed(o, now, assignment, end, free_streams, fifo, f_tail, v_next):
    """Op ``o`` is computed: its stream is free at once; the device's release (which grants the next
    waiting op) and ``o``'s finish follow as two adjacent zero-delay events, one ``RELEASE_FINISH``
    entry. Returns ``(f_tail, v_next)``."""
    end[U(o)] = now
    free_streams[U(assignment[U(o)])] += 1
    fifo[U(f_tail)] = (v_next << 32) | (o << 3) | RELEASE_FINISH
    return f_tail + 1, v_next + 2  # the release and the finish event


@njit(cache=True, inline="always")
def on_arrived_group(
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
            t = route_end(p, n_dev, end[U(u)], size[U(u)], edge_factor[U(e)], route_ptr, route_link, link_latency,
                           link_bandwidth, s_ptr, s_seg)
        else:
            t = end[U(u)] + (pair_latency[U(p)] + size[U(u)] * pair_inv_bw[U(p)]) * edge_factor[U(e)]
        if t == now:
            f_tail, v_next = on_arrived(e, now, edge_dst, edge_end, missing, fifo, f_tail, v_next)
    return f_tail, v_next


@njit(cache=True, inline="always")
def on_arrived(e, now, edge_dst, edge_end, missing, fifo, f_tail, v_next):
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
def on_delivered(e, edge_dst, fifo, f_tail, v_next):
    """The last input of ``e``'s consumer was delivered: its ``INPUTS_READY`` follows. Returns ``(f_tail, v_next)``."""
    fifo[U(f_tail)] = (v_next << 32) | (edge_dst[U(e)] << 3) | INPUTS_READY
    return f_tail + 1, v_next + 1


@njit(cache=True, inline="always")
def on_started(o, now, start, fifo, f_tail, v_next):
    """Op ``o`` of zero duration started: its ``COMPUTED`` follows. Returns ``(f_tail, v_next)``."""
    start[U(o)] = now
    fifo[U(f_tail)] = (v_next << 32) | (o << 3) | COMPUTED
    return f_tail + 1, v_next + 1


@njit(cache=True, inline="always")
def sift_up_appended(h_time, h_key, h_code, h_sorted, h_size):
    """Sift up the heap entries ``h_*[h_sorted:h_size]`` that the last event appended, in push order:
    exactly the heap that pushing them one by one gives (a sift-up only moves the entry's ancestors).
    Returns ``h_size`` (the new ``h_sorted``: ``h_*[:h_size]`` is a heap). Inlined: the loop's time
    unchanged (0.98-1.00x of the sift-up written out in it)."""
    while h_sorted < h_size:
        at = U(h_sorted)
        heap_push(h_time, h_key, h_code, 0, h_sorted, h_time[at], h_key[at], h_code[at])
        h_sorted += 1
    return h_sorted


@compiled_step
def pop_event(h_time, h_key, h_code, h_size):
    """Remove the smallest entry of the heap ``h_*[:h_size]`` (``h_size >= 1``); returns
    ``(its code, h_size - 1)``. A compiled step: inlined into the loop, it made the loop 8-65 % slower."""
    code = heap_pop(h_time, h_key, h_code, 0, h_size)
    h_size -= 1
    return code, h_size


@compiled_step
def grant_by_priority(
    now, fixed, free_streams, q_len, q_key, q_seq, q_op, q_base, q_head, comp, comp_row, inv_speed, comp_factor,
    start, fifo, f_tail, v_next, h_time, h_key, h_code, h_size, strag, s_ptr, s_seg,
):
    """Priority and fixed modes, once every event due ``now`` is done: fill each device's free
    streams from its queue (a heap on ``(priority, request order)``), lowest value first, and start
    each granted op as :func:`start_op` does. In fixed mode (``fixed``; ranks as priorities) a device
    whose next op in its order is not ready yet waits. Returns ``(f_tail, v_next, h_size)``."""
    for d in range(free_streams.shape[0]):
        while free_streams[U(d)] > 0 and q_len[U(d)] > 0:
            if fixed and q_key[U(q_base[U(d)])] != q_head[U(d)]:
                break  # the device's next op is not ready: it waits
            g = heap_pop(q_key, q_seq, q_op, q_base[U(d)], q_len[U(d)])
            q_head[U(d)] += 1
            q_len[U(d)] -= 1
            free_streams[U(d)] -= 1
            f_tail, v_next, h_size = start_op(
                g, d, now, comp, inv_speed, comp_row, comp_factor, start, fifo, f_tail, v_next, h_time, h_key, h_code,
                h_size, strag, s_ptr, s_seg,
            )
    return f_tail, v_next, h_size
