"""Replay a :class:`~doppler_gym.comm.schedule.Schedule` on its topology, independently of any solver.

:func:`validate` checks, with numpy over all sends at once:

- ids: commodity, link and epoch of every send are in range; no send is listed twice;
- capacity: every window of ``beta + 1`` epochs on a link holds at most ``window_capacity`` sends;
- causality: a GPU sends only a commodity it holds at the start of that epoch (its own from epoch 0,
  others from their arrival, see :mod:`doppler_gym.comm.schedule`); a switch sends a commodity
  only in the epoch it arrives there, on any number of out-links if copy-capable, otherwise on at
  most as many out-links as copies arrived;
- horizon: every send arrives by ``epochs`` (nothing is still in flight after the schedule ends);
- demands: every wanted (commodity, GPU) is held by the start of epoch ``epochs``.

Redundant work (a GPU receiving a commodity it already holds, ``epochs`` larger than needed) is
reported as a warning, not an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from doppler_gym.comm.schedule import Schedule, arrival_offset, link_timing

MAX_MESSAGES = 12  # per kind of error; the rest are counted
NEVER = np.iinfo(np.int64).max // 4


@dataclass
class ValidationReport:
    """Result of :func:`validate`.

    Attributes:
        ok: True when there is no error.
        errors: one line per problem, naming commodity, link/node and epoch.
        warnings: redundant but legal behaviour.
        delivery_epoch: ``(n_commodities, n_nodes) int64``: the epoch at whose end the node first
            holds the commodity (it holds it from the start of the next epoch); -1 where it never
            receives it, including the commodity's source and every switch.
        epochs_needed: ``1 + max`` of ``delivery_epoch`` over the wanted pairs (0 if none).
    """

    ok: bool
    errors: list[str]
    warnings: list[str] = field(default_factory=list)
    delivery_epoch: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    epochs_needed: int = 0

    def raise_if_invalid(self) -> None:
        """Raise ``ValueError`` listing the errors, if any."""
        if not self.ok:
            shown = "\n  ".join(self.errors[:20])
            more = f"\n  ... and {len(self.errors) - 20} more" if len(self.errors) > 20 else ""
            raise ValueError(f"invalid schedule ({len(self.errors)} errors):\n  {shown}{more}")


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, kind: str, messages: list[str], total: int) -> None:
        self.lines.extend(f"{kind}: {m}" for m in messages[:MAX_MESSAGES])
        if total > MAX_MESSAGES:
            self.lines.append(f"{kind}: ... and {total - MAX_MESSAGES} more")

    def add_rows(self, kind: str, mask: np.ndarray, message: Callable[[int], str]) -> None:
        """One line ``message(row)`` per True row of ``mask`` (the first ``MAX_MESSAGES``; the rest counted)."""
        rows = np.flatnonzero(mask)
        if rows.size:
            self.add(kind, [message(r) for r in rows[:MAX_MESSAGES]], rows.size)


def validate(schedule: Schedule) -> ValidationReport:
    """Check ``schedule`` (see the module docstring); never raises for a bad schedule."""
    topo, demand = schedule.topology, schedule.demand
    n_nodes, n_links, n_comm = topo.n_nodes, topo.n_links, demand.n_commodities
    errors, warnings = _Log(), _Log()
    empty = np.full((n_comm, demand.n_nodes), -1, np.int64)
    if demand.n_nodes != n_nodes:
        msg = (
            f"topology: the demand is defined on {demand.n_nodes} nodes but topology {topo.name!r} has "
            f"{n_nodes}; build the demand with make_demand(kind, this topology)"
        )
        return ValidationReport(False, [msg], [], empty, 0)
    names = topo.node_names
    sends = schedule.sends.astype(np.int64)
    x, link, k = sends[:, 0], sends[:, 1], sends[:, 2]

    # ---- ids
    bad = (x < 0) | (x >= n_comm) | (link < 0) | (link >= n_links) | (k < 0)
    if bad.any():
        errors.add_rows("ids", bad, lambda r: (
            f"send row {r} = (commodity {x[r]}, link {link[r]}, epoch {k[r]}) is out of range (commodities "
            f"0..{n_comm - 1}, links 0..{n_links - 1}, epochs >= 0)"))
        x, link, k = x[~bad], link[~bad], k[~bad]

    def where(r: int) -> str:
        lk = int(link[r])
        return f"commodity {x[r]} on link {lk} ({names[topo.src[lk]]} -> {names[topo.dst[lk]]}) in epoch {k[r]}"

    # ---- duplicates
    horizon = int(k.max()) + 1 if k.size else 1
    key = (x * n_links + link) * horizon + k
    _uniq, first, counts = np.unique(key, return_index=True, return_counts=True)
    if np.any(counts > 1):
        dup = first[counts > 1]
        errors.add("duplicate", [f"{where(r)} is listed {counts[counts > 1][i]} times; list each send once"
                                 for i, r in enumerate(dup[:MAX_MESSAGES])], dup.size)

    timing = link_timing(topo, schedule.tau, schedule.chunk_bytes)
    offset = arrival_offset(topo, timing)

    # ---- capacity: windows of beta+1 epochs ending at e >= beta
    beta = timing.beta
    cap = timing.window_capacity
    width = max(horizon, int(beta.max(initial=0)) + 1)
    counts_le = np.zeros((n_links, width), np.int64)
    np.add.at(counts_le, (link, k), 1)
    csum = np.zeros((n_links, width + 1), np.int64)
    np.cumsum(counts_le, axis=1, out=csum[:, 1:])
    ends = np.arange(width)[None, :]
    starts = ends - beta[:, None]
    valid = starts >= 0
    rows = np.arange(n_links)[:, None]
    window = csum[rows, ends + 1] - csum[rows, np.maximum(starts, 0)]
    over = valid & (window > cap[:, None])
    if over.any():
        ls, es = np.nonzero(over)
        msgs = []
        for lk, e in zip(ls[:MAX_MESSAGES], es[:MAX_MESSAGES]):
            lo = e - beta[lk]
            span = f"epoch {e}" if beta[lk] == 0 else f"epochs {lo}..{e}"
            msgs.append(
                f"link {lk} ({names[topo.src[lk]]} -> {names[topo.dst[lk]]}) carries {window[lk, e]} sends in "
                f"{span}, more than its {cap[lk]} (kappa={timing.kappa[lk]:.3g} chunks/epoch, beta={beta[lk]}); "
                f"move sends to later epochs"
            )
        errors.add("capacity", msgs, int(over.sum()))

    # ---- arrivals
    head = topo.dst[link].astype(np.int64)
    tail = topo.src[link].astype(np.int64)
    arrive = k + offset[link]
    head_gpu = ~topo.is_switch[head]
    held = np.full((n_comm, n_nodes), NEVER, np.int64)
    held[np.arange(n_comm), demand.source] = 0
    np.minimum.at(held, (x[head_gpu], head[head_gpu]), arrive[head_gpu])

    # ---- causality at GPUs
    tail_gpu = ~topo.is_switch[tail]
    unheld = tail_gpu & (held[x, tail] > k)

    def not_held(r: int) -> str:
        h = held[x[r], tail[r]]
        when = "never holds it" if h >= NEVER else f"holds it only from epoch {h}"
        return f"{where(r)}: GPU {names[tail[r]]} {when}; send it after it arrives"

    errors.add_rows("causality", unheld, not_held)

    # ---- causality at switches: sends in epoch e match arrivals for epoch e
    base = horizon + int(offset.max(initial=0)) + 1  # > every epoch a key holds
    sw_in = ~head_gpu
    in_keys, in_counts = np.unique((x[sw_in] * n_nodes + head[sw_in]) * base + arrive[sw_in], return_counts=True)
    sw_out = ~tail_gpu
    out_rows = np.flatnonzero(sw_out)
    if out_rows.size:
        out_key = (x[sw_out] * n_nodes + tail[sw_out]) * base + k[sw_out]
        okeys, ofirst, ocounts = np.unique(out_key, return_index=True, return_counts=True)
        arrived = np.zeros(okeys.size, np.int64)
        if in_keys.size:
            pos = np.minimum(np.searchsorted(in_keys, okeys), in_keys.size - 1)
            match = in_keys[pos] == okeys
            arrived[match] = in_counts[pos[match]]
        copy = topo.copy_capable[tail[out_rows[ofirst]]]
        allowed = np.where(copy, np.where(arrived > 0, ocounts, 0), arrived)
        badsw = ocounts > allowed
        if badsw.any():
            msgs = []
            for i in np.flatnonzero(badsw)[:MAX_MESSAGES]:
                r = out_rows[ofirst[i]]
                sw = names[tail[r]]
                if arrived[i] == 0:
                    msgs.append(
                        f"switch {sw} sends commodity {x[r]} in epoch {k[r]} on {ocounts[i]} link(s) but it does not "
                        f"arrive there for that epoch (switches have no buffer: forward in the arrival epoch)"
                    )
                else:
                    msgs.append(
                        f"switch {sw} cannot copy: it sends commodity {x[r]} on {ocounts[i]} links in epoch {k[r]} "
                        f"but only {arrived[i]} cop{'y' if arrived[i] == 1 else 'ies'} arrived; send one per arrival"
                    )
            errors.add("switch", msgs, int(badsw.sum()))

    # ---- horizon
    errors.add_rows("horizon", arrive > schedule.epochs, lambda r: (
        f"{where(r)} arrives in epoch {arrive[r]}, after the schedule's {schedule.epochs} epochs; drop the "
        f"send or raise epochs"))

    # ---- demands
    wanted = demand.wants
    got = held <= schedule.epochs
    missing = wanted & ~got
    if missing.any():
        xs, vs = np.nonzero(missing)
        msgs = []
        for c, v in zip(xs[:MAX_MESSAGES], vs[:MAX_MESSAGES]):
            h = held[c, v]
            state = "never arrives" if h >= NEVER else f"arrives only at the start of epoch {h}"
            msgs.append(
                f"commodity {c} (chunk {demand.chunk[c]} of {names[demand.source[c]]}) is wanted at {names[v]} but "
                f"{state}; the schedule claims {schedule.epochs} epochs"
            )
        errors.add("demand", msgs, int(missing.sum()))

    delivery = np.where(held < NEVER, held - 1, -1)
    delivery[np.arange(n_comm), demand.source] = -1
    delivery[:, topo.is_switch] = -1
    needed = int(delivery[wanted].max(initial=-1)) + 1 if wanted.any() else 0

    # ---- warnings
    if head_gpu.any():
        gx, gv = x[head_gpu], head[head_gpu]
        n_recv = np.zeros((n_comm, n_nodes), np.int64)
        np.add.at(n_recv, (gx, gv), 1)
        n_recv[np.arange(n_comm), demand.source] += 1
        extra = int(np.maximum(n_recv - 1, 0).sum())
        if extra:
            c, v = (int(a[0]) for a in np.nonzero(n_recv > 1))
            warnings.add("redundant", [
                f"{extra} sends deliver a commodity to a GPU that already has it (e.g. commodity {c} at {names[v]})"
            ], 1)
    if not errors.lines and schedule.epochs > needed:
        warnings.add("epochs", [f"every demand is met after {needed} epochs, the schedule claims {schedule.epochs}"], 1)
    return ValidationReport(
        ok=not errors.lines, errors=errors.lines, warnings=warnings.lines, delivery_epoch=delivery,
        epochs_needed=needed,
    )
