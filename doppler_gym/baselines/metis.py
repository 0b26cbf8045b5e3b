"""Balanced min-cut partitioning with METIS (Karypis & Kumar, "A fast and high quality multilevel
scheme for partitioning irregular graphs", SIAM J. Sci. Comput. 20(1):359-392, 1998), the
"classic partitioner" baseline of device-placement papers (ColocRL and Placeto used Scotch).

Each op is a vertex weighted by its compute; each edge is weighted by the time to send the
producer's output to another device; part ``d`` becomes device ``d``, with a target share of the
work proportional to the device's speed. METIS ignores precedence, so it tends to serialise
dependent work on one device: a weak baseline under work-conserving execution.
"""

from __future__ import annotations

import time

import numpy as np

from doppler_gym.baselines.common import Costs, check_seed, finish, resolve
from doppler_gym.baselines.types import Placement
from doppler_gym.graph.analysis import topological_order
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology

WEIGHT_SCALE = 10_000  # largest integer weight handed to METIS (each kind scaled separately)
WEIGHT_TOTAL = 2**30  # cap on the sum of each kind of weights, so METIS's 32-bit sums cannot overflow


def integer_weights(values: np.ndarray, minimum: int) -> np.ndarray:
    """``values`` (>= 0) scaled so the largest becomes ``WEIGHT_SCALE`` (the sum at most
    ``WEIGHT_TOTAL``), rounded, and raised to at least ``minimum``; ``(k,) int64``."""
    values = np.asarray(values, dtype=np.float64)
    top, total = (float(values.max()), float(values.sum())) if values.size else (0.0, 0.0)
    if top <= 0:
        return np.full(values.shape, max(minimum, 1), dtype=np.int64)
    scale = min(WEIGHT_SCALE / top, WEIGHT_TOTAL / total)
    return np.maximum(np.rint(values * scale), minimum).astype(np.int64)


def metis_partition(
    graph: DataflowGraph, topology: Topology | int, config: SimConfig | None = None, *, seed: int = 0
) -> Placement:
    """Partition the ops into ``D`` balanced parts of small transfer cut with METIS (pymetis).

    Vertex weight = compute (FLOP, or raw cost), edge weight = transfer time of the producer's
    output averaged over device pairs, both scaled to integers (:func:`integer_weights`; edge
    weights at least 1, as METIS requires). Target part weights are proportional to the device
    speeds (equal for raw costs).

    Returns a :class:`Placement` with ``order = topological_order(graph)``;
    ``info["edge_cut"]`` is METIS's cut in scaled integer weight.

    Raises:
        ImportError: pymetis is not installed (``pip install 'doppler-gym[solvers]'``).
    """
    started = time.perf_counter()
    graph, topology, config = resolve(graph, topology, config, "metis_partition")
    seed = check_seed(seed, "metis_partition")
    d = topology.n_devices
    if d == 1 or graph.n_ops == 0:
        assignment = np.zeros(graph.n_ops, dtype=np.int64)
        return finish("metis", graph, topology, config, assignment, topological_order(graph), started, {"edge_cut": 0})
    try:
        import pymetis
    except ImportError:
        raise ImportError(
            "metis_partition needs pymetis: pip install pymetis (or pip install 'doppler-gym[solvers]')"
        ) from None
    costs = Costs.of(graph, topology, config)
    # undirected CSR: each edge u -> v appears as v in u's list and u in v's list
    heads = np.concatenate([graph.src, graph.dst]).astype(np.int64)
    tails = np.concatenate([graph.dst, graph.src]).astype(np.int64)
    edge_w = integer_weights(np.concatenate([costs.mean_comm[graph.src]] * 2), minimum=1)
    by_head = np.argsort(heads, kind="stable")
    xadj = np.zeros(graph.n_ops + 1, dtype=np.int64)
    np.cumsum(np.bincount(heads, minlength=graph.n_ops), out=xadj[1:])
    vertex_w = integer_weights(graph.flops, minimum=0)
    speed = np.ones(d) if config.cost_model == "raw" else topology.speed
    cut, parts = pymetis.part_graph(
        d,
        adjacency=pymetis.CSRAdjacency(xadj, tails[by_head]),
        vweights=vertex_w,
        eweights=edge_w[by_head],
        tpwgts=(speed / speed.sum()).tolist(),
        options=pymetis.Options(seed=seed),
    )
    assignment = np.asarray(parts, dtype=np.int64)
    return finish("metis", graph, topology, config, assignment, topological_order(graph), started,
                  {"edge_cut": int(cut), "seed": seed})
