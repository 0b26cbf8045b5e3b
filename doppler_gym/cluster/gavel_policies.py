"""Gavel's scheduling policies as linear programs on HiGHS: the allocation X[job, GPU type].

Gavel (Narayanan et al., "Heterogeneity-Aware Cluster Scheduling Policies for Deep Learning
Workloads", OSDI 2020) writes a policy as an optimisation over an allocation ``X`` of shape
``(n_jobs, n_types)``: ``X[i, j]`` is the fraction of wall time job ``i`` should spend on GPUs of type
``j`` (all ``sf[i]`` of them at once). Every policy here shares Gavel's base constraints (section 3.1)::

    X >= 0,    sum_j X[i, j] <= 1  (each job),    sum_i sf[i] X[i, j] <= cap[j]  (each GPU type)

with ``sf[i]`` the job's GPU count (scale factor) and ``cap[j]`` the GPUs of type ``j``. The effective
throughput of job ``i`` is ``thr_i(X) = sum_j T[i, j] X[i, j]`` [steps/s] for measured throughputs
``T[i, j]`` [steps/s] (0: the job cannot run on that type). The round-based mechanism that realises
``X`` (section 5) is :mod:`doppler_gym.cluster.rounds` (Gavel's simulator's mechanics) or
:mod:`doppler_gym.cluster.gavel_engine` (on the event engine).

Policies (``POLICIES``; ``*_perf`` are heterogeneity-aware, the others agnostic as Gavel defines them:
they see every throughput as 1):

- ``max_min_fairness`` / ``max_min_fairness_perf`` (section 4.1, LAS): maximise ``min_i w_i^-1 sf_i
  thr_i(X) / thr_i(X_iso)``, the effective throughput normalised by the job's throughput under the
  agnostic allocation ``X_iso`` and weighted by the scale factor (a job on ``sf`` GPUs gets ``sf`` times
  less time than a 1-GPU job with the same throughput). An LP in ``(X, t)``: maximise ``t`` subject to
  ``t <= a_i . X[i]`` for every job.
- ``finish_time_fairness`` / ``finish_time_fairness_perf`` (section 4.2, Themis): minimise
  ``max_i rho_i(X)``, ``rho_i = (t_i + r_i / thr_i(X)) / (t_i + r_i / thr_i(X_iso))`` for elapsed time
  ``t_i`` [s] and remaining steps ``r_i``. Quasi-convex: for fixed ``rho`` the constraints
  ``thr_i(X) >= r_i / (rho E_i - t_i)`` are linear, so ``rho`` is found by bisection over LP feasibility.
- ``min_total_duration`` (section 4.2, makespan): the least ``T`` such that every job can finish its
  ``r_i`` remaining steps by ``T``: ``thr_i(X) >= r_i / T``. With ``s = 1 / T`` this is one LP: maximise
  ``s`` subject to ``thr_i(X) >= r_i s`` (Gavel bisects on ``T`` to within 5%; the LP gives it exactly).
- ``fifo`` / ``fifo_perf`` (section 4.2): not LPs. Jobs in arrival order get a whole type (``X[i, j] = 1``) while
  one has ``sf`` GPUs left; the first job that fits no type stops the queue (no backfilling). ``fifo``
  keeps a job on the type it started on and picks a seeded random type among those that fit (Gavel's
  ``policies/fifo.py``, with its over-allocation fixed: running jobs' GPUs are counted before freed
  slots are reused; ``FIFOPolicy(gavel_bugs=True)`` runs it as Gavel does, for comparisons);
  ``fifo_perf`` re-assigns every job, in arrival order, to its fastest type that still fits each time
  it is called.

Which optimal ``X`` an LP returns matters to the mechanism (ties between types are common). Gavel
solves with ECOS, an interior-point method; here HiGHS's interior-point solver runs without
crossover, so the answer lies inside the optimal face, as ECOS's does, not on a vertex.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from doppler_gym import extras

_TOL = 1e-9


@dataclass(frozen=True)
class PolicyInput:
    """What a policy sees at one allocation (Gavel's allocation state).

    Shapes: ``n`` active jobs (rows, in arrival order), ``m`` GPU types (columns).

    Attributes:
        throughputs: ``(n, m) float64`` [steps/s] each job's solo throughput on all its ``sf`` GPUs of a type.
        scale_factors: ``(n,) int64`` [GPUs] each job's GPU count.
        capacity: ``(m,) int64`` [GPUs] of each type.
        weights: ``(n,) float64`` priority weights (> 0; 1 = equal).
        remaining: ``(n,) float64`` [steps] left to train.
        elapsed: ``(n,) float64`` [s] since each job arrived.
        type_names: ``m`` GPU type names (optional; Gavel's FIFO visits types in name order).
    """

    throughputs: np.ndarray
    scale_factors: np.ndarray
    capacity: np.ndarray
    weights: np.ndarray
    remaining: np.ndarray
    elapsed: np.ndarray
    type_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        tp = np.asarray(self.throughputs, dtype=np.float64)
        if tp.ndim != 2:
            raise ValueError(f"PolicyInput.throughputs must be (n_jobs, n_types), got shape {tp.shape}")
        n, m = tp.shape
        fields = {"throughputs": tp}
        for name, shape, dtype in (("scale_factors", (n,), np.int64), ("capacity", (m,), np.int64),
                                   ("weights", (n,), np.float64), ("remaining", (n,), np.float64),
                                   ("elapsed", (n,), np.float64)):
            arr = np.asarray(getattr(self, name), dtype=dtype)
            if arr.shape != shape:
                raise ValueError(f"PolicyInput.{name} must have shape {shape}, got {arr.shape}")
            fields[name] = arr
        if not np.all(np.isfinite(tp)) or (tp < 0).any():
            raise ValueError("PolicyInput.throughputs must be finite and >= 0 [steps/s]")
        if (fields["scale_factors"] < 1).any() or (fields["capacity"] < 0).any():
            raise ValueError("PolicyInput: scale_factors must be >= 1 and capacity >= 0 [GPUs]")
        if not (fields["weights"] > 0).all():
            raise ValueError("PolicyInput.weights must be > 0 (priority weights)")
        names = tuple(self.type_names)
        if names and len(names) != m:
            raise ValueError(f"PolicyInput.type_names must name the {m} types, got {names!r}")
        object.__setattr__(self, "type_names", names)
        if (fields["remaining"] < 0).any() or (fields["elapsed"] < 0).any():
            raise ValueError("PolicyInput: remaining [steps] and elapsed [s] must be >= 0")
        for name, arr in fields.items():
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def shape(self) -> tuple[int, int]:
        return self.throughputs.shape  # type: ignore[return-value]

    def agnostic(self) -> PolicyInput:
        """The same input with every throughput 1 (how Gavel's agnostic policies see the jobs)."""
        return PolicyInput(np.ones(self.shape), self.scale_factors, self.capacity, self.weights, self.remaining,
                           self.elapsed, self.type_names)


# -- the LP core ---------------------------------------------------------------------------------------
def _base_rows(p: PolicyInput) -> tuple[list, list, list]:
    """Gavel's base constraints over the allocation's columns (row-major ``(n, m)``, first in the LP), as
    ``(rows, lower, upper)``: each row a ``(cols, values)`` pair."""
    n, m = p.shape
    rows, lo, hi = [], [], []
    for i in range(n):  # sum_j X[i, j] <= 1
        rows.append((np.arange(i * m, (i + 1) * m), np.ones(m)))
        lo.append(-np.inf)
        hi.append(1.0)
    for j in range(m):  # sum_i sf_i X[i, j] <= cap_j
        rows.append((np.arange(n) * m + j, p.scale_factors.astype(np.float64)))
        lo.append(-np.inf)
        hi.append(float(p.capacity[j]))
    return rows, lo, hi


def _solve(cost: np.ndarray, rows: list, lo: list, hi: list, col_upper: np.ndarray,
           maximise: bool) -> np.ndarray | None:
    """Solve the LP ``max/min cost . z`` s.t. ``lo <= rows z <= hi``, ``0 <= z <= col_upper`` with HiGHS's
    interior-point method without crossover; the solution ``(n_cols,)``, or ``None`` if infeasible."""
    highspy = extras.require("highspy", "the Gavel policies (doppler_gym.cluster.gavel_policies)")
    n_cols = cost.shape[0]
    lp = highspy.HighsLp()
    lp.num_col_ = n_cols
    lp.num_row_ = len(rows)
    lp.col_cost_ = cost.astype(np.float64)
    lp.col_lower_ = np.zeros(n_cols)
    lp.col_upper_ = np.where(np.isinf(col_upper), highspy.kHighsInf, col_upper)
    lp.row_lower_ = np.where(np.isinf(lo), -highspy.kHighsInf, lo).astype(np.float64)
    lp.row_upper_ = np.where(np.isinf(hi), highspy.kHighsInf, hi).astype(np.float64)
    lp.sense_ = highspy.ObjSense.kMaximize if maximise else highspy.ObjSense.kMinimize
    starts, index, value = [0], [], []
    for cols, vals in rows:
        index.append(np.asarray(cols, dtype=np.int32))
        value.append(np.asarray(vals, dtype=np.float64))
        starts.append(starts[-1] + len(cols))
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.asarray(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.concatenate(index) if index else np.zeros(0, np.int32)
    lp.a_matrix_.value_ = np.concatenate(value) if value else np.zeros(0)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.setOptionValue("solver", "ipm")
    h.setOptionValue("run_crossover", "off")
    h.passModel(lp)
    h.run()
    status = h.getModelStatus()
    if status == highspy.HighsModelStatus.kInfeasible:
        return None
    if status != highspy.HighsModelStatus.kOptimal:
        # IPM without crossover can stop short on degenerate problems; fall back to simplex
        h.setOptionValue("solver", "simplex")
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
    return np.asarray(h.getSolution().col_value, dtype=np.float64)


def _allocation(z: np.ndarray, n: int, m: int) -> np.ndarray:
    """The ``(n, m)`` allocation from the first ``n m`` columns, clipped to [0, 1] as Gavel does."""
    return np.clip(z[: n * m].reshape(n, m), 0.0, 1.0)


def _max_min(p: PolicyInput, coeff: np.ndarray) -> np.ndarray:
    """Maximise ``t`` s.t. ``t <= sum_j coeff[i, j] X[i, j]`` for every job, under the base constraints."""
    n, m = p.shape
    rows, lo, hi = _base_rows(p)
    t_col = n * m
    for i in range(n):  # t - coeff_i . X_i <= 0
        rows.append((np.r_[np.arange(i * m, (i + 1) * m), t_col], np.r_[-coeff[i], 1.0]))
        lo.append(-np.inf)
        hi.append(0.0)
    cost = np.zeros(n * m + 1)
    cost[t_col] = 1.0
    z = _solve(cost, rows, lo, hi, np.r_[np.ones(n * m), np.inf], maximise=True)
    if z is None:  # cannot happen: X = 0, t = 0 is feasible
        raise RuntimeError("max-min fairness LP reported infeasible")
    return _allocation(z, n, m)


def isolated_throughputs(p: PolicyInput) -> np.ndarray:
    """``(n,)`` [steps/s] each job's throughput under the agnostic max-min allocation (Gavel's ``X_iso``)."""
    x_iso = max_min_fairness(p, aware=False)
    return (p.throughputs * x_iso).sum(axis=1)


def max_min_fairness(p: PolicyInput, aware: bool = True) -> np.ndarray:
    """Gavel's max-min fairness (LAS), ``(n, m)`` allocation; see the module docstring.

    Agnostic (``aware=False``): every throughput is 1, so the objective is ``min_i sf_i sum_j X[i, j] /
    w_i``, GPU time weighted by scale factor. Aware: ``min_i sf_i thr_i(X) / (w_i thr_i(X_iso))``.
    """
    n, m = p.shape
    if n == 0:
        return np.zeros((0, m))
    if not aware:
        coeff = np.repeat((p.scale_factors / p.weights)[:, None], m, axis=1)
        return _max_min(p, coeff)
    iso = isolated_throughputs(p)
    with np.errstate(divide="ignore", invalid="ignore"):
        norm = np.where(iso > 0, 1.0 / iso, 0.0)
    coeff = p.throughputs * (p.scale_factors / p.weights * norm)[:, None]
    return _max_min(p, coeff)


def _throughput_floor_feasible(p: PolicyInput, need: np.ndarray) -> np.ndarray | None:
    """An allocation with ``thr_i(X) >= need[i]`` for every job under the base constraints, or ``None``."""
    n, m = p.shape
    rows, lo, hi = _base_rows(p)
    for i in range(n):
        if need[i] > 0:
            rows.append((np.arange(i * m, (i + 1) * m), p.throughputs[i]))
            lo.append(float(need[i]))
            hi.append(np.inf)
    z = _solve(np.zeros(n * m), rows, lo, hi, np.ones(n * m), maximise=False)
    return None if z is None else _allocation(z, n, m)


def finish_time_fairness(p: PolicyInput, aware: bool = True, rel_tol: float = 1e-4) -> np.ndarray:
    """Gavel's finish-time fairness (Themis), ``(n, m)`` allocation: the least ``rho`` by bisection over LP
    feasibility (see the module docstring), to relative precision ``rel_tol``; the allocation at the
    smallest feasible ``rho`` found. Agnostic (``aware=False``): every throughput is 1, as Gavel's."""
    n, m = p.shape
    if n == 0:
        return np.zeros((0, m))
    q = p if aware else p.agnostic()
    iso = isolated_throughputs(q)
    with np.errstate(divide="ignore"):
        e_iso = q.elapsed + np.where(iso > 0, q.remaining / np.where(iso > 0, iso, 1.0), np.inf)
    finite = np.isfinite(e_iso) & (e_iso > 0)

    def need(rho: float) -> np.ndarray:
        slack = rho * e_iso - q.elapsed
        with np.errstate(divide="ignore"):
            return np.where(finite & (q.remaining > 0), q.remaining / np.where(slack > 0, slack, np.nan), 0.0)

    lo = float(np.max(q.elapsed[finite] / e_iso[finite], initial=0.0))
    hi = max(1.0, 2 * lo)
    best = None
    for _ in range(60):  # grow hi until feasible
        r = need(hi)
        if not np.isnan(r).any():
            best = _throughput_floor_feasible(q, r)
            if best is not None:
                break
        lo, hi = hi, 2 * hi
    if best is None:
        raise RuntimeError("finish-time fairness: no feasible rho found (a job with zero throughput everywhere?)")
    while hi - lo > rel_tol * hi:
        mid = 0.5 * (lo + hi)
        r = need(mid)
        x = None if np.isnan(r).any() else _throughput_floor_feasible(q, r)
        if x is None:
            lo = mid
        else:
            hi, best = mid, x
    return best


def finish_time_ratios(p: PolicyInput, x: np.ndarray, aware: bool = True) -> np.ndarray:
    """``(n,)`` Themis' ``rho_i(X)`` of allocation ``x`` (inf where the job gets no throughput)."""
    q = p if aware else p.agnostic()
    iso = isolated_throughputs(q)
    thr = (q.throughputs * x).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_x = q.elapsed + np.where(q.remaining > 0, q.remaining / thr, 0.0)
        t_iso = q.elapsed + np.where(q.remaining > 0, q.remaining / iso, 0.0)
        return t_x / t_iso


def min_total_duration(p: PolicyInput) -> np.ndarray:
    """Gavel's minimum makespan policy, ``(n, m)`` allocation: maximise ``s = 1/T`` subject to
    ``thr_i(X) >= r_i s`` (heterogeneity-aware by construction)."""
    n, m = p.shape
    if n == 0:
        return np.zeros((0, m))
    rows, lo, hi = _base_rows(p)
    s_col = n * m
    for i in range(n):  # r_i s - T_i . X_i <= 0
        rows.append((np.r_[np.arange(i * m, (i + 1) * m), s_col], np.r_[-p.throughputs[i], p.remaining[i]]))
        lo.append(-np.inf)
        hi.append(0.0)
    cost = np.zeros(n * m + 1)
    cost[s_col] = 1.0
    # s <= 1e9 [1/s]: bounded even when no job has steps left
    z = _solve(cost, rows, lo, hi, np.r_[np.ones(n * m), 1e9], maximise=True)
    if z is None:
        raise RuntimeError("min-total-duration LP reported infeasible")
    return _allocation(z, n, m)


class FIFOPolicy:
    """Gavel's FIFO allocation (``fifo``: ``perf=False``; ``fifo_perf``: ``perf=True``); see the module docstring.

    Stateful: ``fifo`` remembers each job's type until it leaves. ``seed`` seeds the random type choice.
    ``gavel_bugs=True`` (``fifo`` only) reproduces Gavel's ``policies/fifo.py`` (the version at commit
    fc065b6) as it runs, for comparisons under matched mechanics: a job that leaves hands its slot to the
    queue's head when that job fits the GPUs counted free so far (before the later running jobs are
    subtracted) and can run on that type, so a type can be allocated past its size; and a new job goes to
    the last type in name order that still has a free GPU, whether or not it fits (passed over if it
    cannot run there), while the seeded random draw only picks which type is dropped from the list when
    one fills up.
    """

    def __init__(self, perf: bool, seed: int = 0, gavel_bugs: bool = False) -> None:
        if perf and gavel_bugs:
            raise ValueError("FIFOPolicy: gavel_bugs applies to the agnostic fifo only (perf=False)")
        self.perf, self.gavel_bugs = perf, gavel_bugs
        self._rng = random.Random(seed)
        self._assigned: dict[int, int] = {}  # job id -> type index

    def __call__(self, job_ids: Sequence[int], p: PolicyInput) -> np.ndarray:
        """``(n, m)`` 0/1 allocation of the jobs ``job_ids`` (rows of ``p``, arrival order)."""
        n, m = p.shape
        if len(job_ids) != n:
            raise ValueError(f"FIFOPolicy: {len(job_ids)} job ids for {n} rows of throughputs")
        row = {int(j): r for r, j in enumerate(job_ids)}
        if self.perf:
            self._assigned = {}
        if self.gavel_bugs:
            self._gavel_fifo(row, p)
        else:
            self._fifo(row, p)
        x = np.zeros((n, m))
        for j, t in self._assigned.items():
            x[row[j], t] = 1.0
        return x

    def _fifo(self, row: dict[int, int], p: PolicyInput) -> None:
        """Strict FIFO over the free GPUs after every running job's (the fixed policy)."""
        self._assigned = {j: t for j, t in self._assigned.items() if j in row}
        free = p.capacity.astype(np.int64).copy()
        for j, t in self._assigned.items():
            free[t] -= p.scale_factors[row[j]]
        for j in sorted(row):
            if j in self._assigned:
                continue
            r = row[j]
            fits = [t for t in range(p.shape[1]) if free[t] >= p.scale_factors[r] and p.throughputs[r, t] > 0]
            if not fits:
                break  # strict FIFO: the head of the queue blocks the rest
            if self.perf:
                t = max(fits, key=lambda k: (p.throughputs[r, k], -k))
            else:
                t = fits[self._rng.randrange(len(fits))]
            self._assigned[j] = t
            free[t] -= p.scale_factors[r]

    def _gavel_fifo(self, row: dict[int, int], p: PolicyInput) -> None:
        """Gavel's base-mode FIFO as it runs (class docstring); types in name order (``p.type_names``,
        else column order), as Gavel lists them."""
        sf = {j: int(p.scale_factors[r]) for j, r in row.items()}
        free = p.capacity.astype(np.int64).copy()
        queue = [j for j in sorted(row) if j not in self._assigned]
        for j in sorted(self._assigned):
            t = self._assigned[j]
            if j in row:
                free[t] -= sf[j]
                continue
            # the job left: its slot goes to the queue's head if it fits the GPUs counted so far and can run there
            if queue and sf[queue[0]] <= free[t] and p.throughputs[row[queue[0]], t] > 0:
                k = queue.pop(0)
                self._assigned[k] = t
                free[t] -= sf[k]
            del self._assigned[j]
        names = p.type_names or tuple(str(k) for k in range(p.shape[1]))
        open_types = sorted((t for t in range(p.shape[1]) if free[t] > 0), key=lambda t: names[t])
        while queue and open_types:
            j = queue.pop(0)
            fits = [pos for pos, t in enumerate(open_types) if free[t] >= sf[j]]
            if not fits:
                break
            pick = self._rng.randrange(len(fits))
            t = open_types[-1]
            if p.throughputs[row[j], t] > 0:  # else the job is passed over this time
                self._assigned[j] = t
                free[t] -= sf[j]
                if free[t] == 0:
                    open_types.pop(fits[pick])


AWARE = {"fifo": False, "fifo_perf": True, "max_min_fairness": False, "max_min_fairness_perf": True,
         "finish_time_fairness": False, "finish_time_fairness_perf": True, "min_total_duration": True}
"""Policy name -> heterogeneity-aware (Gavel's ``Perf`` policies: types tried fastest first each round)."""
POLICIES = tuple(AWARE)


class Policy:
    """One of :data:`POLICIES` as a callable ``(job_ids, PolicyInput) -> (n, m) allocation``.

    Args:
        name: a name of :data:`POLICIES`.
        seed: seeds ``fifo``'s random type choice.
        gavel_bugs: ``fifo`` only: Gavel's FIFO as it runs (:class:`FIFOPolicy`), for matched comparisons.
    """

    def __init__(self, name: str, seed: int = 0, gavel_bugs: bool = False) -> None:
        if name not in AWARE:
            raise ValueError(f"unknown Gavel policy {name!r}; valid: {', '.join(POLICIES)}")
        if gavel_bugs and name != "fifo":
            raise ValueError(f"gavel_bugs=True reproduces Gavel's fifo only, not {name!r}")
        self.name = name
        self.aware = AWARE[name]
        self.fifo = name.startswith("fifo")
        self.gavel_bugs = gavel_bugs
        self._fifo = FIFOPolicy(perf=self.aware, seed=seed, gavel_bugs=gavel_bugs) if self.fifo else None

    def __call__(self, job_ids: Sequence[int], p: PolicyInput) -> np.ndarray:
        if self._fifo is not None:
            return self._fifo(job_ids, p)
        if self.name.startswith("max_min_fairness"):
            return max_min_fairness(p, aware=self.aware)
        if self.name.startswith("finish_time_fairness"):
            return finish_time_fairness(p, aware=self.aware)
        return min_total_duration(p)

    def __repr__(self) -> str:
        return f"Policy({self.name!r})"
