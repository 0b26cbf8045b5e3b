"""Parameter sweeps of the cluster simulator as tasks: :func:`cluster_sweep` runs
:func:`doppler_gym.cluster.run` over schedulers x seeds (and any other grid of its keyword
arguments), locally or as Ray tasks; the results do not depend on where they ran.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from doppler_gym.parallel.tasks import map_tasks


def _cluster_cell(cell: dict[str, Any], trace: Any, cluster: Any, fixed: dict[str, Any]) -> Any:
    from doppler_gym import cluster as dgc

    return dgc.run(trace, cluster, cell["scheduler"], seed=cell["seed"], **fixed,
                   **{k: v for k, v in cell.items() if k not in ("scheduler", "seed")})


def cluster_grid(schedulers: Sequence[Any], seeds: Sequence[int],
                 grid: Mapping[str, Sequence[Any]] | None = None) -> list[dict[str, Any]]:
    """The cells of a sweep: every combination of ``scheduler``, ``seed`` and the values of ``grid``
    (keyword arguments of :func:`doppler_gym.cluster.run`), in ``itertools.product`` order
    (scheduler slowest, then seed, then the ``grid`` keys in their order)."""
    grid = dict(grid or {})
    for key in ("scheduler", "seed", "trace", "cluster"):
        if key in grid:
            raise ValueError(f"cluster_grid: {key!r} is not a grid key; give schedulers and seeds as arguments, "
                             "and one trace and cluster per sweep")
    if not schedulers or not seeds:
        raise ValueError("cluster_grid: give at least one scheduler and one seed")
    keys = ["scheduler", "seed", *grid]
    values = [list(schedulers), list(seeds), *(list(v) for v in grid.values())]
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def cluster_sweep(trace: Any, cluster: Any, schedulers: Sequence[Any], seeds: Sequence[int], *,
                  grid: Mapping[str, Sequence[Any]] | None = None, ray_address: str | None = None,
                  **fixed: Any) -> list[tuple[dict[str, Any], Any]]:
    """``doppler_gym.cluster.run(trace, cluster, scheduler, seed=seed, **fixed, **cell)`` for every
    cell of :func:`cluster_grid`, one task per cell.

    Args:
        trace: a ``cluster.JobTrace`` or a shipped trace name.
        cluster: the ``cluster.Cluster``.
        schedulers: scheduler names (or ``Scheduler`` instances).
        seeds: failure-process seeds.
        grid: more keyword arguments of ``run`` to sweep, e.g. ``{"checkpoints": ["fixed", "young"]}``.
        ray_address: ``None``: run here; else a Ray address (:func:`~doppler_gym.parallel.tasks.connect`).
        fixed: keyword arguments of ``run`` shared by every cell (``failures=FailureModel(...)``).

    Returns:
        ``[(cell, ClusterResult), ...]`` in the order of :func:`cluster_grid`.
    """
    cells = cluster_grid(schedulers, seeds, grid)
    clash = set(fixed) & {k for c in cells[:1] for k in c}
    if clash:
        raise ValueError(f"cluster_sweep: {', '.join(sorted(clash))} given both as fixed and swept")
    results = map_tasks(functools.partial(_cluster_cell, trace=trace, cluster=cluster, fixed=dict(fixed)),
                        cells, ray_address)
    return list(zip(cells, results))
