"""The planning state of insertion-based list schedulers (HEFT, CPOP, PEFT).

A plan fixes each op's device and start time. An op may be inserted into an idle gap between ops
already planned on a device if it fits there after its data is ready (Topcuoglu, Hariri & Wu,
"Performance-effective and low-complexity task scheduling for heterogeneous computing", IEEE
TPDS 13(3):260-274, 2002, section 4.1). Times are the simulator's internal unit, uncontended.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Callable

import numpy as np

from doppler_gym.baselines.common import Costs
from doppler_gym.graph.types import DataflowGraph


class InsertionPlan:
    """Ops planned so far: device, start and finish of each, and busy intervals per device.

    Attributes:
        device: ``(n_ops,) int64`` device of each planned op, -1 if not planned.
        start: ``(n_ops,) float64`` planned start (0 if not planned).
        finish: ``(n_ops,) float64`` planned finish (0 if not planned).
    """

    def __init__(self, graph: DataflowGraph, costs: Costs) -> None:
        self.graph = graph
        self.costs = costs
        n, d = graph.n_ops, costs.n_devices
        self.device = np.full(n, -1, dtype=np.int64)
        self.start = np.zeros(n)
        self.finish = np.zeros(n)
        self._starts: list[list[float]] = [[] for _ in range(d)]  # sorted busy-interval starts per device
        self._ends: list[list[float]] = [[] for _ in range(d)]  # their ends, aligned

    @property
    def makespan(self) -> float:
        """Latest planned finish."""
        return float(self.finish.max()) if self.finish.size else 0.0

    def data_ready(self, op: int) -> np.ndarray:
        """``(D,)`` when all of ``op``'s inputs (planned already) could be on each device."""
        preds = self.graph.predecessors(op)
        if preds.size == 0:
            return np.zeros(self.costs.n_devices)
        src = self.device[preds]
        arrive = (
            self.finish[preds][:, None]
            + self.costs.latency[src]
            + self.costs.out_bytes[preds][:, None] * self.costs.inv_bw[src]
        )  # (k, D); zero transfer on the producer's own device (zero diagonal)
        return arrive.max(axis=0)

    def earliest_fit(self, device: int, ready: float, duration: float) -> float:
        """Earliest start >= ``ready`` of a ``duration``-long op on ``device``: the first idle gap
        it fits in, else after the device's last planned op.

        No gap that closes before ``ready`` can hold the op, so the scan starts (by bisection) at
        the first busy interval that starts at or after ``ready``; the gap before it opens at the
        latest end so far. Every op is placed where it fits (:meth:`place`), so no interval starts
        strictly inside another: the latest end before index ``k`` is among the intervals that
        share the start of interval ``k - 1`` (a zero-length op placed at another's start shares
        it). Cost: O(log n) plus the gaps tried, instead of a scan from time 0.
        """
        starts, ends = self._starts[device], self._ends[device]
        k = bisect_left(starts, ready)
        prev_end = 0.0
        j = k - 1
        while j >= 0 and starts[j] == starts[k - 1]:
            prev_end = max(prev_end, ends[j])
            j -= 1
        for i in range(k, len(starts)):
            t = max(ready, prev_end)
            if t + duration <= starts[i]:
                return t
            prev_end = max(prev_end, ends[i])
        return max(ready, prev_end)

    def earliest_finish(self, op: int) -> tuple[np.ndarray, np.ndarray]:
        """``(start (D,), finish (D,))``: ``op``'s insertion-based earliest start and finish on each device."""
        ready = self.data_ready(op)
        comp = self.costs.comp[op]
        start = np.array([self.earliest_fit(d, ready[d], comp[d]) for d in range(comp.shape[0])])
        return start, start + comp

    def place(self, op: int, device: int, start: float) -> None:
        """Plan ``op`` on ``device`` from ``start``, a start where it fits (:meth:`earliest_fit`'s or
        :meth:`earliest_finish`'s for that device)."""
        end = start + self.costs.comp[op, device]
        k = bisect_right(self._starts[device], start)
        self._starts[device].insert(k, start)
        self._ends[device].insert(k, end)
        self.device[op] = device
        self.start[op] = start
        self.finish[op] = end


def plan_from_ready_list(
    plan: InsertionPlan,
    priority: np.ndarray,
    pos: np.ndarray,
    choose: Callable[[int, np.ndarray, np.ndarray], int],
) -> np.ndarray:
    """Plan every op from a ready list: the ready op with the highest ``priority`` next (ties to
    the lower ``pos``), on the device ``choose(op, start, finish)`` returns, given its
    insertion-based earliest start and finish on each device (both ``(D,)``).

    Args:
        plan: an empty plan; filled in place.
        priority: ``(n_ops,)`` higher goes first.
        pos: ``(n_ops,)`` tie-break, e.g. the position in ``topological_order``.
        choose: the device rule.

    Returns:
        The selection order, ``(n_ops,) int64`` (a topological order).
    """
    graph = plan.graph
    waiting = graph.in_degree.tolist()
    heap = [(-priority[v], pos[v], v) for v in range(graph.n_ops) if waiting[v] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, _, v = heapq.heappop(heap)
        start, end = plan.earliest_finish(v)
        d = choose(v, start, end)
        plan.place(v, d, float(start[d]))
        order.append(v)
        for s in graph.successors(v).tolist():
            waiting[s] -= 1
            if waiting[s] == 0:
                heapq.heappush(heap, (-priority[s], pos[s], s))
    return np.array(order, dtype=np.int64)
