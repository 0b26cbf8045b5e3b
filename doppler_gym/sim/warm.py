"""Load the simulator's kernels before a timed run, so that the run does not pay for it."""

from __future__ import annotations

import time

import numpy as np

from doppler_gym.graph.analysis import topological_order
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.api import simulate, simulate_batch
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology


def warm_up(graph: DataflowGraph, topology: Topology | int | None, config: SimConfig) -> float:
    """Simulate ``graph`` with every op on device 0 and topological priorities: three
    :func:`~doppler_gym.sim.api.simulate` calls (an int64 assignment twice, as the first call packs
    the problem and later ones take the fast path, then an int32 one) and one
    :func:`~doppler_gym.sim.api.simulate_batch` call; returns the seconds it took.

    The first call of a kernel in a process loads its machine code from Numba's cache (about a
    second in all) or, on a cold cache, compiles it (minutes). A search with a wall-clock budget
    calls this first so that its budget is spent on searching. It also packs the problem, which the
    search's calls then find cached.
    """
    started = time.perf_counter()
    if graph.n_ops:
        one = np.zeros(graph.n_ops, np.int64)
        rank = np.empty(graph.n_ops, np.float64)  # topological: valid under every queue_order
        rank[topological_order(graph)] = np.arange(graph.n_ops)
        for assignment in (one, one, one.astype(np.int32)):  # the first call packs, the others take the fast path
            simulate(graph, assignment, topology, priorities=rank, config=config)
        simulate_batch(graph, one[None, :], topology, priorities=rank, config=config)
    return time.perf_counter() - started
