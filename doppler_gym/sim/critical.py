"""The critical chain of a simulated run: the ops whose timing sets the makespan.

On a work-conserving runtime an op starts when its last input has arrived or when its device frees
up, whichever is later. Walking back from the op that ends last, each step goes to what held the
current op back: the producer of its last-arriving input (the data dependence binds) or the op that
ran before it on its device (the device binds). The walk ends at an op that started at time 0. Moving
any op off this chain leaves the makespan as it is unless it disturbs an op on it; shortening the
chain is the only way to a shorter run (the critical-path neighbourhoods of job-shop scheduling:
Nowicki & Smutnicki, "A fast taboo search algorithm for the job shop problem", Management Science
42(6):797-813, 1996).
"""

from __future__ import annotations

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.trace import Trace


def critical_chain(graph: DataflowGraph, trace: Trace, rtol: float = 1e-9) -> np.ndarray:
    """The ops of ``trace``'s critical chain, earliest first (module docstring).

    Args:
        graph: the graph ``trace`` ran.
        trace: a run of ``graph`` (:func:`~doppler_gym.sim.api.simulate`).
        rtol: two times count as equal within ``rtol * makespan``.

    Returns:
        ``(k,) int64`` op ids, ``1 <= k <= n_ops`` (empty for a graph without ops). Where an input's
        arrival and the device's previous op bind at the same time the walk follows the input; where
        neither binds within the tolerance (a transfer that queued for a link, a stream that freed up
        at another time) it ends there.

    Raises:
        ValueError: ``trace`` is not a run of ``graph`` (its op count differs).
    """
    n = graph.n_ops
    start, end, device = trace.start, trace.end, np.asarray(trace.assignment)
    if start.shape[0] != n:
        raise ValueError(f"critical_chain: the trace has {start.shape[0]} ops but graph {graph.name!r} has {n}; "
                         f"give the trace of a run of this graph")
    if n == 0:
        return np.empty(0, dtype=np.int64)
    tol = rtol * max(abs(trace.makespan), np.finfo(np.float64).tiny)
    arrival = np.where(np.isnan(trace.edge_end), end[graph.src], trace.edge_end)  # (n_edges,) input arrival
    by_device = np.lexsort((end, device))  # ops grouped by device, by end time within one
    device_ends = end[by_device]
    device_ptr = np.searchsorted(device[by_device], np.arange(trace.n_devices + 1))
    v = int(np.argmax(end))
    chain, seen = [v], {v}
    while start[v] > tol:
        v = _binding_op(graph, v, start[v], tol, arrival, device[v], by_device, device_ends, device_ptr)
        if v < 0 or v in seen:
            break
        chain.append(v)
        seen.add(v)
    return np.array(chain[::-1], dtype=np.int64)


def _binding_op(graph: DataflowGraph, v: int, began: float, tol: float, arrival: np.ndarray, dev: int,
                by_device: np.ndarray, device_ends: np.ndarray, device_ptr: np.ndarray) -> int:
    """What held ``v`` back until ``began``: the producer of its latest input arriving then, else
    an op of its device ending then; -1 if neither."""
    edges = graph.pred_edge[graph.pred_ptr[v]:graph.pred_ptr[v + 1]]
    if edges.size:
        last = int(np.argmax(arrival[edges]))
        if arrival[edges[last]] >= began - tol:
            return int(graph.src[edges[last]])
    lo, hi = device_ptr[dev], device_ptr[dev + 1]
    k = lo + int(np.searchsorted(device_ends[lo:hi], began + tol, side="right")) - 1
    while k >= lo and device_ends[k] >= began - tol:
        if by_device[k] != v:
            return int(by_device[k])
        k -= 1
    return -1
