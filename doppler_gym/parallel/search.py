"""Island local search: independent :func:`~doppler_gym.baselines.local_search` runs (islands),
optionally in rounds where the best placement migrates to every island; each island a task
(:func:`~doppler_gym.parallel.tasks.map_tasks`), so ``ray_address`` spreads them over a Ray cluster.

With ``rounds=1`` it is plain independent restarts. Every island runs a fixed number of
evaluations (``max_evals``, never a wall-clock budget), so the result is the same locally and on
any cluster for the same seed.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from doppler_gym.baselines.common import check_seed, resolve
from doppler_gym.baselines.local_search import local_search
from doppler_gym.baselines.types import Placement
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.parallel.tasks import map_tasks
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology


def island_seed(seed: int, round_index: int, island: int) -> int:
    """The ``local_search`` seed of island ``island`` in round ``round_index`` (a uint32 drawn
    from ``np.random.SeedSequence([seed, round_index, island])``: distinct streams per island)."""
    return int(np.random.SeedSequence([seed, round_index, island]).generate_state(1)[0])


def _island(task: tuple[int, Sequence[Placement] | None], graph: DataflowGraph, topology: Topology,
            config: SimConfig, max_evals: int, options: dict[str, Any]) -> Placement:
    seed, starts = task
    return local_search(graph, topology, config, seed=seed, max_evals=max_evals, seconds=None,
                        starts=None if starts is None else list(starts), **options)


def island_search(graph: DataflowGraph, topology: Topology | int, config: SimConfig | None = None, *,
                  islands: int = 4, rounds: int = 1, max_evals: int = 20_000, seed: int = 0,
                  starts: Sequence[Placement | np.ndarray] | None = None, ray_address: str | None = None,
                  task_cpus: float = 1.0, **options: Any) -> Placement:
    """``islands`` local searches of ``max_evals`` evaluations per round; after each round every
    island restarts from the best placement so far (ties: the lowest island index).

    Args:
        graph, topology, config: as for every baseline.
        islands: searches per round (tasks run at once with Ray).
        rounds: rounds; 1 = independent restarts (no migration).
        max_evals: simulated neighbours per island and round (``local_search``'s ``max_evals``).
        seed: island ``i`` of round ``r`` runs with :func:`island_seed` ``(seed, r, i)``.
        starts: the first round's start placements (default: ``local_search``'s own).
        ray_address: ``None``: the islands run here one after another; else a Ray address
            (:func:`~doppler_gym.parallel.tasks.connect`).
        task_cpus: CPUs each island's Ray task reserves (its ``map_tasks`` ``num_cpus``).
        options: more ``local_search`` options (``batch_size``, ``research``, ...).

    Returns:
        The best :class:`Placement`, named ``"island_search"``; ``info``: ``islands``, ``rounds``,
        ``evals`` (all islands), ``round_best`` (best makespan after each round), ``island_makespans``
        (per round, per island), ``best_island`` ``(round, island)`` and ``lower_bound``.
    """
    started = time.perf_counter()
    graph, topology, config = resolve(graph, topology, config, "island_search")
    seed = check_seed(seed, "island_search")
    for name, value in (("islands", islands), ("rounds", rounds), ("max_evals", max_evals)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"island_search: {name} must be an integer >= 1, got {value!r}")
    for name in ("seed", "seconds", "max_evals", "starts"):
        if name in options:
            raise TypeError(f"island_search: {name!r} is set by island_search itself; see its arguments")
    run = functools.partial(_island, graph=graph, topology=topology, config=config, max_evals=int(max_evals),
                            options=dict(options))
    first = None if starts is None else tuple(starts)
    best: Placement | None = None
    best_at = (0, 0)
    evals = 0
    round_best: list[float] = []
    island_makespans: list[list[float]] = []
    for r in range(rounds):
        begin = first if r == 0 else (best,)
        tasks = [(island_seed(seed, r, i), begin) for i in range(islands)]
        found = map_tasks(run, tasks, ray_address, num_cpus=task_cpus)
        island_makespans.append([float(p.makespan) for p in found])
        evals += sum(int(p.info["evals"]) for p in found)
        k = int(np.argmin([p.makespan for p in found]))  # first minimum: the lowest island index
        if best is None or found[k].makespan < best.makespan:
            best, best_at = found[k], (r, k)
        round_best.append(float(best.makespan))
    assert best is not None
    info = {"seed": seed, "islands": int(islands), "rounds": int(rounds), "max_evals": int(max_evals),
            "evals": evals, "round_best": round_best, "island_makespans": island_makespans,
            "best_island": best_at, "lower_bound": best.info.get("lower_bound"),
            "start": best.info.get("start"), "start_makespan": best.info.get("start_makespan"),
            "stopped": best.info.get("stopped")}
    return Placement(best.assignment, best.order, "island_search", best.makespan, time.perf_counter() - started, info)
