"""The stragglers of a run as the piecewise-constant speed profiles the kernels read.

:func:`profile_arrays` turns :class:`~doppler_gym.sim.stragglers.Straggler` slowdowns (reported time
unit) into per-resource segments in the kernels' internal unit, which
:func:`doppler_gym.sim.packing.pack` packs; :func:`advance` is the kernels' rule for when work ends
over such a profile, in Python.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from doppler_gym.sim.stragglers import Straggler


def profile_arrays(
    stragglers: Sequence[Straggler], n_devices: int, divisor: float
) -> tuple[np.ndarray, np.ndarray]:
    """The piecewise-constant speed profiles the kernels read.

    Resources: device ``d`` is ``d``; link ``a -> b`` is ``D + a * D + b``. Each resource's
    stragglers become disjoint segments, sorted by time, where the speed differs from full speed
    (overlaps multiply their factors); times are multiplied by ``divisor`` (reported to internal
    units).

    Returns:
        ``ptr`` ``(D + D*D + 1,) int32``: resource ``r``'s segments are ``ptr[r]:ptr[r+1]``;
        ``seg`` ``(3K,) float64``: segment starts, then ends, then speed factors (K segments).
    """
    d = n_devices
    by_resource: dict[int, list[Straggler]] = {}
    for s in stragglers:
        r = s.index if s.kind == "device" else d + s.index[0] * d + s.index[1]
        by_resource.setdefault(r, []).append(s)
    counts = np.zeros(d + d * d, np.int64)
    starts: list[float] = []
    ends: list[float] = []
    speeds: list[float] = []
    for r in sorted(by_resource):
        group = by_resource[r]
        bounds = sorted({s.start for s in group} | {s.end for s in group})
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            speed = 1.0
            covered = False
            for s in group:
                if s.start <= lo and hi <= s.end:
                    speed *= s.factor
                    covered = True
            if covered:
                starts.append(lo * divisor)
                ends.append(hi * divisor)
                speeds.append(speed)
                counts[r] += 1
    ptr = np.zeros(d + d * d + 1, np.int32)
    np.cumsum(counts, out=ptr[1:])
    seg = np.array(starts + ends + speeds, dtype=np.float64)
    return ptr, seg


def advance(ptr: np.ndarray, seg: np.ndarray, r: int, t: float, work: float) -> float:
    """When work ``work`` (time at full speed) started at ``t`` on resource ``r`` ends: a pure-Python
    twin of the kernels' rule (:func:`doppler_gym.sim.finish_times.advance`), for tests and tools."""
    k_total = seg.shape[0] // 3
    if work == 0.0:
        return t
    for k in range(int(ptr[r]), int(ptr[r + 1])):
        s, e, f = seg[k], seg[k_total + k], seg[2 * k_total + k]
        if e <= t:
            continue
        if s > t:
            if work <= s - t:
                return t + work
            work -= s - t
            t = s
        cap = (e - t) * f
        if work <= cap:
            return t + work / f
        work -= cap
        t = e
    return t + work
