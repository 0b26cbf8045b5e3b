"""Minimum-epoch chunk schedules for multicast demands (ALLGATHER, BROADCAST, ``{src: dsts}``) on CP-SAT.

The TE-CCL MILP (Liu et al., SIGCOMM 2024; model in :mod:`doppler_gym.comm.cpsat_model`) has only 0/1
variables and +-1 coefficients, which suits CP-SAT (about 100x faster than HiGHS MIP on
the hard 16-GPU case). The search, like the released code's ``ITERATIVE`` mode:

1. a lower bound ``lo`` from :func:`doppler_gym.comm.bounds.release_cut_bound_epochs` (hop latency,
   per-GPU in-links, cuts at the slowest links);
2. feasibility solves at ``lo, lo+1, lo+3, lo+7, ...`` until one succeeds; its schedule's real
   epoch count is the upper bound ``hi``;
3. bisection on feasibility between them; every feasible answer lowers ``hi`` to the epochs its
   schedule really needs;
4. pruning of sends that feed no demand (:mod:`doppler_gym.comm.prune`);
5. early delivery at the minimum ``hi``: every send left-shifted to its earliest valid epoch
   (:mod:`doppler_gym.comm.compact`; deterministic, milliseconds) and, on request
   (``objective_budget``), the released ``PAPER`` objective (maximise the met (demand, epoch)
   pairs, i.e. minimise the sum of completion epochs) by CP-SAT, warm-started from that schedule.
   The objective pass is off by default: it can cost tens of seconds per 16-GPU case for a few
   percent of the objective, and a wall-clock stop would make the schedule depend on the load.

``optimal`` is True when every horizon below the result was proven infeasible (or is below the
lower bound). A solve that hits its share of the time limit counts as "not shown feasible": the
search moves up, and the result is then not claimed optimal.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from doppler_gym.comm.bounds import release_cut_bound_epochs
from doppler_gym.comm.compact import left_shift
from doppler_gym.comm.cpsat_model import build_chunk_model, read_sends, solver_params
from doppler_gym.comm.expanded import Network, open_demand
from doppler_gym.comm.prune import delivery_epochs, prune_sends


@dataclass(frozen=True)
class MilpResult:
    """Outcome of :func:`min_epoch_schedule`.

    Attributes:
        sends: (n_sends, 3) int32 (commodity, link, epoch), pruned.
        epochs: epochs the schedule needs (1 + last epoch at whose end a demand is met).
        lower_bound: the analytic lower bound the search started from [epochs].
        optimal: every smaller horizon was proven infeasible.
        seconds: wall time of the whole search [s].
        solves: list of (horizon, status, seconds) for every CP-SAT call, status in
            {"feasible", "infeasible", "unknown", "trivially-infeasible", "objective"}; seconds
            include building the model.
    """

    sends: np.ndarray
    epochs: int
    lower_bound: int
    optimal: bool
    seconds: float
    solves: tuple[tuple[int, str, float], ...]


def min_epoch_schedule(net: Network, sources: np.ndarray, wants: np.ndarray, time_limit: float = 60.0,
                       seed: int = 0, early_delivery: bool = True, max_epochs: int = 100_000,
                       objective_budget: float = 0.0) -> MilpResult:
    """Minimum-epoch schedule of the multicast demand ``(sources, wants)`` on ``net``.

    Args:
        net: link timing (:func:`doppler_gym.comm.expanded.network`).
        sources: (n_commodities,) int node holding each commodity at epoch 0 (a GPU).
        wants: (n_commodities, n_nodes) bool destinations of each commodity.
        time_limit: wall-clock budget for the whole search [s]; the CP-SAT objective pass gets at
            most an eighth of what is left.
        seed: CP-SAT random seed (the same seed gives the same schedule when no solve times out).
        early_delivery: pull sends forward after the search (:func:`doppler_gym.comm.compact.left_shift`).
        objective_budget: when > 0 (and ``early_delivery``), also maximise the released objective with
            CP-SAT at the minimum horizon for this deterministic-time budget (CP-SAT work units;
            one unit can take seconds of wall time, so it is off by default).
        max_epochs: give up (ValueError) beyond this horizon.

    Raises:
        RuntimeError: no schedule found within ``time_limit`` (raise it, or use ``method="rounds"``).
    """
    from ortools.sat.python import cp_model

    t0 = time.perf_counter()
    sources, wants, holds = open_demand(sources, wants)
    if not wants.any():
        return MilpResult(np.zeros((0, 3), np.int32), 0, 0, True, time.perf_counter() - t0, ())
    lb = release_cut_bound_epochs(net, sources, wants)
    solves: list[tuple[int, str, float]] = []
    deadline = t0 + float(time_limit)

    def attempt(E: int):
        """Feasibility solve at horizon E: (status, sends or None)."""
        ts = time.perf_counter()
        if deadline - ts <= 0:
            solves.append((E, "unknown", 0.0))
            return "unknown", None
        cm = build_chunk_model(net, wants, holds, last_land=E, last_send=E)
        if not cm.feasible:
            solves.append((E, "trivially-infeasible", time.perf_counter() - ts))
            return "infeasible", None
        solver = solver_params(deadline - time.perf_counter(), seed)
        st = solver.Solve(cm.model)
        if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            solves.append((E, "feasible", time.perf_counter() - ts))
            return "feasible", (cm, solver)
        if st == cp_model.INFEASIBLE:
            solves.append((E, "infeasible", time.perf_counter() - ts))
            return "infeasible", None
        solves.append((E, "unknown", time.perf_counter() - ts))
        return "unknown", None

    def epochs_of(sends: np.ndarray) -> int:
        return int(delivery_epochs(net, sends, wants, holds).max())

    proven = True  # every horizon below lo is infeasible
    lo, best, hi = lb, None, None
    step = 1
    E = lb
    while best is None:
        if max_epochs < E:
            raise ValueError(f"min_epoch_schedule: no schedule within {max_epochs} epochs; coarser epochs "
                             "(epoch='slow' or a multiplier) or fewer chunks shrink the model")
        status, got = attempt(E)
        if status == "feasible":
            cm, solver = got
            best = (cm, solver, read_sends(solver, cm))
            hi = epochs_of(best[2])
            break
        if status == "unknown":
            if time.perf_counter() >= deadline:
                raise RuntimeError(f"min_epoch_schedule: no schedule found within time_limit={time_limit} s "
                                   f"(tried horizons {[e for e, *_ in solves]}); raise time_limit, use coarser "
                                   "epochs, or method='rounds'")
            proven = False
        lo = E + 1
        E = lo + step - 1
        step *= 2
    while lo < hi and time.perf_counter() < deadline:
        mid = (lo + hi - 1) // 2
        status, got = attempt(mid)
        if status == "feasible":
            cm, solver = got
            sends = read_sends(solver, cm)
            best = (cm, solver, sends)
            hi = epochs_of(sends)
        else:
            if status == "unknown":
                proven = False
            lo = mid + 1
    optimal = proven and lo >= hi
    cm, solver, sends = best
    kept = prune_sends(net, sends, wants, holds)
    if early_delivery:
        kept = left_shift(net, kept, holds)
        if objective_budget > 0 and time.perf_counter() < deadline:
            sends = _early_delivery(net, wants, holds, hi, kept, deadline, seed, solves, objective_budget)
            kept = left_shift(net, prune_sends(net, sends, wants, holds), holds)
    epochs = epochs_of(kept)
    return MilpResult(kept, epochs, lb, bool(optimal and epochs == hi), time.perf_counter() - t0, tuple(solves))


def _early_delivery(net: Network, wants: np.ndarray, holds: np.ndarray, E: int, sends: np.ndarray,
                    deadline: float, seed: int, solves: list, budget: float) -> np.ndarray:
    """Re-solve at horizon E maximising the met (demand, epoch) pairs, hinted with ``sends``."""
    from ortools.sat.python import cp_model

    ts = time.perf_counter()
    cm = build_chunk_model(net, wants, holds, last_land=E, last_send=E)
    chosen = {tuple(int(v) for v in row) for row in sends}
    for key, v in zip(cm.sends, cm.send_vars):
        cm.model.AddHint(v, key in chosen)
    terms = []
    for c, d in zip(*np.nonzero(wants & ~holds)):
        terms.extend(cm.hold.get((int(c), int(d)), {}).values())
    if not terms:
        return sends
    cm.model.Maximize(sum(terms))
    left = deadline - time.perf_counter()
    solver = solver_params(max(0.05, left / 4), seed)
    # a deterministic-time budget keeps the pass reproducible (same seed, same schedule) when it
    # stops before proving its optimum; the wall-clock limit is only a safety net
    solver.parameters.max_deterministic_time = max(0.05, min(left / 8, budget))
    st = solver.Solve(cm.model)
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        solves.append((E, "objective", time.perf_counter() - ts))
        return read_sends(solver, cm)
    return sends
