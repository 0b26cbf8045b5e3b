"""The LP relaxation (TE-CCL's ALLTOALL LP, study section 1.3) on HiGHS, and its chunk schedule.

Relaxed: chunks are divisible, the commodity is the *source* (all chunks of one source share one
flow), and there is no copy. For demands in which every chunk has a single destination (ALLTOALL,
SCATTER, GATHER) copy never helps, so the LP's minimum horizon is the optimum of the divisible
problem and a lower bound for whole chunks; when the LP solution is integral it *is* an optimal
chunk schedule. For multicast demands the LP is a copy-free restriction (every destination's copy
travels on its own) and gives valid but usually longer schedules.

Model (per source ``s``; epochs ``t = 0..E``; the timing of :mod:`doppler_gym.comm.expanded`):

* ``f[s, l, k] >= 0`` chunks of ``s`` sent on link ``l`` in epoch ``k`` (only where useful);
* ``y[s, i, t] >= 0`` chunks of ``s`` a GPU ``i`` keeps at the end of epoch ``t``;
* ``x[s, d, t] >= 0`` chunks of ``s`` delivered to ``d`` landing at ``t`` (met at the end of ``t - 1``);
* GPU ``i``: ``y[t] = y[t-1] + landings(t) - sends(t) - x(t)``; the source starts with all its
  chunks; a switch forwards what lands in the same epoch: ``sends(t) = landings(t)``;
* ``sum_t x[s, d, t] = D[s, d]`` (chunks of ``s`` that ``d`` wants);
* capacity: on each link, each window of ``beta + 1`` epochs carries at most ``cap`` chunks.

Differences from the released LP, on purpose: the released LP caps each epoch at ``kappa`` and
delays by ``1 + delta`` only (a fluid model of links slower than a chunk per epoch) and charges a
switch-to-GPU hop a full epoch; here the LP uses the chunk timing of the MILP and the validator
(windowed capacity, ``1 + delta + beta``, instantaneous switch-to-GPU hop), so an integral LP
solution is directly a valid :class:`~doppler_gym.comm.schedule.Schedule`. Both agree when
``beta = 0`` on every link (e.g. ``epoch="slow"``) and no switch sits on a path.

Objective: ``min sum t * x[s, d, t] + 1e-3 * sum f`` (early delivery, then no useless flow), at the
smallest horizon ``E`` that is feasible. The search starts from the analytic lower bound
(:func:`~doppler_gym.comm.bounds.release_cut_bound_epochs`), walks up with doubling steps and bisects.

Integral chunks: the simplex vertex is often integral; when it is not, the same model is solved as
a MIP (integral ``f``) with HiGHS under the remaining time; path decomposition then turns each
source's flow into one path per chunk (:func:`decompose`).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from doppler_gym.comm.bounds import release_cut_bound_epochs
from doppler_gym.comm.expanded import INF, Network, earliest, open_demand, to_targets

FLOW_COST = 1e-3  # per chunk and link: removes useless flow without changing delivery times
INT_TOL = 1e-6


@dataclass(frozen=True)
class LpResult:
    """Outcome of :func:`lp_schedule`.

    Attributes:
        epochs: smallest horizon at which the LP is feasible (the divisible optimum when ``optimal``).
        mean_delivery: the LP's average delivery epoch, ``sum t * x / sum x`` (fractional) [epochs].
        integral: the LP (or its MIP repair) gave whole chunks on every link and epoch.
        sends: (n_sends, 3) int32 (commodity, link, epoch) from the path decomposition, or None when
            no integral solution was found in time.
        schedule_epochs: epochs the chunk schedule needs (<= ``epochs``), -1 without a schedule.
        lower_bound: the analytic bound the search started from.
        optimal: every smaller horizon is infeasible for the LP (or below the bound).
        seconds: wall time [s].
        solves: (horizon, status, seconds) of every HiGHS call.
    """

    epochs: int
    mean_delivery: float
    integral: bool
    sends: np.ndarray | None
    schedule_epochs: int
    lower_bound: int
    optimal: bool
    seconds: float
    solves: tuple[tuple[int, str, float], ...]


@dataclass
class HorizonLp:
    """The LP of one horizon (see the module docstring) with the maps to read its solution back.

    Attributes:
        n_cols: number of columns (variables).
        f_col: ``(source index, link, send epoch) -> column`` of the flow variables [chunks].
        y_col: ``(source index, GPU, epoch) -> column`` of the stock kept at the end of the epoch [chunks].
        x_col: ``(source index, destination, landing epoch) -> column`` of the deliveries [chunks].
        lp: the ``highspy.HighsLp`` model.
    """

    n_cols: int
    f_col: dict[tuple[int, int, int], int]  # (source idx, link, epoch) -> column
    y_col: dict[tuple[int, int, int], int]  # (source idx, GPU, epoch) -> column
    x_col: dict[tuple[int, int, int], int]  # (source idx, destination, landing epoch) -> column
    lp: object


def build_horizon_lp(net: Network, srcs: np.ndarray, D: np.ndarray, E: int) -> HorizonLp | None:
    """Assemble the LP of the module docstring at horizon ``E``.

    Args:
        net: the time-expanded network (:mod:`doppler_gym.comm.expanded`).
        srcs: ``(n_src,) int`` the source nodes, one flow commodity each.
        D: ``(n_src, n_nodes) float`` chunks of source ``srcs[i]`` that each node wants.
        E: the horizon [epochs]: every delivery lands by epoch ``E``.

    Returns:
        The model, or ``None`` when some wanted chunk cannot reach its destination by ``E`` even
        on an empty network (the horizon is infeasible without solving).
    """
    import highspy
    from scipy import sparse

    n_src = D.shape[0]
    rows: dict[tuple, int] = {}

    def row(key) -> int:
        r = rows.get(key)
        if r is None:
            r = rows[key] = len(rows)
        return r

    ri, ci, vals = [], [], []
    cost: list[float] = []
    f_col, y_col, x_col = {}, {}, {}
    f_keys = []
    gpu = ~net.is_switch
    for si in range(n_src):
        s = int(srcs[si])
        want = D[si] > 0
        reach = earliest(net, {s: 0})
        if np.any(reach[want] > E):
            return None
        togo = to_targets(net, want)
        # f columns
        for l in range(net.n_links):
            i, j = int(net.src[l]), int(net.dst[l])
            if j == s or togo[j] >= INF or reach[i] >= INF:
                continue
            lag = int(net.lag[l])
            for k in range(int(reach[i]), E - lag - int(togo[j]) + 1):
                col = len(cost)
                cost.append(FLOW_COST)
                f_keys.append((si, l, k))
                f_col[(si, l, k)] = col
                ri.append(row(("n", si, i, k)))  # leaves i at k
                ci.append(col)
                vals.append(1.0)
                ri.append(row(("n", si, j, k + lag)))  # lands at j at k + lag
                ci.append(col)
                vals.append(-1.0)
                ri.append(row(("cap", l, k)))
                ci.append(col)
                vals.append(1.0)
        # stock columns y[s, i, t] for GPUs (the source too), t = 0..E-1 (stock at E is useless)
        for i in np.flatnonzero(gpu):
            i = int(i)
            t0 = 0 if i == s else int(reach[i])
            for t in range(t0, E):
                col = len(cost)
                cost.append(0.0)
                y_col[(si, i, t)] = col
                ri += [row(("n", si, i, t)), row(("n", si, i, t + 1))]
                ci += [col, col]
                vals += [1.0, -1.0]
        # deliveries
        for d in np.flatnonzero(want):
            d = int(d)
            for t in range(int(reach[d]), E + 1):
                col = len(cost)
                cost.append(float(t))
                x_col[(si, d, t)] = col
                ri += [row(("n", si, d, t)), row(("dem", si, d))]
                ci += [col, col]
                vals += [1.0, 1.0]
    n_cols = len(cost)
    # capacity rows: per link, windows of beta+1 epochs; convert the per-epoch "cap" rows into windows
    cap_rows = {k: r for k, r in rows.items() if k[0] == "cap"}
    ri = np.asarray(ri, dtype=np.int64)
    ci = np.asarray(ci, dtype=np.int64)
    vals = np.asarray(vals, dtype=np.float64)
    is_cap = np.zeros(len(rows), dtype=bool)
    is_cap[list(cap_rows.values())] = True
    keep = ~is_cap[ri]
    # renumber non-capacity rows
    new_id = -np.ones(len(rows), dtype=np.int64)
    base = np.flatnonzero(~is_cap)
    new_id[base] = np.arange(base.shape[0])
    lo_b = np.zeros(base.shape[0])
    hi_b = np.zeros(base.shape[0])
    keys = list(rows.keys())
    for r in base:
        key = keys[r]
        if key[0] == "n":
            _, si, i, t = key
            if i == int(srcs[si]) and t == 0:
                lo_b[new_id[r]] = hi_b[new_id[r]] = float(D[si].sum())
        else:  # demand
            _, si, d = key
            lo_b[new_id[r]] = hi_b[new_id[r]] = float(D[si, d])
    R = [new_id[ri[keep]]]
    C = [ci[keep]]
    V = [vals[keep]]
    n_rows = base.shape[0]
    # window rows
    f_arr = np.asarray(f_keys, dtype=np.int64).reshape(-1, 3)
    f_cols = np.asarray([f_col[k] for k in f_keys], dtype=np.int64)
    cap_lo, cap_hi = [], []
    if f_arr.shape[0]:
        order = np.lexsort((f_arr[:, 2], f_arr[:, 1]))
        links = f_arr[order, 1]
        bounds = np.flatnonzero(np.diff(links)) + 1
        for grp in np.split(order, bounds):
            l = int(f_arr[grp[0], 1])
            w, cap = int(net.window[l]), float(net.cap[l])
            ks = f_arr[grp, 2]
            for end in range(max(int(ks.min()), w - 1), int(ks.max()) + w):
                sel = f_cols[grp[(ks >= end - w + 1) & (ks <= end)]]
                if sel.shape[0] == 0:
                    continue
                R.append(np.full(sel.shape[0], n_rows, dtype=np.int64))
                C.append(sel)
                V.append(np.ones(sel.shape[0]))
                cap_lo.append(-np.inf)
                cap_hi.append(cap)
                n_rows += 1
    A = sparse.csc_matrix((np.concatenate(V), (np.concatenate(R), np.concatenate(C))), shape=(n_rows, n_cols))
    lp = highspy.HighsLp()
    lp.num_col_ = n_cols
    lp.num_row_ = n_rows
    lp.col_cost_ = np.asarray(cost, dtype=np.float64)
    lp.col_lower_ = np.zeros(n_cols)
    lp.col_upper_ = np.full(n_cols, highspy.kHighsInf)
    lp.row_lower_ = np.concatenate([lo_b, np.full(len(cap_lo), -highspy.kHighsInf)])
    lp.row_upper_ = np.concatenate([hi_b, np.asarray(cap_hi, dtype=np.float64)])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    lp.a_matrix_.index_ = A.indices.astype(np.int32)
    lp.a_matrix_.value_ = A.data
    lp.a_matrix_.num_col_ = n_cols
    lp.a_matrix_.num_row_ = n_rows
    return HorizonLp(n_cols, f_col, y_col, x_col, lp)


def solve_horizon_lp(
    built: HorizonLp, time_limit: float, integral: bool = False, seed: int = 0
) -> tuple[str, np.ndarray | None]:
    """Solve a horizon's LP with HiGHS (one thread).

    Args:
        built: the model from :func:`build_horizon_lp`.
        time_limit: HiGHS's budget [s] (at least 0.05).
        integral: solve with integral flow columns (a MIP); any integral point is accepted, since
            the horizon is fixed.
        seed: HiGHS's random seed.

    Returns:
        ``(status, values)``: ``("feasible", (n_cols,) float64)`` (the LP optimum, or for a MIP
        any integral point found), ``("infeasible", None)``, or ``("unknown", None)`` when the
        time ran out first.
    """
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", max(0.05, float(time_limit)))
    h.setOptionValue("random_seed", int(seed))
    h.setOptionValue("threads", 1)
    h.passModel(built.lp)
    if integral:
        cols = np.fromiter(built.f_col.values(), dtype=np.int32)
        h.changeColsIntegrality(cols.shape[0], cols, np.full(cols.shape[0], highspy.HighsVarType.kInteger))
        h.setOptionValue("mip_rel_gap", 1.0)  # any integral point will do: the horizon is fixed
    h.run()
    st = h.getModelStatus()
    if st == highspy.HighsModelStatus.kOptimal or (integral and h.getInfo().primal_solution_status == 2):
        return "feasible", np.asarray(h.getSolution().col_value)
    if st in (highspy.HighsModelStatus.kInfeasible,):
        return "infeasible", None
    return "unknown", None


def lp_schedule(net: Network, sources: np.ndarray, wants: np.ndarray, time_limit: float = 120.0,
                seed: int = 0, max_epochs: int = 100_000) -> LpResult:
    """Minimum-horizon LP of the demand ``(sources, wants)`` and, when integral, its chunk schedule.

    Args:
        net: link timing.
        sources: (n_commodities,) int source GPU of each commodity.
        wants: (n_commodities, n_nodes) bool destinations.
        time_limit: wall-clock budget [s] for the search and the integral repair.
        seed: HiGHS random seed.
        max_epochs: give up beyond this horizon.
    """
    t0 = time.perf_counter()
    deadline = t0 + float(time_limit)
    sources, wants, _ = open_demand(sources, wants)
    srcs = np.unique(sources[wants.any(axis=1)])
    if srcs.shape[0] == 0:
        return LpResult(0, 0.0, True, np.zeros((0, 3), np.int32), 0, 0, True, time.perf_counter() - t0, ())
    D = np.zeros((srcs.shape[0], net.n_nodes), dtype=np.int64)
    for si, s in enumerate(srcs):
        D[si] = wants[sources == s].sum(axis=0)
    lb = release_cut_bound_epochs(net, sources, wants)
    solves: list[tuple[int, str, float]] = []

    def attempt(E: int):
        ts = time.perf_counter()
        built = build_horizon_lp(net, srcs, D, E)
        if built is None:
            solves.append((E, "trivially-infeasible", time.perf_counter() - ts))
            return "infeasible", None, None
        status, x = solve_horizon_lp(built, deadline - time.perf_counter(), seed=seed)
        solves.append((E, status, time.perf_counter() - ts))
        return status, built, x

    proven = True
    lo, E, step = lb, lb, 1
    best = None
    while best is None:
        if max_epochs < E or time.perf_counter() >= deadline:
            raise RuntimeError(f"lp_schedule: no feasible horizon found (tried {[s[0] for s in solves]}) within "
                               f"time_limit={time_limit} s / max_epochs={max_epochs}; raise them")
        status, built, x = attempt(E)
        if status == "feasible":
            best = (E, built, x)
            break
        proven &= status == "infeasible"
        lo = E + 1
        E = lo + step - 1
        step *= 2
    hi = best[0]
    while lo < hi and time.perf_counter() < deadline:
        mid = (lo + hi) // 2
        status, built, x = attempt(mid)
        if status == "feasible":
            best, hi = (mid, built, x), mid
        else:
            proven &= status == "infeasible"
            lo = mid + 1
    E, built, x = best
    mean_delivery = _mean_delivery(built, x)
    f = x[np.fromiter(built.f_col.values(), dtype=np.int64)]
    integral = bool(np.all(np.abs(f - np.round(f)) <= INT_TOL))
    values = x
    if not integral and time.perf_counter() < deadline:
        ts = time.perf_counter()
        status, xi = solve_horizon_lp(built, deadline - time.perf_counter(), integral=True, seed=seed)
        solves.append((E, "mip-" + status, time.perf_counter() - ts))
        if status == "feasible":
            values, integral = xi, True
    sends = None
    sched_epochs = -1
    if integral:
        sends = decompose(net, built, values, sources, wants, srcs)
        from doppler_gym.comm.prune import delivery_epochs

        holds = np.zeros_like(wants)
        holds[np.arange(wants.shape[0]), sources] = True
        sched_epochs = int(delivery_epochs(net, sends, wants, holds).max())
    return LpResult(E, mean_delivery, integral, sends, sched_epochs, lb, bool(proven and lo >= hi),
                    time.perf_counter() - t0, tuple(solves))


def _mean_delivery(built: HorizonLp, values: np.ndarray) -> float:
    """``sum t * x / sum x`` over the delivery columns [epochs]."""
    num = den = 0.0
    for (_, _, t), col in built.x_col.items():
        num += t * values[col]
        den += values[col]
    return num / den if den > 0 else 0.0


def decompose(net: Network, built: HorizonLp, values: np.ndarray, sources: np.ndarray, wants: np.ndarray,
              srcs: np.ndarray) -> np.ndarray:
    """Split each source's integral flow into one time-stamped path per chunk.

    Walks the time-expanded graph from the source: at a GPU a chunk is delivered if a delivery is
    left there at that epoch, else sent on a link with flow left, else kept to the next epoch; at a
    switch it is sent on. Flow conservation makes every walk end in a delivery. Each delivery of
    source ``s`` at ``d`` is then given to one commodity of ``s`` that ``d`` wants.

    Returns:
        (n_sends, 3) int32 (commodity, link, epoch), duplicates (a copy, multicast demands only) merged.
    """
    f_col, y_col, x_col = built.f_col, built.y_col, built.x_col
    out_of: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    send_left: dict[tuple[int, int, int], int] = {}
    for key, col in f_col.items():
        n = int(round(values[col]))
        if n > 0:
            si, l, k = key
            send_left[key] = n
            out_of[(si, int(net.src[l]), k)].append(l)
    keep_left = {key: int(round(values[col])) for key, col in y_col.items() if round(values[col]) > 0}
    deliver_left = {key: int(round(values[col])) for key, col in x_col.items() if round(values[col]) > 0}
    pending: dict[tuple[int, int], list[int]] = defaultdict(list)  # (source, dest) -> commodities
    for c, d in zip(*np.nonzero(wants)):
        pending[(int(sources[c]), int(d))].append(int(c))
    rows: list[tuple[int, int, int]] = []
    for si, s in enumerate(srcs):
        s = int(s)
        units = int(sum(v for (ssi, _, _), v in deliver_left.items() if ssi == si))
        for _ in range(units):
            node, t, path = s, 0, []
            for _step in range(10_000_000):
                if not net.is_switch[node]:
                    key = (si, node, t)
                    if deliver_left.get(key, 0) > 0:
                        deliver_left[key] -= 1
                        break
                moved = False
                for l in out_of.get((si, node, t), []):
                    if send_left.get((si, l, t), 0) > 0:
                        send_left[(si, l, t)] -= 1
                        path.append((l, t))
                        node, t = int(net.dst[l]), t + int(net.lag[l])
                        moved = True
                        break
                if moved:
                    continue
                key = (si, node, t)
                if not net.is_switch[node] and keep_left.get(key, 0) > 0:
                    keep_left[key] -= 1
                    t += 1
                    continue
                raise RuntimeError(f"decompose: flow of source {s} stops at node {node} in epoch {t} "
                                   "(not conserved; LP tolerance problem)")
            c = pending[(s, node)].pop()
            rows.extend((c, l, k) for l, k in path)
    arr = np.unique(np.asarray(rows, dtype=np.int64).reshape(-1, 3), axis=0)
    if arr.shape[0]:
        arr = arr[np.lexsort((arr[:, 0], arr[:, 1], arr[:, 2]))]
    return arr.astype(np.int32)
