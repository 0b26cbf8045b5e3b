"""Lower bounds on the makespan, in the unit the simulator reports for a given config."""

from __future__ import annotations

from doppler_gym.graph.analysis import lower_bound
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
    ``Topology.uniform(devices)``). The result is divided by ``config.time_divisor``, so it
    compares directly with ``simulate(...).makespan`` (e.g. paper units in the reference mode).
    """
    if config.cost_model == "raw":
        n = devices.n_devices if isinstance(devices, Topology) else devices
        return lower_bound(graph, n) / config.time_divisor
    topo = devices if isinstance(devices, Topology) else Topology.uniform(devices)
    return lower_bound(graph, topo) / config.time_divisor
