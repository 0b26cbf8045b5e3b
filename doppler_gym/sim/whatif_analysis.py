"""What the stragglers of one run cost: :func:`whatif`.

As ByteDance's what-if analysis of stragglers does (Lin et al., "Understanding Stragglers in Large
Model Training Using What-if Analysis", OSDI 2025): simulate the run without them and compare. The
slowdown is ``makespan / nominal makespan``; a straggler's cost is ``makespan(all) - makespan(all but
it)`` (``"leave_one_out"``, the default: what removing it alone would save) or ``makespan(it alone) -
nominal makespan`` (``"alone"``). Times are in the run's reported unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from doppler_gym.sim.api import simulate
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.stragglers import Straggler, as_stragglers

if TYPE_CHECKING:
    from doppler_gym.graph.types import DataflowGraph
    from doppler_gym.sim.trace import Trace
    from doppler_gym.topology.types import Topology

WHATIF_METHODS = ("leave_one_out", "alone")


@dataclass(frozen=True)
class WhatIf:
    """What the stragglers of one run cost (:func:`whatif`).

    Attributes:
        stragglers: the ``k`` stragglers, in the order of ``cost``.
        makespan: with all of them [reported unit].
        nominal_makespan: with none [reported unit].
        cost: ``(k,) float64`` makespan each one cost [reported unit] (``method``).
        method: ``"leave_one_out"`` (``makespan - makespan without it``) or ``"alone"``
            (``makespan with only it - nominal``).
        trace: the :class:`~doppler_gym.sim.trace.Trace` with all of them (its
            ``nominal_makespan`` and ``straggler_cost`` filled).
    """

    stragglers: tuple[Straggler, ...]
    makespan: float
    nominal_makespan: float
    cost: np.ndarray
    method: str
    trace: Trace

    @property
    def slowdown(self) -> float:
        """``makespan / nominal_makespan`` (1.0 when the nominal makespan is 0)."""
        return self.makespan / self.nominal_makespan if self.nominal_makespan > 0 else 1.0


def whatif(
    graph: DataflowGraph,
    assignment: object,
    topology: Topology | None = None,
    priorities: object | None = None,
    config: SimConfig | None = None,
    stragglers: Sequence[Straggler] | None = None,
    method: str = "leave_one_out",
) -> WhatIf:
    """Simulate with the stragglers and without them, and the cost of each (``k + 2`` runs).

    Args:
        graph, assignment, topology, priorities: as in :func:`doppler_gym.simulate`.
        config: the runtime model (``SimConfig()`` when ``None``); its own ``stragglers`` are used
            when ``stragglers`` is ``None``.
        stragglers: the stragglers to study.
        method: ``"leave_one_out"`` or ``"alone"`` (module docstring).
    """
    if config is None:
        config = SimConfig()
    if not isinstance(config, SimConfig):
        raise TypeError(f"config must be a SimConfig, got {type(config).__name__}")
    if method not in WHATIF_METHODS:
        raise ValueError(f"whatif: method must be one of {WHATIF_METHODS}, got {method!r}")
    chosen = config.stragglers if stragglers is None else as_stragglers(stragglers)

    def run(subset: tuple[Straggler, ...]) -> Trace:
        return simulate(graph, assignment, topology=topology, priorities=priorities,
                        config=replace(config, stragglers=subset))

    full = run(chosen)
    nominal = run(()).makespan
    cost = np.empty(len(chosen), np.float64)
    for i in range(len(chosen)):
        if method == "leave_one_out":
            cost[i] = full.makespan - run(chosen[:i] + chosen[i + 1 :]).makespan
        else:
            cost[i] = run((chosen[i],)).makespan - nominal
    cost.setflags(write=False)
    trace = full.with_straggler_costs(nominal, cost)
    return WhatIf(stragglers=chosen, makespan=float(full.makespan), nominal_makespan=float(nominal), cost=cost,
                  method=method, trace=trace)
