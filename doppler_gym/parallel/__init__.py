"""Independent tasks on one machine or a Ray cluster: searches and sweeps that give the same
results wherever they run.

==========================  ================================================================
:func:`map_tasks`           ``[fn(x) for x in items]`` here, or as Ray tasks with ``ray_address``
:func:`connect`             join or start a Ray cluster (``"local"``, ``"auto"``, ``HOST:6379``)
:func:`island_search`       local search islands (independent restarts, or rounds with migration)
:func:`cluster_sweep`       ``doppler_gym.cluster.run`` over schedulers x seeds x a grid
:func:`baseline_grid`       baselines over (graph, seed) cells (``doppler eval --graphs/--seeds``)
==========================  ================================================================

Ray is optional (``pip install 'doppler-gym[ray]'``) and imported only when an address is given.
Commands: ``doppler eval ... --ray [ADDRESS]``, ``doppler train ... --ray [ADDRESS]``; figures and
cluster set-up in ``docs/results/ray.md``.
"""

from __future__ import annotations

from doppler_gym.parallel.grid import Cell, baseline_cell, baseline_grid
from doppler_gym.parallel.search import island_search, island_seed
from doppler_gym.parallel.sweeps import cluster_grid, cluster_sweep
from doppler_gym.parallel.tasks import LOCAL, connect, import_ray, map_tasks

__all__ = ["LOCAL", "Cell", "baseline_cell", "baseline_grid", "cluster_grid", "cluster_sweep", "connect",
           "import_ray", "island_search", "island_seed", "map_tasks"]
