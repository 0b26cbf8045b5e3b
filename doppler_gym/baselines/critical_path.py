"""DOPPLER's critical-path list scheduler, the teacher of its imitation stage.

At each step the ready op (all predecessors placed) with the highest b-level is selected, random
tie-break; it goes to the device where it could start earliest per the incremental estimate
:class:`~doppler_gym.sim.estimate.EstimatedSchedule`, random tie-break. The b-level is DOPPLER's
(:func:`doppler_gym.graph.analysis.b_level`) on times under the config: compute time averaged
over devices and transfer time averaged over device pairs, which for raw costs (the paper files
under ``SimConfig.reference()``) is exactly the files' ``comp`` / ``comm`` columns.

The episode runs on :class:`~doppler_gym.sim.placement_state.PlacementState`, whose ready ops are in
the authors' order: the sources by id, then each op appended when its last predecessor is placed
(successors in edge order). Sources: the authors' ``cp_utils.py`` and
``scheduler/rl_agent.py`` (github.com/xinyuyao/Doppler); the list-scheduling family is surveyed
by Kwok & Ahmad, ACM Computing Surveys 31(4), 1999.

Seeds and figures. The paper graphs are full of ties (equal b-levels, equal earliest starts), so
the result depends on the tie-break stream. On ``paper/chainmm`` with 4 devices under
``SimConfig.reference()`` the makespans are multiples of about 100: over seeds 0-199 the mean is
1779.1 with a standard deviation of 125.5, so a mean over 20 seeds moves by about +-56 (two
standard errors) with the stream. Seeds 0-19 average 1770.1; a 20-seed mean of 1840.1 published
for this heuristic (start = earliest start, the authors' simulator) comes from another random
stream and lies within that spread: the definitions agree (a second implementation in
``tests/doppler_gym/baselines/test_critical_path_study.py`` picks the same op and device at every
step), only the draws differ. The envs' reference makespan uses ``seed=0`` (1600.09 on chainmm).
"""

from __future__ import annotations

import time

import numpy as np

from doppler_gym.baselines.common import Costs, check_seed, finish, resolve
from doppler_gym.baselines.types import Placement
from doppler_gym.graph.analysis import b_level
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.placement_state import PlacementState
from doppler_gym.topology.types import Topology


def critical_path(
    graph: DataflowGraph,
    topology: Topology | int,
    config: SimConfig | None = None,
    *,
    seed: int = 0,
    paper_faithful: bool = False,
) -> Placement:
    """DOPPLER's critical-path heuristic: highest b-level ready op, earliest-start device.

    Args:
        graph: the graph.
        topology: the devices (an int ``n`` means ``Topology.uniform(n)``).
        config: the simulator model; ``None`` = the graph's
            :func:`~doppler_gym.instances.default_config` on ``topology``. The estimate uses its cost model.
        seed: seed of the random tie-breaks.
        paper_faithful: reproduce the authors' code, bugs included: the estimate's start times
            follow their packed, dependency-free bookkeeping (``time_model="faithful"``), and the
            node is picked by their indexing bug, ``legal_nodes[chosen_index]`` with
            ``chosen_index`` a random index into the list of tied maxima, i.e. one of the first
            ``k`` ready ops (``k`` = number of ops tied at the highest b-level), usually the
            oldest ready op rather than the highest one.

    Returns:
        A :class:`Placement` whose ``order`` is the selection order; ``info`` holds the seed,
        the mode and the estimate's own makespan (``estimated_makespan``, reported unit).
    """
    started = time.perf_counter()
    graph, topology, config = resolve(graph, topology, config, "critical_path")
    rng = np.random.default_rng(check_seed(seed, "critical_path"))
    time_model = "faithful" if paper_faithful else "fixed"
    assignment, order, estimate = critical_path_schedule(
        graph, topology, config, rng=rng, time_model=time_model, authors_selection=bool(paper_faithful)
    )
    name = "critical_path_paper" if paper_faithful else "critical_path"
    info = {"seed": seed, "paper_faithful": bool(paper_faithful),
            "estimated_makespan": estimate / config.time_divisor}
    return finish(name, graph, topology, config, assignment, order, started, info)


def critical_path_schedule(
    graph: DataflowGraph,
    topology: Topology,
    config: SimConfig,
    *,
    rng: np.random.Generator,
    time_model: str = "fixed",
    authors_selection: bool = False,
) -> tuple[np.ndarray, np.ndarray, float]:
    """The list scheduler behind :func:`critical_path`, with its two fidelity switches apart.

    Args:
        graph, topology, config: checked inputs (see :func:`critical_path`).
        rng: source of the tie-breaks.
        time_model: ``"fixed"`` (start = earliest start) or ``"faithful"`` (the authors' packed
            bookkeeping), see :class:`~doppler_gym.sim.estimate.EstimatedSchedule`.
        authors_selection: pick ``ready[i]`` with ``i`` a random index into the tied maxima (the
            authors' bug) instead of the tied maximum itself.

    Returns:
        ``(assignment (n_ops,) int64, order (n_ops,) int64, estimated makespan)``, the last in
        the simulator's internal unit (before ``time_divisor``).
    """
    n = graph.n_ops
    costs = Costs.of(graph, topology, config)
    level = b_level(graph, costs.mean_comp, costs.mean_comm)
    state = PlacementState(graph, topology, config, time_model=time_model)
    order = np.empty(n, dtype=np.int64)
    for step in range(n):
        ready = list(state.ready)  # the authors' ready list: sources by id, then in the order they became ready
        levels = level[ready]
        tied = np.flatnonzero(levels == levels.max())
        pick = int(rng.integers(tied.size))
        v = ready[pick if authors_selection else int(tied[pick])]
        earliest = state.select(v)[:, 4]
        best = np.flatnonzero(earliest == earliest.min())
        state.place(int(best[rng.integers(best.size)]))
        order[step] = v
    return state.assignment, order, float(state.makespan)
