"""The makespan lower bound, in the unit the simulator reports for a given config."""

from __future__ import annotations

import numpy as np

from doppler_gym.graph.analysis import critical_path
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.costs import Costs
from doppler_gym.topology.types import Topology

_DEFAULT_CONFIG = SimConfig()  # simulate's default
BOUND_RTOL = 1e-12  # a makespan within this relative distance of the lower bound is optimal


def bound_proves_optimality(config: SimConfig) -> bool:
    """Whether a placement whose makespan reaches :func:`makespan_lower_bound` is optimal under
    ``config``: one stream per device and no jitter (with jitter the bound holds for the
    deterministic model only, so reaching it proves nothing about a random draw)."""
    return config.streams == 1 and not config.has_jitter


def reaches_bound(makespan: float, bound: float, config: SimConfig) -> bool:
    """Whether ``makespan`` [``config``'s unit] is within :data:`BOUND_RTOL` of ``bound`` where that
    proves optimality (:func:`bound_proves_optimality`)."""
    return bound_proves_optimality(config) and makespan <= bound * (1 + BOUND_RTOL)


def makespan_lower_bound(
    graph: DataflowGraph, devices: int | Topology, config: SimConfig = _DEFAULT_CONFIG
) -> float:
    """``max(compute-only critical path, total work / capacity)`` in ``config``'s reported unit.

    Communication is ignored, so every placement of ``graph`` on these devices, simulated under
    ``config`` (``simulate(graph, assignment, topology, config=config).makespan``), takes at least
    this long. Each op computes at least ``flops / speed`` of the fastest device and each device
    runs at most ``config.streams`` ops at once, each at full speed.

    Args:
        graph: the graph.
        devices: a device count ``n >= 1`` or a :class:`Topology`. With ``cost_model="raw"``
            costs are times and only the device count matters (the critical path is the sum of
            ``flops``, capacity is ``n * streams``). With ``"topology"`` an op takes
            ``flops / speed[d]`` [s] (an int means ``Topology.uniform(n)``): the critical path
            runs at the fastest speed and capacity is ``sum(speed) * streams``. With ``"roofline"`` each
            op takes at least its time on its fastest device (:class:`~doppler_gym.sim.costs.Costs`): the
            critical path of those times, and their sum over ``n * streams``.
        config: the runtime model (default ``SimConfig()``, as :func:`~doppler_gym.simulate`).
            The result is divided by ``config.time_divisor`` (paper units in the reference
            mode). Jitter scales durations at random, so with jitter this bounds the
            deterministic model only.

    Returns:
        The bound, a float in the unit of ``Trace.makespan`` under ``config``.

    Raises:
        ValueError: ``devices`` is neither a positive int nor a Topology.
        TypeError: ``config`` is not a SimConfig.
    """
    if not isinstance(devices, Topology) and (
        isinstance(devices, bool) or not isinstance(devices, (int, np.integer)) or devices < 1
    ):
        raise ValueError(
            f"makespan_lower_bound: devices must be a positive int or a Topology, got {devices!r}; "
            f"e.g. 4 or Topology.preset('p100x4')"
        )
    if not isinstance(config, SimConfig):
        raise TypeError(f"makespan_lower_bound: config must be a SimConfig, got {type(config).__name__}")
    if config.cost_model == "raw":
        n = devices.n_devices if isinstance(devices, Topology) else int(devices)
        path = critical_path(graph)[0]
        capacity = float(n * config.streams)
    elif config.cost_model == "roofline":  # each op at its fastest device's time; total work over all streams
        topo = devices if isinstance(devices, Topology) else Topology.uniform(int(devices))
        fastest = Costs.of(graph, topo, config).comp.min(axis=1)
        path = critical_path(graph, comp=fastest)[0]
        return max(path, float(fastest.sum()) / (topo.n_devices * config.streams)) / config.time_divisor
    else:
        topo = devices if isinstance(devices, Topology) else Topology.uniform(int(devices))
        path = critical_path(graph, comp=graph.flops / topo.speed.max())[0]
        capacity = float(topo.speed.sum() * config.streams)
    return max(path, graph.total_flops / capacity) / config.time_divisor
