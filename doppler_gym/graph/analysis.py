"""Graph analysis: topological order, DOPPLER's b-level / t-level, critical path.

All functions are iterative (no recursion) and run in O(n + E) after the topological order.
Costs are ``(n_ops,) float64`` arrays in the graph's cost units (FLOP / bytes for physical
graphs, the files' raw integers for paper graphs: divide by 1e10 for the paper's time units).
The makespan lower bound, which needs devices and a runtime model, is
:func:`doppler_gym.sim.bounds.makespan_lower_bound`.
"""

from __future__ import annotations

import heapq

import numpy as np

from doppler_gym.graph.types import DataflowGraph

__all__ = ["topological_order", "b_level", "t_level", "critical_path"]


def topological_order(graph: DataflowGraph) -> np.ndarray:
    """The lexicographically smallest topological order of the ops.

    Kahn's algorithm, always taking the ready op with the smallest id. When every edge goes from
    a smaller to a larger id (true for all paper files) this is ``0..n-1`` and costs O(n + E);
    otherwise a heap makes it O(n log n + E).

    Returns:
        ``(n_ops,) int32`` op ids; every edge's producer comes before its consumer.
    """
    n = graph.n_ops
    if graph.n_edges == 0 or bool(np.all(graph.src < graph.dst)):
        return np.arange(n, dtype=np.int32)
    indeg = graph.in_degree.tolist()
    ptr = graph.succ_ptr.tolist()
    succ = graph.succ.tolist()
    heap = [v for v in range(n) if indeg[v] == 0]
    order: list[int] = []
    while heap:
        u = heapq.heappop(heap)
        order.append(u)
        for v in succ[ptr[u] : ptr[u + 1]]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(heap, v)
    return np.array(order, dtype=np.int32)  # complete: DataflowGraph guarantees a DAG


def b_level(graph: DataflowGraph, comp: np.ndarray | None = None, comm: np.ndarray | None = None) -> np.ndarray:
    """DOPPLER's bottom level: the longest cost from each op to a sink, the op included.

    ``b(v) = comp(v)`` if ``v`` has no successors, else ``comp(v) + comm(v) + max_{s in succ(v)} b(s)``
    (the authors' ``cp_utils``; ``comm(v)`` is paid once per op, for sending its output).

    Args:
        graph: the graph.
        comp: ``(n_ops,)`` compute cost per op; defaults to ``graph.flops``.
        comm: ``(n_ops,)`` communication cost per op; defaults to ``graph.out_bytes``.

    Returns:
        ``(n_ops,) float64`` b-level per op, in the units of ``comp``/``comm``.
    """
    comp_a, comm_a = _costs(graph, comp, comm)
    return _level(graph.succ_ptr, graph.succ, topological_order(graph)[::-1], comp_a, comm_a)


def t_level(graph: DataflowGraph, comp: np.ndarray | None = None, comm: np.ndarray | None = None) -> np.ndarray:
    """DOPPLER's top level: b-level on the reversed graph.

    ``t(v) = comp(v)`` if ``v`` has no predecessors, else ``comp(v) + comm(v) + max_{p in pred(v)} t(p)``.
    Unlike the textbook t-level this INCLUDES ``v``'s own comp and comm (as the authors' code).

    Args:
        graph: the graph.
        comp: ``(n_ops,)`` compute cost per op; defaults to ``graph.flops``.
        comm: ``(n_ops,)`` communication cost per op; defaults to ``graph.out_bytes``.

    Returns:
        ``(n_ops,) float64`` t-level per op, in the units of ``comp``/``comm``.
    """
    comp_a, comm_a = _costs(graph, comp, comm)
    return _level(graph.pred_ptr, graph.pred, topological_order(graph), comp_a, comm_a)


def critical_path(graph: DataflowGraph, comp: np.ndarray | None = None) -> tuple[float, list[int]]:
    """The compute-only longest path (no communication cost).

    Args:
        graph: the graph.
        comp: ``(n_ops,)`` compute cost per op; defaults to ``graph.flops``.

    Returns:
        ``(length, ops)``: the sum of ``comp`` along the path (units of ``comp``) and its op ids
        from a source to a sink (zero-cost ops included). Ties go to the source with the smallest
        id, then to the first successor in edge order. ``(0.0, [])`` for an empty graph.
    """
    comp_a, _ = _costs(graph, comp, None)
    if graph.n_ops == 0:
        return 0.0, []
    zero = np.zeros(graph.n_ops, dtype=np.float64)
    b = _level(graph.succ_ptr, graph.succ, topological_order(graph)[::-1], comp_a, zero)
    ptr, succ = graph.succ_ptr, graph.succ
    sources = np.flatnonzero(graph.in_degree == 0)
    u = int(sources[np.argmax(b[sources])])
    path = [u]
    while ptr[u + 1] > ptr[u]:
        children = succ[ptr[u] : ptr[u + 1]]
        u = int(children[np.argmax(b[children])])
        path.append(u)
    return float(b[path[0]]), path


# ---------------------------------------------------------------------- helpers
def _costs(
    graph: DataflowGraph, comp: np.ndarray | None, comm: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """``(comp, comm)`` as ``(n_ops,) float64`` arrays, defaulting to the graph's columns."""
    out = []
    for label, values, default in (("comp", comp, graph.flops), ("comm", comm, graph.out_bytes)):
        arr = default if values is None else np.asarray(values, dtype=np.float64)
        if arr.shape != (graph.n_ops,):
            raise ValueError(
                f"{label} must have shape ({graph.n_ops},) (one value per op of graph "
                f"{graph.name!r}), got {arr.shape}"
            )
        out.append(arr)
    return out[0], out[1]


def _level(
    ptr: np.ndarray, nbr: np.ndarray, order: np.ndarray, comp: np.ndarray, comm: np.ndarray
) -> np.ndarray:
    """``L(v) = comp(v)`` if ``v`` has no neighbours, else ``comp(v) + comm(v) + max L(nbr)``.

    ``ptr``/``nbr`` is a CSR adjacency and ``order`` visits every neighbour before the op itself.
    Plain Python lists keep the per-op cost low; O(n + E).
    """
    ptr_l, nbr_l = ptr.tolist(), nbr.tolist()
    comp_l, comm_l = comp.tolist(), comm.tolist()
    level = [0.0] * len(comp_l)
    for v in order.tolist():
        lo, hi = ptr_l[v], ptr_l[v + 1]
        if lo == hi:
            level[v] = comp_l[v]
        else:
            level[v] = comp_l[v] + comm_l[v] + max(level[w] for w in nbr_l[lo:hi])
    return np.array(level, dtype=np.float64)
