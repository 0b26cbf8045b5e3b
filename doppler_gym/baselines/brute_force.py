"""Exhaustive search over assignments: the exact optimum of the assignment-only problem that
DOPPLER poses (the runtime, not the placer, orders the ops), for graphs of a dozen ops.

All ``D ** n`` assignments are simulated with :func:`~doppler_gym.sim.api.simulate_batch` in chunks;
when every device is interchangeable (equal speeds and links, or raw costs) op 0 is fixed to
device 0, which leaves ``D ** (n - 1)`` (relabelling the devices of an optimum gives an optimum).
"""

from __future__ import annotations

import time

import numpy as np

from doppler_gym.baselines.common import Costs, finish, queue_priorities, resolve
from doppler_gym.baselines.types import Placement
from doppler_gym.graph.analysis import topological_order
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.api import simulate_batch
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology

MAX_OPS = 12  # default refusal threshold on the op count
MAX_ASSIGNMENTS = 4**11  # default refusal threshold on the number of simulations (~4.2M, seconds)


def count_assignments(graph: DataflowGraph, topology: Topology | int, config: SimConfig | None = None) -> int:
    """How many assignments :func:`brute_force` would simulate (``D ** n``, or ``D ** (n - 1)``
    on interchangeable devices)."""
    graph, topology, config = resolve(graph, topology, config, "count_assignments")
    d, n = topology.n_devices, graph.n_ops
    free = n - 1 if n and Costs.of(graph, topology, config).uniform else n
    return d**free


def brute_force(
    graph: DataflowGraph,
    topology: Topology | int,
    config: SimConfig | None = None,
    *,
    max_ops: int = MAX_OPS,
    max_assignments: int = MAX_ASSIGNMENTS,
    chunk: int = 65_536,
) -> Placement:
    """The assignment of least simulated makespan, by enumeration (ties: the first in
    lexicographic order of the device tuple). Deterministic.

    Args:
        graph, topology, config: as for every baseline.
        max_ops: refuse graphs with more ops.
        max_assignments: refuse when more assignments than this would be simulated.
        chunk: assignments per ``simulate_batch`` call.

    Under ``queue_order="priority"`` every assignment runs with ``topological_order`` as priorities.

    Returns:
        A :class:`Placement` with ``order = topological_order(graph)``; ``info`` holds the
        number of assignments simulated, whether op 0 was fixed, and how many assignments reach
        the optimum.

    Raises:
        ValueError: the graph is too large (over ``max_ops`` ops or ``max_assignments`` assignments).
    """
    started = time.perf_counter()
    graph, topology, config = resolve(graph, topology, config, "brute_force")
    n, d = graph.n_ops, topology.n_devices
    total = count_assignments(graph, topology, config)
    if n > max_ops or total > max_assignments:
        raise ValueError(
            f"brute_force: graph {graph.name!r} has {n} ops on {d} devices, {total:,} assignments to simulate "
            f"(limits: {max_ops} ops, {max_assignments:,} assignments); use local_search or cp_sat for larger "
            f"graphs, or raise max_ops / max_assignments if you can wait (~1 us per simulation)"
        )
    symmetric = total < d**n
    free = n - 1 if symmetric else n
    order = topological_order(graph)
    prio = queue_priorities(order, config)
    weights = d ** np.arange(free - 1, -1, -1, dtype=np.int64)  # first free op is the most significant digit
    best_cost, best_index, n_best = np.inf, 0, 0
    for first in range(0, total, chunk):
        index = np.arange(first, min(first + chunk, total), dtype=np.int64)
        digits = (index[:, None] // weights[None, :]) % d  # (k, free)
        batch = np.concatenate([np.zeros((index.size, n - free), dtype=np.int64), digits], axis=1)
        scores = simulate_batch(graph, batch, topology, priorities=prio, config=config)
        k = int(np.argmin(scores))
        if scores[k] < best_cost:
            best_cost, best_index, n_best = float(scores[k]), int(index[k]), 0
        n_best += int(np.count_nonzero(scores == best_cost))
    digits = (best_index // weights) % d
    assignment = np.concatenate([np.zeros(n - free, dtype=np.int64), digits]).astype(np.int64)
    info = {"assignments": total, "op0_fixed": symmetric, "optimal_assignments": n_best}
    return finish("brute_force", graph, topology, config, assignment, order, started, info)
