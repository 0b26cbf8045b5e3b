"""``solve``: a collective on a topology -> a validated minimum-epoch chunk schedule.

``solve(topology, collective, buffer_bytes, chunks, epoch, method)``:

1. the topology by name or object (:func:`~doppler_gym.comm.topology.comm_topology`), the demand
   (:func:`~doppler_gym.comm.demand.make_demand`), the chunk size ``buffer_bytes / output_chunks``
   (:func:`~doppler_gym.comm.demand.chunk_bytes_for`: ALLGATHER on 16 GPUs with a 1 GB buffer and
   C = 1 moves 62.5 MB chunks, as in the paper), the epoch (:func:`~doppler_gym.comm.epochs.epoch_duration`)
   and the link timing;
2. the solver: ``"milp"`` (:mod:`~doppler_gym.comm.milp`, CP-SAT, any demand, copy),
   ``"lp"`` (:mod:`~doppler_gym.comm.lp`, HiGHS, exact for single-destination demands such as
   ALLTOALL), ``"rounds"`` (:mod:`~doppler_gym.comm.rounds`, time-partitioned CP-SAT for large
   topologies, not optimal), or ``"auto"`` (LP when every chunk has one destination, else MILP);
3. :func:`~doppler_gym.comm.validate.validate` on the result; an invalid schedule raises
   ``RuntimeError`` (a solver bug, never the user's fault).

REDUCE-SCATTER and ALLREDUCE (SCCL/TACCL construction, :func:`~doppler_gym.comm.demand.composition`)
return a :class:`PhasedSchedule`: REDUCE-SCATTER is one phase, the ALLGATHER schedule of the
reversed topology, to be run backwards in time (a send of chunk ``c`` on reversed link ``j -> i``
in epoch ``k`` is a partial sum of ``c`` sent on ``i -> j`` in epoch ``E - 1 - k``, reduced on
arrival); ALLREDUCE is that phase followed by a forward ALLGATHER. Each phase is a plain
:class:`~doppler_gym.comm.schedule.Schedule` validated on its own topology; times add up.
``buffer_bytes`` is then the data each GPU contributes (``n_gpus * C`` chunks, the ALLGATHER
output), and the algorithmic bandwidth is ``buffer_bytes / finish_time``. In-network reduction is
not modelled, and a reversed phase's exact timing assumes symmetric links (a switch-to-GPU hop and
its reverse GPU-to-switch hop are charged differently by the epoch model).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from doppler_gym.comm.demand import Demand, canonical_kind, chunk_bytes_for, composition, make_demand
from doppler_gym.comm.epochs import default_multiplier, epoch_duration
from doppler_gym.comm.expanded import network
from doppler_gym.comm.schedule import Schedule, link_timing
from doppler_gym.comm.topology import CommTopology, comm_topology, reverse_topology

METHODS = ("milp", "lp", "rounds", "auto")
DEFAULT_TIME_LIMIT = 120.0  # [s] per solve() call
_UNITS = {"": 1.0, "B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
          "KIB": 2.0**10, "MIB": 2.0**20, "GIB": 2.0**30, "TIB": 2.0**40}
_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*")


@dataclass(frozen=True, eq=False)
class PhasedSchedule:
    """A collective made of several schedules run one after the other (REDUCE-SCATTER, ALLREDUCE).

    Attributes:
        name: the collective (``"reduce-scatter"`` or ``"allreduce"``).
        phases: the phase schedules in time order.
        backwards: per phase, True when it is the ALLGATHER of the reversed topology run backwards
            in time (a reduce phase).
        buffer_bytes: the data each GPU contributes [B] (the ALLGATHER output buffer).
    """

    name: str
    phases: tuple[Schedule, ...]
    backwards: tuple[bool, ...]
    buffer_bytes: float

    @property
    def epochs(self) -> int:
        """Total epochs over the phases."""
        return sum(p.epochs for p in self.phases)

    @property
    def finish_time(self) -> float:
        """Sum of the phases' finish times [s]."""
        return sum(p.finish_time for p in self.phases)

    @property
    def algo_bandwidth(self) -> float:
        """``buffer_bytes / finish_time`` [B/s]."""
        return self.buffer_bytes / self.finish_time if self.finish_time > 0 else math.inf

    @property
    def solver_seconds(self) -> float:
        """Solver wall time over the phases [s]."""
        return sum(p.solver_seconds for p in self.phases)

    @property
    def optimal(self) -> bool:
        """Every phase proven minimal (the sum of phase optima; the joint optimum may be lower)."""
        return all(p.optimal for p in self.phases)

    @property
    def method(self) -> str:
        return self.phases[0].method

    def __repr__(self) -> str:
        return (f"PhasedSchedule(name={self.name!r}, phases={len(self.phases)}, epochs={self.epochs}, "
                f"finish_time={self.finish_time:.4g}, optimal={self.optimal})")


def read_size(text: str) -> float | None:
    """Bytes [B] written in ``text``: ``"1GB"``, ``"64 KB"``, ``"1e9"``, ``"1GiB"`` (B, KB, MB, GB, TB are
    powers of 1000; KiB, MiB, GiB, TiB powers of 1024; any case), or None when ``text`` is not a size.
    The value is not checked (it may be 0)."""
    m = _SIZE.fullmatch(text)
    if not m or m.group(2).upper() not in _UNITS:
        return None
    return float(m.group(1)) * _UNITS[m.group(2).upper()]


def parse_bytes(value: Any) -> float:
    """Bytes from a number or a string such as ``"1GB"``, ``"64 KB"``, ``"1GiB"`` (KB = 1e3, KiB = 1024)."""
    if isinstance(value, bool):
        raise TypeError(f"buffer size must be bytes (number or '64KB'), got {value!r}")
    if isinstance(value, (int, float, np.integer, np.floating)):
        x = float(value)
    elif isinstance(value, str):
        read = read_size(value)
        if read is None:
            raise ValueError(f"buffer size {value!r} not understood: use bytes or a number with B, KB, MB, GB "
                             "(powers of 1000) or KiB, MiB, GiB (powers of 1024), e.g. '1GB'")
        x = read
    else:
        raise TypeError(f"buffer size must be bytes (number or '64KB'), got {type(value).__name__}")
    if not (x > 0 and math.isfinite(x)):
        raise ValueError(f"buffer size must be positive, got {value!r}")
    return x


def solve(topology: Any, collective: str | Mapping, buffer_bytes: float | str, chunks: int = 1,
          epoch: str | float = "fast", method: str = "milp", time_limit: float | None = None, seed: int = 0,
          *, root: int | str | None = None, group: Any = None, multiplier: float | str = 1.0,
          early_delivery: bool = True, objective_budget: float = 0.0, round_epochs: int | None = None,
          round_budget: float = 2.0) -> Schedule | PhasedSchedule:
    """Minimum-epoch schedule of a collective, checked by the validator.

    Args:
        topology: a name (``"dgx1"``, ``"ndv2-2"``, ``"dgx2-2"``, ``"amd-2"``, ``"mesh-4"``), a
            ``CommTopology`` or a ``dg.Topology``.
        collective: ``"allgather"``, ``"alltoall"``, ``"broadcast"``, ``"scatter"``, ``"gather"``,
            ``"reduce-scatter"``, ``"allreduce"`` or ``{source: destinations}``.
        buffer_bytes: per-GPU output buffer [B] (number or ``"1GB"``); see the module docstring for
            the composite collectives.
        chunks: C, chunks per GPU (ALLTOALL: per pair).
        epoch: ``"fast"``, ``"slow"`` or an epoch length in seconds.
        method: ``"milp"``, ``"lp"``, ``"rounds"`` or ``"auto"``.
        time_limit: wall-clock budget for the whole call [s] (default 120).
        seed: solver seed (same seed, same schedule, when no solve hits its limit).
        root: root GPU of broadcast/scatter/gather.
        group: the GPUs taking part (ids or names, at least 2; default all), see
            :func:`~doppler_gym.comm.demand.make_demand`; ``buffer_bytes`` is then per member GPU.
        multiplier: epoch multiplier for ``"fast"``/``"slow"``, or ``"auto"`` for the published
            experiments' choice (:func:`~doppler_gym.comm.epochs.default_multiplier`).
        early_delivery: MILP only: left-shift sends to their earliest valid epochs after the search.
        objective_budget: MILP only: CP-SAT deterministic-time budget for the released early-delivery
            objective at the minimum horizon (0: off; see :mod:`doppler_gym.comm.milp`).
        round_epochs: rounds only: epochs per round (default: TE-CCL's ``E_r = max(15, lag + window)``).
        round_budget: rounds only: CP-SAT deterministic-time budget per round (more: better, slower).

    Returns:
        A :class:`~doppler_gym.comm.schedule.Schedule`, or a :class:`PhasedSchedule` for
        REDUCE-SCATTER/ALLREDUCE.
    """
    started = time.perf_counter()
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"solve: unknown method {method!r}; use one of {', '.join(METHODS)}")
    topo = comm_topology(topology)
    buffer = parse_bytes(buffer_bytes)
    if time_limit is None:
        time_limit = DEFAULT_TIME_LIMIT
    if not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise ValueError(f"solve: time_limit must be positive seconds, got {time_limit!r}")
    if isinstance(multiplier, str):
        if multiplier != "auto":
            raise ValueError(f"solve: multiplier must be a positive number or 'auto', got {multiplier!r}")
        multiplier = default_multiplier(epoch, buffer)
    name, parts = collective_phases(collective)
    phases = []
    for kind, backwards in parts:
        left = time_limit - (time.perf_counter() - started)
        if left <= 0:
            raise RuntimeError(f"solve: time_limit={time_limit} s used up before phase {len(phases) + 1} of "
                               f"{name}; raise time_limit")
        part_topo, demand = phase_demand(topo, kind, backwards, chunks=chunks, root=root, group=group)
        phases.append(solve_demand(part_topo, demand, buffer, epoch=epoch, method=method,
                                   time_limit=left / (len(parts) - len(phases)), seed=seed,
                                   multiplier=float(multiplier), early_delivery=early_delivery,
                                   objective_budget=objective_budget, round_epochs=round_epochs,
                                   round_budget=round_budget))
    if len(parts) == 1 and not parts[0][1]:
        return phases[0]
    return PhasedSchedule(name=name, phases=tuple(phases), backwards=tuple(b for _, b in parts), buffer_bytes=buffer)


def collective_phases(collective: str | Mapping) -> tuple[str, tuple[tuple[Any, bool], ...]]:
    """The collective's name and its phases ``(kind or {source: destinations}, backwards)`` in time order.

    A ``{source: destinations}`` mapping is one forward phase named ``"multicast"``; a name gives
    :func:`~doppler_gym.comm.demand.composition` (REDUCE-SCATTER: one backwards phase, ALLREDUCE: two).
    """
    if isinstance(collective, Mapping):
        return "multicast", ((collective, False),)
    name = canonical_kind(collective)
    return name, composition(name)


def phase_demand(topology: CommTopology, kind: Any, backwards: bool, chunks: int = 1,
                 root: int | str | None = None, group: Any = None) -> tuple[CommTopology, Demand]:
    """The topology a phase runs on (reversed when ``backwards``) and its demand
    (:func:`~doppler_gym.comm.demand.make_demand` of ``kind`` with ``chunks`` per GPU, ``root`` and ``group``)."""
    part_topo = reverse_topology(topology) if backwards else topology
    return part_topo, make_demand(kind, part_topo, chunks=chunks, root=root, group=group)


def phase_timing(topology: CommTopology, demand: Demand, buffer_bytes: float, epoch: str | float = "fast",
                 multiplier: float = 1.0) -> tuple[float, float]:
    """``(chunk_bytes [B], tau [s])`` of one phase: :func:`~doppler_gym.comm.demand.chunk_bytes_for`
    of the per-GPU buffer [B] and :func:`~doppler_gym.comm.epochs.epoch_duration` (the solvers and
    the baselines of ``doppler collective`` both take their epochs from here)."""
    chunk_bytes = chunk_bytes_for(demand, buffer_bytes)
    return chunk_bytes, epoch_duration(topology, chunk_bytes, epoch, multiplier=multiplier)


def solve_demand(topology: CommTopology, demand: Demand, buffer_bytes: float, epoch: str | float = "fast",
                 method: str = "milp", time_limit: float = DEFAULT_TIME_LIMIT, seed: int = 0,
                 multiplier: float = 1.0, early_delivery: bool = True, objective_budget: float = 0.0,
                 round_epochs: int | None = None, round_budget: float = 2.0) -> Schedule:
    """Schedule one demand (see :func:`solve`); validated before it is returned."""
    from doppler_gym.comm.validate import validate

    if method not in METHODS:
        raise ValueError(f"solve_demand: unknown method {method!r}; use one of {', '.join(METHODS)}")
    if demand.n_nodes != topology.n_nodes:
        raise ValueError(f"solve_demand: demand {demand.name!r} is for {demand.n_nodes} nodes but topology "
                         f"{topology.name!r} has {topology.n_nodes}; build the demand on this topology")
    chunk_bytes, tau = phase_timing(topology, demand, buffer_bytes, epoch, multiplier)
    net = network(topology, link_timing(topology, tau, chunk_bytes))
    if method == "auto":
        method = "lp" if int(demand.wants.sum(axis=1).max(initial=0)) <= 1 else "milp"
    if method == "milp":
        from doppler_gym.comm.milp import min_epoch_schedule

        r = min_epoch_schedule(net, demand.source, demand.wants, time_limit=time_limit, seed=seed,
                               early_delivery=early_delivery, objective_budget=objective_budget)
        sends, epochs, optimal, secs = r.sends, r.epochs, r.optimal, r.seconds
    elif method == "lp":
        from doppler_gym.comm.lp import lp_schedule

        r = lp_schedule(net, demand.source, demand.wants, time_limit=time_limit, seed=seed)
        if r.sends is None:
            raise RuntimeError(f"solve: the LP of {demand.name} on {topology.name} is fractional at its minimum "
                               f"horizon {r.epochs} (mean delivery {r.mean_delivery:.2f}) and no integral "
                               "repair was found in time; use method='milp', more chunks or a larger time_limit")
        sends, epochs, secs = r.sends, r.schedule_epochs, r.seconds
        optimal = r.optimal and r.schedule_epochs == r.epochs and _single_destination(demand)
    else:
        from doppler_gym.comm.rounds import rounds_schedule

        r = rounds_schedule(net, demand.source, demand.wants, round_epochs=round_epochs, time_limit=time_limit,
                            seed=seed, round_budget=round_budget)
        sends, epochs, optimal, secs = r.sends, r.epochs, r.optimal, r.seconds
    schedule = Schedule(topology=topology, demand=demand, chunk_bytes=chunk_bytes, tau=tau, epochs=epochs,
                        sends=sends, method=method, solver_seconds=secs, optimal=optimal)
    report = validate(schedule)
    if not report.ok or report.epochs_needed != epochs:
        raise RuntimeError(f"solve: the {method} solver produced an invalid schedule for {demand.name} on "
                           f"{topology.name} (a bug, please report it): epochs {epochs} vs needed "
                           f"{report.epochs_needed}; {'; '.join(report.errors[:5])}")
    return schedule


def _single_destination(demand: Demand) -> bool:
    return bool(np.all(demand.wants.sum(axis=1) <= 1))
