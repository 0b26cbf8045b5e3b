"""Plumbing shared by the baselines: input checks, cost tables in simulator time, and the final
re-simulation that turns an assignment into a :class:`~doppler_gym.baselines.types.Placement`.

Cost tables are in the simulator's internal time unit (seconds, or raw cost units), i.e. before
``SimConfig.time_divisor``; a :class:`Placement`'s makespan is in the reported unit.
"""

from __future__ import annotations

import time

import numpy as np

from doppler_gym.baselines.types import Placement, rank_of
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.instances import default_config, resolve_topology
from doppler_gym.sim.api import simulate
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.costs import Costs  # noqa: F401  (re-exported for the baselines)
from doppler_gym.topology.types import Topology


def resolve(
    graph: object, topology: object, config: object, where: str
) -> tuple[DataflowGraph, Topology, SimConfig]:
    """Check a baseline's inputs (objects, not names): an int topology means ``Topology.uniform(n)``
    and a ``None`` config the graph's :func:`~doppler_gym.instances.default_config` on that topology.

    Raises:
        TypeError: a graph that is not a DataflowGraph, a topology that is neither a Topology
            nor an int, or a config that is not a SimConfig.
        ValueError: an int topology below 1.
    """
    if not isinstance(graph, DataflowGraph):
        raise TypeError(
            f"{where}: graph must be a DataflowGraph, got {type(graph).__name__}; load one with "
            f"doppler_gym.load_graph(path_or_name) or doppler_gym.instances.resolve_graph(spec)"
        )
    if not isinstance(topology, (Topology, int, np.integer)) or isinstance(topology, bool):
        raise TypeError(
            f"{where}: topology must be a Topology or a device count, got {type(topology).__name__}; "
            f"e.g. 4, Topology.uniform(4) or Topology.preset('p100x4')"
        )
    topology = resolve_topology(topology, f"{where}: topology")
    if config is None:
        config = default_config(graph, topology)
    elif not isinstance(config, SimConfig):
        raise TypeError(
            f"{where}: config must be a SimConfig or None (None = doppler_gym.instances.default_config(graph, "
            f"topology)), got {type(config).__name__}"
        )
    return graph, topology, config


def check_seed(seed: object, where: str) -> int:
    """``seed`` as an int >= 0, or a clear ValueError."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{where}: seed must be an integer >= 0, got {seed!r}")
    return int(seed)


def queue_priorities(order: np.ndarray, config: SimConfig) -> np.ndarray | None:
    """The ``priorities`` argument of ``simulate`` for a placement with this ``order``:
    the rank of each op under ``queue_order="priority"``, else ``None``."""
    return rank_of(order) if config.queue_order == "priority" else None


def finish(
    name: str,
    graph: DataflowGraph,
    topology: Topology,
    config: SimConfig,
    assignment: np.ndarray,
    order: np.ndarray,
    started: float,
    info: dict | None = None,
) -> Placement:
    """Simulate ``assignment`` (with ``order`` as priorities where the config uses them) and
    wrap it as a :class:`Placement`; ``started`` is the ``time.perf_counter()`` of the start."""
    trace = simulate(graph, assignment, topology, priorities=queue_priorities(order, config), config=config)
    return Placement(
        assignment=assignment, order=order, name=name, makespan=trace.makespan,
        seconds=time.perf_counter() - started, info=dict(info or {}), memory=trace.memory,
    )
