"""PEFT, Predict Earliest Finish Time (Arabnejad & Barbosa, "List scheduling algorithm for
heterogeneous systems by an optimistic cost table", IEEE TPDS 25(3):682-694, 2014).

The optimistic cost table OCT(t, p) is the longest remaining path after ``t`` if ``t`` ran on
``p`` and every later op got its best device, ignoring device contention:
``OCT(t, p) = max over successors s of min over p' of [OCT(s, p') + w(s, p') + c(t: p -> p')]``,
0 for sinks. Ops go in decreasing ``mean_p OCT(t, p)`` from a ready list; each to the device that
minimises its (insertion-based) earliest finish plus ``OCT(t, p)``. The transfer ``c`` is the real
time between the two devices (equal to the paper's mean on uniform links), as in SAGA's PEFT.
"""

from __future__ import annotations

import time

import numpy as np

from doppler_gym.baselines.common import Costs, finish, resolve
from doppler_gym.baselines.timeline import InsertionPlan, plan_from_ready_list
from doppler_gym.baselines.types import Placement, rank_of
from doppler_gym.graph.analysis import topological_order
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology


def optimistic_cost_table(graph: DataflowGraph, costs: Costs) -> np.ndarray:
    """``(n_ops, D) float64`` OCT(t, p), in the simulator's internal time unit."""
    oct_ = np.zeros((graph.n_ops, costs.n_devices))
    for t in topological_order(graph)[::-1].tolist():
        succ = graph.successors(t)
        if succ.size == 0:
            continue
        rest = oct_[succ] + costs.comp[succ]  # (k, D'): from each successor on, if it runs on D'
        via = rest[:, None, :] + costs.transfer(t)[None, :, :]  # (k, D, D'): t on D, successor on D'
        oct_[t] = via.min(axis=2).max(axis=0)
    return oct_


def peft(graph: DataflowGraph, topology: Topology | int, config: SimConfig | None = None) -> Placement:
    """Predict Earliest Finish Time list scheduling (see the module docstring). Deterministic:
    ties go to the earlier op in ``topological_order`` and to the lowest device id.

    Returns a :class:`Placement` whose ``order`` is the selection order;
    ``info["plan_makespan"]`` is the plan's makespan in the reported unit.
    """
    started = time.perf_counter()
    graph, topology, config = resolve(graph, topology, config, "peft")
    costs = Costs.of(graph, topology, config)
    oct_ = optimistic_cost_table(graph, costs)
    plan = InsertionPlan(graph, costs)
    order = plan_from_ready_list(
        plan, oct_.mean(axis=1), rank_of(topological_order(graph)), lambda v, start, end: int(np.argmin(end + oct_[v]))
    )
    info = {"plan_makespan": plan.makespan / config.time_divisor}
    return finish("peft", graph, topology, config, plan.device.copy(), order, started, info)
