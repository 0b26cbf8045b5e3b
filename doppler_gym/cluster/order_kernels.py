"""Compiled (Numba) steps of :class:`~doppler_gym.cluster.schedulers.HintedSort`: the start of a sort from the
last order, and the sorted order gathered with the check that equal keys are in index order (each O(k) in
one pass, where NumPy's fancy indexing takes several)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def start_from_last(last, jobs, mask, key):
    """The jobs of ``jobs`` (``(k,) int64``) in the order they have in ``last`` (``(m,) int64``, distinct), then
    those not in ``last`` in the order of ``jobs``: a ``(k,) int64`` permutation of ``jobs``, and their keys
    (``key``: ``(n,)``, one per job index; ``(k,)``). ``mask``: ``(n,) bool`` scratch over job indices, all False
    on entry and on return."""
    for j in jobs:
        mask[j] = True
    out = np.empty(jobs.size, dtype=np.int64)
    keys = np.empty(jobs.size, dtype=key.dtype)
    m = _take_marked(last, mask, key, out, keys, 0)
    _take_marked(jobs, mask, key, out, keys, m)
    return out, keys


@njit(cache=True, inline="always")
def _take_marked(seq, mask, key, out, keys, m):
    """Append each job of ``seq`` marked in ``mask`` to ``out[m:]`` (its key to ``keys[m:]``) and unmark it;
    returns the new ``m``."""
    for j in seq:
        if mask[j]:
            out[m] = j
            keys[m] = key[j]
            m += 1
            mask[j] = False
    return m


@njit(cache=True)
def gather_sorted(start, keys, pos):
    """``start[pos]`` (``start``: ``(k,) int64`` job indices, ``keys``: ``(k,)`` their keys, ``pos``: ``(k,) int64``
    the stable sort of ``keys``) and whether every two neighbours in it with equal keys are in ascending index
    order (then it is the sort by (key, index))."""
    out = np.empty(start.size, dtype=np.int64)
    in_order = True
    for p in range(start.size):
        out[p] = start[pos[p]]
        if p and keys[pos[p]] == keys[pos[p - 1]] and out[p] < out[p - 1]:
            in_order = False
    return out, in_order
