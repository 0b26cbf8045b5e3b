"""The TE-CCL time-expanded chunk model on OR-Tools CP-SAT (0/1 variables), shared by ``milp`` and ``rounds``.

Variables (all Boolean), over the :class:`~doppler_gym.comm.expanded.Network` timing:

* ``F[c, l, k]``: commodity ``c`` starts crossing link ``l`` in epoch ``k``. Created only where
  useful: the sender can have the chunk by ``k`` (earliest reach) and, with ``deadline=True``, the
  receiver can still pass it on to a destination by the horizon; never into a node holding it.
* ``H[c, i, t]``: GPU ``i`` holds ``c`` at the start of epoch ``t`` (the TE-CCL buffer ``B``).

Constraints (the TE-CCL MILP's, written as clauses where they are logical):

1. capacity: every window of ``window[l]`` epochs has at most ``cap[l]`` sends on ``l``
   (``AddAtMostOne`` when ``cap = 1``), counting sends an earlier round already made (``busy``);
2. buffers are monotone and fed by arrivals: ``H[t] -> H[t-1] or (a send lands at t)``;
   ``H[t-1] -> H[t]``; holders at epoch 0 and in-flight landings are constants;
3. send only what you hold, with copy: ``F[c, (i, j), k] -> H[c, i, k]`` for every out-link of GPU ``i``;
4. switches: copy-capable ``F[c, (w, j), k] -> OR of the sends landing at w in epoch k``; plain
   switches ``sum_j F[c, (w, j), k] <= sum of landings``;
5. destinations (``require=True``): ``H[c, d, E] = 1`` for every wanted ``(c, d)``.

The released model also forces ``B <= 1`` as an equality, i.e. a GPU receives a chunk at most once;
here a second reception is allowed (it is wasteful, never useful, and the pruning pass removes it),
which leaves the minimum epochs unchanged and gives the solver fewer rows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from doppler_gym.comm.expanded import INF, Network, earliest, to_targets


@dataclass
class ChunkModel:
    """A built CP-SAT model plus the maps needed to read a schedule out of it.

    Attributes:
        model: the ``cp_model.CpModel``.
        sends: list of (commodity, link, epoch) of every ``F`` variable, parallel to ``send_vars``.
        send_vars: the ``F`` literals.
        hold: ``{(c, gpu): {t: literal}}`` buffer literals (only non-constant ones).
        feasible: False when the instance is trivially infeasible at this horizon (a wanted chunk
            cannot reach its destination in time); the model is then not worth solving.
    """

    model: object
    sends: list[tuple[int, int, int]] = field(default_factory=list)
    send_vars: list[object] = field(default_factory=list)
    hold: dict[tuple[int, int], dict[int, object]] = field(default_factory=dict)
    feasible: bool = True


def build_chunk_model(net: Network, wants: np.ndarray, holds: np.ndarray, last_land: int, last_send: int,
                      pending: dict[tuple[int, int], int] | None = None,
                      busy: dict[int, dict[int, int]] | None = None, deadline: bool = True,
                      require: bool = True) -> ChunkModel:
    """Build the chunk model over epochs ``0..last_send`` (sends) and ``0..last_land`` (landings).

    Args:
        net: link timing.
        wants: (n_commodities, n_nodes) bool demands still to serve.
        holds: (n_commodities, n_nodes) bool GPUs holding each commodity at epoch 0.
        last_land: the horizon ``E``: landings after it are not modelled (buffers ``H[.., 0..E]``).
        last_send: last epoch in which a send may start.
        pending: ``{(c, node): t}`` chunks in flight that become usable at ``node`` in epoch ``t``.
        busy: ``{link: {epoch < 0: sends}}`` sends of an earlier round still inside a capacity window.
        deadline: only create sends whose chunk can still reach a destination by ``last_land``.
            Sends into a switch are always limited to those it can forward by ``last_send``, so no
            chunk is left in flight to a switch (the rounds solver relies on it).
        require: every wanted chunk must be held at its destination at epoch ``last_land``.
    """
    builder = _ChunkModelBuilder(net, wants, holds, last_land, last_send, pending or {}, busy or {})
    for c in range(wants.shape[0]):
        if not wants[c].any():
            continue
        if not builder.add_sends(c, deadline=deadline, require=require):
            builder.out.feasible = False
            return builder.out
    builder.add_buffers()
    builder.add_send_only_what_is_held()
    builder.add_switch_forwarding()
    builder.add_capacity_windows()
    if require and not builder.add_destinations():
        builder.out.feasible = False
    return builder.out


class _ChunkModelBuilder:
    """Adds the chunk model's variables and constraints step by step (the steps of :func:`build_chunk_model`).

    The steps run in a fixed order, so one instance always gives the same model (CP-SAT's search, and
    hence the schedule of a seed, depends on the order of variables and constraints).

    Attributes:
        net, wants, holds, last_land, last_send, busy: as in :func:`build_chunk_model`.
        model: the ``cp_model.CpModel`` being built; out: the :class:`ChunkModel` returned.
        pending_by_commodity: ``{c: {node: t}}`` the ``pending`` chunks, by commodity.
        arrivals: ``{(c, node, t): [F literals landing at node in epoch t]}``.
        link_epoch: ``{(link, k): [F literals starting on link in epoch k]}``.
        gpu_sends: ``(c, gpu, k, literal)`` of every send from a GPU that does not hold ``c`` at epoch 0.
        switch_sends: ``{(c, switch, k): [F literals leaving the switch in epoch k]}``.
        true, false: the constant literals (created by :meth:`add_buffers`).
    """

    def __init__(self, net: Network, wants: np.ndarray, holds: np.ndarray, last_land: int, last_send: int,
                 pending: dict[tuple[int, int], int], busy: dict[int, dict[int, int]]) -> None:
        from ortools.sat.python import cp_model

        self.net, self.wants, self.holds = net, wants, holds
        self.last_land, self.last_send, self.busy = last_land, last_send, busy
        self.model = cp_model.CpModel()
        self.out = ChunkModel(model=self.model)
        self.pending_by_commodity: dict[int, dict[int, int]] = defaultdict(dict)
        for (c, node), t in pending.items():
            self.pending_by_commodity[c][node] = t
        self.arrivals: dict[tuple[int, int, int], list] = defaultdict(list)
        self.link_epoch: dict[tuple[int, int], list] = defaultdict(list)
        self.gpu_sends: list[tuple[int, int, int, object]] = []
        self.switch_sends: dict[tuple[int, int, int], list] = defaultdict(list)
        self.true: object = None
        self.false: object = None

    def add_sends(self, c: int, *, deadline: bool, require: bool) -> bool:
        """Create the ``F`` literals of commodity ``c``: on every link whose sender can have ``c`` by
        epoch ``k`` and whose receiver, not holding it, can pass it on to a destination in time.

        Returns False when, with ``require``, a wanted chunk cannot reach its destination by
        ``last_land`` (the horizon is infeasible); nothing is added then.
        """
        net, holds, m, out = self.net, self.holds, self.model, self.out
        lag = net.lag
        starts = {int(i): 0 for i in np.flatnonzero(holds[c])}
        for node, t in self.pending_by_commodity[c].items():
            starts[node] = min(starts.get(node, INF), t)
        reach = earliest(net, starts)
        togo = to_targets(net, self.wants[c])
        if require:
            need = self.wants[c] & ~holds[c]
            if np.any(reach[need] > self.last_land):
                return False
        for l in range(net.n_links):
            i, j = int(net.src[l]), int(net.dst[l])
            if holds[c, j] or togo[j] >= INF or reach[i] >= INF:
                continue
            hi = self.last_send
            if deadline:
                hi = min(hi, self.last_land - int(lag[l]) - int(togo[j]))
            else:
                hi = min(hi, self.last_land - int(lag[l]))
            if net.is_switch[j]:  # a switch forwards on arrival: only within the modelled sends
                hi = min(hi, self.last_send - int(lag[l]))
            for k in range(int(reach[i]), hi + 1):
                v = m.NewBoolVar("")
                out.sends.append((c, l, k))
                out.send_vars.append(v)
                self.arrivals[(c, j, k + int(lag[l]))].append(v)
                self.link_epoch[(l, k)].append(v)
                if net.is_switch[i]:
                    self.switch_sends[(c, i, k)].append(v)
                elif not holds[c, i]:
                    self.gpu_sends.append((c, i, k, v))
        return True

    def add_buffers(self) -> None:
        """Create the constants and the ``H`` literals of every GPU a send lands on (constraint 2):
        ``H[t] = H[t-1] + landings(t)`` from the first landing to ``last_land`` (or until an in-flight
        copy arrives, after which nothing else may land there)."""
        m, arrivals, last_land = self.model, self.arrivals, self.last_land
        self.true = m.NewConstant(1)
        self.false = m.NewConstant(0)
        gpu = ~self.net.is_switch
        land_times: dict[tuple[int, int], list[int]] = defaultdict(list)
        for (c, node, t) in arrivals:
            if gpu[node]:
                land_times[(c, node)].append(t)
        for (c, i), times in land_times.items():
            if self.holds[c, i]:
                continue
            first = min(times)
            p = self.pending_by_commodity[c].get(i)
            stop = last_land if p is None else min(last_land, p - 1)
            if first > stop:
                continue
            lits = {t: m.NewBoolVar("") for t in range(first, stop + 1)}
            self.out.hold[(c, i)] = lits
            for t in range(first, stop + 1):
                land = arrivals.get((c, i, t), [])
                prev = lits.get(t - 1)
                # H[t] = H[t-1] + landings(t): monotone, fed by arrivals, and at most one reception
                m.Add(lits[t] == sum(land) + (prev if prev is not None else 0))
            if p is not None:  # nothing else may land once the in-flight copy is there
                late = [v for t in range(p, last_land + 1) for v in arrivals.get((c, i, t), [])]
                for v in late:
                    m.Add(v == 0)

    def hold_literal(self, c: int, i: int, t: int) -> object:
        """The literal "GPU ``i`` holds ``c`` at the start of epoch ``t``": ``true``/``false`` where it
        is a constant (held at epoch 0, an in-flight copy already there, nothing landed yet)."""
        if self.holds[c, i]:
            return self.true
        p = self.pending_by_commodity[c].get(i)
        if p is not None and p <= t:
            return self.true
        lits = self.out.hold.get((c, i))
        if not lits:
            return self.false
        first = min(lits)
        if t < first:
            return self.false
        return lits[min(t, max(lits))]

    def add_send_only_what_is_held(self) -> None:
        """Constraint 3: a GPU sends ``c`` in epoch ``k`` only if it holds ``c`` then."""
        m = self.model
        for c, i, k, v in self.gpu_sends:
            h = self.hold_literal(c, i, k)
            if h is self.false:
                m.Add(v == 0)
            elif h is not self.true:
                m.AddImplication(v, h)

    def add_switch_forwarding(self) -> None:
        """Constraint 4: a switch sends ``c`` in epoch ``k`` only what lands there in epoch ``k`` (any
        number of copies if copy-capable, else one per landing; an in-flight copy counts once)."""
        m, arrivals, net = self.model, self.arrivals, self.net
        for (c, w, k), outs in self.switch_sends.items():
            if self.pending_by_commodity[c].get(w) == k:
                if not net.copy_capable[w]:
                    m.Add(sum(outs) <= 1 + sum(arrivals.get((c, w, k), [])))
                continue
            ins = arrivals.get((c, w, k), [])
            if net.copy_capable[w]:
                for v in outs:
                    m.AddBoolOr([v.Not()] + list(ins))
            else:
                m.Add(sum(outs) <= sum(ins))

    def add_capacity_windows(self) -> None:
        """Constraint 1: every window of ``window[l]`` epochs holds at most ``cap[l]`` sends on link
        ``l``, less the sends of an earlier round (``busy``) still inside the window."""
        m, net = self.model, self.net
        by_link: dict[int, dict[int, list]] = defaultdict(dict)
        for (l, k), vs in self.link_epoch.items():
            by_link[l][k] = vs
        for l, epochs in by_link.items():
            w, cap = int(net.window[l]), int(net.cap[l])
            prior = self.busy.get(l, {})
            ks = sorted(epochs)
            for k in range(ks[0], ks[-1] + w):
                lo = k - w + 1
                terms = [v for kk in range(max(lo, 0), k + 1) for v in epochs.get(kk, [])]
                used = sum(n for kk, n in prior.items() if lo <= kk < 0)
                room = cap - used
                if len(terms) <= room:
                    continue
                if room <= 0:
                    for v in terms:
                        m.Add(v == 0)
                elif room == 1:
                    m.AddAtMostOne(terms)
                else:
                    m.Add(sum(terms) <= room)

    def add_destinations(self) -> bool:
        """Constraint 5: every wanted ``(c, d)`` is held at epoch ``last_land``.

        Returns False (stopping at the first such pair) when one can never be held by then.
        """
        for c, d in zip(*np.nonzero(self.wants & ~self.holds)):
            h = self.hold_literal(int(c), int(d), self.last_land)
            if h is self.false:
                return False
            if h is not self.true:
                self.model.Add(h == 1)
        return True


def solver_params(time_limit: float, seed: int):
    """A CP-SAT solver with 2 workers, a wall-clock limit and a seed; deterministic for one seed.

    ``interleave_search`` makes the parallel search independent of thread timing, so the same
    seed gives the same schedule whenever the solve finishes within its limit.
    """
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 2
    solver.parameters.interleave_search = True
    solver.parameters.random_seed = int(seed)
    solver.parameters.max_time_in_seconds = max(0.01, float(time_limit))
    return solver


def read_sends(solver, chunk: ChunkModel) -> np.ndarray:
    """(n, 3) int64 (commodity, link, epoch) of the sends set in the solver's solution."""
    vals = [solver.BooleanValue(v) for v in chunk.send_vars]
    rows = [s for s, on in zip(chunk.sends, vals) if on]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)
