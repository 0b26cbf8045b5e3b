"""Boundary checks for graph arrays: every failure is a ValueError saying what, where and how to fix."""

from __future__ import annotations

import numpy as np


def validate_graph_arrays(
    src: object, dst: object, flops: object, out_bytes: object, where: str = "graph"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Check and normalise the arrays of a DAG; returns contiguous ``(src, dst, flops, out_bytes)``.

    Args:
        src, dst: edge endpoints, ``(n_edges,)`` integer sequences.
        flops, out_bytes: ``(n_ops,)`` non-negative finite costs.
        where: prefix for error messages (a file name or graph name).

    Returns:
        ``src``, ``dst`` as int32 and ``flops``, ``out_bytes`` as float64 copies.

    Raises:
        ValueError: wrong shapes, non-integer endpoints, endpoints out of range, self loops,
            duplicate edges, negative/NaN/inf costs, or a cycle (reported with the ops on it).
    """
    flops_arr = _cost_array(flops, "flops", where)
    bytes_arr = _cost_array(out_bytes, "out_bytes", where)
    n = flops_arr.shape[0]
    if bytes_arr.shape[0] != n:
        raise ValueError(
            f"{where}: flops has {n} entries but out_bytes has {bytes_arr.shape[0]}; "
            f"give one compute cost and one output size per op"
        )
    src_arr = _index_array(src, "src", where)
    dst_arr = _index_array(dst, "dst", where)
    if src_arr.shape != dst_arr.shape:
        raise ValueError(
            f"{where}: {src_arr.shape[0]} edge sources but {dst_arr.shape[0]} edge destinations; "
            f"every edge needs both endpoints"
        )
    for label, arr in (("source", src_arr), ("destination", dst_arr)):
        bad = np.flatnonzero((arr < 0) | (arr >= n))
        if bad.size:
            k = int(bad[0])
            raise ValueError(
                f"{where}: edge {k} has {label} {int(arr[k])}, outside the op range 0..{n - 1} "
                f"({bad.size} such edges); op ids must index the graph's {n} ops"
            )
    loops = np.flatnonzero(src_arr == dst_arr)
    if loops.size:
        k = int(loops[0])
        raise ValueError(f"{where}: edge {k} is a self loop on op {int(src_arr[k])}; remove it")
    if src_arr.size:
        key = src_arr.astype(np.int64) * n + dst_arr
        order = np.argsort(key, kind="stable")
        dup = np.flatnonzero(key[order][1:] == key[order][:-1])
        if dup.size:
            i, j = int(order[dup[0]]), int(order[dup[0] + 1])
            raise ValueError(
                f"{where}: edges {i} and {j} both connect op {int(src_arr[i])} -> op "
                f"{int(dst_arr[i])}; list each producer -> consumer pair once"
            )
    cycle = find_cycle(n, src_arr, dst_arr)
    if cycle is not None:
        shown = " -> ".join(str(v) for v in cycle[:20]) + (" -> ..." if len(cycle) > 20 else "")
        raise ValueError(
            f"{where}: the graph has a cycle through ops {shown} -> {cycle[0]}; a dataflow graph "
            f"must be acyclic (remove or reverse one of these edges)"
        )
    return src_arr, dst_arr, flops_arr, bytes_arr


def validate_memory_array(values: object, n_ops: int, label: str, where: str = "graph") -> np.ndarray:
    """A per-op memory size (``workspace_bytes``, ``persistent_bytes``) as a contiguous ``(n_ops,) float64``
    copy [B]; ``None`` gives zeros.

    Raises:
        ValueError: not one finite number >= 0 per op.
    """
    if values is None:
        return np.zeros(n_ops, dtype=np.float64)
    arr = _cost_array(values, label, where)
    if arr.shape[0] != n_ops:
        raise ValueError(
            f"{where}: {label} has {arr.shape[0]} entries but the graph has {n_ops} ops; give one size "
            f"in bytes per op (0 for none) or None"
        )
    return arr


def _cost_array(values: object, label: str, where: str) -> np.ndarray:
    try:
        arr = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {label} must be a sequence of numbers") from None
    if arr.ndim != 1:
        raise ValueError(f"{where}: {label} must be one-dimensional (one value per op), got shape {arr.shape}")
    bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{where}: {label}[{i}] = {float(arr[i])!r} is not a finite non-negative number "
            f"({bad.size} such ops); costs must be >= 0 and finite"
        )
    return np.ascontiguousarray(arr)


def _index_array(values: object, label: str, where: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int32)
    if arr.ndim != 1:
        raise ValueError(f"{where}: {label} must be one-dimensional, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        as_float = np.asarray(arr, dtype=np.float64) if arr.dtype.kind in "fb" else None
        if as_float is None or not np.all(as_float == np.round(as_float)):
            raise ValueError(f"{where}: edge {label} ids must be integers, got dtype {arr.dtype}")
    if arr.size and (arr.max() > np.iinfo(np.int32).max or arr.min() < np.iinfo(np.int32).min):
        raise ValueError(f"{where}: edge {label} ids exceed the int32 range")
    return np.ascontiguousarray(arr.astype(np.int32))


def find_cycle(n: int, src: np.ndarray, dst: np.ndarray) -> list[int] | None:
    """Return the ops of one directed cycle (in edge order), or ``None`` if the graph is acyclic.

    Kahn's algorithm removes every op that no cycle feeds; the rest all have a remaining
    predecessor, so a backward walk closes a cycle. O(n + E).
    """
    indeg = np.bincount(dst, minlength=n).astype(np.int64)
    order = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    succ = dst[order]
    stack = list(np.flatnonzero(indeg == 0))
    removed = 0
    while stack:
        u = stack.pop()
        removed += 1
        for v in succ[ptr[u] : ptr[u + 1]]:
            indeg[v] -= 1
            if indeg[v] == 0:
                stack.append(int(v))
    if removed == n:
        return None
    # Every op left over has a leftover predecessor, so walking backwards must revisit an op.
    alive = indeg > 0
    back_order = np.argsort(dst, kind="stable")
    back_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=back_ptr[1:])
    pred = src[back_order]
    seen: dict[int, int] = {}
    path: list[int] = []
    u = int(np.flatnonzero(alive)[0])
    while u not in seen:
        seen[u] = len(path)
        path.append(u)
        u = next(int(v) for v in pred[back_ptr[u] : back_ptr[u + 1]] if alive[v])
    return path[seen[u] :][::-1]
