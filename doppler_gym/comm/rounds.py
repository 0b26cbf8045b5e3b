"""Time-partitioned chunk scheduling (TE-CCL's A* rounds) for topologies too big for one model.

Time is cut into rounds of ``R`` epochs (default ``max(15, max lag + max window)``, TE-CCL's
``E_r``). Each round solves the chunk model of :mod:`doppler_gym.comm.cpsat_model` over its own
epochs, starting from what the previous rounds left:

* buffers: every GPU holding a chunk at the round's start holds it from epoch 0;
* in flight: chunks sent to a GPU in an earlier round that land in this one become usable at their
  landing epoch (nothing is ever left in flight to a switch: a round only sends into a switch
  what the switch can forward within the round);
* capacity: sends of the previous round still inside a ``beta + 1`` window count against it;
* demands already met, or guaranteed by a chunk in flight, are dropped;
* nothing has to finish within the round.

Round objective (integer weights, maximised): every remaining (chunk, destination) earns 100 per
epoch of the round's horizon during which the destination holds it (early delivery), and every
chunk parked at a GPU ``n`` at the end earns ``sum_d 10 / (1 + dist(n, d)) - 10 / (1 + dist(now, d))``
over its remaining destinations ``d``, where ``dist`` is the epoch distance and ``now`` the closest
current holder: a reward for moving chunks closer, the "distance to go" of the A* objective.

Rounds stop when every demand is met or guaranteed; the sends of all rounds are then pruned and
left-shifted (:mod:`doppler_gym.comm.compact`), which closes gaps at round boundaries. The result
is greedy across rounds and not
optimal (``optimal`` is True only when it meets the analytic lower bound). A round that plans no
send although demands remain is retried with twice the length (the usual cause: every remaining
path is longer than the round), up to four times.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from doppler_gym.comm.bounds import release_cut_bound_epochs
from doppler_gym.comm.compact import left_shift
from doppler_gym.comm.cpsat_model import build_chunk_model, read_sends, solver_params
from doppler_gym.comm.expanded import INF, Network, open_demand, to_targets
from doppler_gym.comm.prune import delivery_epochs, prune_sends

DELIVERY_WEIGHT = 100
PARK_WEIGHT = 10


@dataclass(frozen=True)
class RoundsResult:
    """Outcome of :func:`rounds_schedule`.

    Attributes:
        sends: (n_sends, 3) int32 (commodity, link, epoch), absolute epochs, pruned.
        epochs: epochs the schedule needs.
        rounds: number of rounds solved.
        round_epochs: epochs per round (after any doubling).
        lower_bound: analytic lower bound [epochs].
        optimal: ``epochs == lower_bound``.
        seconds: wall time [s].
    """

    sends: np.ndarray
    epochs: int
    rounds: int
    round_epochs: int
    lower_bound: int
    optimal: bool
    seconds: float


def default_round_epochs(net: Network) -> int:
    """The study's round length ``max(15, max lag + max window)`` [epochs]."""
    return int(max(15, int(net.lag.max(initial=0)) + int(net.window.max(initial=1))))


def rounds_schedule(net: Network, sources: np.ndarray, wants: np.ndarray, round_epochs: int | None = None,
                    time_limit: float = 120.0, seed: int = 0, round_budget: float = 2.0,
                    max_rounds: int = 10_000) -> RoundsResult:
    """Schedule the demand ``(sources, wants)`` round by round.

    Args:
        net: link timing.
        sources: (n_commodities,) int source GPU of each commodity.
        wants: (n_commodities, n_nodes) bool destinations.
        round_epochs: epochs per round (>= 1); default :func:`default_round_epochs`.
        time_limit: wall-clock budget [s]; RuntimeError when used up before every demand is met.
        seed: CP-SAT seed.
        round_budget: CP-SAT deterministic-time budget per round (keeps rounds reproducible).
        max_rounds: safety stop.
    """
    t0 = time.perf_counter()
    deadline = t0 + float(time_limit)
    sources, wants, src_holds = open_demand(sources, wants)
    R = int(round_epochs) if round_epochs is not None else default_round_epochs(net)
    if R < 1:
        raise ValueError(f"rounds_schedule: round_epochs must be >= 1, got {round_epochs!r}")
    if not wants.any():
        return RoundsResult(np.zeros((0, 3), np.int32), 0, 0, R, 0, True, time.perf_counter() - t0)
    lb = release_cut_bound_epochs(net, sources, wants)
    dist_to = {int(d): to_targets(net, _onehot(net.n_nodes, int(d))) for d in np.flatnonzero(wants.any(axis=0))}

    holds = src_holds.copy()
    pending: dict[tuple[int, int], int] = {}  # (c, gpu) -> absolute landing epoch
    all_sends: list[np.ndarray] = []
    start = 0  # absolute epoch of the round's first epoch
    rounds = 0
    retries = 0
    while True:
        for key in [k for k, t in pending.items() if t <= start]:
            holds[key] = True
            del pending[key]
        remaining = wants & ~holds
        for (c, node) in pending:
            remaining[c, node] = False
        if not remaining.any():
            break
        if rounds >= max_rounds or time.perf_counter() >= deadline:
            raise RuntimeError(f"rounds_schedule: {int(remaining.sum())} demands still open after {rounds} rounds "
                               f"({time.perf_counter() - t0:.1f} s); raise time_limit or round_epochs")
        last_send = R - 1
        last_land = R - 1 + int(net.lag.max())
        rel_pending = {k: t - start for k, t in pending.items()}
        busy = _busy(net, all_sends, start)
        cm = build_chunk_model(net, remaining, holds, last_land=last_land, last_send=last_send,
                               pending=rel_pending, busy=busy, deadline=False, require=False)
        _objective(cm, net, remaining, holds, rel_pending, dist_to, last_land)
        greedy = greedy_round(net, remaining, holds, rel_pending, busy, dist_to, R)
        chosen = {tuple(row) for row in greedy.tolist()}
        for key, v in zip(cm.sends, cm.send_vars):
            cm.model.AddHint(v, key in chosen)
        solver = solver_params(max(0.05, deadline - time.perf_counter()), seed)
        solver.parameters.max_deterministic_time = float(round_budget)
        from ortools.sat.python import cp_model

        st = solver.Solve(cm.model)
        sends = read_sends(solver, cm) if st in (cp_model.OPTIMAL, cp_model.FEASIBLE) else greedy
        # keep only sends that change something: a kept reason is recomputed globally at the end
        if sends.shape[0] == 0:
            retries += 1
            if retries > 4:
                raise RuntimeError(f"rounds_schedule: round {rounds} planned no send with {int(remaining.sum())} "
                                   f"demands open, even with {R}-epoch rounds; raise time_limit or round_epochs")
            R *= 2
            continue
        retries = 0
        sends = sends.copy()
        sends[:, 2] += start
        all_sends.append(sends)
        for c, l, k in sends:
            j = int(net.dst[l])
            if net.is_switch[j]:
                continue
            land = int(k + net.lag[l])
            if land <= start + R:
                holds[c, j] = True
                pending.pop((int(c), j), None)
            elif not holds[c, j]:
                key = (int(c), j)
                pending[key] = min(pending.get(key, land), land)
        start += R
        rounds += 1
    sends = np.concatenate(all_sends) if all_sends else np.zeros((0, 3), np.int64)
    kept = left_shift(net, prune_sends(net, sends, wants, src_holds), src_holds)
    epochs = int(delivery_epochs(net, kept, wants, src_holds).max())
    return RoundsResult(kept, epochs, rounds, R, lb, epochs == lb, time.perf_counter() - t0)


def _onehot(n: int, i: int) -> np.ndarray:
    v = np.zeros(n, dtype=bool)
    v[i] = True
    return v


def _busy(net: Network, all_sends: list[np.ndarray], start: int) -> dict[int, dict[int, int]]:
    """Sends of earlier rounds in the last ``window - 1`` epochs before ``start``: {link: {rel epoch: n}}."""
    busy: dict[int, dict[int, int]] = {}
    if not all_sends:
        return busy
    last = all_sends[-1]
    for _c, l, k in last:
        rel = int(k) - start
        if rel < 0 and rel >= 1 - int(net.window[l]):
            busy.setdefault(int(l), {})
            busy[int(l)][rel] = busy[int(l)].get(rel, 0) + 1
    return busy


def _objective(cm, net: Network, remaining: np.ndarray, holds: np.ndarray, pending: dict, dist_to: dict,
               last_land: int) -> None:
    """Early delivery plus the distance-to-go parking reward (module docstring)."""
    terms = []
    for (c, i), lits in cm.hold.items():
        dests = np.flatnonzero(remaining[c])
        if remaining[c, i]:
            terms.extend((DELIVERY_WEIGHT, v) for v in lits.values())
            continue
        if not dests.size or last_land not in lits:
            continue
        gain = 0.0
        have = [int(n) for n in np.flatnonzero(holds[c])] + [n for (cc, n) in pending if cc == c]
        for d in dests:
            dist = dist_to[int(d)]
            now = min((int(dist[n]) for n in have), default=INF)
            if dist[i] < now:
                gain += PARK_WEIGHT / (1.0 + dist[i]) - (PARK_WEIGHT / (1.0 + now) if now < INF else 0.0)
        w = round(gain)
        if w > 0:
            terms.append((w, lits[last_land]))
    if terms:
        cm.model.Maximize(sum(w * v for w, v in terms))


def greedy_round(net: Network, remaining: np.ndarray, holds: np.ndarray, pending: dict, busy: dict,
                 dist_to: dict, R: int) -> np.ndarray:
    """A quick valid plan for one round: the CP-SAT hint, and the fallback when CP-SAT finds nothing.

    Epoch by epoch, link by link, while the link has window capacity: send the chunk held at the
    tail that gets closest to one of its remaining destinations, if the head is closer than the
    tail and lacks it. A send into a switch must be forwarded in its landing epoch (within the
    round): it goes to the switch's GPU neighbours that are closer and lack the chunk (all of them
    for a copy-capable switch, one otherwise; switch-to-switch hops are left to CP-SAT).

    Args:
        net: the time-expanded network (:mod:`doppler_gym.comm.expanded`).
        remaining: ``(n_commodities, n_nodes) bool``: the open demands (commodity ``c`` still
            wanted at node ``n``).
        holds: ``(n_commodities, n_nodes) bool``: who holds each chunk at the round's start.
        pending: ``{(commodity, GPU): landing epoch}`` of chunks in flight, relative to the round's
            start [epochs].
        busy: ``{link: {epoch: sends}}``: sends of the previous round in the epochs before this one
            (negative, relative [epochs]) that still count against the link's capacity window.
        dist_to: ``{destination node: (n_nodes,) int64}``: epochs from each node to the
            destination (:func:`~doppler_gym.comm.expanded.to_targets`), for every destination
            with an open demand.
        R: the round's length [epochs]; sends start in epochs ``0..R-1``.

    Returns:
        ``(n, 3) int64`` rows (commodity, link, send epoch relative to the round's start).
    """
    n_comm, n_nodes = remaining.shape
    hold = np.where(holds, 0, INF).astype(np.int64)
    for (c, node), t in pending.items():
        hold[c, node] = min(hold[c, node], max(t, 0))
    mind = np.full((n_comm, n_nodes), INF, dtype=np.int64)
    for d, dist in dist_to.items():
        mind = np.minimum(mind, np.where(remaining[:, d:d + 1], dist[None, :], INF))
    horizon = R + int(net.lag.max()) + int(net.window.max()) + 1
    offset = int(net.window.max())  # column of epoch e is e + offset (busy epochs are negative)
    count = np.zeros((net.n_links, horizon + offset), dtype=np.int64)
    for l, per in busy.items():
        for e, k in per.items():
            count[l, e + offset] += k

    def room(l: int, e: int) -> bool:
        w, cap = int(net.window[l]), int(net.cap[l])
        # every window [end - w + 1, end] that contains e has a free slot
        return all(count[l, max(end - w + 1, -offset) + offset:end + offset + 1].sum() < cap
                   for end in range(e, e + w))

    out_gpu = {w: [int(l) for l in net.out_links(w) if not net.is_switch[net.dst[l]]]
               for w in np.flatnonzero(net.is_switch)}
    rows = []
    gpu_links = [int(l) for l in range(net.n_links) if not net.is_switch[net.src[l]]]
    for t in range(R):
        for l in gpu_links:
            i, j = int(net.src[l]), int(net.dst[l])
            land = t + int(net.lag[l])
            while room(l, t):
                held = (hold[:, i] <= t) & (mind[:, i] < INF)
                if net.is_switch[j]:
                    if land > R - 1:
                        break
                    best, best_links = -1, []
                    for c in np.flatnonzero(held):
                        outs = [o for o in out_gpu[j] if hold[c, net.dst[o]] >= INF
                                and mind[c, net.dst[o]] < mind[c, i] and room(o, land)]
                        if not net.copy_capable[j]:
                            outs = outs[:1]
                        if len(outs) > len(best_links):
                            best, best_links = int(c), outs
                    if best < 0:
                        break
                    rows.append((best, l, t))
                    count[l, t + offset] += 1
                    for o in best_links:
                        rows.append((best, o, land))
                        count[o, land + offset] += 1
                        g = int(net.dst[o])
                        hold[best, g] = land + int(net.lag[o])
                else:
                    cand = held & (hold[:, j] >= INF) & (mind[:, j] < mind[:, i])
                    if not cand.any():
                        break
                    c = int(np.flatnonzero(cand)[np.argmin(mind[cand, j])])
                    rows.append((c, l, t))
                    count[l, t + offset] += 1
                    hold[c, j] = land
    return np.array(rows, dtype=np.int64).reshape(-1, 3)
