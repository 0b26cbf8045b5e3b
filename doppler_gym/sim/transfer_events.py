"""The transfer steps of the event loop (:mod:`doppler_gym.sim.event_loop`): an op's finish event,
which starts one transfer per out-edge, and ``HOP_DONE``, a transfer's end of one hop over a FIFO link.

The two events are compiled steps (:data:`~doppler_gym.sim.compiled_step.compiled_step`: on their own, without
reference counting). The arrays they read come in groups, built once per run by the loop:

* ``heap``: ``(h_time, h_key, h_code)``, the loop's event heap (``(H,)`` float64 [internal time
  units], int64 keys, int64 codes; new entries are appended, the loop sifts them up);
* ``routes``: ``(route_ptr (D*D+1,), route_link, link_latency (D*D,) [s], link_bandwidth (D*D,) [B/s])``,
  as :func:`~doppler_gym.sim.event_state.link_arrays` returns them;
* ``profiles``: ``(s_ptr, s_pair, s_seg)``, the straggler speed profiles
  (:func:`~doppler_gym.sim.packed_layout.straggler_arrays`; read only with ``strag``);
* ``link_q``: ``(l_base, l_head, l_tail, l_busy, l_queue)``, the FIFO link queues
  (:func:`~doppler_gym.sim.event_state.link_queues`, and the workspace's ``l_queue``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from doppler_gym.sim.compiled_step import compiled_step
from doppler_gym.sim.events import ARRIVED, ARRIVED_GROUP, HOP_DONE, on_arrived, send_hop
from doppler_gym.sim.finish_times import hop_end, route_end
from doppler_gym.sim.heap import heap_append
from doppler_gym.sim.unsigned import U


@njit(cache=True, inline="always")
def arrive_at_once(e, c, now, missing, edge_end, fifo, f_tail, v_next):
    """Transfer ``e`` to op ``c`` arrives with zero delay: virtually (a count-down) unless it is
    ``c``'s last input, whose ``ARRIVED`` stays a real zero-delay event. Returns ``(f_tail, v_next)``."""
    if missing[U(c)] == 1:
        fifo[U(f_tail)] = (v_next << 32) | (e << 3) | ARRIVED
        return f_tail + 1, v_next + 1
    missing[U(c)] -= 1
    edge_end[U(e)] = now
    return f_tail, v_next


@njit(cache=True, inline="always")
def take_link(e, ln, now, key, nbytes, edge_factor, routes, profiles, strag, link_q, heap, h_size, n_dev):
    """Transfer ``e`` (``nbytes``) asks for FIFO link ``ln``: it queues when the link is busy, else
    takes it and pushes its ``HOP_DONE`` with heap key ``key`` (:func:`~doppler_gym.sim.events.send_hop`).
    Returns ``(h_size, the next push's key)``."""
    l_base, _, l_tail, l_busy, l_queue = link_q
    if l_busy[U(ln)]:
        l_queue[U(l_base[U(ln)] + l_tail[U(ln)])] = e
        l_tail[U(ln)] += 1
        return h_size, key
    l_busy[U(ln)] = 1
    _, _, link_latency, link_bandwidth = routes
    s_ptr, _, s_seg = profiles
    h_time, h_key, h_code = heap
    h_size = send_hop(e, ln, now, key, nbytes, link_latency, link_bandwidth, edge_factor, h_time, h_key, h_code, h_size,
                      n_dev, strag, s_ptr, s_seg)
    return h_size, key + 1


@njit(cache=True, inline="always")
def free_link(ln, now, key, edge_src, size, edge_factor, edge_start, routes, profiles, strag, link_q, heap, h_size,
              n_dev):
    """FIFO link ``ln`` finished a hop: it serves its next waiting transfer (whose transfer starts
    now if this is its first hop) and pushes that one's ``HOP_DONE`` with key ``key``, or goes idle.
    Returns ``(h_size, the next push's key)``."""
    l_base, l_head, l_tail, l_busy, l_queue = link_q
    if l_head[U(ln)] >= l_tail[U(ln)]:
        l_busy[U(ln)] = 0
        return h_size, key
    e2 = l_queue[U(l_base[U(ln)] + l_head[U(ln)])]
    l_head[U(ln)] += 1
    if np.isnan(edge_start[U(e2)]):
        edge_start[U(e2)] = now
    _, _, link_latency, link_bandwidth = routes
    s_ptr, _, s_seg = profiles
    h_time, h_key, h_code = heap
    t = hop_end(ln, n_dev, now, size[U(edge_src[U(e2)])], edge_factor[U(e2)], link_latency, link_bandwidth, strag,
                s_ptr, s_seg)
    return heap_append(h_time, h_key, h_code, h_size, t, key, (e2 << 3) | HOP_DONE), key + 1


@compiled_step
def hop_done(e, now, key, n_dev, assignment, edge_src, edge_dst, size, edge_factor, routes, profiles, strag, link_q,
             edge_hop, edge_start, edge_end, missing, fifo, f_tail, v_next, heap, h_size):
    """``HOP_DONE`` of transfer ``e`` at ``now`` (FIFO links): its link serves the next waiting
    transfer (:func:`free_link`), then ``e`` asks for the next link of its route (:func:`take_link`)
    or, after the last, arrives (a consumer's last input queues its ``DELIVERED``). Pushes take keys
    ``key, key + 1, ...``. Returns ``(f_tail, v_next, h_size, the next push's key)``."""
    route_ptr, route_link, _, _ = routes
    p = assignment[U(edge_src[U(e)])] * n_dev + assignment[U(edge_dst[U(e)])]
    h = route_ptr[U(p)] + edge_hop[U(e)]
    h_size, key = free_link(route_link[U(h)], now, key, edge_src, size, edge_factor, edge_start, routes, profiles,
                            strag, link_q, heap, h_size, n_dev)
    if h + 1 < route_ptr[U(p + 1)]:  # on to the next hop
        edge_hop[U(e)] += 1
        h_size, key = take_link(e, route_link[U(h + 1)], now, key, size[U(edge_src[U(e)])], edge_factor, routes,
                                profiles, strag, link_q, heap, h_size, n_dev)
    else:
        f_tail, v_next = on_arrived(e, now, edge_dst, edge_end, missing, fifo, f_tail, v_next)
    return f_tail, v_next, h_size, key


@compiled_step
def finish_on_fifo_links(o, now, key, n_dev, given_times, assignment, succ_ptr, succ_edge, edge_dst, edge_factor, size,
                         routes, profiles, strag, link_q, edge_hop, edge_start, edge_end, missing, fifo, f_tail, v_next,
                         heap, h_size):
    """The finish event of op ``o`` with FIFO links: one transfer per out-edge in CSR order (SimPy's);
    a transfer between two devices queues for the first link of its route (:func:`take_link`, pushes
    keyed ``key, key + 1, ...``), one on the same device arrives at once (:func:`arrive_at_once`).
    Returns ``(f_tail, v_next, h_size)``."""
    route_ptr, route_link, _, _ = routes
    _, _, _, l_busy, _ = link_q
    a = assignment[U(o)]
    for k in range(succ_ptr[U(o)], succ_ptr[U(o + 1)]):
        e = succ_edge[U(k)]
        c = edge_dst[U(e)]
        b = assignment[U(c)]
        if a == b and not (given_times and edge_factor[U(e)] > 0.0):
            f_tail, v_next = arrive_at_once(e, c, now, missing, edge_end, fifo, f_tail, v_next)
            continue
        ln = route_link[U(route_ptr[U(a * n_dev + b)])]
        edge_hop[U(e)] = 0
        edge_start[U(e)] = np.nan if l_busy[U(ln)] else now  # NaN while it waits for its first hop
        h_size, key = take_link(e, ln, now, key, size[U(o)], edge_factor, routes, profiles, strag, link_q, heap,
                                h_size, n_dev)
    return f_tail, v_next, h_size


@compiled_step
def finish_on_ideal_links(o, now, key, n_dev, given_times, assignment, succ_ptr, succ_edge, edge_dst, edge_factor, size,
                          pair_latency, pair_inv_bw, routes, profiles, strag, edge_start, edge_end, missing, fifo,
                          f_tail, v_next, heap, h_size):
    """The finish event of op ``o`` with ideal links: one transfer per out-edge in CSR order (SimPy's).
    Zero-delay arrivals count down at once (:func:`arrive_at_once`); the delayed ones of one arrival
    time form one ``ARRIVED_GROUP`` heap entry (the first delayed transfer's), others an ``ARRIVED``
    each, keyed ``key, key + 1, ...``. Transfer times: ``edge_factor`` itself with ``given_times``,
    else the route's latency and ``size[o]`` / bandwidth (over the speed profiles of slowed links with
    ``strag``), times ``edge_factor``. Returns ``(f_tail, v_next, h_size)``."""
    route_ptr, route_link, link_latency, link_bandwidth = routes
    s_ptr, s_pair, s_seg = profiles
    h_time, h_key, h_code = heap
    a = assignment[U(o)]
    group_k = -1
    group_t = 0.0
    for k in range(succ_ptr[U(o)], succ_ptr[U(o + 1)]):
        e = succ_edge[U(k)]
        c = edge_dst[U(e)]
        b = assignment[U(c)]
        if a == b and not (given_times and edge_factor[U(e)] > 0.0):
            t = now
        else:
            p = a * n_dev + b
            edge_start[U(e)] = now
            if given_times:
                t = now + edge_factor[U(e)]
            elif strag and s_pair[U(p)] != 0:  # the route crosses a slowed link
                t = route_end(p, n_dev, now, size[U(o)], edge_factor[U(e)], route_ptr, route_link, link_latency,
                              link_bandwidth, s_ptr, s_seg)
            else:
                t = now + (pair_latency[U(p)] + size[U(o)] * pair_inv_bw[U(p)]) * edge_factor[U(e)]
        if t == now:
            f_tail, v_next = arrive_at_once(e, c, now, missing, edge_end, fifo, f_tail, v_next)
        elif group_k < 0:  # first delayed transfer of o: a group entry
            group_k = k
            group_t = t
            h_size = heap_append(h_time, h_key, h_code, h_size, t, key, (k << 3) | ARRIVED_GROUP)
            key += 1
        elif t != group_t:
            h_size = heap_append(h_time, h_key, h_code, h_size, t, key, (e << 3) | ARRIVED)
            key += 1
    return f_tail, v_next, h_size
