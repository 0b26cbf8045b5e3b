"""HEFT and CPOP list scheduling (Topcuoglu, Hariri & Wu, "Performance-effective and
low-complexity task scheduling for heterogeneous computing", IEEE TPDS 13(3):260-274, 2002).

Both plan with mean costs over devices (w-bar) and device pairs (c-bar) and insert ops into idle
gaps (:class:`~doppler_gym.baselines.timeline.InsertionPlan`). Compute times come from the
devices' speeds (``Costs.comp``), transfer times from the routes' latency and bandwidth. The plan
fixes an order per device; the returned placement keeps only the assignment and the list order,
and its makespan is the work-conserving simulation of that assignment (the plan's own makespan is
in ``info["plan_makespan"]``).
"""

from __future__ import annotations

import time

import numpy as np

from doppler_gym.baselines.common import Costs, finish, resolve
from doppler_gym.baselines.timeline import InsertionPlan, plan_from_ready_list
from doppler_gym.baselines.types import Placement, rank_of
from doppler_gym.graph.analysis import b_level, topological_order
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology

_CP_RTOL = 1e-9  # relative tolerance when matching priorities to the critical-path length


def upward_rank(graph: DataflowGraph, costs: Costs) -> np.ndarray:
    """``(n_ops,)`` rank_u(i) = w-bar(i) + max over successors j of (c-bar(i, j) + rank_u(j)).

    An op's output costs the same to every consumer here, so this is DOPPLER's b-level on mean
    costs (:func:`doppler_gym.graph.analysis.b_level`)."""
    return b_level(graph, costs.mean_comp, costs.mean_comm)


def downward_rank(graph: DataflowGraph, costs: Costs) -> np.ndarray:
    """``(n_ops,)`` rank_d(j) = max over predecessors i of (rank_d(i) + w-bar(i) + c-bar(i, j)); 0 at sources."""
    w, c = costs.mean_comp, costs.mean_comm
    rank = np.zeros(graph.n_ops)
    for v in topological_order(graph).tolist():
        preds = graph.predecessors(v)
        if preds.size:
            rank[v] = float(np.max(rank[preds] + w[preds] + c[preds]))
    return rank


def heft(graph: DataflowGraph, topology: Topology | int, config: SimConfig | None = None) -> Placement:
    """Heterogeneous Earliest Finish Time: ops by decreasing upward rank, each on the device
    where it finishes first (insertion-based; ties to the lowest device id). Deterministic.

    Returns a :class:`Placement` whose ``order`` is the rank order (a topological order: ties
    go to the earlier op in ``topological_order``); ``info["plan_makespan"]`` is the plan's
    makespan in the reported unit.
    """
    started = time.perf_counter()
    graph, topology, config = resolve(graph, topology, config, "heft")
    plan, order = heft_plan(graph, Costs.of(graph, topology, config))
    info = {"plan_makespan": plan.makespan / config.time_divisor}
    return finish("heft", graph, topology, config, plan.device.copy(), order, started, info)


def heft_plan(graph: DataflowGraph, costs: Costs) -> tuple[InsertionPlan, np.ndarray]:
    """HEFT's plan (devices, start and finish times) and its rank order ``(n_ops,) int64``."""
    rank = upward_rank(graph, costs)
    order = np.lexsort((rank_of(topological_order(graph)), -rank)).astype(np.int64)
    plan = InsertionPlan(graph, costs)
    for v in order.tolist():
        start, end = plan.earliest_finish(v)
        d = int(np.argmin(end))
        plan.place(v, d, float(start[d]))
    return plan, order


def cpop(graph: DataflowGraph, topology: Topology | int, config: SimConfig | None = None) -> Placement:
    """Critical Path On a Processor: priority = upward + downward rank; the ops of one critical
    path (priority equal to the critical-path length, followed from the highest-priority source)
    all go to the device that runs them fastest in total; every other op to its earliest-finish
    device (insertion-based). The ready op with the highest priority goes next (ties to the
    earlier op in ``topological_order``). Deterministic.

    Returns a :class:`Placement` whose ``order`` is the selection order; ``info`` holds the plan's
    makespan (reported unit), the critical path's ops and its device.
    """
    started = time.perf_counter()
    graph, topology, config = resolve(graph, topology, config, "cpop")
    costs = Costs.of(graph, topology, config)
    priority = upward_rank(graph, costs) + downward_rank(graph, costs)
    pos = rank_of(topological_order(graph))
    path = _critical_ops(graph, priority)
    cp_device = int(np.argmin(costs.comp[path].sum(axis=0)))
    on_path = np.zeros(graph.n_ops, dtype=bool)
    on_path[path] = True
    plan = InsertionPlan(graph, costs)
    order = plan_from_ready_list(
        plan, priority, pos, lambda v, start, end: cp_device if on_path[v] else int(np.argmin(end))
    )
    info = {"plan_makespan": plan.makespan / config.time_divisor, "critical_ops": path, "critical_device": cp_device}
    return finish("cpop", graph, topology, config, plan.device.copy(), order, started, info)


def _critical_ops(graph: DataflowGraph, priority: np.ndarray) -> list[int]:
    """One critical path: from the source of highest priority, follow a successor whose priority
    equals the critical-path length (the first in edge order)."""
    sources = np.flatnonzero(graph.in_degree == 0)
    if sources.size == 0:  # an empty graph
        return []
    u = int(sources[np.argmax(priority[sources])])
    length = priority[u]
    path = [u]
    while True:
        succ = graph.successors(u)
        on = succ[np.isclose(priority[succ], length, rtol=_CP_RTOL, atol=0.0)] if succ.size else succ
        if on.size == 0:
            return path
        u = int(on[0])
        path.append(u)
