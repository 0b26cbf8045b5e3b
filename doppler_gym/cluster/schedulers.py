"""Scheduling policies: each orders the active jobs; the engine allocates GPUs in that order.

A scheduler is a small object with

- ``order(view) -> list[int]``: the active jobs (waiting or running; indices into the trace) in
  priority order, from a :class:`JobView` of the state at this event;
- ``preemptive``: if true, the engine runs the greedy prefix of the order that fits the cluster and
  suspends the running jobs outside it (a suspension loses no work: the job keeps its progress, as
  in the Tiresias and Gavel simulators); if false, running jobs are never stopped and waiting jobs
  start, in order, on the GPUs that are free (skipping those that do not fit: backfilling);
- ``share``: if true, waiting jobs that do not fit on free GPUs may be packed onto GPUs that hold
  exactly one job (two jobs per GPU at most), at the speeds of the interference model;
- ``round_s``: if set, the engine also reschedules every ``round_s`` seconds [s] while some job
  waits (for policies whose priorities change while jobs run, such as LAS);
- ``elastic`` (with ``preemptive``): after admitting the greedy prefix at the requested GPU counts,
  the engine hands the spare GPUs out one at a time to the admitted job whose iteration time drops
  most, relatively, with one more GPU (up to its ``max_gpus``; times on the first node's GPU type),
  and resizes running jobs whose count changed (a resize restarts the job on new GPUs and pays the
  run's ``preemption_cost``).

Policies: ``fifo``; ``srtf`` (shortest remaining service, time x GPUs, first; durations known); ``las`` (2D
least attained service: GPUs x time received, no duration knowledge); ``tiresias`` (2D-LAS
discretised into queues by attained-service thresholds, FIFO within a queue; Gu et al., NSDI 2019);
``gandiva`` (FIFO plus packing onto shared GPUs; Xiao et al., OSDI 2018); ``elastic`` (LAS order, spare
GPUs to jobs up to their maximum by marginal speedup: an Optimus-style greedy, not Pollux's goodput
optimisation).
"""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np


@dataclass
class JobView:
    """What a scheduler may read at an event (arrays over all jobs of the trace; read-only by convention).

    Shapes: every array is ``(n_jobs,)``.
    """

    now: float  # [s]
    active: list[int]  # waiting or running job indices, arrival order
    arrival: np.ndarray  # float64 [s]
    gpus: np.ndarray  # int64, requested GPUs
    running: np.ndarray  # bool
    attained: np.ndarray  # float64 [GPU s], GPUs x time held so far
    remaining: np.ndarray  # float64 [s], solo time left at the current iteration time (srtf only)
    completion: np.ndarray | None = None  # float64 [s], completion time of the finished jobs, NaN for the others
    # The engine's live state (read-only; copy what you keep past the next ``send``):
    alloc: list[list[int]] | None = None  # GPU ids each job holds ([] unless running)
    occupants: list[list[int]] | None = None  # (n_gpus,) jobs on each GPU (at most 2)
    speed: np.ndarray | None = None  # float64, solo seconds per second of each running job (0 while restoring)
    restarting: np.ndarray | None = None  # bool, jobs in a restart delay after a failure


@dataclass(frozen=True)
class Allocation:
    """An explicit decision for :meth:`doppler_gym.cluster.simulation.ClusterSimulation.apply_allocation`: the
    GPUs of every job that runs from this event on.

    ``gpus``: ``{job index (trace order): GPU ids}``; a running job left out is preempted (suspended,
    keeping its progress), one given other GPUs is migrated, a waiting job listed starts. A GPU may
    hold two jobs if the interference model lets them share; a job gets between its ``gpus`` and
    ``max_gpus`` GPUs.
    """

    gpus: dict[int, tuple[int, ...]]


class Scheduler(ABC):
    """A job scheduler: at each event, the order in which active jobs are offered GPUs.

    Class attributes: ``preemptive`` (running jobs may be stopped for earlier ones), ``share`` (jobs
    may be packed two to a GPU), ``round_s`` [s] (period of the round-tick events, or None).
    """

    name = "base"
    preemptive = False
    share = False
    elastic = False
    round_s: float | None = None

    @abstractmethod
    def order(self, view: JobView) -> list[int]:
        """Indices of ``view.active``'s jobs, first served first."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class FIFO(Scheduler):
    """First in, first out by arrival time; non-preemptive, with backfilling."""

    name = "fifo"

    def order(self, view: JobView) -> list[int]:
        return list(view.active)


class SRTF(Scheduler):
    """Shortest remaining service first, preemptive; knows every job's duration.

    Service is 2D, like LAS's: remaining solo time x GPUs (Tiresias' SRSF), so a short job on many
    GPUs does not jump ahead of a slightly longer one on a single GPU.
    """

    name = "srtf"
    preemptive = True

    def order(self, view: JobView) -> list[int]:
        return sorted(view.active, key=lambda j: (view.remaining[j] * view.gpus[j], view.arrival[j], j))


class LAS(Scheduler):
    """2D least attained service (GPUs x time held), preemptive, rescheduled every ``round_s`` [s]."""

    name = "las"
    preemptive = True

    def __init__(self, round_s: float = 60.0) -> None:
        if not (round_s > 0):
            raise ValueError(f"LAS: round_s must be > 0 [s], got {round_s!r}")
        self.round_s = round_s

    def order(self, view: JobView) -> list[int]:
        return sorted(view.active, key=lambda j: (view.attained[j], view.arrival[j], j))


class Tiresias(Scheduler):
    """Tiresias' discretised 2D-LAS: queue = number of ``thresholds`` [GPU s] passed; FIFO within a queue."""

    name = "tiresias"
    preemptive = True

    def __init__(self, thresholds: tuple[float, ...] = (3_600.0, 36_000.0), round_s: float = 60.0) -> None:
        if list(thresholds) != sorted(thresholds) or any(t <= 0 for t in thresholds):
            raise ValueError(f"Tiresias: thresholds must be increasing and > 0 [GPU s], got {thresholds!r}")
        if not (round_s > 0):
            raise ValueError(f"Tiresias: round_s must be > 0 [s], got {round_s!r}")
        self.thresholds = tuple(float(t) for t in thresholds)
        self.round_s = round_s

    def order(self, view: JobView) -> list[int]:
        return sorted(view.active, key=lambda j: (bisect.bisect_right(self.thresholds, view.attained[j]),
                                                  view.arrival[j], j))


class Gandiva(Scheduler):
    """FIFO order, non-preemptive; jobs that do not fit on free GPUs are packed onto GPUs holding one job."""

    name = "gandiva"
    share = True

    def order(self, view: JobView) -> list[int]:
        return list(view.active)


class Elastic(LAS):
    """LAS order (preemptive, rounds of ``round_s``); admitted jobs grow into the spare GPUs up to their
    ``max_gpus``, one GPU at a time to the largest relative speedup (see the module docstring)."""

    name = "elastic"
    elastic = True


_REGISTRY: dict[str, type[Scheduler]] = {c.name: c for c in (FIFO, SRTF, LAS, Tiresias, Gandiva, Elastic)}


def names() -> tuple[str, ...]:
    """Registered scheduler names."""
    return tuple(_REGISTRY)


def make(spec: str | Scheduler, **options: object) -> Scheduler:
    """A scheduler by name (``"fifo"``, ``"srtf"``, ``"las"``, ``"tiresias"``, ``"gandiva"``, ``"elastic"``)
    or as given."""
    if isinstance(spec, Scheduler):
        return spec
    key = str(spec).strip().lower()
    if key not in _REGISTRY:
        raise ValueError(f"unknown scheduler {spec!r}; valid names: {', '.join(names())}")
    return _REGISTRY[key](**options)  # type: ignore[arg-type]
