"""Imitation teachers: the critical-path heuristic (the env's own) or a fixed search placement.

``TrainArgs.imitation.teacher``:

- ``"critical_path"`` (DOPPLER's stage 1): ``env.teacher_mask()``, the max-b-level ready ops in
  SEL and the earliest-start devices in PLC. Imitation can at best copy the heuristic.
- ``"search"``: the placement that local search finds from the critical-path and HEFT placements
  (:func:`search_placement`: :func:`doppler_gym.baselines.local_search` with ``imitation.teacher_evals``
  simulated neighbours, and the best of ``imitation.teacher_restarts`` independent restarts beside it; the
  same target on every machine) is the PLC target; SEL stays the
  critical-path teacher's (under the reference model's FIFO queues the SEL order does not change
  the makespan, only what the policy has seen when it places each op). Expert-iteration style
  (Anthony, Tian & Barber, NeurIPS 2017): a slow planner's placement becomes a fast policy's.

On a mix of graphs (``graph="mix"``) every episode may draw another graph: :class:`SearchTeacher`
looks up the drawn graph's target in a :class:`SearchTargets` cache (keyed by the graph's content
digest, the topology's content and the sim config; bounded LRU) at each reset and runs the search
on a miss, so a graph drawn again costs nothing.

When the devices are interchangeable (the raw cost model, or identical devices and links), any
relabelling of the target's devices is as good as the target. :class:`AssignmentTeacher` then
names, at each PLC step, the devices that the best relabelling of the target to the ops placed so
far (a maximum matching of the overlap counts) gives the selected op, so a learner's roll-in that
put the first ops elsewhere still gets consistent labels.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import gymnasium as gym
import numpy as np
from scipy.optimize import linear_sum_assignment

from doppler_gym.envs.context import graph_digest, topology_key
from doppler_gym.envs.observation import PLC
from doppler_gym.envs.placement import PlacementEnv
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology


def devices_interchangeable(topology: Topology, config: SimConfig) -> bool:
    """Whether every permutation of the devices leaves every makespan unchanged: the raw cost model
    (the reference simulator ignores the figures), or equal speeds and memories and one bandwidth
    and one latency between every pair of distinct devices."""
    if config.cost_model == "raw":
        return True
    off = ~np.eye(topology.n_devices, dtype=bool)
    return all(_all_equal(a) for a in (topology.speed, topology.memory, topology.bandwidth[off],
                                       topology.latency[off]))


def _all_equal(values: np.ndarray) -> bool:
    return values.size == 0 or bool(np.all(values == values.flat[0]))


def relabelled_targets(target: np.ndarray, placed: np.ndarray, op: int, n_devices: int) -> np.ndarray:
    """The devices ``op`` may go to under the best relabellings of ``target`` to the placement so far.

    Args:
        target: ``(n_ops,)`` the target assignment.
        placed: ``(n_ops,)`` the devices of the ops placed so far, -1 elsewhere.
        op: the op being placed.
        n_devices: ``D``.

    Returns:
        ``(k,) int64`` sorted devices ``j`` such that some permutation ``pi`` of the devices with
        ``pi(target[op]) = j`` agrees with ``placed`` on as many placed ops as the best permutation
        does (all ``D`` devices before anything is placed).
    """
    mask = placed >= 0
    overlap = np.zeros((n_devices, n_devices))
    np.add.at(overlap, (target[mask], placed[mask]), 1.0)
    rows, cols = linear_sum_assignment(overlap, maximize=True)
    best = overlap[rows, cols].sum()
    out = []
    src = int(target[op])
    for j in range(n_devices):
        forced = overlap.copy()
        forced[src, :] = -1e9
        forced[:, j] = -1e9
        forced[src, j] = overlap[src, j]
        r, c = linear_sum_assignment(forced, maximize=True)
        if forced[r, c].sum() >= best - 1e-9:
            out.append(j)
    return np.asarray(out, np.int64)


class AssignmentTeacher(gym.Wrapper):
    """``teacher_mask()`` that follows a fixed target assignment in PLC (see the module docstring).

    Args:
        env: a ``Doppler-Sim-v0`` env on the target's graph (``unwrapped`` a :class:`PlacementEnv`).
        target: ``(n_ops,)`` device of each op.
        interchangeable: relabel the target's devices to the placement so far
            (:func:`relabelled_targets`); else the PLC label is ``target[op]`` itself.
    """

    def __init__(self, env: gym.Env, target: np.ndarray, interchangeable: bool) -> None:
        super().__init__(env)
        base = env.unwrapped
        if not isinstance(base, PlacementEnv):
            raise TypeError(f"AssignmentTeacher wraps a PlacementEnv, got {type(base).__name__}")
        self.target = np.asarray(target, np.int64)
        self.interchangeable = bool(interchangeable)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        n = self.env.unwrapped.context.n_ops
        if n != self.target.size:
            raise ValueError(f"AssignmentTeacher: the target places {self.target.size} ops, the episode's graph "
                             f"has {n}; a search teacher needs one graph (not a mix)")
        return obs, info

    def teacher_mask(self) -> np.ndarray:
        """``(max_ops + max_devices,) int8``: the critical-path SEL set, or the target's PLC device(s)."""
        base = self.env.unwrapped
        if base.phase != PLC or base.episode_over:
            return base.teacher_mask()
        mask = np.zeros(base.max_ops + base.max_devices, np.int8)
        op = base.selected_op
        if self.interchangeable:
            devices = relabelled_targets(self.target, base.assignment, op, base.context.n_devices)
        else:
            devices = self.target[op : op + 1]
        mask[base.max_ops + devices] = 1
        return mask


RESTART_OP_EVALS = 16 * 50_000 * 1_000  # [op x evaluations] the restarts' work cap: 16 full restarts up to 1,000 ops


def search_placement(graph: DataflowGraph, topology: Topology, config: SimConfig, evals: int,
                     seed: int, restarts: int = 0, restart_op_evals: int = RESTART_OP_EVALS,
                     batch_size: int = 256) -> dict[str, Any]:
    """The search teacher's placement of one instance: the best of a local search (``evals``
    simulated neighbours, ``seed``) from the critical-path and HEFT placements and up to ``restarts``
    independent ones (:func:`~doppler_gym.parallel.search.island_search`, ``evals // 4`` neighbours
    each, seeds drawn from ``seed``), each from its own default starts
    (:func:`~doppler_gym.baselines.local_search.default_starts`: the critical-path placement with the
    restart's own tie-breaking, HEFT and round robin). One run ends in one of several basins by luck,
    and the basin depends on the start; the best of several runs from several starts is a far
    steadier target (``docs/results/train_default.md``). Every run scores ``batch_size`` neighbours
    per step (``local_search``'s option): a small batch takes more steps for the same evaluations and
    ends in a good basin more often, at more wall clock per evaluation.

    Fewer restarts run on large graphs, so that ``n_ops x`` their evaluations stay within
    ``restart_op_evals`` (a simulation costs about linear time in the ops: the default allows 16 up
    to 1,000 ops, 4 at 4,000, none above 16,000), and none once the first run reached the makespan
    lower bound. The rule counts ops and evaluations, never seconds, so the target is the same on
    every machine.

    Returns:
        ``{"name": "search", "assignment": [n_ops ints], "makespan", "evals", "restarts", "batch_size",
        "total_evals", "seconds", "interchangeable"}`` (``makespan`` in the config's reported unit;
        ``evals`` the main run's budget, ``restarts`` the restarts run, ``total_evals`` the neighbours
        all runs simulated).

    Every search picks its own Numba thread count (``local_search(threads=None)``: all threads while
    they get the cores, one when another process takes them; :class:`~doppler_gym.sim.threads.ThreadTuner`),
    within a :func:`~doppler_gym.sim.threads.numba_threads` set around the call. The makespans do not
    depend on it, only the wall clock.
    """
    from doppler_gym import baselines
    from doppler_gym.parallel.search import island_search

    cp = baselines.run("critical_path", graph, topology, config, seed=seed)
    heft = baselines.run("heft", graph, topology, config)
    found = baselines.run("local_search", graph, topology, config, seed=seed, seconds=None, max_evals=int(evals),
                          starts=[cp, heft], batch_size=batch_size)
    total, seconds = int(found.info["evals"]), found.seconds
    each = max(1, int(evals) // 4)
    restarts = min(int(restarts), int(restart_op_evals) // (max(graph.n_ops, 1) * each))
    if found.info["stopped"] == "lower_bound":  # optimal: no restart can do better
        restarts = 0
    if restarts > 0:
        more = island_search(graph, topology, config, islands=restarts, max_evals=each, seed=seed,
                             batch_size=batch_size)  # each island from its own default starts
        total, seconds = total + int(more.info["evals"]), seconds + more.seconds
        if more.makespan < found.makespan:
            found = more
    return {"name": "search", "assignment": np.asarray(found.assignment).tolist(),
            "makespan": float(found.makespan), "evals": int(evals), "restarts": int(restarts),
            "batch_size": int(batch_size), "total_evals": total,
            "seconds": round(seconds, 3), "interchangeable": devices_interchangeable(topology, config)}


class SearchTargets:
    """Bounded LRU cache of search-teacher placements, keyed by instance content.

    The key is the graph's content digest (:func:`~doppler_gym.envs.context.graph_digest`), the
    topology's content under the config (:func:`~doppler_gym.envs.context.topology_key`) and the
    config's ``repr``: two graph objects with the same structure and costs share one target.

    Args:
        evals: simulated neighbours per search (:func:`search_placement`).
        seed: the searches' seed.
        restarts: independent restarts per search (:func:`search_placement`).
        batch_size: neighbours per step of every search (:func:`search_placement`).
        size: the most targets kept [count] (least recently used dropped first).

    Attributes:
        hits, misses: lookups served from the cache / that ran a search.
        seconds: total search time [s].
    """

    def __init__(self, evals: int, seed: int, size: int = 512, restarts: int = 0, batch_size: int = 256) -> None:
        if size < 1:
            raise ValueError(f"SearchTargets: size must be >= 1, got {size}")
        self.evals, self.seed, self.size, self.restarts = int(evals), int(seed), int(size), int(restarts)
        self.batch_size = int(batch_size)
        self._data: OrderedDict[tuple, dict[str, Any]] = OrderedDict()
        self.hits = self.misses = 0
        self.seconds = 0.0

    def __len__(self) -> int:
        return len(self._data)

    @staticmethod
    def key(graph: DataflowGraph, topology: Topology, config: SimConfig) -> tuple:
        """The content key of an instance."""
        return (graph_digest(graph), topology_key(topology, config), repr(config))

    def target(self, graph: DataflowGraph, topology: Topology, config: SimConfig) -> dict[str, Any]:
        """The instance's search placement (:func:`search_placement`), from the cache or searched now."""
        key = self.key(graph, topology, config)
        found = self._data.get(key)
        if found is not None:
            self.hits += 1
            self._data.move_to_end(key)
            return found
        self.misses += 1
        found = search_placement(graph, topology, config, self.evals, self.seed, self.restarts,
                                 batch_size=self.batch_size)
        self.seconds += found["seconds"]
        self._data[key] = found
        while len(self._data) > self.size:
            self._data.popitem(last=False)
        return found

    def stats(self) -> dict[str, Any]:
        """``{"targets", "hits", "misses", "seconds"}`` for logs and the summary."""
        return {"targets": len(self), "hits": self.hits, "misses": self.misses, "seconds": round(self.seconds, 3)}


class SearchTeacher(AssignmentTeacher):
    """:class:`AssignmentTeacher` whose target is the search placement of each episode's graph.

    At every reset the episode's instance (the env's ``context``: graph, topology, config) is looked
    up in ``targets`` (searched on a miss), so it works on a mix of graphs and topologies.

    Args:
        env: a ``Doppler-Sim-v0`` env (any graph source).
        targets: the shared cache.
    """

    def __init__(self, env: gym.Env, targets: SearchTargets) -> None:
        super().__init__(env, np.zeros(0, np.int64), interchangeable=False)
        self.targets = targets

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        ctx = self.env.unwrapped.context
        found = self.targets.target(ctx.graph, ctx.topology, ctx.config)
        self.target = np.asarray(found["assignment"], np.int64)
        self.interchangeable = bool(found["interchangeable"])
        return obs, info
