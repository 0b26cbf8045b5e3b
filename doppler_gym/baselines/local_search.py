"""Local search over assignments, scored by the simulator in batches.

Iterated local search with Metropolis acceptance (Kirkpatrick, Gelatt & Vecchi, "Optimization by
simulated annealing", Science 220:671-680, 1983; Lourenco, Martin & Stuetzle, "Iterated local
search", Handbook of Metaheuristics, 2003). Each iteration draws ``batch_size`` neighbours of the
current assignment, scores them all with one :func:`~doppler_gym.sim.api.simulate_batch` call and
moves to the best one (ties at random) if it is no worse, or else with probability
``exp(-(worse - current) / (temperature * best))``. Moving on ties matters: many assignments share
a makespan (only the ops on the critical chain of events count), so the search walks these
plateaus instead of stopping on them. After ``patience`` iterations without a new best it restarts
from the best with ``kick`` random moves.

Moves, drawn with equal probability:
    reassign: one op to another device;
    swap: two ops exchange devices;
    group: an op together with its inputs, or with its consumers, or the linear chain it lies on
        (ops linked by edges whose producer has one consumer and consumer one input), to one device;
    block: a run of 2..``block_max`` consecutive ops of ``topological_order`` to one device;
    proposal (only with a research ``proposal``, a share ``proposal_share`` of all moves): one op to
        another device drawn from the op's row of the ``(n_ops, D)`` proposal (e.g. a learned
        policy's placement probabilities), so the search tries the moves a guide rates likely first.

Moves on the critical chain (research ``critical_share > 0``): a share of the moves draw their op (the
op reassigned, the first op of a swap, an op inside the block, the proposal's op) from the critical
chain of the current assignment's run (:func:`~doppler_gym.sim.critical.critical_chain`), the ops
whose timing sets the makespan, instead of from all ops; one more :func:`~doppler_gym.sim.api.simulate`
per accepted move finds the chain. Group moves stay uniform.

Research options (:class:`LocalSearchResearch`, ``local_search(..., research=...)``): the search's
own tuning (``patience``, ``kick``, ``temperature``, ``block_max``), the move proposal and the
critical-chain moves. Each was measured against its default and showed no gain (the class says
where), so they stay out of :func:`local_search`'s own arguments.

Racing the starts (``probe_share > 0`` with two or more ``starts``): the start with the lowest
makespan is not always the one whose search ends lowest (one local search ends in one of several
basins). Each start then gets a probe search of ``probe_share`` of the budget, and the best
placement of any probe is searched on for the rest: successive halving with one round (Jamieson &
Talwalkar, "Non-stochastic best arm identification and hyperparameter optimization", AISTATS 2016).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from doppler_gym.baselines.common import check_seed, finish, queue_priorities, resolve
from doppler_gym.baselines.critical_path import critical_path
from doppler_gym.baselines.heft import heft
from doppler_gym.baselines.simple import round_robin
from doppler_gym.baselines.types import Placement
from doppler_gym.graph.analysis import topological_order
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.api import simulate, simulate_batch
from doppler_gym.sim.bounds import makespan_lower_bound, reaches_bound
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.critical import critical_chain
from doppler_gym.sim.threads import ThreadTuner
from doppler_gym.sim.trace import Trace
from doppler_gym.sim.warm import warm_up
from doppler_gym.topology.types import Topology


def local_search(
    graph: DataflowGraph,
    topology: Topology | int,
    config: SimConfig | None = None,
    *,
    seed: int = 0,
    max_evals: int | None = None,
    seconds: float | None = 10.0,
    batch_size: int = 256,
    starts: Sequence[Placement | np.ndarray] | None = None,
    probe_share: float = 0.0,
    threads: int | None = None,
    research: LocalSearchResearch | None = None,
) -> Placement:
    """Improve the best of several start placements by batched local search (module docstring).

    Args:
        graph, topology, config: as for every baseline (``config=None``: the graph's
            :func:`~doppler_gym.instances.default_config` on ``topology``).
        seed: seeds the moves, the acceptance draws and the default critical-path start.
        max_evals: stop after this many simulated neighbours (``None``: no limit).
        seconds: stop after this much wall-clock time [s], start placements included (``None``:
            no limit); the clock starts once the simulator's kernels are loaded
            (:func:`~doppler_gym.sim.warm.warm_up`). Only ``max_evals`` gives the same result on
            every machine.
        batch_size: neighbours scored per ``simulate_batch`` call.
        starts: placements (or ``(n_ops,)`` assignments, taken with ``topological_order``; or a
            ``(B, n_ops)`` array of them) to start from; default: :func:`default_starts`
            (:func:`critical_path`, :func:`heft` and :func:`round_robin`).
            The best one is the start; under ``queue_order="priority"`` its order gives the
            priorities of every candidate.
        probe_share: with two or more ``starts``, race them (module docstring): each start's probe
            gets this share of ``max_evals`` and of ``seconds``, the rest goes to the search from the
            best probe's placement; the probes and that search are seeded from ``seed`` and the start's
            index. ``probe_share * len(starts)`` must be below 1. 0: the search starts from the best
            start.
        threads: Numba threads for the batches; ``None`` (the default): one or Numba's current count,
            whichever the search measures as faster on the machine as it is loaded now
            (:class:`~doppler_gym.sim.threads.ThreadTuner`). Only the wall clock depends on it.
        research: the research options (:class:`LocalSearchResearch`); ``None``: their defaults.

    The search also stops when it reaches ``makespan_lower_bound`` (a proof of optimality),
    where that bound holds: one stream per device and no jitter. With jitter each candidate is
    scored on its own random draw (``simulate_batch``); the returned makespan is the usual
    ``simulate`` of the best.

    Returns:
        A :class:`Placement` (``order`` = the start's order). ``info``: ``evals``,
        ``iterations``, ``restarts``, ``start`` (name) and ``start_makespan``, ``stopped``
        (``"lower_bound"``, ``"max_evals"``, ``"seconds"``, or ``"no_moves"`` with one device), ``seconds_to_best``,
        ``evals_to_best``, ``lower_bound``, ``numba_threads`` (the thread count last chosen for the
        batches, see ``threads``) and ``numba_utilisation`` (the share of their wall clock the
        threads had the cores in the last measurement, :attr:`ThreadTuner.utilisation`; ``None`` when
        nothing was measured). After a race ``evals``,
        ``iterations`` and ``restarts`` count the probes too, ``start`` is the start whose probe
        won, and ``probes`` lists each probe's ``start``, ``start_makespan``, ``makespan`` and
        ``evals`` (the probes stop at the first one that reaches the lower bound).

    Raises:
        ValueError: no budget (both ``max_evals`` and ``seconds`` ``None``) or a bad option.
    """
    graph, topology, config = resolve(graph, topology, config, "local_search")
    warm_up(graph, topology, config)  # the simulator's kernels load (or compile) before the clock starts
    started = time.perf_counter()
    seed = check_seed(seed, "local_search")
    _check_options(max_evals, seconds, batch_size)
    if research is None:
        research = LocalSearchResearch()
    elif not isinstance(research, LocalSearchResearch):
        raise TypeError(f"local_search: research must be a LocalSearchResearch or None, got {type(research).__name__}")
    proposal = _check_proposal(research.proposal, graph.n_ops, topology.n_devices)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1):
        raise ValueError(f"local_search: threads must be an integer >= 1 or None, got {threads!r}")
    candidates = _start_placements(graph, topology, config, starts, seed)
    _check_probe_share(probe_share, len(candidates))
    searcher = _Searcher(graph, topology, config, makespan_lower_bound(graph, topology, config),
                         _move_tables(graph), batch_size, research.patience, research.kick, research.temperature,
                         research.block_max, proposal, float(research.proposal_share),
                         float(research.critical_share), None if threads is None else int(threads))
    if probe_share > 0 and len(candidates) > 1:
        return _race(searcher, candidates, seed, max_evals, seconds, float(probe_share), started)
    return searcher.run(min(candidates, key=lambda p: p.makespan), seed, max_evals, seconds, started)


@dataclass(frozen=True, eq=False)  # eq=False: compared by identity (``proposal`` is an array)
class LocalSearchResearch:
    """Research options of :func:`local_search`: knobs whose own measurements showed no gain over
    their defaults (``docs/results/train_default.md``, ``docs/results/bench_place.md``), for
    experiments only. ``LocalSearchResearch()`` is the search :func:`local_search` runs by default.

    Attributes:
        patience: iterations without a new best before a restart from the best (an integer >= 1).
            ``patience=50`` found the teacher's best basin no more often than 200.
        kick: random moves applied to the best at a restart (an integer >= 0). ``kick=20`` ended
            exactly where 5 did (50,000 evaluations at 256 per step are fewer steps than ``patience``).
        temperature: Metropolis temperature as a fraction of the best makespan (> 0). 0.02 ended
            exactly where 0.004 did: the best of a batch is almost always no worse than the current.
        block_max: longest block move [ops] (an integer >= 2).
        proposal: ``(n_ops, D)`` nonnegative move weights per op and device (rows need not sum to
            1; a row of zeros means uniform): proposal moves draw an op uniformly and its new device
            from its row, the current device excluded. ``None``: no proposal moves. A policy's PLC
            probabilities made the search worse (3.937 against 3.791 on random 1,000 ops at 5,000
            evaluations); even an oracle's proposal was level with plain moves (1.0024 at 2 s).
        proposal_share: the share of the moves that are proposal moves when ``proposal`` is given
            (0..1); the other move kinds share the rest equally.
        critical_share: the share of the moves whose op is drawn from the current critical chain
            (module docstring), 0..1; 0: every op is drawn uniformly. Level with plain search
            (0.9953, 0.9985 and 1.0025 of plain's makespan, each interval holding 1).

    Raises:
        ValueError: an option out of its range (checked when the object is made; the proposal's
            shape is checked by :func:`local_search`, which knows the graph).
    """

    patience: int = 200
    kick: int = 5
    temperature: float = 0.004
    block_max: int = 8
    proposal: np.ndarray | None = None
    proposal_share: float = 0.5
    critical_share: float = 0.0

    def __post_init__(self) -> None:
        for label, value, low in (("patience", self.patience, 1), ("kick", self.kick, 0),
                                  ("block_max", self.block_max, 2)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"LocalSearchResearch: {label} must be an integer >= {low}, got {value!r}")
        if not (_is_number(self.temperature) and self.temperature > 0):
            raise ValueError(f"LocalSearchResearch: temperature must be a positive fraction of the makespan, "
                             f"got {self.temperature!r}")
        for label, value in (("proposal_share", self.proposal_share), ("critical_share", self.critical_share)):
            if not (_is_number(value) and 0.0 <= value <= 1.0):
                raise ValueError(f"LocalSearchResearch: {label} must be a number in [0, 1], got {value!r}")


@dataclass(frozen=True)
class _Searcher:
    """What every search from one start shares: the instance, its lower bound, the move tables
    (:func:`_move_tables`, built once per :func:`local_search` call) and the options."""

    graph: DataflowGraph
    topology: Topology
    config: SimConfig
    bound: float
    tables: tuple[np.ndarray, np.ndarray, int]
    batch_size: int
    patience: int
    kick: int
    temperature: float
    block_max: int
    proposal: np.ndarray | None
    proposal_share: float
    critical_share: float
    threads: int | None

    def run(self, start: Placement, seed: int, max_evals: int | None, seconds: float | None,
            started: float) -> Placement:
        """The search from ``start`` (module docstring); ``seconds`` count from ``started``
        (``time.perf_counter()``)."""
        graph, topology, config, bound = self.graph, self.topology, self.config, self.bound
        rng = np.random.default_rng(seed)
        order = start.order
        prio = queue_priorities(order, config)
        n, d = graph.n_ops, topology.n_devices
        moves = _Moves(graph, d, self.block_max, rng, self.proposal, self.proposal_share, self.tables,
                       self.critical_share)

        current, cost = start.assignment.copy(), start.makespan
        if self.critical_share > 0:
            moves.focus_on(simulate(graph, current, topology, priorities=prio, config=config))
        best, best_cost = current.copy(), cost
        evals = iterations = restarts = stall = 0
        tuner = ThreadTuner(None if self.threads is None else [self.threads])
        evals_to_best, seconds_to_best = 0, time.perf_counter() - started
        stopped = "lower_bound"
        while not reaches_bound(best_cost, bound, config):
            if max_evals is not None and evals >= max_evals:
                stopped = "max_evals"
                break
            if seconds is not None and time.perf_counter() - started >= seconds:
                stopped = "seconds"
                break
            if n == 0 or d == 1:
                stopped = "no_moves"
                break
            size = self.batch_size if max_evals is None else min(self.batch_size, max_evals - evals)
            batch = moves.neighbours(current, size)
            with tuner.timed(size):  # one Numba thread or all, whichever is faster on this machine now
                scores = simulate_batch(graph, batch, topology, priorities=prio, config=config)
            evals += size
            iterations += 1
            k = int(np.lexsort((rng.random(size), scores))[0])
            stall += 1
            if scores[k] < best_cost:
                best, best_cost, stall = batch[k].copy(), float(scores[k]), 0
                evals_to_best, seconds_to_best = evals, time.perf_counter() - started
            if scores[k] <= cost or rng.random() < np.exp(-(scores[k] - cost) / (self.temperature * best_cost)):
                current, cost = batch[k].copy(), float(scores[k])
                if self.critical_share > 0:
                    moves.focus_on(simulate(graph, current, topology, priorities=prio, config=config))
            if stall >= self.patience:
                current = best.copy()
                for _ in range(self.kick):
                    current = moves.neighbours(current, 1)[0]
                trace = simulate(graph, current, topology, priorities=prio, config=config)
                cost = trace.makespan
                if self.critical_share > 0:
                    moves.focus_on(trace)
                evals += 1
                restarts += 1
                stall = 0
        info = {
            "seed": seed, "evals": evals, "iterations": iterations, "restarts": restarts, "start": start.name,
            "start_makespan": start.makespan, "stopped": stopped, "evals_to_best": evals_to_best,
            "seconds_to_best": seconds_to_best, "lower_bound": bound, "numba_threads": tuner.chosen,
            "numba_utilisation": tuner.utilisation,
        }
        return finish("local_search", graph, topology, config, best, order, started, info)


def _check_options(max_evals: int | None, seconds: float | None, batch_size: int) -> None:
    if max_evals is None and seconds is None:
        raise ValueError("local_search: give a budget: max_evals (simulations) and/or seconds (wall clock)")
    for label, value, low in (("max_evals", max_evals, 0), ("batch_size", batch_size, 1)):
        if value is None and label == "max_evals":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"local_search: {label} must be an integer >= {low}, got {value!r}")
    if seconds is not None and not (_is_number(seconds) and seconds >= 0):
        raise ValueError(f"local_search: seconds must be a number >= 0 or None, got {seconds!r}")


def _check_proposal(proposal: object, n: int, d: int) -> np.ndarray | None:
    """The research proposal as ``(n, d) float64`` (or None), after checking it."""
    if proposal is None:
        return None
    p = np.asarray(proposal, dtype=np.float64)
    if p.shape != (n, d):
        raise ValueError(f"local_search: proposal has shape {p.shape}; expected (n_ops, n_devices) = ({n}, {d}), "
                         f"one weight per op and device")
    if not np.all(np.isfinite(p)) or p.min(initial=0.0) < 0:
        raise ValueError("local_search: proposal weights must be finite and >= 0")
    return p


def default_starts(graph: DataflowGraph, topology: Topology, config: SimConfig, seed: int = 0) -> list[Placement]:
    """The start placements :func:`local_search` uses when given none: :func:`critical_path` (``seed``),
    :func:`heft` and :func:`round_robin` (for callers that add their own starts to these)."""
    return [critical_path(graph, topology, config, seed=seed), heft(graph, topology, config),
            round_robin(graph, topology, config)]


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _start_placements(
    graph: DataflowGraph,
    topology: Topology,
    config: SimConfig,
    starts: Sequence[Placement | np.ndarray] | None,
    seed: int,
) -> list[Placement]:
    """The start placements, each re-simulated under ``config`` (``starts=None``: :func:`default_starts`)."""
    if starts is None:
        return default_starts(graph, topology, config, seed)
    if len(starts) == 0:
        raise ValueError("local_search: starts is empty; give at least one placement or leave it None")
    candidates = []
    for i, s in enumerate(starts):
        name, order = (s.name, s.order) if isinstance(s, Placement) else (f"starts[{i}]", topological_order(graph))
        assignment = s.assignment if isinstance(s, Placement) else np.asarray(s)
        if assignment.shape != (graph.n_ops,):
            raise ValueError(
                f"local_search: starts[{i}] has shape {assignment.shape} but graph {graph.name!r} has "
                f"{graph.n_ops} ops; give one device per op"
            )
        candidates.append(
            finish(name, graph, topology, config, assignment.astype(np.int64), order, time.perf_counter())
        )
    return candidates


def _check_probe_share(share: object, n_starts: int) -> None:
    if not (_is_number(share) and share >= 0 and share * n_starts < 1):
        raise ValueError(f"local_search: probe_share must be a number >= 0 with probe_share * len(starts) < 1 "
                         f"(here {n_starts} starts), got {share!r}")


def _child_seed(seed: int, index: int) -> int:
    """An independent seed for part ``index`` of a search seeded with ``seed``."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


def _race(
    searcher: _Searcher, candidates: list[Placement], seed: int, max_evals: int | None, seconds: float | None,
    probe_share: float, started: float,
) -> Placement:
    """Race the start placements (module docstring): a probe search from each with ``probe_share``
    of the budget, then the search from the best probe's placement with what is left."""
    probes, used = [], 0
    for i, start in enumerate(candidates):
        began = time.perf_counter()
        probe = searcher.run(start, _child_seed(seed, i),
                             None if max_evals is None else max(1, int(probe_share * max_evals)),
                             None if seconds is None else probe_share * seconds, began)
        probes.append((start, probe, used, began - started))
        used += probe.info["evals"]
        if probe.info["stopped"] == "lower_bound":  # optimal: the other starts cannot do better
            break
    start, winner, offset, winner_began = min(probes, key=lambda row: row[1].makespan)  # ties: the earlier start
    began = time.perf_counter()
    rest = searcher.run(winner, _child_seed(seed, len(candidates)),
                        None if max_evals is None else max(0, max_evals - used),
                        None if seconds is None else max(0.0, seconds - (began - started)), began)
    best, improved = (rest, True) if rest.makespan < winner.makespan else (winner, False)
    info = dict(best.info)
    for key in ("evals", "iterations", "restarts"):
        info[key] = sum(p.info[key] for _, p, _, _ in probes) + rest.info[key]
    if improved:
        to_best = (used + rest.info["evals_to_best"], began - started + rest.info["seconds_to_best"])
    else:
        to_best = (offset + winner.info["evals_to_best"], winner_began + winner.info["seconds_to_best"])
    info.update(seed=seed, start=start.name, start_makespan=start.makespan, stopped=rest.info["stopped"],
                evals_to_best=to_best[0], seconds_to_best=to_best[1],
                probes=[{"start": s.name, "start_makespan": s.makespan, "makespan": p.makespan,
                         "evals": p.info["evals"]} for s, p, _, _ in probes])
    return finish("local_search", searcher.graph, searcher.topology, searcher.config, best.assignment, start.order,
                  started, info)


class _Moves:
    """Draws neighbours of an assignment (see the module docstring for the move kinds)."""

    def __init__(
        self, graph: DataflowGraph, n_devices: int, block_max: int, rng: np.random.Generator,
        proposal: np.ndarray | None = None, proposal_share: float = 0.0,
        tables: tuple[np.ndarray, np.ndarray, int] | None = None, critical_share: float = 0.0,
    ) -> None:
        self.graph = graph
        self.critical_share = critical_share
        self.focus = np.arange(graph.n_ops)
        self.n, self.d, self.rng = graph.n_ops, n_devices, rng
        self.proposal = proposal
        self.proposal_share = proposal_share if proposal is not None else 0.0
        self.block_max = min(block_max, max(graph.n_ops, 2))
        self.pos, self.groups, self.n_groups = tables if tables is not None else _move_tables(graph)
        self.kinds = np.array([0, 1, 2, 3] if self.n_groups else [0, 1, 3])  # the group move needs groups

    def focus_on(self, trace: Trace) -> None:
        """Draw the moved op from the critical chain of ``trace`` (the current assignment's run) with
        ``critical_share``."""
        self.focus = critical_chain(self.graph, trace)
        if self.focus.size == 0:
            self.focus = np.arange(self.n)

    def neighbours(self, x: np.ndarray, size: int) -> np.ndarray:
        """``(size, n_ops) int64``: ``size`` random neighbours of ``x``."""
        rng, n, d = self.rng, self.n, self.d
        out = np.repeat(x[None, :], size, axis=0)
        kind = self.kinds[rng.integers(0, self.kinds.size, size)]
        if self.proposal_share > 0:  # only then: the draws without a proposal stay as they were
            kind = np.where(rng.random(size) < self.proposal_share, 4, kind)
        rows = np.arange(size)
        i, j = rng.integers(0, n, size), rng.integers(0, n, size)
        if self.critical_share > 0:
            on_chain = rng.random(size) < self.critical_share
            i = np.where(on_chain, self.focus[rng.integers(0, self.focus.size, size)], i)
        dev = rng.integers(0, d, size)
        r = rows[kind == 0]  # reassign to another device
        out[r, i[r]] = (x[i[r]] + 1 + rng.integers(0, d - 1, r.size)) % d
        r = rows[kind == 1]  # swap
        out[r, i[r]], out[r, j[r]] = x[j[r]], x[i[r]]
        r = rows[kind == 2]  # group
        if r.size:
            members = self.groups[rng.integers(0, self.n_groups, r.size)]  # (k, width)
            keep = (members >= 0).ravel()
            width = members.shape[1]
            out[np.repeat(r, width)[keep], members.ravel()[keep]] = np.repeat(dev[r], width)[keep]
        r = rows[kind == 3]  # block of consecutive ops in topological order
        if r.size:
            length = rng.integers(2, self.block_max + 1, r.size)
            if self.critical_share > 0:  # the block holds op i (so a chain op when drawn from the chain)
                first = self.pos[i[r]] - rng.integers(0, length)
            else:
                first = rng.integers(0, n, r.size)
            inside = (self.pos[None, :] >= first[:, None]) & (self.pos[None, :] < (first + length)[:, None])
            out[r] = np.where(inside, dev[r, None], out[r])
        r = rows[kind == 4]  # proposal: op i to a device drawn from its proposal row, its own excluded
        if r.size:
            w = self.proposal[i[r]]  # (k, D), a copy
            own = x[i[r]]
            w[np.arange(r.size), own] = 0.0
            empty = w.sum(1) <= 0
            w[empty] = 1.0  # no weight elsewhere: uniform over the other devices
            w[np.arange(r.size), own] = 0.0
            cum = np.cumsum(w, axis=1)
            u = rng.random(r.size) * cum[:, -1]
            out[r, i[r]] = np.minimum((cum <= u[:, None]).sum(1), d - 1)
        return out


def _move_tables(graph: DataflowGraph) -> tuple[np.ndarray, np.ndarray, int]:
    """What the moves look up (``O(n_ops + n_edges)`` to build): ``pos``, the ``(n_ops,)`` position
    of each op in ``topological_order``; ``groups``, the ``(G, width)`` op sets of :func:`_groups`
    padded with -1 (one row of -1 when there are none); and ``G``."""
    pos = np.empty(graph.n_ops, dtype=np.int64)
    pos[topological_order(graph)] = np.arange(graph.n_ops)
    groups = _groups(graph)
    width = max((len(g) for g in groups), default=1)
    table = np.full((max(len(groups), 1), width), -1, dtype=np.int64)
    for i, g in enumerate(groups):
        table[i, : len(g)] = g
    return pos, table, len(groups)


def _groups(graph: DataflowGraph) -> list[np.ndarray]:
    """Op sets moved together: each op with its inputs, each op with its consumers, and each
    linear chain; only sets of two ops or more, without duplicates."""
    seen: set[tuple[int, ...]] = set()
    out: list[np.ndarray] = []

    def add(ops: np.ndarray) -> None:
        key = tuple(sorted(set(ops.tolist())))
        if len(key) >= 2 and key not in seen:
            seen.add(key)
            out.append(np.array(key, dtype=np.int64))

    for v in range(graph.n_ops):
        add(np.append(graph.predecessors(v), v))
        add(np.append(graph.successors(v), v))
    indeg, outdeg = graph.in_degree, graph.out_degree
    for v in range(graph.n_ops):  # chains start where the link into v is not a one-to-one link
        preds = graph.predecessors(v)
        if preds.size == 1 and outdeg[preds[0]] == 1:
            continue
        chain = [v]
        while outdeg[chain[-1]] == 1 and indeg[graph.successors(chain[-1])[0]] == 1:
            chain.append(int(graph.successors(chain[-1])[0]))
        add(np.array(chain))
    return out
