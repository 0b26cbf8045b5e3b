"""Binary min-heaps on flat arrays for the Numba kernels, keyed by ``(time, key)``.

A heap is three parallel arrays ``h_time`` (float64), ``h_key`` (int64) and ``h_code`` (int64),
optionally a segment ``[base, base + size)`` of them (one heap per device queue). Indices are
unsigned (:mod:`doppler_gym.sim.unsigned`). The event loop's own heap has its sift-up and pop in
:mod:`doppler_gym.sim.events` (``sift_up_appended``, ``pop_event``: faster there; it says so).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from doppler_gym.sim.unsigned import U0, U1, U


@njit(cache=True, inline="always")
def less(t1, s1, t2, s2):
    # Bitwise, not short-circuit: compiles to flag arithmetic instead of unpredictable branches.
    return (t1 < t2) | ((t1 == t2) & (s1 < s2))


@njit(cache=True, inline="always")
def heap_push(h_time, h_key, h_code, base, size, t, key, code):
    """Insert ``(t, key) -> code`` into the heap at ``h_*[base:base+size]``."""
    b = np.uint64(base)
    i = np.uint64(size)
    while i != U0:
        parent = (i - U1) >> U1
        p = b + parent
        if less(t, key, h_time[p], h_key[p]):
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
def heap_pop(h_time, h_key, h_code, base, size):
    """Remove the smallest entry of the heap at ``base`` (``size`` entries); returns its code."""
    b = np.uint64(base)
    top = h_code[b]
    m = np.uint64(size - 1)
    q = b + m
    t = h_time[q]
    key = h_key[q]
    code = h_code[q]
    i = U0
    while True:
        child = i + i + U1
        if child >= m:
            break
        c = b + child
        if child + U1 < m:
            right = U(less(h_time[c + U1], h_key[c + U1], h_time[c], h_key[c]))  # branch-free
            c += right
            child += right
        if less(h_time[c], h_key[c], t, key):
            q = b + i
            h_time[q] = h_time[c]
            h_key[q] = h_key[c]
            h_code[q] = h_code[c]
            i = child
        else:
            break
    if m != U0:
        q = b + i
        h_time[q] = t
        h_key[q] = key
        h_code[q] = code
    return top


@njit(cache=True, inline="always")
def heap_append(h_time, h_key, h_code, h_size, t, key, code):
    """Append ``(t, key) -> code`` to the heap arrays, not yet in heap order (the top of the event
    loop sifts appended entries up in push order); returns the new size."""
    h_time[U(h_size)] = t
    h_key[U(h_size)] = key
    h_code[U(h_size)] = code
    return h_size + 1
