"""When work ends in the event loop: an op's compute, one hop of a transfer, a transfer's route.

At full speed the times are closed formulas; a device or link slowed by stragglers
(:mod:`doppler_gym.sim.stragglers`) integrates the work over its piecewise-constant speed profile
(``ptr``/``seg`` of :func:`~doppler_gym.sim.packed_layout.straggler_arrays`).
"""

from __future__ import annotations

from numba import njit

from doppler_gym.sim.unsigned import U


@njit(cache=True)
def advance(s_ptr, s_seg, r, t, w):
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
def hop_end(ln, n_dev, now, nbytes, factor, link_latency, link_bandwidth, strag, s_ptr, s_seg):
    """When a hop over link ``ln`` that starts ``now`` with ``nbytes`` (time multiplier ``factor``)
    is done: ``now + (latency + nbytes / bandwidth) * factor``; on a slowed link its bytes serialise
    over the link's profile and arrive ``latency * factor`` later."""
    if strag and s_ptr[U(n_dev + ln + 1)] > s_ptr[U(n_dev + ln)]:
        return advance(s_ptr, s_seg, n_dev + ln, now, nbytes / link_bandwidth[U(ln)] * factor) + (
            link_latency[U(ln)] * factor
        )
    return now + (link_latency[U(ln)] + nbytes / link_bandwidth[U(ln)]) * factor


@njit(cache=True)
def route_end(p, n_dev, t, nbytes, factor, route_ptr, route_link, link_latency, link_bandwidth, s_ptr, s_seg):
    """When a transfer over the route of pair ``p`` that leaves at ``t`` arrives, with ideal links:
    its hops one after another (store-and-forward), each by :func:`hop_end`."""
    for h in range(route_ptr[U(p)], route_ptr[U(p + 1)]):
        t = hop_end(route_link[U(h)], n_dev, t, nbytes, factor, link_latency, link_bandwidth, True, s_ptr, s_seg)
    return t
