"""Lower bounds on the makespan, in the unit the simulator reports for a given config."""

from __future__ import annotations

from doppler_gym.graph.analysis import critical_path
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology

_DEFAULT_CONFIG = SimConfig()


def makespan_lower_bound(
    graph: DataflowGraph, devices: int | Topology, config: SimConfig = _DEFAULT_CONFIG
) -> float:
    """``max(compute-only critical path, total work / capacity)`` in ``config``'s time unit.

    With ``cost_model="raw"`` costs are times and only the device count matters; with
    ``"topology"`` compute times come from the devices' speeds (an int means
    ``Topology.uniform(devices)``). Capacity counts every stream (``config.streams`` ops run at
    full speed at once per device). The result is divided by ``config.time_divisor``, so it
    compares directly with ``simulate(...).makespan`` (e.g. paper units in the reference mode).
    Jitter scales durations at random, so with jitter this bounds the deterministic model only.
    """
    if config.cost_model == "raw":
        n = devices.n_devices if isinstance(devices, Topology) else devices
        path = critical_path(graph)[0]
        capacity = float(n * config.streams)
        work = graph.total_flops
    else:
        topo = devices if isinstance(devices, Topology) else Topology.uniform(devices)
        path = critical_path(graph, comp=graph.flops / topo.speed.max())[0]
        capacity = float(topo.speed.sum() * config.streams)
        work = graph.total_flops
    return max(path, work / capacity) / config.time_divisor
