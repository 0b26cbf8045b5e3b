"""RANDOM: a seeded random layered DAG for tests and training mixes (costs only, no specs).

Ops are spread over ``levels`` levels (each level gets at least one op). Each op of level ``l``
feeds each op of level ``l + 1`` with probability ``edge_prob`` and reaches back to each op two or
more levels below with probability ``skip_prob``. Every op above level 0 has a predecessor on the
level just below it and every op below the top level has a successor, so the longest path has
exactly ``levels`` ops and no op is isolated (unless ``levels == 1``). Edges only go upwards, so
the graph is acyclic. Costs are log-uniform in the given ranges.
"""

from __future__ import annotations

import math

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.workloads.builder import check_ints
from doppler_gym.workloads.workload import Workload


def build(
    n_ops: int = 100,
    levels: int = 10,
    edge_prob: float = 0.1,
    skip_prob: float = 0.005,
    flops_range: tuple[float, float] = (1e9, 1e12),
    bytes_range: tuple[float, float] = (1e6, 1e9),
    seed: int = 0,
) -> Workload:
    """Build a random layered DAG.

    Args:
        n_ops: number of ops [count], at least ``levels``.
        levels: number of levels [count] (the longest path, in ops).
        edge_prob: probability [0..1] of an edge between two ops on consecutive levels.
        skip_prob: probability [0..1] of an edge from an op two or more levels below.
        flops_range: ``(low, high)`` compute cost per op [FLOP], ``0 < low <= high``.
        bytes_range: ``(low, high)`` output size per op [B], ``0 < low <= high``.
        seed: seed of ``np.random.default_rng``; the same seed gives the same graph.

    Returns:
        A workload whose graph has names ``op[level,i]`` and kind ``"random"``, no specs.
    """
    n_ops, levels = check_ints("random", n_ops=n_ops, levels=levels)
    (seed,) = check_ints("random", minimum=0, seed=seed)
    if levels > n_ops:
        raise ValueError(f"random: levels={levels} exceeds n_ops={n_ops}; every level needs an op")
    for name, p in (("edge_prob", edge_prob), ("skip_prob", skip_prob)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"random: {name} must be a probability in [0, 1], got {p!r}")
    flops_bounds = _bounds("flops_range", flops_range)
    bytes_bounds = _bounds("bytes_range", bytes_range)
    rng = np.random.default_rng(seed)
    sizes = 1 + rng.multinomial(n_ops - levels, np.full(levels, 1.0 / levels))
    starts = np.concatenate([[0], np.cumsum(sizes)])
    src: list[np.ndarray] = []
    dst: list[np.ndarray] = []
    for lv in range(1, levels):
        prev = np.arange(starts[lv - 1], starts[lv])
        cur = np.arange(starts[lv], starts[lv + 1])
        link = rng.random((prev.size, cur.size)) < edge_prob
        for col in np.flatnonzero(~link.any(axis=0)):
            link[rng.integers(prev.size), col] = True
        for row in np.flatnonzero(~link.any(axis=1)):
            link[row, rng.integers(cur.size)] = True
        rows, cols = np.nonzero(link)
        src.append(prev[rows])
        dst.append(cur[cols])
        for v in cur:
            skips = rng.choice(starts[lv - 1], size=rng.binomial(starts[lv - 1], skip_prob), replace=False)
            src.append(np.sort(skips))
            dst.append(np.full(skips.size, v))
    level_of = np.repeat(np.arange(levels), sizes)
    graph = DataflowGraph(
        src=np.concatenate(src) if src else [],
        dst=np.concatenate(dst) if dst else [],
        flops=_log_uniform(rng, flops_bounds, n_ops),
        out_bytes=_log_uniform(rng, bytes_bounds, n_ops),
        names=tuple(f"op[{lv},{i - starts[lv]}]" for i, lv in enumerate(level_of)),
        kinds=("random",) * n_ops,
        name="random",
    )
    return Workload(graph)


def _bounds(name: str, bounds: tuple[float, float]) -> tuple[float, float]:
    """``(low, high)`` as floats; ValueError naming ``name`` unless ``0 < low <= high < inf``."""
    try:
        low, high = (float(x) for x in bounds)
    except (TypeError, ValueError):
        raise ValueError(f"random: {name} must be a (low, high) pair of numbers, got {bounds!r}") from None
    if not (0.0 < low <= high and math.isfinite(high)):
        raise ValueError(f"random: {name} must satisfy 0 < low <= high < inf, got {bounds!r}")
    return low, high


def _log_uniform(rng: np.random.Generator, bounds: tuple[float, float], n: int) -> np.ndarray:
    """``(n,) float64`` log-uniform draws in ``[low, high]`` (exactly ``low`` when equal)."""
    low, high = bounds
    return low * (high / low) ** rng.random(n)
