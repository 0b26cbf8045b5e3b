"""Baselines over a grid of instances and seeds, one task per cell (``doppler eval --ray``,
``--graphs``, ``--seeds``): :func:`baseline_cell` and :func:`baseline_grid`.

A cell runs the chosen baselines in registry order with the cell's seed, as ``doppler eval`` does on
one graph: ``local_search`` starts from the placements found before it. The searches run on a
count budget (``local_search``: ``search_evals`` evaluations), never a wall-clock one, so a cell's
placements are the same locally and on any Ray cluster; only ``cp_sat`` (a time limit) depends on
the machine, and it runs only when named.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from doppler_gym import baselines
from doppler_gym.baselines.types import Placement
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.parallel.tasks import map_tasks
from doppler_gym.sim.bounds import makespan_lower_bound
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology


@dataclass(frozen=True)
class Cell:
    """One instance of a grid: ``graph`` on ``topology`` under ``config``, with ``seed`` for every
    seeded baseline; ``label`` names the graph in tables."""

    label: str
    graph: DataflowGraph
    topology: Topology
    config: SimConfig
    seed: int


def baseline_cell(cell: Cell, names: Sequence[str], search_evals: int = 20_000,
                  cp_sat_seconds: float = 20.0) -> dict[str, Placement]:
    """The placements of ``names`` (in registry order) on one cell.

    Args:
        cell: the instance and seed.
        names: baseline names (:func:`doppler_gym.baselines.names`).
        search_evals: ``local_search``'s ``max_evals`` (its wall-clock limit is off).
        cp_sat_seconds: ``cp_sat``'s time limit [s].

    Returns:
        ``{name: Placement}`` in registry order.
    """
    if search_evals < 1:
        raise ValueError(f"search_evals must be >= 1, got {search_evals}")
    results: dict[str, Placement] = {}
    for name in [n for n in baselines.names() if n in names]:
        opts: dict[str, object] = {}
        if "seed" in baselines.options(name):
            opts["seed"] = cell.seed
        if name == "local_search":
            opts.update(max_evals=int(search_evals), seconds=None)
            if results:
                opts["starts"] = list(results.values())
        if name == "cp_sat":
            opts["time_limit"] = cp_sat_seconds
        results[name] = baselines.run(name, cell.graph, cell.topology, cell.config, **opts)
    return results


def _cell_rows(cell: Cell, names: Sequence[str], search_evals: int, cp_sat_seconds: float) -> list[dict]:
    found = baseline_cell(cell, names, search_evals, cp_sat_seconds)
    bound = makespan_lower_bound(cell.graph, cell.topology, cell.config)
    return [{"graph": cell.label, "n_ops": cell.graph.n_ops, "topology": cell.topology.name, "seed": cell.seed,
             "baseline": name, "makespan": float(p.makespan), "lower_bound": float(bound),
             "ratio_to_lower_bound": float(p.makespan / bound) if bound > 0 else float("nan"),
             "seconds": float(p.seconds), "assignment": p.assignment.tolist()} for name, p in found.items()]


def baseline_grid(cells: Sequence[Cell], names: Sequence[str], *, search_evals: int = 20_000,
                  cp_sat_seconds: float = 20.0, ray_address: str | None = None) -> list[dict]:
    """:func:`baseline_cell` on every cell, one task per cell (Ray tasks with ``ray_address``).

    Returns:
        One row per cell and baseline, cells in the given order: ``graph``, ``n_ops``, ``topology``,
        ``seed``, ``baseline``, ``makespan`` and ``lower_bound`` (the config's unit), ``ratio_to_lower_bound``,
        ``seconds`` (the baseline's own run time, where it ran) and ``assignment``.
    """
    fn = functools.partial(_cell_rows, names=tuple(names), search_evals=search_evals, cp_sat_seconds=cp_sat_seconds)
    return [row for rows in map_tasks(fn, cells, ray_address) for row in rows]
