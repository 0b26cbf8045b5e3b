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
    if demand.n_nodes != topo.n_nodes:
        msg = (
            f"topology: the demand is defined on {demand.n_nodes} nodes but topology {topo.name!r} has "
            f"{topo.n_nodes}; build the demand with make_demand(kind, this topology)"
        )
        empty = np.full((demand.n_commodities, demand.n_nodes), -1, np.int64)
        return ValidationReport(False, [msg], [], empty, 0)
    replay = _Replay(schedule)
    replay.check_ids()
    replay.check_duplicates()
    replay.check_capacity()
    replay.find_arrivals()
    replay.check_gpu_causality()
    replay.check_switch_causality()
    replay.check_horizon()
    replay.check_demands()
    delivery, needed = replay.delivery_epochs()
    replay.warn_redundant_receptions()
    errors, warnings = replay.errors, replay.warnings
    if not errors.lines and schedule.epochs > needed:
        warnings.add("epochs", [f"every demand is met after {needed} epochs, the schedule claims {schedule.epochs}"], 1)
    return ValidationReport(
        ok=not errors.lines, errors=errors.lines, warnings=warnings.lines, delivery_epoch=delivery,
        epochs_needed=needed,
    )


class _Replay:
    """One validation: the schedule's sends as arrays and the checks of :func:`validate` as steps.

    The steps run in the order :func:`validate` calls them; each adds its lines to ``errors`` or
    ``warnings``. Row ``r`` indexes the sends kept after :meth:`check_ids`.

    Attributes:
        x, link, k: ``(n_sends,) int64`` commodity, link and start epoch of each send.
        horizon: ``1 + max`` start epoch (1 without sends).
        timing: the :func:`~doppler_gym.comm.schedule.link_timing` of the links.
        offset: ``(n_links,) int64`` epochs from a send's start to its arrival.
        head, tail: ``(n_sends,) int64`` receiving and sending node of each send (after :meth:`find_arrivals`).
        arrive: ``(n_sends,) int64`` epoch from whose start the receiver holds the send's commodity.
        head_gpu, tail_gpu: ``(n_sends,) bool`` the receiver / sender is a GPU.
        held: ``(n_commodities, n_nodes) int64`` first epoch a GPU holds a commodity (``NEVER`` if it
            never does; 0 at the source).
    """

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.topo, self.demand = schedule.topology, schedule.demand
        self.names = self.topo.node_names
        self.n_nodes, self.n_links, self.n_comm = self.topo.n_nodes, self.topo.n_links, self.demand.n_commodities
        self.errors, self.warnings = _Log(), _Log()
        sends = schedule.sends.astype(np.int64)
        self.x, self.link, self.k = sends[:, 0], sends[:, 1], sends[:, 2]
        self.horizon = 1
        self.timing = link_timing(self.topo, schedule.tau, schedule.chunk_bytes)
        self.offset = arrival_offset(self.topo, self.timing)

    def where(self, r: int) -> str:
        """``commodity 1 on link 2 (b -> c) in epoch 0``: send row ``r`` in words."""
        topo, names = self.topo, self.names
        lk = int(self.link[r])
        route = f"{names[topo.src[lk]]} -> {names[topo.dst[lk]]}"
        return f"commodity {self.x[r]} on link {lk} ({route}) in epoch {self.k[r]}"

    def check_ids(self) -> None:
        """Commodity, link and epoch of every send in range; the sends out of range are dropped."""
        x, link, k, n_comm, n_links = self.x, self.link, self.k, self.n_comm, self.n_links
        bad = (x < 0) | (x >= n_comm) | (link < 0) | (link >= n_links) | (k < 0)
        if bad.any():
            self.errors.add_rows("ids", bad, lambda r: (
                f"send row {r} = (commodity {x[r]}, link {link[r]}, epoch {k[r]}) is out of range (commodities "
                f"0..{n_comm - 1}, links 0..{n_links - 1}, epochs >= 0)"))
            self.x, self.link, self.k = x[~bad], link[~bad], k[~bad]
        self.horizon = int(self.k.max()) + 1 if self.k.size else 1

    def check_duplicates(self) -> None:
        """No send (commodity, link, epoch) is listed twice."""
        key = (self.x * self.n_links + self.link) * self.horizon + self.k
        _uniq, first, counts = np.unique(key, return_index=True, return_counts=True)
        if np.any(counts > 1):
            dup, times = first[counts > 1], counts[counts > 1]
            msgs = [f"{self.where(r)} is listed {times[i]} times; list each send once"
                    for i, r in enumerate(dup[:MAX_MESSAGES])]
            self.errors.add("duplicate", msgs, dup.size)

    def check_capacity(self) -> None:
        """Every window of ``beta + 1`` epochs ending at ``e >= beta`` holds at most ``window_capacity``
        sends on a link (counted with cumulative sums over ``(n_links, epochs)``)."""
        topo, names, timing, n_links = self.topo, self.names, self.timing, self.n_links
        beta = timing.beta
        cap = timing.window_capacity
        width = max(self.horizon, int(beta.max(initial=0)) + 1)
        counts_le = np.zeros((n_links, width), np.int64)
        np.add.at(counts_le, (self.link, self.k), 1)
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
            self.errors.add("capacity", msgs, int(over.sum()))

    def find_arrivals(self) -> None:
        """Receiver, sender and arrival epoch of every send, and the first epoch each GPU holds each
        commodity (``held``)."""
        topo = self.topo
        self.head = topo.dst[self.link].astype(np.int64)
        self.tail = topo.src[self.link].astype(np.int64)
        self.arrive = self.k + self.offset[self.link]
        self.head_gpu = ~topo.is_switch[self.head]
        self.tail_gpu = ~topo.is_switch[self.tail]
        held = np.full((self.n_comm, self.n_nodes), NEVER, np.int64)
        held[np.arange(self.n_comm), self.demand.source] = 0
        hg = self.head_gpu
        np.minimum.at(held, (self.x[hg], self.head[hg]), self.arrive[hg])
        self.held = held

    def check_gpu_causality(self) -> None:
        """A GPU sends only a commodity it holds at the start of that epoch."""
        x, k, tail, held, names = self.x, self.k, self.tail, self.held, self.names
        unheld = self.tail_gpu & (held[x, tail] > k)

        def not_held(r: int) -> str:
            h = held[x[r], tail[r]]
            when = "never holds it" if h >= NEVER else f"holds it only from epoch {h}"
            return f"{self.where(r)}: GPU {names[tail[r]]} {when}; send it after it arrives"

        self.errors.add_rows("causality", unheld, not_held)

    def check_switch_causality(self) -> None:
        """A switch sends a commodity only in the epoch it arrives there: on any number of out-links if
        copy-capable, else on at most as many as copies arrived (sends and arrivals matched by a key
        ``(commodity, switch, epoch)``)."""
        x, k, head, tail, arrive, n_nodes = self.x, self.k, self.head, self.tail, self.arrive, self.n_nodes
        base = self.horizon + int(self.offset.max(initial=0)) + 1  # > every epoch a key holds
        sw_in = ~self.head_gpu
        in_keys, in_counts = np.unique((x[sw_in] * n_nodes + head[sw_in]) * base + arrive[sw_in], return_counts=True)
        sw_out = ~self.tail_gpu
        out_rows = np.flatnonzero(sw_out)
        if not out_rows.size:
            return
        out_key = (x[sw_out] * n_nodes + tail[sw_out]) * base + k[sw_out]
        okeys, ofirst, ocounts = np.unique(out_key, return_index=True, return_counts=True)
        arrived = np.zeros(okeys.size, np.int64)
        if in_keys.size:
            pos = np.minimum(np.searchsorted(in_keys, okeys), in_keys.size - 1)
            match = in_keys[pos] == okeys
            arrived[match] = in_counts[pos[match]]
        copy = self.topo.copy_capable[tail[out_rows[ofirst]]]
        allowed = np.where(copy, np.where(arrived > 0, ocounts, 0), arrived)
        badsw = ocounts > allowed
        if badsw.any():
            msgs = []
            for i in np.flatnonzero(badsw)[:MAX_MESSAGES]:
                r = out_rows[ofirst[i]]
                sw = self.names[tail[r]]
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
            self.errors.add("switch", msgs, int(badsw.sum()))

    def check_horizon(self) -> None:
        """Every send arrives by the schedule's ``epochs``."""
        arrive, epochs = self.arrive, self.schedule.epochs
        self.errors.add_rows("horizon", arrive > epochs, lambda r: (
            f"{self.where(r)} arrives in epoch {arrive[r]}, after the schedule's {epochs} epochs; drop the "
            f"send or raise epochs"))

    def check_demands(self) -> None:
        """Every wanted (commodity, GPU) is held by the start of epoch ``epochs``."""
        demand, held, names, epochs = self.demand, self.held, self.names, self.schedule.epochs
        missing = demand.wants & ~(held <= epochs)
        if missing.any():
            xs, vs = np.nonzero(missing)
            msgs = []
            for c, v in zip(xs[:MAX_MESSAGES], vs[:MAX_MESSAGES]):
                h = held[c, v]
                state = "never arrives" if h >= NEVER else f"arrives only at the start of epoch {h}"
                msgs.append(
                    f"commodity {c} (chunk {demand.chunk[c]} of {names[demand.source[c]]}) is wanted at {names[v]} but "
                    f"{state}; the schedule claims {epochs} epochs"
                )
            self.errors.add("demand", msgs, int(missing.sum()))

    def delivery_epochs(self) -> tuple[np.ndarray, int]:
        """``(delivery_epoch, epochs_needed)`` of :class:`ValidationReport`: ``(n_commodities, n_nodes)
        int64`` epoch at whose end a GPU first holds a commodity (-1 at its source, at switches and
        where it never arrives), and ``1 + max`` of it over the wanted pairs (0 if none)."""
        wanted = self.demand.wants
        delivery = np.where(self.held < NEVER, self.held - 1, -1)
        delivery[np.arange(self.n_comm), self.demand.source] = -1
        delivery[:, self.topo.is_switch] = -1
        needed = int(delivery[wanted].max(initial=-1)) + 1 if wanted.any() else 0
        return delivery, needed

    def warn_redundant_receptions(self) -> None:
        """Warn when sends deliver a commodity to a GPU that already holds it."""
        hg = self.head_gpu
        if not hg.any():
            return
        n_recv = np.zeros((self.n_comm, self.n_nodes), np.int64)
        np.add.at(n_recv, (self.x[hg], self.head[hg]), 1)
        n_recv[np.arange(self.n_comm), self.demand.source] += 1
        extra = int(np.maximum(n_recv - 1, 0).sum())
        if extra:
            c, v = (int(a[0]) for a in np.nonzero(n_recv > 1))
            example = f"commodity {c} at {self.names[v]}"
            self.warnings.add("redundant", [
                f"{extra} sends deliver a commodity to a GPU that already has it (e.g. {example})"
            ], 1)
