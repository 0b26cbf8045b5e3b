"""``agents.place`` (defined here, in ``agents.placer``): a graph placed by a learned policy, alone or in a search.

``place(graph, devices=4)`` decodes the shipped pre-trained :class:`~agents.policy.DopplerPolicy`
greedily (:mod:`agents.decode`, linear cost), runs the cheap heuristics (:data:`HEURISTICS`:
critical path, HEFT, CPOP, PEFT, round robin, single device, and METIS where pymetis is installed;
together 10-90 ms on the paper graphs, under a tenth of the decode, and under half of it at 6,000 ops)
and returns the placement with the lowest makespan (ties go to the policy), each scored by
:func:`~doppler_gym.baselines.common.finish` (``simulate`` under the graph's default config). The
result names the winner (``chosen``) and records every candidate's makespan (``candidates``):
the policy alone can lose badly to a heuristic on graphs unlike its training mix (1.5x HEFT on a
communication-heavy layered DAG, issue 35). ``heuristics=False`` returns the policy's placement alone.
``search_seconds=S > 0`` spends ``S`` seconds of wall clock in total (the heuristics included) on a
policy-guided search, and the result is the best of the search and the heuristics:

1. decode the greedy placement and compute the usual heuristic starts (critical path, HEFT, round
   robin), so the search never starts worse than plain :func:`~doppler_gym.baselines.local_search`.
   When the decode, at its pace so far, would take over ``decode_share`` (a quarter) of the budget,
   it stops (:class:`~agents.decode.DecodeTimeLimit`, after a few dozen steps) and the search is
   plain local search from the heuristics (``info["decode_skipped"]``): on large graphs and short
   budgets the decode would eat the search's time;
2. decode ``samples`` sampled placements (one lockstep decode; by default as many as a fifth of
   the budget allows, none when the greedy decode is worse than the best heuristic: samples of a
   policy whose greedy decode loses rarely win, and on large graphs they cost much of the budget);
3. run :func:`~doppler_gym.baselines.local_search` for the rest of the budget. When the best decode
   is within 10% of the best heuristic start, the two starts race (``probe_share``, default 0.1 of
   the budget each): the placement with the lower makespan is not always the better start for a
   local search, and a short probe of each tells them apart better. Otherwise the policy is no
   guide on this instance, and the search is plain local search from the best heuristic (same seed,
   same moves). The moves are plain local search's: the decode's PLC probabilities as a move
   proposal led the search to worse placements (``docs/results/bench_place.md``), so place() does
   not offer them (:class:`~doppler_gym.baselines.local_search.LocalSearchResearch` keeps the
   proposal for experiments).

Same seed, ``samples`` and ``max_evals`` (with an unbounded time) give the same placement.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from doppler_gym import baselines as heuristic_baselines
from doppler_gym.baselines.common import finish
from doppler_gym.baselines.critical_path import critical_path
from doppler_gym.baselines.heft import heft
from doppler_gym.baselines.local_search import default_starts, local_search
from doppler_gym.baselines.types import Placement, jsonable
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.instances import default_config, resolve_graph, resolve_topology
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.warm import warm_up
from doppler_gym.topology.types import Topology

DEFAULT_DEVICES = 4
SAMPLE_OPS = 40_000  # default samples: at most min(MAX_SAMPLES, SAMPLE_OPS // n_ops) (decode time ~ K n)
MAX_SAMPLES = 16
SAMPLE_GAP = 1.0  # default: no sampled decodes when the greedy one is worse than the best heuristic (1.1 until
# 2026-12-02: on validation graphs of 2,000-4,000 ops, 1.0 was 0.6% better at 5 s; docs/results/bench_place.md)
RACE_GAP = 1.1  # the best decode races the best heuristic when it is at most 10% worse than it
PROBE_SHARE = 0.1  # default share of the budget of each raced start's probe (docs/results/bench_place.md)
DECODE_SHARE = 0.25  # a search goes without the policy when its greedy decode would take over this share
# of the budget (the decode projects its wall clock as it goes: agents.decode.DecodeTimeLimit)
HEURISTICS = ("critical_path", "heft", "cpop", "peft", "round_robin", "single_device", "metis")
# the heuristics place() runs beside the policy by default (doppler_gym.baselines names, default options):
# list schedulers and partitioners whose cost is a small share of the decode's; metis only with pymetis


@dataclass(frozen=True)
class PlaceResult:
    """The placement :func:`place` returns.

    Attributes:
        makespan: simulated makespan under ``config`` [``time_unit``].
        assignment: ``(n_ops,) int64`` device of each op.
        order: ``(n_ops,) int64`` the op order (SEL order of a decode, the start's order after a
            search); its ranks are the priorities under ``queue_order="priority"``.
        seconds: wall clock of the placement (decode, heuristics and search) [s]; neither loading
            torch, the policy and the simulator's kernels (``info["load_seconds"]``) nor, with
            ``heuristics=False``, the reference baselines count.
        method: what the policy ran: ``"greedy"`` (its decode) or ``"search"`` (policy-guided local
            search).
        chosen: the candidate this placement is: ``method`` (the policy's placement) or the name of
            the heuristic that beat it (``"heft"``, ``"critical_path"``, ...).
        candidates: the makespan of every candidate [``time_unit``], the policy's (``method``) first,
            then each heuristic's in :data:`HEURISTICS` order (only the policy's with
            ``heuristics=False``); all simulated under the same config.
        graph, n_ops, topology, n_devices, time_unit: the instance.
        policy: where the policy came from (``"pretrained"``, a checkpoint path, or ``"object"``).
        search_seconds: the budget asked for [s].
        seed: the seed.
        baselines: reference makespans ``{"critical_path": .., "heft": ..}`` (empty when not asked).
        info: details (``decode_seconds``, ``samples``, ``start``, ``evals``, ...; ``decode_skipped``
            with ``projected_seconds`` and ``limit_seconds`` when the search went without the policy,
            and then ``greedy_makespan`` is ``None``).
    """

    makespan: float
    assignment: np.ndarray
    order: np.ndarray
    seconds: float
    method: str
    graph: str
    n_ops: int
    topology: str
    n_devices: int
    time_unit: str
    policy: str
    search_seconds: float
    seed: int
    chosen: str
    candidates: dict[str, float]
    baselines: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (lists and plain numbers)."""
        return {
            "graph": self.graph, "n_ops": self.n_ops, "topology": self.topology, "n_devices": self.n_devices,
            "makespan": self.makespan, "time_unit": self.time_unit, "seconds": self.seconds, "method": self.method,
            "policy": self.policy, "search_seconds": self.search_seconds, "seed": self.seed,
            "chosen": self.chosen, "candidates": dict(self.candidates),
            "baselines": dict(self.baselines), "info": jsonable(self.info),
            "assignment": self.assignment.tolist(), "order": self.order.tolist(),
        }


def _decode_limit(search_seconds: float, share: float, static_seconds: float) -> float | None:
    """The greedy decode's time limit [s] within a search of ``search_seconds``: what is left of
    ``share`` of the budget after the decoder's static part; ``None`` (no limit) for the decode
    alone (0), an unbounded search or share (``inf``)."""
    if search_seconds <= 0 or np.isinf(search_seconds) or np.isinf(share):
        return None
    return max(share * float(search_seconds) - static_seconds, 0.0)


def resolve_policy(policy: object, device: str = "cpu") -> tuple[torch.nn.Module, str]:
    """``(DopplerPolicy, label)`` from ``None`` (the shipped one), a checkpoint path or a policy."""
    from agents.policy import DopplerPolicy

    if policy is None:
        from agents import pretrained

        return pretrained.load_policy(device=device), "pretrained"
    if isinstance(policy, DopplerPolicy):
        return policy, "object"
    if isinstance(policy, (str, os.PathLike)):
        from agents import pretrained

        try:
            return pretrained.load_policy(device=device, path=policy), str(policy)
        except (RuntimeError, KeyError) as exc:  # another policy class or architecture
            raise ValueError(f"checkpoint {str(policy)!r} does not hold a DopplerPolicy this version can load: "
                             f"{' '.join(str(exc).split())[:200]}") from None
    raise TypeError(f"policy must be None (the shipped pre-trained policy), a checkpoint path or a DopplerPolicy, "
                    f"got {type(policy).__name__}")


def resolve_devices(devices: object, topology: object) -> Topology:
    """The topology from ``devices`` (a count) or ``topology`` (a preset name or Topology), not both."""
    if devices is not None and topology is not None:
        raise ValueError("give devices or topology, not both (devices=N means N identical, fully linked devices)")
    if topology is not None:
        return resolve_topology(topology, "topology")
    if devices is None:
        return resolve_topology(DEFAULT_DEVICES, "devices")
    if isinstance(devices, bool) or not isinstance(devices, (int, np.integer)):
        raise TypeError(f"devices must be an integer device count, got {type(devices).__name__}")
    return resolve_topology(int(devices), "devices")


def _flush_native_stdout() -> None:
    """Flush the C library's stdio buffers (nothing where the platform's C library cannot be loaded)."""
    with contextlib.suppress(OSError, TypeError, AttributeError):
        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def _native_stdout_silenced() -> Iterator[None]:
    """File descriptor 1 goes to ``os.devnull`` within the block: METIS (C) prints warnings there on
    small graphs ("Cannot bisect a graph with 0 vertices!") while its partition stays valid. Python's
    and C's buffers are flushed before and after, so other output is neither lost nor reordered;
    where fd 1 cannot be duplicated, nothing is silenced."""
    if sys.stdout is not None:
        sys.stdout.flush()
    _flush_native_stdout()
    try:
        saved = os.dup(1)
    except OSError:
        yield
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        yield
    finally:
        _flush_native_stdout()
        os.dup2(saved, 1)
        os.close(saved)


def heuristic_placements(
    graph: DataflowGraph, topology: Topology, config: SimConfig, known: Sequence[Placement] = ()
) -> tuple[list[Placement], dict[str, str]]:
    """The placements of :data:`HEURISTICS` (default options) under ``config``, in that order, and
    ``{name: why}`` of those skipped (``metis`` without pymetis).

    A placement in ``known`` named as a heuristic is taken as that heuristic's, not computed again
    (the caller ran it with the same options and config). A heuristic whose optional package is
    missing (``ImportError``: pymetis for ``metis``) is skipped, its error message kept."""
    reuse = {p.name: p for p in known}
    placements: list[Placement] = []
    skipped: dict[str, str] = {}
    for name in HEURISTICS:
        if name in reuse:
            placements.append(reuse[name])
            continue
        try:
            with _native_stdout_silenced() if name == "metis" else contextlib.nullcontext():
                placements.append(heuristic_baselines.run(name, graph, topology, config))
        except ImportError as exc:
            skipped[name] = str(exc)
    return placements, skipped


def best_candidate(
    policy: Placement, method: str, heuristics: Sequence[Placement]
) -> tuple[Placement, str, dict[str, float]]:
    """``(placement, name, candidates)``: the lowest-makespan placement among the policy's (named
    ``method``) and the ``heuristics`` (ties go to the policy, then to the earlier heuristic), its
    name, and ``{name: makespan}`` of every candidate, the policy's first."""
    named = [(method, policy), *((p.name, p) for p in heuristics)]
    chosen, best = min(named, key=lambda item: item[1].makespan)
    return best, chosen, {name: p.makespan for name, p in named}


def place(
    graph: object,
    *,
    devices: int | None = None,
    topology: object = None,
    policy: object = None,
    search_seconds: float = 0.0,
    seed: int = 0,
    samples: int | None = None,
    max_evals: int | None = None,
    reference: bool = True,
    heuristics: bool = True,
    params: dict[str, object] | None = None,
    probe_share: float = PROBE_SHARE,
    sample_gap: float = SAMPLE_GAP,
    decode_share: float = DECODE_SHARE,
) -> PlaceResult:
    """Place ``graph`` with a learned policy, keeping a cheap heuristic's placement where it is better
    (module docstring).

    Args:
        graph: a :class:`DataflowGraph`, a paper graph name, a workload name (with ``params``) or a
            ``.txt``/``.json`` path (:func:`doppler_gym.instances.resolve_graph`).
        devices: ``N`` identical, fully linked devices (default 4); or
        topology: a preset name (``"p100x4"``) or a :class:`Topology`.
        policy: ``None`` = the shipped pre-trained policy (:mod:`agents.pretrained`), a checkpoint
            path, or a :class:`~agents.policy.DopplerPolicy`.
        search_seconds: 0 = the policy's greedy decode; ``S > 0``: policy-guided search within
            ``S`` seconds of wall clock in total, decodes included (once torch and the policy are
            loaded) [s]; ``inf`` with ``max_evals``: a search bounded by evaluations only.
        seed: seeds the sampled decodes and the search.
        samples: sampled decodes used as search starts (default: as many as a fifth of the budget
            allows after the greedy decode, at most ``min(16, 40000 // n_ops)``; give it, with
            ``max_evals``, for a result that does not depend on the machine's speed).
        max_evals: also stop the search after this many simulations (with a large
            ``search_seconds``, a result that is the same on every machine).
        reference: also report the critical-path and HEFT makespans (``baselines``: the candidates'
            with ``heuristics``, else computed apart, not counted in ``seconds``).
        heuristics: True (default): also run the cheap heuristics (:data:`HEURISTICS`, within the
            budget of a search) and return the best of them and the policy's placement
            (``chosen``, ``candidates``); False: the policy's placement alone.
        params: workload generator parameters when ``graph`` is a workload name.
        probe_share: share of the budget each of the two raced starts' probes gets (0 < share < 0.5;
            module docstring); 0: the search starts from the better of the two.
        sample_gap: with ``samples=None``, no sampled decodes when the greedy decode's makespan is over
            ``sample_gap`` times the best heuristic's (default 1.0: only a greedy decode at least as
            good as every heuristic earns samples).
        decode_share: with ``0 < search_seconds < inf``, the search goes without the policy when the
            greedy decode would take over this share of the budget (default 0.25; ``inf``: never).

    Returns:
        A :class:`PlaceResult`; its makespan is ``simulate`` of its assignment (with its order as
        priorities where the config uses them) under ``default_config(graph, topology)``, the config every
        candidate is scored under.
    """
    loading = time.perf_counter()
    from agents.decode import Decoded, DecodeTimeLimit, DirectDecoder

    _check_options(search_seconds, seed, probe_share, sample_gap, decode_share, heuristics)
    g = resolve_graph(graph, params)
    if g.n_ops == 0:
        raise ValueError(f"graph {g.name!r} has no ops; there is nothing to place")
    topo = resolve_devices(devices, topology)
    config = default_config(g, topo)
    net, label = resolve_policy(policy)
    net.set_training_mode(False)
    warm_up(g, topo, config)  # the simulator's kernels load (or compile) outside the budget
    started = time.perf_counter()  # the budget starts once torch, the policy and the kernels are loaded
    search = search_seconds > 0
    decoder = DirectDecoder(net, g, topo, config)
    info: dict[str, Any] = {"load_seconds": started - loading}
    greedy: Decoded | None = None
    try:
        greedy = decoder.run(greedy=True,
                             time_limit=_decode_limit(search_seconds, decode_share, decoder.static_seconds))
    except DecodeTimeLimit as stop:  # the budget is too short for the policy here: plain local search
        info["decode_skipped"] = {"projected_seconds": decoder.static_seconds + stop.projected,
                                  "limit_seconds": decode_share * search_seconds}
    search_starts = default_starts(g, topo, config, seed) if search else []
    rows: list[tuple[Decoded, int]] = []
    decoded: list[Placement] = []
    if greedy is not None:
        greedy_placement = finish("greedy", g, topo, config, greedy.assignments[0], greedy.orders[0], started)
        if search and samples is None:  # a fifth of the budget, at most MAX_SAMPLES episodes (machine-
            # dependent), and none when the greedy decode is over sample_gap times the best heuristic's
            # makespan: then the policy is no guide on this instance and the time goes to the search
            samples = min(MAX_SAMPLES, SAMPLE_OPS // g.n_ops)
            if not np.isinf(search_seconds):  # an unbounded time (with max_evals) has no fifth to respect
                samples = min(samples, int(0.2 * search_seconds / max(greedy.seconds, 1e-3)))
            if greedy_placement.makespan > sample_gap * min(p.makespan for p in search_starts):
                samples = 0
        rows = [(greedy, 0)]
        if search and samples:
            sampled = decoder.run(samples=int(samples), greedy=False, seed=seed)
            rows += [(sampled, r) for r in range(int(samples))]
        decoded = [greedy_placement] + [finish("sample", g, topo, config, d.assignments[r], d.orders[r], started)
                                        for d, r in rows[1:]]
    samples = len(rows[1:])
    best_row = min(range(len(decoded)), key=lambda i: (decoded[i].makespan, i)) if decoded else 0
    info.update({"decode_seconds": time.perf_counter() - started, "samples": samples,
                 "greedy_makespan": decoded[0].makespan if decoded else None,
                 "best_decode_makespan": decoded[best_row].makespan if decoded else None})
    others: list[Placement] = []  # the heuristic candidates beside the policy's placement
    if heuristics:  # the search's starts are reused (its critical path is another one unless seed is 0)
        ran = time.perf_counter()
        others, skipped = heuristic_placements(
            g, topo, config, known=[p for p in search_starts if p.name != "critical_path" or seed == 0])
        info.update({"heuristics_seconds": time.perf_counter() - ran, "heuristics_skipped": skipped})
    if not search:
        best: Placement = decoded[0]
        method = "greedy"
    else:
        best = _search(g, topo, config, search_starts, decoded[best_row] if decoded else None, started, info,
                       search_seconds=search_seconds, seed=seed, max_evals=max_evals, probe_share=probe_share)
        method = "search"
    best, chosen, candidates = best_candidate(best, method, others)
    seconds = time.perf_counter() - started
    baselines: dict[str, float] = {}
    if reference and heuristics:
        baselines = {"critical_path": candidates["critical_path"], "heft": candidates["heft"]}
    elif reference:
        baselines = {"critical_path": critical_path(g, topo, config, seed=0).makespan,
                     "heft": heft(g, topo, config).makespan}
    return PlaceResult(
        makespan=best.makespan, assignment=np.asarray(best.assignment), order=np.asarray(best.order),
        seconds=seconds, method=method, graph=g.name,
        n_ops=g.n_ops, topology=topo.name, n_devices=topo.n_devices, time_unit=config.time_unit, policy=label,
        search_seconds=float(search_seconds), seed=int(seed), chosen=chosen, candidates=candidates,
        baselines=baselines, info=info,
    )


def _check_options(search_seconds: object, seed: object, probe_share: object, sample_gap: object,
                   decode_share: object, heuristics: object) -> None:
    """:func:`place`'s numeric and flag options, each a ValueError (TypeError for ``heuristics``) naming it."""
    if isinstance(search_seconds, bool) or not isinstance(search_seconds, (int, float, np.integer, np.floating)) \
            or not search_seconds >= 0:
        raise ValueError(f"search_seconds must be a number >= 0, got {search_seconds!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if isinstance(probe_share, bool) or not isinstance(probe_share, (int, float, np.floating)) \
            or not 0.0 <= probe_share < 0.5:
        raise ValueError(f"probe_share must be a number in [0, 0.5), got {probe_share!r}")
    if isinstance(sample_gap, bool) or not isinstance(sample_gap, (int, float, np.floating)) or not sample_gap > 0:
        raise ValueError(f"sample_gap must be a number > 0, got {sample_gap!r}")
    if isinstance(decode_share, bool) or not isinstance(decode_share, (int, float, np.floating)) \
            or not decode_share > 0:
        raise ValueError(f"decode_share must be a number > 0 (inf: never skip the decode), got {decode_share!r}")
    if not isinstance(heuristics, (bool, np.bool_)):
        raise TypeError(f"heuristics must be True (also run the cheap heuristics and keep the best placement) "
                        f"or False (the policy's placement alone), got {heuristics!r}")


def _search(g: DataflowGraph, topo: Topology, config: SimConfig, search_starts: list[Placement],
            best_decode: Placement | None, started: float, info: dict[str, Any], *, search_seconds: float,
            seed: int, max_evals: int | None, probe_share: float) -> Placement:
    """The search of :func:`place`: local search from the best heuristic, racing the best decode when it is
    within :data:`RACE_GAP` of it (otherwise the policy is no guide on this instance and the search is plain
    ``local_search``), for what is left of ``search_seconds`` since ``started`` [s]; records what it did in
    ``info``."""
    best_heuristic = min(search_starts, key=lambda p: p.makespan)
    race = best_decode is not None and best_decode.makespan <= RACE_GAP * best_heuristic.makespan
    starts = [best_heuristic, best_decode] if race else [best_heuristic]
    info.update({"heuristic_starts": {p.name: p.makespan for p in search_starts}, "raced": race})
    left = search_seconds - (time.perf_counter() - started)
    if left > 0 or max_evals is not None and np.isinf(search_seconds):
        found = local_search(
            g, topo, config, seed=seed, seconds=None if np.isinf(search_seconds) else max(left, 0.0),
            max_evals=max_evals, starts=starts, probe_share=probe_share if race else 0.0,
        )
        info.update({k: found.info[k] for k in ("evals", "iterations", "restarts", "stopped", "start",
                                                "start_makespan")})
        if "probes" in found.info:
            info["probes"] = found.info["probes"]
        return found
    best = min(starts, key=lambda p: p.makespan)  # ties go to the heuristic
    info.update({"evals": 0, "stopped": "seconds (spent on the starts)", "start": best.name,
                 "start_makespan": best.makespan})
    return best
