"""The state of the event loop (:mod:`doppler_gym.sim.event_loop`) before its first event: the
packed arrays it reads, the views it writes (into ``times`` and the workspace of
:func:`~doppler_gym.sim.event_loop.alloc_workspace`), and their reset for a run.

Each function does one step of the loop's setup and is inlined into it (``inline="always"``);
they run once per simulation, before the loop (measured: the loop's time unchanged, 0.95-1.01x of the
setup written out in it, interleaved runs).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from doppler_gym.sim.events import INPUTS_READY
from doppler_gym.sim.packed_layout import Meta, segment


@njit(cache=True, inline="always")
def link_arrays(meta, ints, floats):
    """The packed problem's edge endpoints and per-link tables, for ``E`` edges and ``D`` devices.

    Returns:
        ``(edge_src (E,) int32, edge_dst (E,) int32, route_ptr (D*D+1,) int32, route_link int32,
        link_latency (D*D,) float64 [s], link_bandwidth (D*D,) float64 [B/s])``: the route of
        device pair ``p = a * D + b`` is the links ``route_link[route_ptr[p]:route_ptr[p + 1]]``
        (link ``ln = i * D + j`` is the direct link from device ``i`` to ``j``).
    """
    n_edges, n_links = meta[Meta.N_EDGES], meta[Meta.N_DEVICES] * meta[Meta.N_DEVICES]
    edge_src = segment(ints, meta, Meta.SRC, n_edges)
    edge_dst = segment(ints, meta, Meta.DST, n_edges)
    route_ptr = segment(ints, meta, Meta.ROUTE_PTR, n_links + 1)
    route_link = ints[meta[Meta.ROUTE_LINK] :]
    link_latency = segment(floats, meta, Meta.LATENCY, n_links)
    link_bandwidth = segment(floats, meta, Meta.BANDWIDTH, n_links)
    return edge_src, edge_dst, route_ptr, route_link, link_latency, link_bandwidth


@njit(cache=True, inline="always")
def time_views(times, n, n_edges):
    """``(start (n,), end (n,), edge_start (E,), edge_end (E,))``: the four rows of ``times``
    ``(2n + 2E,) float64`` (internal time units), as views."""
    return times[0:n], times[n : 2 * n], times[2 * n : 2 * n + n_edges], times[2 * n + n_edges : 2 * n + 2 * n_edges]


@njit(cache=True, inline="always")
def device_queues(dev_i32, n_dev):
    """``(q_base, q_head, q_len, free_streams)``, each ``(D,) int32``: views of the workspace's
    ``(4D,)`` device block. Op ``o`` waits at most once, in its device's segment ``q_base[d]:`` of
    the queue arrays; ``q_head``: in FIFO mode the consumed entries, in priority/fixed modes the ops
    started; ``q_len``: in FIFO mode the entries appended, in priority mode the heap's size."""
    return dev_i32[0:n_dev], dev_i32[n_dev : 2 * n_dev], dev_i32[2 * n_dev : 3 * n_dev], dev_i32[3 * n_dev : 4 * n_dev]


@njit(cache=True, inline="always")
def link_queues(link_i32, n_links):
    """``(l_base (L+1,), l_head (L,), l_tail (L,), l_busy (L,))`` int32 for ``L = D*D`` links:
    views of the workspace's ``(4L+1,)`` link block. With FIFO links each transfer waits at most
    once per hop of its route, link ``ln`` in segment ``l_base[ln]:l_base[ln + 1]`` of the queue;
    ``l_busy[ln]`` is 1 while a transfer holds it."""
    return (
        link_i32[0 : n_links + 1],
        link_i32[n_links + 1 : 2 * n_links + 1],
        link_i32[2 * n_links + 1 : 3 * n_links + 1],
        link_i32[3 * n_links + 1 : 4 * n_links + 1],
    )


@njit(cache=True, inline="always")
def reset_device_queues(assignment, streams, q_base, q_head, q_len, free_streams):
    """Empty the device queues for ``assignment`` ``(n,)``: each device's segment holds its ops
    (``q_base`` the running count), no op waits or started, every device has ``streams`` free."""
    q_len[:] = 0
    for o in range(assignment.shape[0]):
        q_len[assignment[o]] += 1
    acc = 0
    for d in range(q_base.shape[0]):
        q_base[d] = acc
        acc += q_len[d]
        q_len[d] = 0
        q_head[d] = 0
        free_streams[d] = streams


@njit(cache=True, inline="always")
def reset_link_queues(assignment, edge_src, edge_dst, route_ptr, route_link, n_dev, l_base, l_head, l_tail, l_busy):
    """Empty the link queues (FIFO links): each link's segment has room for every transfer between
    two devices whose route crosses it; no link is busy."""
    n_links = l_head.shape[0]
    l_base[:] = 0
    for e in range(edge_src.shape[0]):
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


@njit(cache=True, inline="always")
def initial_events(in_degree, missing, end, edge_start, edge_end, fifo):
    """Reset the per-op and per-edge state (``missing`` inputs, op ``end`` 0, edge times NaN) and
    queue the ``INPUTS_READY`` of every op without inputs, in op order, at FIFO (and virtual)
    positions ``0, 1, ...``; returns how many were queued."""
    f_tail = 0
    for o in range(in_degree.shape[0]):
        missing[o] = in_degree[o]
        end[o] = 0.0
        if in_degree[o] == 0:
            fifo[f_tail] = (f_tail << 32) | (o << 3) | INPUTS_READY
            f_tail += 1
    for e in range(edge_start.shape[0]):
        edge_start[e] = np.nan
        edge_end[e] = np.nan
    return f_tail
