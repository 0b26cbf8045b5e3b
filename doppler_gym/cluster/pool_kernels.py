"""Compiled (Numba) free-GPU index of a :class:`~doppler_gym.cluster.gpu_pool.GpuPool`: packing and the
bookkeeping of taking and freeing GPUs, one job or a whole admission's worth in one call.

The index is a :class:`FreeIndex` of arrays (``G`` GPUs, ``N`` nodes, ``T`` GPU types, nodes of at most ``C``
GPUs, ``W = ceil(N / 64)`` words):

- ``is_free``: ``(G,) bool``, GPU holds no job;
- ``n_free``: ``(N,) int64`` free GPUs per node;
- ``bits``: ``(T, C + 1, W) uint64``, bit ``nd`` of ``bits[t, c]`` set iff node ``nd`` is of type ``t`` and has
  exactly ``c > 0`` free GPUs (the node buckets: the lowest node of a bucket is its lowest set bit);
- ``bucket_n``: ``(T, C + 1) int64`` nodes per bucket;
- geometry (read-only): ``node_first`` ``(N + 1,) int64`` first GPU id of each node (GPU ids run node by
  node), ``gpu_node`` ``(G,) int64``, ``node_tid`` ``(N,) int64`` type index of each node.

:func:`pack_into` is :func:`doppler_gym.cluster.placement.pack` over the free GPUs of one type: the fullest node
holding the job (lowest id among equals), its lowest free GPUs; else the nodes with the most free GPUs first
(lowest id among equals), each node's lowest free GPUs, in that order. :func:`pack_take_many` packs and takes
for a list of jobs one after another (each sees the GPUs the earlier ones took), exactly as the per-job calls.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

_ONE = np.uint64(1)


class FreeIndex(NamedTuple):
    """The arrays of the module docstring (the live index and the cluster's geometry)."""

    is_free: np.ndarray
    n_free: np.ndarray
    bits: np.ndarray
    bucket_n: np.ndarray
    node_first: np.ndarray
    gpu_node: np.ndarray
    node_tid: np.ndarray


def new_index(node_gpus: list[int], node_tid: list[int], n_types: int) -> FreeIndex:
    """The index of a cluster with every GPU free: ``node_gpus`` GPUs per node (``N`` ints >= 1) and
    ``node_tid`` each node's type index (``N`` ints in ``[0, n_types)``)."""
    sizes = np.asarray(node_gpus, dtype=np.int64)
    n_nodes = len(sizes)
    node_first = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    idx = FreeIndex(is_free=np.ones(int(node_first[-1]), dtype=np.bool_), n_free=sizes.copy(),
                    bits=np.zeros((n_types, int(sizes.max()) + 1, (n_nodes + 63) // 64), dtype=np.uint64),
                    bucket_n=np.zeros((n_types, int(sizes.max()) + 1), dtype=np.int64), node_first=node_first,
                    gpu_node=np.repeat(np.arange(n_nodes, dtype=np.int64), sizes),
                    node_tid=np.asarray(node_tid, dtype=np.int64))
    for nd in range(n_nodes):
        _bucket_set(idx.bits, idx.bucket_n, int(idx.node_tid[nd]), int(sizes[nd]), nd, True)
    return idx


@njit(cache=True)
def _ctz(x):
    """Trailing zero bits of the nonzero ``uint64`` ``x`` (the index of its lowest set bit)."""
    n = 0
    for shift in (32, 16, 8, 4, 2, 1):
        mask = (_ONE << np.uint64(shift)) - _ONE
        if (x & mask) == np.uint64(0):
            x >>= np.uint64(shift)
            n += shift
    return n


@njit(cache=True)
def _bucket_set(bits, bucket_n, t, c, nd, on):
    """Put node ``nd`` into (``on``) or out of the bucket ``(t, c)``."""
    bit = _ONE << np.uint64(nd & 63)
    if on:
        bits[t, c, nd >> 6] |= bit
        bucket_n[t, c] += 1
    else:
        bits[t, c, nd >> 6] &= ~bit
        bucket_n[t, c] -= 1


@njit(cache=True)
def _lowest_node(bits, t, c):
    """The lowest node id of bucket ``(t, c)`` (which must be nonempty)."""
    for w in range(bits.shape[2]):
        x = bits[t, c, w]
        if x != np.uint64(0):
            return w * 64 + _ctz(x)
    return -1


@njit(cache=True)
def _node_lowest_free(is_free, node_first, nd, m, out, pos):
    """Write the ``m`` lowest free GPU ids of node ``nd`` into ``out[pos:pos + m]``; returns ``pos + m``."""
    g = node_first[nd]
    while m > 0:
        if is_free[g]:
            out[pos] = g
            pos += 1
            m -= 1
        g += 1
    return pos


@njit(cache=True)
def pack_into(is_free, n_free, bits, bucket_n, node_first, k, t, out, pos):
    """Pack ``k`` free GPUs of type ``t`` (at least ``k`` must be free) into ``out[pos:pos + k]`` (``int64``),
    in :func:`placement.pack`'s order; reads the index only. Returns ``pos + k``."""
    top = bucket_n.shape[1] - 1
    for c in range(k, top + 1):
        if bucket_n[t, c] > 0:
            return _node_lowest_free(is_free, node_first, _lowest_node(bits, t, c), k, out, pos)
    left = k
    for c in range(top, 0, -1):
        if bucket_n[t, c] == 0:
            continue
        for w in range(bits.shape[2]):
            x = bits[t, c, w]
            while x != np.uint64(0):
                nd = w * 64 + _ctz(x)
                x &= x - _ONE
                m = min(c, left)
                pos = _node_lowest_free(is_free, node_first, nd, m, out, pos)
                left -= m
                if left == 0:
                    return pos
    return pos


@njit(cache=True)
def set_busy(is_free, n_free, bits, bucket_n, gpu_node, node_tid, gpus, lo, hi, busy):
    """GPUs ``gpus[lo:hi]`` (``int64`` ids) become busy (``busy``: each must be free) or free (each must be busy):
    ``is_free``, the node counts and buckets. Returns whether they lie on more than one node."""
    spans = False
    first = gpu_node[gpus[lo]] if hi > lo else -1
    for p in range(lo, hi):
        g = gpus[p]
        nd = gpu_node[g]
        spans = spans or nd != first
        t, c = node_tid[nd], n_free[nd]
        if c > 0:
            _bucket_set(bits, bucket_n, t, c, nd, False)
        c = c - 1 if busy else c + 1
        n_free[nd] = c
        is_free[g] = not busy
        if c > 0:
            _bucket_set(bits, bucket_n, t, c, nd, True)
    return spans


@njit(cache=True)
def pack_take_many(is_free, n_free, bits, bucket_n, node_first, gpu_node, node_tid, needs, t, out, spans):
    """For each job in turn (``needs``: ``(m,) int64`` GPUs each, all of type ``t`` and free enough), pack its
    GPUs (:func:`pack_into`) and take them: ``out`` (``(needs.sum(),) int64``) gets the jobs' GPU ids one job
    after another, ``spans`` (``(m,) bool``) whether each job's lie on more than one node."""
    pos = 0
    for j in range(needs.size):
        end = pack_into(is_free, n_free, bits, bucket_n, node_first, needs[j], t, out, pos)
        spans[j] = set_busy(is_free, n_free, bits, bucket_n, gpu_node, node_tid, out, pos, end, True)
        pos = end
