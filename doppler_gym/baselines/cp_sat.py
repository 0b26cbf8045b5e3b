"""An exact schedule model solved with OR-Tools CP-SAT (Perron & Didier, CP-SAT, Google OR-Tools).

The model is P|prec, c_ij|Cmax with assignment: one optional interval per (op, device) and exactly
one present per op; the intervals of a device never overlap (at most ``streams`` at once when a
device has several); a consumer starts after its producer ends plus the transfer time when their
devices differ; minimise the last end. Symmetric devices: op 0 is fixed to device 0. HEFT's plan
is the solution hint.

CP-SAT chooses the order of the ops as well as their devices, so its optimum is a lower bound of
the best work-conserving execution of any assignment (the WC runtime orders ops by itself, and
link contention is not modelled). The returned placement is the solver's assignment, re-simulated
under the config; ``info`` keeps the solver's schedule objective and bound.

Times are integers: when every duration is an integer multiple of a common tick (raw paper
costs: the gcd of the costs) the model is exact; otherwise durations are rounded to
``horizon / resolution`` ticks (``info["exact"]`` is False).
"""

from __future__ import annotations

import math
import os
import time
from functools import reduce

import numpy as np

from doppler_gym.baselines.common import Costs, check_seed, finish, resolve
from doppler_gym.baselines.heft import heft_plan
from doppler_gym.baselines.types import Placement, rank_of
from doppler_gym.graph.analysis import topological_order
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology

MAX_EXACT_TICKS = 2**40  # exact integer model only if the horizon stays below this many ticks


def cp_sat(
    graph: DataflowGraph,
    topology: Topology | int,
    config: SimConfig | None = None,
    *,
    time_limit: float = 10.0,
    seed: int = 0,
    workers: int | None = None,
    resolution: int = 100_000,
) -> Placement:
    """Solve the schedule model (module docstring) and return its assignment.

    Args:
        graph, topology, config: as for every baseline.
        time_limit: solver wall-clock limit [s].
        seed: CP-SAT's ``random_seed``.
        workers: CP-SAT search workers (default: the machine's CPU count). With one worker and
            a solve that finishes before the limit the result is reproducible.
        resolution: ticks per horizon when durations must be rounded.

    Returns:
        A :class:`Placement` whose ``order`` sorts the ops by the solver's start times; ``info``:
        ``status`` ("OPTIMAL" or "FEASIBLE"), ``objective`` and ``bound`` (the schedule's
        makespan and the solver's lower bound, reported unit), ``exact``, ``tick`` (internal
        time unit), ``wall_time`` [s].

    Raises:
        ImportError: ortools is not installed.
        RuntimeError: no schedule found within ``time_limit``.
    """
    started = time.perf_counter()
    graph, topology, config = resolve(graph, topology, config, "cp_sat")
    seed = check_seed(seed, "cp_sat")
    if not (isinstance(time_limit, (int, float)) and not isinstance(time_limit, bool) and time_limit > 0):
        raise ValueError(f"cp_sat: time_limit must be a positive number of seconds, got {time_limit!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"cp_sat: workers must be an integer >= 1 or None, got {workers!r}")
    if isinstance(resolution, bool) or not isinstance(resolution, int) or resolution < 10:
        raise ValueError(f"cp_sat: resolution must be an integer >= 10, got {resolution!r}")
    try:
        from ortools.sat.python import cp_model
    except ImportError:
        raise ImportError(
            "cp_sat needs OR-Tools: pip install ortools (or pip install 'doppler-gym[solvers]')"
        ) from None

    costs = Costs.of(graph, topology, config)
    n, d = graph.n_ops, topology.n_devices
    transfer = np.stack([costs.transfer(u) for u in range(n)]) if n else np.zeros((0, d, d))  # (n, D, D)
    plan, _ = heft_plan(graph, costs)
    tick, exact = _tick(costs.comp, transfer, plan.makespan, resolution)
    comp_t = np.rint(costs.comp / tick).astype(np.int64)  # (n, D) ticks
    transfer_t = np.rint(transfer / tick).astype(np.int64)  # (n, D, D) ticks
    horizon = int(max(comp_t.sum(axis=0).min(), math.ceil(plan.makespan / tick) + 1, 1))

    model = cp_model.CpModel()
    start = [model.new_int_var(0, horizon, f"s{i}") for i in range(n)]
    end = [model.new_int_var(0, horizon, f"e{i}") for i in range(n)]
    on = [[model.new_bool_var(f"x{i}_{k}") for k in range(d)] for i in range(n)]
    per_device: list[list] = [[] for _ in range(d)]
    for i in range(n):
        model.add_exactly_one(on[i])
        for k in range(d):
            per_device[k].append(
                model.new_optional_interval_var(start[i], int(comp_t[i, k]), end[i], on[i][k], f"i{i}_{k}")
            )
    for k in range(d):
        if config.streams == 1:
            model.add_no_overlap(per_device[k])
        else:
            model.add_cumulative(per_device[k], [1] * n, config.streams)
    off = ~np.eye(d, dtype=bool)
    for u, v in zip(graph.src.tolist(), graph.dst.tolist()):
        model.add(start[v] >= end[u])
        pair = transfer_t[u]
        if d == 1 or not pair[off].any():
            continue
        if np.all(pair[off] == pair[off][0]):  # one transfer time whatever the devices: a "moved" flag
            moved = model.new_bool_var(f"m{u}_{v}")
            model.add_hint(moved, int(plan.device[u] != plan.device[v]))
            for k in range(d):
                model.add_bool_or([on[u][k].Not(), on[v][k], moved])
            model.add(start[v] >= end[u] + int(pair[off][0]) * moved)
        else:
            for a in range(d):
                for b in range(d):
                    if a != b and pair[a, b] > 0:
                        model.add(start[v] >= end[u] + int(pair[a, b])).only_enforce_if([on[u][a], on[v][b]])
    makespan = model.new_int_var(0, horizon, "makespan")
    for i in np.flatnonzero(graph.out_degree == 0).tolist():
        model.add(makespan >= end[i])
    model.minimize(makespan)
    hint_device = plan.device.copy()
    if n and costs.uniform:  # symmetry: op 0 on device 0, and the hint relabelled to match
        model.add(on[0][0] == 1)
        swap = {0: int(plan.device[0]), int(plan.device[0]): 0}
        hint_device = np.array([swap.get(int(k), int(k)) for k in plan.device], dtype=np.int64)
    hint_start = np.rint(plan.start / tick).astype(np.int64)  # HEFT's plan as a complete hint
    hint_end = hint_start + comp_t[np.arange(n), hint_device]
    for i in range(n):
        model.add_hint(start[i], int(hint_start[i]))
        model.add_hint(end[i], int(hint_end[i]))
        for k in range(d):
            model.add_hint(on[i][k], int(hint_device[i] == k))
    model.add_hint(makespan, int(hint_end.max()) if n else 0)

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.random_seed = seed
    solver.parameters.num_workers = workers if workers is not None else (os.cpu_count() or 1)
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise RuntimeError(
            f"cp_sat: no schedule found for graph {graph.name!r} within {time_limit} s "
            f"(status {solver.status_name(status)}); raise time_limit"
        )
    chosen = np.array([[solver.value(x) for x in row] for row in on], dtype=np.int64).reshape(n, d)
    assignment = chosen.argmax(axis=1).astype(np.int64)
    starts = np.array([solver.value(s) for s in start], dtype=np.float64)
    order = np.lexsort((rank_of(topological_order(graph)), starts)).astype(np.int64)
    scale = tick / config.time_divisor
    info = {
        "status": solver.status_name(status), "objective": solver.objective_value * scale,
        "bound": solver.best_objective_bound * scale, "exact": exact, "tick": tick,
        "wall_time": solver.wall_time, "seed": seed,
    }
    return finish("cp_sat", graph, topology, config, assignment, order, started, info)


def _tick(comp: np.ndarray, transfer: np.ndarray, plan_makespan: float, resolution: int) -> tuple[float, bool]:
    """``(tick, exact)``: the gcd of all durations when they are integers and the horizon stays
    below ``MAX_EXACT_TICKS`` ticks, else ``horizon / resolution`` (rounded model)."""
    values = np.concatenate([comp.ravel(), transfer.ravel()])
    values = values[values > 0]
    horizon = max(plan_makespan, float(comp.sum(axis=0).min()) if comp.size else 0.0, 1e-300)
    if values.size and np.all(values == np.round(values)) and values.max() < 2**62:
        g = reduce(math.gcd, np.unique(values).astype(np.int64).tolist())
        if horizon / g < MAX_EXACT_TICKS:
            return float(g), True
    return horizon / resolution, False
