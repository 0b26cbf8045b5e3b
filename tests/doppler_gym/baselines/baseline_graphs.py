"""Toy graphs with known optima for the baseline tests (raw costs: comp and comm are times)."""

from __future__ import annotations

import numpy as np

import doppler_gym as dg

RAW = dg.SimConfig(cost_model="raw")  # costs are times, reported as they are


def make_graph(edges: list[tuple[int, int]], comp: list[float], comm: list[float], name: str) -> dg.DataflowGraph:
    src = [u for u, _ in edges]
    dst = [v for _, v in edges]
    return dg.DataflowGraph(src=src, dst=dst, flops=np.array(comp, float), out_bytes=np.array(comm, float), name=name)


def two_chains() -> dg.DataflowGraph:
    """Two independent chains 0->1->2 and 3->4->5, unit compute, transfer 10.

    On 2 devices the optimum is 3 (one chain per device, no transfer) = the lower bound."""
    return make_graph([(0, 1), (1, 2), (3, 4), (4, 5)], [1] * 6, [10] * 6, "two-chains")


def fork_join() -> dg.DataflowGraph:
    """0 -> {1, 2, 3} -> 4, unit compute, transfer 10: any transfer costs more than running
    everything on one device, so the optimum is 5 (all on one device)."""
    return make_graph([(0, 1), (0, 2), (0, 3), (1, 4), (2, 4), (3, 4)], [1] * 5, [10] * 5, "fork-join")


def small_random(seed: int, n_ops: int = 7) -> dg.DataflowGraph:
    """A random layered DAG with small integer costs (exact for CP-SAT, fast for brute force)."""
    shape = dg.workloads.make("random", n_ops=n_ops, levels=3, edge_prob=0.5, seed=seed)
    rng = np.random.default_rng(seed)
    return make_graph(
        list(zip(shape.src.tolist(), shape.dst.tolist())),
        rng.integers(1, 10, n_ops).tolist(), rng.integers(0, 8, n_ops).tolist(), f"small-random-{seed}",
    )


