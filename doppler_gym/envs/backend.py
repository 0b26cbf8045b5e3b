"""Backends: what executes a finished placement and measures its makespan.

The env is a thin shell (``docs/architecture.md``): at the end of an episode it hands the assignment and
priorities to a :class:`Backend` and reads the :class:`~doppler_gym.sim.trace.Trace` back.
:class:`SimBackend` runs the Numba simulator; ``envs_real`` implements the same protocol on real
devices.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.api import simulate
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.trace import Trace
from doppler_gym.topology.types import Topology


@runtime_checkable
class Backend(Protocol):
    """Executes a placed graph.

    Attributes:
        name: short label reported as ``info["backend"]`` (``"sim"``, ``"real"``, ...).
    """

    name: str

    def execute(
        self,
        graph: DataflowGraph,
        topology: Topology,
        assignment: np.ndarray,
        priorities: np.ndarray,
        config: SimConfig,
    ) -> Trace:
        """Run ``graph`` with ``assignment`` and return its trace.

        Args:
            graph: the graph.
            topology: the devices.
            assignment: ``(n_ops,) int64`` device of each op.
            priorities: ``(n_ops,) float64``, lower first: each op's position in the SEL order.
                A backend uses them when its queue order asks for priorities (for the simulator:
                ``config.queue_order == "priority"``) and ignores them otherwise.
            config: the runtime model (the simulator's knobs; a real backend may read the
                queue order and the time divisor from it).
        """
        ...


class SimBackend:
    """The work-conserving simulator (:func:`doppler_gym.simulate`)."""

    name = "sim"

    def execute(
        self,
        graph: DataflowGraph,
        topology: Topology,
        assignment: np.ndarray,
        priorities: np.ndarray,
        config: SimConfig,
    ) -> Trace:
        return simulate(graph, assignment, topology=topology, priorities=priorities, config=config)

    def __repr__(self) -> str:
        return "SimBackend()"


def as_backend(backend: Backend | None) -> Backend:
    """``backend``, or a :class:`SimBackend` for ``None``; TypeError if it is not a Backend."""
    if backend is None:
        return SimBackend()
    if not isinstance(backend, Backend):
        raise TypeError(
            f"backend must implement the Backend protocol (a name and execute(graph, topology, assignment, "
            f"priorities, config) -> Trace), got {type(backend).__name__}"
        )
    return backend
