"""Scheduling policies: each orders the active jobs; the engine allocates GPUs in that order.

A scheduler is a small object with

- ``order(view) -> list[int]``: the active jobs (waiting or running; indices into the trace) in
  priority order, from a :class:`JobView` of the state at this event; optionally also
  ``order_array(view) -> (k,) int64 array``, the same order without a Python list, which the engine's
  driver uses when the class that defines ``order`` defines it too (:func:`array_order`: every built-in
  scheduler; a subclass that overrides ``order`` alone is driven by its ``order``);
- ``preemptive``: if true, the engine runs the greedy prefix of the order that fits the cluster and
  suspends the running jobs outside it (a suspension loses no work: the job keeps its progress, as
  in the Tiresias and Gavel simulators); if false, no running job is suspended for another, and
  waiting jobs start, in order, on the GPUs that are free (skipping those that do not fit:
  backfilling, unless ``backfill`` is false: then none starts after the first that does not fit);
- ``share``: if true, waiting single-GPU jobs that do not fit on free GPUs may be packed onto GPUs
  that hold exactly one single-GPU job (two jobs per GPU at most), at the speeds of the interference
  model (:mod:`~doppler_gym.cluster.placement`: Gavel measured no co-location above one GPU);
- ``round_s``: if set, the engine also reschedules every ``round_s`` seconds [s] while some job
  waits (for policies whose priorities change while jobs run, such as LAS), or while any job is active
  when ``rounds_while_all_run`` is true (Gavel's rounds, which also move running jobs between types);
- ``elastic`` (with ``preemptive``): after admitting the greedy prefix at the requested GPU counts,
  the engine hands the spare GPUs out one at a time to the admitted job whose iteration time drops
  most, relatively, with one more GPU (up to its ``max_gpus`` and the spare GPUs of the type it was
  given; times on that type), and resizes running jobs whose count changed (a resize restarts the job
  on new GPUs and pays the run's ``preemption_cost``).

On a cluster of several GPU types the engine, not the order, picks each job's type: the fastest
for the job with room, and a move to a faster type when it pays after the restore (preemptive or
not); see :mod:`~doppler_gym.cluster.simulation`. The estimates a policy reads are type-aware:
``remaining`` is on the job's current type, or its fastest type before its first start.

Policies: ``fifo`` (backfilling by default; ``FIFO(backfill=False)``, by name ``fifo_strict``: strict);
``srtf`` (shortest remaining service, time x GPUs, first; durations known); ``las`` (2D
least attained service: GPUs x time received, no duration knowledge); ``tiresias`` (2D-LAS
discretised into queues by attained-service thresholds, FIFO within a queue, with optional starvation
promotion; Gu et al., NSDI 2019); ``gandiva`` (FIFO plus packing single-GPU jobs onto shared GPUs, and
moving a shared job to free GPUs once there are enough; Xiao et al., OSDI 2018); ``elastic`` (LAS order, spare
GPUs to jobs up to their maximum by marginal speedup: an Optimus-style greedy, not Pollux's goodput
optimisation).
"""

from __future__ import annotations

import bisect
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from doppler_gym.cluster import order_kernels as ok


@dataclass
class JobView:
    """What a scheduler may read at an event (arrays over all jobs of the trace; read-only by convention).

    Shapes: every array is ``(n_jobs,)``.
    """

    now: float  # [s]
    active: list[int]  # waiting or running job indices, arrival order
    arrival: np.ndarray  # float64 [s]
    gpus: np.ndarray  # int64, requested GPUs
    running: np.ndarray  # bool (the engine's live mask, kept at starts and releases)
    attained: np.ndarray  # float64 [GPU s], GPUs x time held so far
    remaining: np.ndarray  # float64 [s], solo time left at the current iteration time (srtf only)
    completion: np.ndarray | None = None  # float64 [s], completion time of the finished jobs, NaN for the others
    # The engine's live state (read-only; copy what you keep past the next ``send``):
    alloc: list[list[int]] | None = None  # GPU ids each job holds ([] unless running)
    occupants: list[list[int]] | None = None  # (n_gpus,) jobs on each GPU (at most 2)
    speed: np.ndarray | None = None  # float64, solo seconds per second of each running job (0 while restoring)
    restarting: np.ndarray | None = None  # bool, jobs in a restart delay after a failure (the engine's live mask)
    active_idx: np.ndarray | None = None  # int64, ``active`` as an array (None: build it from ``active``)
    # True when ``arrival`` is nondecreasing in job index (a JobTrace's order): ties of a key then break by
    # index alone, so the orders below sort one key stably instead of three
    arrival_sorted: bool = False

    def active_array(self) -> np.ndarray:
        """``(k,) int64``: the active jobs, arrival order (``active_idx``, or ``active`` converted)."""
        return self.active_idx if self.active_idx is not None else np.asarray(self.active, dtype=np.int64)


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
    may be packed two to a GPU), ``round_s`` [s] (period of the round-tick events, or None),
    ``rounds_while_all_run`` (tick rounds while any job is active, not only while one waits: for policies
    that move running jobs between GPU types every round, as Gavel's).
    """

    name = "base"
    preemptive = False
    backfill = True
    share = False
    elastic = False
    round_s: float | None = None
    rounds_while_all_run = False

    @abstractmethod
    def order(self, view: JobView) -> list[int]:
        """Indices of ``view.active``'s jobs, first served first."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class FIFO(Scheduler):
    """First in, first out by arrival time; non-preemptive.

    Args:
        backfill: start later jobs on the GPUs the head of the queue cannot use (default True: what
            ``fifo`` always did, and what the validated results and the Gavel comparison's "fifo" rows
            use); False: strict FIFO, no job starts while an earlier one waits (Gavel's ``fifo`` policy
            allocates that way, so its matched-mechanics rows compare against ``FIFO(backfill=False)``).
    """

    name = "fifo"

    def __init__(self, backfill: bool = True) -> None:
        if not isinstance(backfill, bool):
            raise ValueError(f"FIFO: backfill must be True or False, got {backfill!r}")
        self.backfill = backfill

    def order(self, view: JobView) -> list[int]:
        return list(view.active)

    def order_array(self, view: JobView) -> np.ndarray:
        """:meth:`order` as a ``(k,) int64`` array (the engine's fast path: no Python list)."""
        return view.active_array()

    def __repr__(self) -> str:
        return f"FIFO(backfill={self.backfill})"


class SRTF(Scheduler):
    """Shortest remaining service first, preemptive; knows every job's duration.

    Service is 2D, like LAS's: remaining solo time x GPUs (Tiresias' SRSF), so a short job on many
    GPUs does not jump ahead of a slightly longer one on a single GPU.
    """

    name = "srtf"
    preemptive = True

    def order(self, view: JobView) -> list[int]:
        return SortedOrder(self.order_array(view))

    def order_array(self, view: JobView) -> np.ndarray:
        """:meth:`order` as a ``(k,) int64`` array (the engine's fast path: no Python list)."""
        act = view.active_array()
        return _sorted_by(act, view.remaining[act] * view.gpus[act], view)


class LAS(Scheduler):
    """2D least attained service (GPUs x time held), preemptive, rescheduled every ``round_s`` [s]."""

    name = "las"
    preemptive = True

    def __init__(self, round_s: float = 60.0) -> None:
        if not (round_s > 0):
            raise ValueError(f"LAS: round_s must be > 0 [s], got {round_s!r}")
        self.round_s = round_s
        self._sort = HintedSort()

    def order(self, view: JobView) -> list[int]:
        return SortedOrder(self.order_array(view))

    def order_array(self, view: JobView) -> np.ndarray:
        """:meth:`order` as a ``(k,) int64`` array (the engine's fast path: no Python list). With
        ``view.arrival_sorted`` the sort starts from the last call's order (:class:`HintedSort`: the same
        result, in about O(k) when few jobs changed places)."""
        act = view.active_array()
        if view.arrival_sorted:
            return self._sort(act, view.attained)
        return _sorted_by(act, view.attained[act], view)


class Tiresias(Scheduler):
    """Tiresias' discretised 2D-LAS: queue = number of ``thresholds`` [GPU s] of service passed; FIFO within a
    queue; with ``starve_limit``, starvation promotion.

    Promotion (Gu et al., NSDI 2019, section 4.2 and Algorithm 1: a job waiting longer than STARVELIMIT goes
    back to the highest-priority queue): a waiting job outside the first queue whose wait since it last ran
    reaches ``starve_limit`` x the service it has had since it last entered the first queue (GPU s over its
    GPUs, i.e. seconds held) is promoted: that service is reset, so it counts from 0 again. This is the rule
    of the authors' simulator (``solve_starvation``: ``last_pending_time >= executed_time x solve_starvation``),
    where the knob is off (0) unless set; ``None`` here keeps it off, so ``tiresias`` ranks as before. The
    wait is measured at decision points (arrivals, completions, ``round_s`` ticks).

    The scheduler keeps each job's promotion state between calls; it starts afresh when the clock goes back
    (a new run with the same object).

    Args:
        thresholds: increasing queue thresholds [GPU s] (default 1 h and 10 h of one GPU).
        round_s: [s] rescheduling period while jobs wait.
        starve_limit: the STARVELIMIT multiple (> 0), or ``None`` (default): no promotion.
    """

    name = "tiresias"
    preemptive = True

    def __init__(self, thresholds: tuple[float, ...] = (3_600.0, 36_000.0), round_s: float = 60.0,
                 starve_limit: float | None = None) -> None:
        if list(thresholds) != sorted(thresholds) or any(t <= 0 for t in thresholds):
            raise ValueError(f"Tiresias: thresholds must be increasing and > 0 [GPU s], got {thresholds!r}")
        if not (round_s > 0):
            raise ValueError(f"Tiresias: round_s must be > 0 [s], got {round_s!r}")
        if starve_limit is not None and not (isinstance(starve_limit, (int, float)) and starve_limit > 0):
            raise ValueError(f"Tiresias: starve_limit must be None or a number > 0, got {starve_limit!r}")
        self.thresholds = tuple(float(t) for t in thresholds)
        self.round_s = round_s
        self.starve_limit = starve_limit
        self._reset()

    def _reset(self) -> None:
        self._base: dict[int, float] = {}  # [GPU s] attained service when the job last entered the first queue
        self._waiting_since: dict[int, float] = {}  # [s] the last decision it was seen running at (or first waiting)
        self._last_now = -math.inf

    def queue_service(self, view: JobView, j: int) -> float:
        """[GPU s] job ``j``'s service since it last entered the first queue (its attained service without
        promotion)."""
        return float(view.attained[j]) - self._base.get(j, 0.0)

    def order(self, view: JobView) -> list[int]:
        return SortedOrder(self.order_array(view))

    def order_array(self, view: JobView) -> np.ndarray:
        """:meth:`order` as a ``(k,) int64`` array (the engine's fast path: no Python list)."""
        act = view.active_array()
        service = view.attained[act]
        if self.starve_limit is not None:
            self._promote(view)
            service = service - np.array([self._base.get(j, 0.0) for j in view.active])
        queue = np.searchsorted(np.asarray(self.thresholds), service, side="right")  # = bisect_right per job
        if len(self.thresholds) < 127:
            queue = queue.astype(np.int8)  # the same stable order; NumPy sorts 8-bit keys by radix, in O(k)
        return _sorted_by(act, queue, view)

    def _promote(self, view: JobView) -> None:
        if view.now < self._last_now:
            self._reset()
        self._last_now = view.now
        for j in view.active:
            if view.running[j]:  # it runs up to this decision at least (the order may stop it here)
                self._waiting_since[j] = view.now
                continue
            since = self._waiting_since.setdefault(j, view.now)
            service = self.queue_service(view, j)
            held = service / max(int(view.gpus[j]), 1)  # [s] of service at its GPU count
            if bisect.bisect_right(self.thresholds, service) > 0 and view.now - since >= self.starve_limit * held:
                self._base[j] = float(view.attained[j])
                self._waiting_since[j] = view.now

    def __repr__(self) -> str:
        return f"Tiresias(thresholds={self.thresholds}, round_s={self.round_s}, starve_limit={self.starve_limit})"


class Gandiva(Scheduler):
    """FIFO order; no job is suspended for another. A waiting single-GPU job that does not fit on free GPUs
    shares a GPU holding one single-GPU job (where the interference model allows the pair); a job that
    shares moves (migrates, paying ``preemption_cost``) to free GPUs once enough are free."""

    name = "gandiva"
    share = True

    def order(self, view: JobView) -> list[int]:
        return list(view.active)

    def order_array(self, view: JobView) -> np.ndarray:
        """:meth:`order` as a ``(k,) int64`` array (the engine's fast path: no Python list)."""
        return view.active_array()


class Elastic(LAS):
    """LAS order (preemptive, rounds of ``round_s``); admitted jobs grow into the spare GPUs up to their
    ``max_gpus``, one GPU at a time to the largest relative speedup (see the module docstring)."""

    name = "elastic"
    elastic = True


class SortedOrder(list):
    """An order (a ``list`` of job indices) that also carries it as ``array``: ``(k,) int64``, the same
    indices, so the engine need not convert the list back (the two must not be changed apart)."""

    def __init__(self, array: np.ndarray) -> None:
        super().__init__(array.tolist())
        self.array = array


def array_order(scheduler: Scheduler):
    """``scheduler.order_array`` (``view -> (k,) int64`` order) when it gives the same order as
    ``scheduler.order`` (both defined by the same class of its MRO: a subclass overriding only ``order``
    does not get the array path), else ``None``. The engine's driver allocates by the array when it can."""
    mro = type(scheduler).__mro__
    owner_order = next((c for c in mro if "order" in c.__dict__), None)
    owner_array = next((c for c in mro if "order_array" in c.__dict__), None)
    return scheduler.order_array if owner_array is not None and owner_array is owner_order else None


class HintedSort:
    """``jobs`` sorted by (``key[job]``, job index), starting from the order of the last call.

    Between two decisions of LAS few jobs change places (waiting jobs' service is fixed, running jobs'
    grows a little), so the last order, less the jobs gone and followed by the new ones, is nearly sorted
    and NumPy's stable sort (timsort) sorts it in about O(k). The result does not depend on that start: a
    stable sort orders equal keys as they come, so the equal keys are checked to be in index order and, if
    any pair is not, the jobs are sorted from scratch (the definition). State: the last order and an
    ``(n,) bool`` scratch mask, renewed when the number of jobs changes.
    """

    def __init__(self) -> None:
        self._last = np.empty(0, dtype=np.int64)  # the last call's order
        self._mask = np.zeros(0, dtype=bool)  # (n,) scratch, all False between calls

    def __call__(self, jobs: np.ndarray, key: np.ndarray) -> np.ndarray:
        """``jobs`` (``(k,) int64``, ascending) sorted by ``key`` (``(n,)``, one value per job index), ties by
        index: ``jobs[np.argsort(key[jobs], kind="stable")]``, as a ``(k,) int64`` array."""
        if self._mask.size != key.size:
            self._mask, self._last = np.zeros(key.size, dtype=bool), np.empty(0, dtype=np.int64)
        start, keys = ok.start_from_last(self._last, jobs, self._mask, key)  # the last order less the gone, + new
        out, in_order = ok.gather_sorted(start, keys, np.argsort(keys, kind="stable"))
        if not in_order:  # equal keys out of index order: sort from scratch
            out = jobs[np.argsort(key[jobs], kind="stable")]
        self._last = out
        return out


def _sorted_by(jobs: np.ndarray, key: np.ndarray, view: JobView) -> np.ndarray:
    """``jobs`` (``(k,)``, ascending indices, as ``view.active_array()``) sorted by (``key``, arrival, job index):
    the orders of SRTF, LAS and Tiresias, as a ``(k,) int64`` array. With ``view.arrival_sorted`` that is a
    stable sort of ``key`` alone (equal keys keep index order, which is then arrival order), else one
    ``np.lexsort`` of the three."""
    if view.arrival_sorted:
        return jobs[np.argsort(key, kind="stable")]
    return jobs[np.lexsort((jobs, view.arrival[jobs], key))]


_REGISTRY: dict[str, type[Scheduler]] = {c.name: c for c in (FIFO, SRTF, LAS, Tiresias, Gandiva, Elastic)}
# names that are a registered scheduler with fixed options: name -> (registered name, options)
_VARIANTS: dict[str, tuple[str, dict[str, object]]] = {"fifo_strict": ("fifo", {"backfill": False})}


def names() -> tuple[str, ...]:
    """Scheduler names :func:`make` takes (``fifo_strict``: ``FIFO(backfill=False)``)."""
    return (*_REGISTRY, *_VARIANTS)


def make(spec: str | Scheduler, **options: object) -> Scheduler:
    """A scheduler by name (``"fifo"``, ``"fifo_strict"``: FIFO without backfilling, ``"srtf"``, ``"las"``,
    ``"tiresias"``, ``"gandiva"``, ``"elastic"``) or as given; ``options`` go to its constructor."""
    if isinstance(spec, Scheduler):
        return spec
    key = str(spec).strip().lower()
    if key in _VARIANTS:
        key, fixed = _VARIANTS[key]
        options = {**options, **fixed}
    if key not in _REGISTRY:
        raise ValueError(f"unknown scheduler {spec!r}; valid names: {', '.join(names())}")
    return _REGISTRY[key](**options)  # type: ignore[arg-type]
