"""Placements that ignore the graph's structure: uniformly random, round-robin, one device."""

from __future__ import annotations

import time

import numpy as np

from doppler_gym.baselines.common import check_seed, finish, resolve
from doppler_gym.baselines.types import Placement
from doppler_gym.graph.analysis import topological_order
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology


def random_placement(
    graph: DataflowGraph, topology: Topology | int, config: SimConfig | None = None, *, seed: int = 0
) -> Placement:
    """Each op on a device drawn uniformly at random (``np.random.default_rng(seed)``).

    Returns a :class:`Placement` with ``order = topological_order(graph)``.
    """
    started = time.perf_counter()
    graph, topology, config = resolve(graph, topology, config, "random_placement")
    rng = np.random.default_rng(check_seed(seed, "random_placement"))
    assignment = rng.integers(0, topology.n_devices, size=graph.n_ops, dtype=np.int64)
    return finish("random", graph, topology, config, assignment, topological_order(graph), started, {"seed": seed})


def round_robin(graph: DataflowGraph, topology: Topology | int, config: SimConfig | None = None) -> Placement:
    """Op ``i`` on device ``i mod D`` (the op ids of the paper files are a topological order,
    so consecutive ops land on consecutive devices).

    Returns a :class:`Placement` with ``order = topological_order(graph)``.
    """
    started = time.perf_counter()
    graph, topology, config = resolve(graph, topology, config, "round_robin")
    assignment = np.arange(graph.n_ops, dtype=np.int64) % topology.n_devices
    return finish("round_robin", graph, topology, config, assignment, topological_order(graph), started)


def single_device(
    graph: DataflowGraph, topology: Topology | int, config: SimConfig | None = None, *, device: int | None = None
) -> Placement:
    """Every op on one device: ``device``, or by default the fastest one (lowest id among equals).

    No transfers happen, so the makespan is the total compute time on that device.

    Raises:
        ValueError: ``device`` outside ``0..D-1``.
    """
    started = time.perf_counter()
    graph, topology, config = resolve(graph, topology, config, "single_device")
    d = topology.n_devices
    if device is None:
        device = 0 if config.cost_model == "raw" else int(np.argmax(topology.speed))
    elif isinstance(device, bool) or not isinstance(device, (int, np.integer)) or not 0 <= device < d:
        raise ValueError(f"single_device: device must be an int in 0..{d - 1}, got {device!r}")
    assignment = np.full(graph.n_ops, int(device), dtype=np.int64)
    return finish("single_device", graph, topology, config, assignment, topological_order(graph), started,
                  {"device": int(device)})
