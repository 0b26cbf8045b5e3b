"""The event-driven simulation of a trace of jobs on a cluster, as an object driven one decision at a time.

Events (:mod:`doppler_gym.cluster.events`): job arrivals, completions, GPU failures, restarts (end of
a restart delay), slowdowns and, for schedulers with ``round_s``, round ticks (every ``round_s``
while some job waits: with none waiting, a new order could not change the allocation). Between two
events every running job advances along its work timeline (:mod:`doppler_gym.cluster.failures`) at
its speed (1 alone, the interference fraction when it shares a GPU). An event that changes the set of
jobs or GPUs is a decision point: the caller then either gives an order, which the simulation
allocates GPUs by under the scheduler's flags (see :mod:`doppler_gym.cluster.schedulers` for the
rules), or an :class:`~doppler_gym.cluster.schedulers.Allocation` it applies as given (the env).
A job started again after a preemption, a migration or an elastic resize first restores its checkpoint
for ``preemption_cost`` seconds, holding its GPUs without progress.

Stragglers: a GPU of the failure model's slow periods runs every job on it at ``straggler_speed``
of its pace (a synchronous job at its slowest GPU's pace).

Bandwidth: with a finite ``Cluster.node_uplink_bandwidth`` or ``rack_uplink_bandwidth``, jobs spanning
nodes (racks) share each node's (rack's) uplink max-min fairly in their pace
(:mod:`doppler_gym.cluster.bandwidth`); a job runs at the lower of that share and its
sharing/straggler speed. The model is conservative: it treats a job's cross-node traffic as on its
critical path.

Runs that cannot finish: with failures, a job whose stretch of work between checkpoints expects more
than :data:`~doppler_gym.cluster.failures.MAX_RESTARTS_PER_STRETCH` restarts is refused before the run
(``ValueError``, naming the job and what to change: :mod:`doppler_gym.cluster.run_checks`). During the
run, a :class:`ClusterRunError` ends it when the float64 clock at ``now`` is too coarse to resolve a
job's iterations (times given in nanoseconds by mistake), when the clock stops advancing for
:data:`STUCK_STEPS` loop steps, when no event is left while jobs wait, or, as a last resort, past
``max_events`` loop steps. A job whose completion is closer than the clock's resolution at ``now``
completes now (a rounding remainder).

Placement (type-aware): a job's GPUs are of one type. Each job ranks the cluster's GPU types by its
iteration time at its GPU count (:meth:`ClusterSimulation.type_ranking`: fastest first, ties by name,
types where it cannot run, time ``inf``, left out); a start takes the fastest type with enough room
(free GPUs; for a preemptive scheduler, GPUs not given to an earlier job of the order), packed on
the fewest nodes of that type (:func:`~doppler_gym.cluster.placement.pack`). Only a job that needs
more GPUs than any one type it can run on has spans types (the fastest first), at its slowest GPU's
pace; no other job spans types unless an :class:`~doppler_gym.cluster.schedulers.Allocation`
puts it there. At each decision a running job moves to a faster type with room when that pays after
the restore: its remaining solo time there plus ``preemption_cost`` is below its remaining time where
it runs (:meth:`ClusterSimulation.migration_pays`). Ranking by type, not node, makes a run independent
of the order the nodes are listed in (up to which of two equal nodes a job lands on). On a cluster of
one GPU type none of this changes a decision. Who holds each GPU, and the free GPUs indexed so that a
start packs without scanning the cluster, are kept by a :class:`~doppler_gym.cluster.gpu_pool.GpuPool`;
an explicit :class:`~doppler_gym.cluster.schedulers.Allocation` is checked by
:func:`~doppler_gym.cluster.allocation_check.check_allocation` before it is applied.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from itertools import repeat

import numpy as np

from doppler_gym.cluster import bandwidth as bw
from doppler_gym.cluster import failures as fl
from doppler_gym.cluster import placement as pl
from doppler_gym.cluster import step_kernels as sk
from doppler_gym.cluster.admission import greedy_changes, grow
from doppler_gym.cluster.allocation_check import check_allocation
from doppler_gym.cluster.events import ARRIVAL, FAILURE, RESTART, RESUME, ROUND, SLOW_END, SLOW_START, EventQueue
from doppler_gym.cluster.gpu_pool import GpuPool
from doppler_gym.cluster.gpu_pool import sorted_remove as _sorted_remove  # noqa: F401 (re-exported: tests use it)
from doppler_gym.cluster.interference import GavelInterference
from doppler_gym.cluster.live_view import LiveJobView
from doppler_gym.cluster.metrics import ClusterResult, summarise
from doppler_gym.cluster.run_checks import check_can_finish, check_inputs
from doppler_gym.cluster.running import RunningBlock
from doppler_gym.cluster.schedulers import Allocation, JobView, Scheduler, SortedOrder
from doppler_gym.cluster.timing import IterationTimes
from doppler_gym.cluster.types import Cluster, JobTrace

SPAN = "*span*"  # the "type" of a job that needs more GPUs than any one type it can run on has: it spans types

# a job's status (ClusterSimulation.status)
WAITING, RUNNING, RESTARTING, DONE, FUTURE = 0, 1, 2, 3, 4
STUCK_STEPS = 10_000  # loop steps without the clock advancing before the run is declared stuck
RESOLUTION = 1e-3  # the float64 clock at `now` must resolve this fraction of a running job's iteration time


def _set_items(target: list, keys: list[int], values: Iterable) -> None:
    """``target[k] = v`` for each pair of ``keys`` and ``values`` (in order), in a C-level loop (no Python loop
    body per item: the batched starts and preemptions set thousands per decision)."""
    deque(map(target.__setitem__, keys, values), maxlen=0)


class ClusterRunError(RuntimeError):
    """A cluster simulation that cannot go on: its clock cannot resolve a job's iterations or has stopped
    advancing, no event is left while jobs wait, or it ran past ``max_events`` loop steps."""


class ClusterSimulation:
    """A trace of jobs on a cluster, advanced from one decision point to the next.

    Drive it as::

        view = sim.run_until_decision()          # the JobView at the first decision point
        while view is not None:
            sim.allocate_in_order(order)         # or sim.apply_allocation(Allocation(...))
            view = sim.run_until_decision()
        result = sim.result()

    :func:`doppler_gym.cluster.engine.simulate_cluster` takes each order from ``scheduler.order``;
    ``Doppler-Cluster-v0`` sends the agent's :class:`Allocation`.

    A policy that allocates by GPU type reads :meth:`iteration_time` (``inf`` where a job cannot run),
    :meth:`type_ranking` (the types a job can run on, fastest first), ``free_by_type`` and
    ``type_capacity``, asks :meth:`free_gpus` for ``k`` free GPUs of a type (packed), and
    :meth:`migration_pays` whether moving a running job to a type pays after the restore; it then sends
    an :class:`Allocation` (which may put a job on GPUs of several types: it then runs at the slowest).

    Args:
        trace, cluster: the jobs and the cluster (every job is checked against the cluster here:
            ``ValueError`` before anything runs).
        scheduler: its flags (``preemptive``, ``share``, ``elastic``) rule :meth:`allocate_in_order`;
            its ``round_s`` [s] sets the round ticks and its ``name`` labels the result.
        seed: seeds the failure draws and, in a stream of their own, the straggler draws.
        failures: the :class:`~doppler_gym.cluster.failures.FailureModel`.
        interference: ``(type_a, type_b, gpu_type) -> (f_a, f_b) | None`` (default :class:`GavelInterference`).
        times: the :class:`IterationTimes` (default: a fresh one for ``cluster``).
        checkpoints: ``"fixed"`` (each job's ``checkpoint_every``) or ``"young"``.
        max_events: the run raises :class:`ClusterRunError` past this many loop steps (a last resort:
            impossible failure settings are refused before the run).
        preemption_cost: [s] a job preempted or moved to other GPUs (migrated) while running spends
            this long restoring its checkpoint when it starts again, holding its GPUs without progress.

    The state below is read-only outside the class (a :class:`JobView` hands out the live arrays).
    Shapes: ``n`` jobs (trace order), ``G`` GPUs (node by node).

    Attributes:
        now: [s] the simulated time.
        status: ``(n,) int8``: ``FUTURE``, ``WAITING``, ``RUNNING``, ``RESTARTING`` or ``DONE``.
        arrival: ``(n,) float64`` [s]; requested: ``(n,) int64`` [GPUs] each job asks for.
        progress, work: ``(n,) float64`` [solo s]: done so far along the work timeline, and in total
            at the current iteration time.
        iter_time: ``(n,) float64`` [s] per iteration on the current (or last) allocation; NaN before a start.
        speed: ``(n,) float64`` solo seconds per second of each running job (0 restoring or stopped).
        solo_total: ``(n,) float64`` [solo s] on the requested GPUs of the first node's type (set at arrival).
        checkpoint_every: ``n`` ints or None [iterations]: each job's own, or Young's (set at its first start).
        attained: ``(n,) float64`` [GPU s] held; held: ``(n,) float64`` [s] wall time holding GPUs.
        first_start, completion: ``(n,) float64`` [s], NaN until they happen.
        interruptions: ``(n,) int64`` failures that stopped the job; lost: ``(n,) float64`` [solo s] rolled back.
        gpus_held: ``(n,) int64`` GPUs each job holds now.
        suspended: ``(n,) bool``: preempted or migrated while running (its next start pays the restore).
        stall_end: ``(n,) float64`` [s] end of the job's current checkpoint restore.
        cross_bytes: ``(n,) float64`` [B] per iteration crossing between the job's nodes (0 on one node).
        alloc: ``n`` lists of the GPU ids each job holds; occupants: ``G`` lists of the jobs on each GPU (<= 2).
        gpu_slow: ``(G,) bool`` GPUs in a slow period.
        pool: the :class:`~doppler_gym.cluster.gpu_pool.GpuPool`; ``occupants``, ``free_by_type``, ``n_busy``,
            ``gpu_node`` (``(G,) int64``), ``gpu_type`` (``G`` names) and ``node_type`` (per node) are its.
        gpu_types: the cluster's GPU types, sorted; type_capacity: ``{type: GPUs}``; free_by_type:
            ``{type: free GPUs now}``; job_gpu_type: ``n`` entries, the type of the GPUs each job holds
            (``None`` when it holds none or spans types).
        n_busy: GPUs holding at least one job; n_done: finished jobs.
        busy_gpu_s: [GPU s] with at least one job; work_gpu_s: [GPU s] solo-equivalent work delivered.
        util_t, util_v: [s] / [GPUs]: the number of busy GPUs from each time on (a step function).
    """

    def __init__(self, trace: JobTrace, cluster: Cluster, scheduler: Scheduler, *, seed: int,
                 failures: fl.FailureModel, interference=None, times: IterationTimes | None = None,
                 checkpoints: str = "fixed", max_events: int = 10_000_000, preemption_cost: float = 0.0) -> None:
        self._rng_failures = np.random.default_rng(seed)
        self.interference = interference if interference is not None else GavelInterference()
        self.times = times if times is not None else IterationTimes(cluster)
        check_inputs(trace, cluster, checkpoints, preemption_cost, self.times)
        check_can_finish(trace, cluster, self.times, failures, checkpoints)
        self.trace, self.cluster, self.scheduler, self.seed = trace, cluster, scheduler, seed
        self.failures, self.checkpoints = failures, checkpoints
        self.max_events, self.preemption_cost = max_events, preemption_cost
        self.jobs = trace.jobs
        self.n_jobs = n = len(self.jobs)
        self.n_gpus = n_gpus = cluster.n_gpus
        self._init_cluster(cluster)
        self._init_jobs()
        self.gpu_slow = np.zeros(n_gpus, dtype=bool)
        self.busy_gpu_s = 0.0
        self.work_gpu_s = 0.0
        self.util_t: list[float] = [0.0]
        self.util_v: list[int] = [0]
        self.now = 0.0
        self.n_done = 0
        self.n_events = 0
        self._steps_at_now = 0  # loop steps since the clock last advanced
        self._pending: JobView | None = None  # the view of the decision point awaiting a decision
        self._round_pending = False  # a round tick is queued (ticks run only while some job waits)
        self._events = EventQueue()
        for i in range(n):
            self._events.push(self.arrival[i], ARRIVAL, i)
        self._failure_rate = n_gpus / failures.gpu_mtbf  # [1/s], whole cluster
        if self._failure_rate > 0:
            self._events.push(float(self._rng_failures.exponential(1.0 / self._failure_rate)), FAILURE)
        # Stragglers: slowdown onsets at rate 1/straggler_mtbs per GPU, ignored on a GPU already slow, so
        # each GPU alternates Exp(straggler_mtbs) healthy and Exp(straggler_duration) slow periods.
        self._rng_slow = np.random.default_rng([seed, 1])  # its own stream: failures draw the same with or without it
        self._slow_rate = n_gpus / failures.straggler_mtbs  # [1/s], whole cluster
        if self._slow_rate > 0:
            self._events.push(float(self._rng_slow.exponential(1.0 / self._slow_rate)), SLOW_START)
        # speeds change beyond starts and stops only with sharing, stragglers, uplinks or restores
        self._variable_speed = (scheduler.share or self._slow_rate > 0 or bool(self.link_capacity)
                                or preemption_cost > 0)

    def _init_cluster(self, cluster: Cluster) -> None:
        """The GPU pool (the GPUs' nodes and types, who holds them), and the capacities of the finite uplinks."""
        self.pool = pool = GpuPool(cluster)  # who holds each GPU, the free ones indexed (kept by _start, _release)
        # the pool's read-only geometry and live state, under the names the class docstring gives
        self.gpu_node, self.gpu_type, self.node_type = pool.gpu_node, pool.gpu_type, pool.node_type
        self.gpu_types, self.type_capacity = pool.gpu_types, pool.type_capacity
        self.free_by_type = pool.free_by_type  # (updated in place by the pool)
        self._one_type = frozenset(self.gpu_types) if len(self.gpu_types) == 1 else None  # every job's GPU types
        self.node_rack = np.asarray(cluster.node_rack, dtype=np.int64)  # (n_nodes,)
        capacity: dict[tuple[str, int], float] = {}  # [B/s] of the finite shared links
        if math.isfinite(cluster.node_uplink_bandwidth):
            capacity.update({("node", k): cluster.node_uplink_bandwidth for k in range(len(cluster.nodes))})
        if math.isfinite(cluster.rack_uplink_bandwidth):
            capacity.update({("rack", r): cluster.rack_uplink_bandwidth for r in sorted(set(cluster.node_rack))})
        self.link_capacity = capacity

    def _init_jobs(self) -> None:
        """Every job in the future, holding nothing (the arrays of the class docstring)."""
        jobs, n = self.jobs, self.n_jobs
        self.arrival = np.array([j.arrival for j in jobs], dtype=np.float64)
        self.requested = np.array([j.gpus for j in jobs], dtype=np.int64)
        self._arrival_sorted = bool(np.all(np.diff(self.arrival) >= 0))  # (a JobTrace's order: always)
        self._need = self.requested.tolist()  # the same as Python ints, for the loops over an order
        self.job_types = [j.job_type for j in jobs]
        self.status = np.full(n, FUTURE, dtype=np.int8)
        self.progress = np.zeros(n)
        self.work = np.zeros(n)
        self.iter_time = np.full(n, np.nan)
        self.speed = np.zeros(n)
        self.solo_total = np.zeros(n)
        self.checkpoint_every: list[int | None] = [j.checkpoint_every for j in jobs]
        self.attained = np.zeros(n)
        self.held = np.zeros(n)
        self.first_start = np.full(n, np.nan)
        self.completion = np.full(n, np.nan)
        self.interruptions = np.zeros(n, dtype=np.int64)
        self.lost = np.zeros(n)
        self.gpus_held = np.zeros(n, dtype=np.int64)
        self.suspended = np.zeros(n, dtype=bool)
        self.stall_end = np.zeros(n)
        self.cross_bytes = np.zeros(n)
        self.alloc: list[list[int]] = [[] for _ in range(n)]
        self._remaining = np.zeros(n)  # [solo s] the JobView's remaining (0 before arrival and once done)
        self._block: RunningBlock | None = None  # cache of _running_block(): dropped at every start and release
        # live masks of the JobView (kept by _start/_release and _interrupt/RESTART, not rebuilt per event)
        self._running_mask = np.zeros(n, dtype=bool)  # (n,) status == RUNNING
        self._restarting_mask = np.zeros(n, dtype=bool)  # (n,) status == RESTARTING
        self._admitted = np.zeros(n, dtype=bool)  # (n,) scratch of _admit_prefix_one_type, all False between calls
        # the active (waiting or running) jobs at the last view, ascending, and the jobs whose status entered or
        # left {WAITING, RUNNING} since (arrival, completion, failure, restart): _active_jobs updates the one
        # from the other instead of scanning the jobs
        self._active = np.empty(0, dtype=np.int64)
        self._active_changed: list[int] = []
        self._active_scratch = np.zeros(n, dtype=bool)  # (n,) scratch of sk.update_active, all False between calls
        self._n_arrived = 0  # arrivals handled: with arrival-sorted jobs, exactly jobs [0, _n_arrived) arrived
        self._first_undone = 0  # no job below this index is active (every one is DONE)
        self._n_active = 0  # active (waiting or running) jobs at the last decision point's view
        self._pace_dirty: set[int] = set()  # running jobs whose GPU pace may have changed since the last refresh
        self.job_gpu_type: list[str | None] = [None] * n
        # job -> (GPUs, their types, iter_time, work, cross-node bytes) of its last start (_set_iteration_time)
        self._timeline: dict[int, tuple[int, frozenset[str], float, float, float]] = {}
        # the same GPUs and cross-node bytes as arrays (0 GPUs: no start yet), for the batched starts on one type
        self._last_gpus = np.zeros(n, dtype=np.int64)  # (n,)
        self._last_cross = np.zeros(n)  # (n,) [B]
        # (job, GPUs) -> types, fastest first; (job, -GPUs) -> GPUs of the largest of those types
        self._ranking: dict[tuple[int, int], tuple[str, ...] | int] = {}

    # -- driving it --------------------------------------------------------------------------------
    def run_until_decision(self) -> JobView | None:
        """Run the events up to the next decision point and return its :class:`JobView` (live arrays,
        read-only; copy what you keep past the next decision), or ``None`` once every job is done.

        Raises ``RuntimeError`` while a decision is pending, and :class:`ClusterRunError` when the run
        cannot go on (see the module docstring).
        """
        self._require_decision(False, "run_until_decision")
        while self.n_done < self.n_jobs:
            self.n_events += 1
            if self.n_events > self.max_events:
                raise ClusterRunError(self._over_cap_message())
            block = self._running_block()
            t_next = self._next_event_time(block)
            self._count_steps_at_now(t_next)
            progress = self._advance_to(t_next, block)
            completed = self._complete_finished(block, progress)
            scheduling, resumed = self._handle_due_events()
            if resumed and not (completed or scheduling):
                self._refresh_speeds()
            if completed or scheduling:
                view = self._view()
                if view is not None:
                    self._pending = view
                    return view
                self._close_event()
        return None

    def allocate_in_order(self, order: list[int] | np.ndarray) -> None:
        """Decide the pending decision point by a priority order of the active jobs (a list, or a ``(k,)`` int
        array: a scheduler's ``order_array``), under the scheduler's flags (the rules of
        :mod:`doppler_gym.cluster.schedulers`)."""
        self._require_decision(True, "allocate_in_order")
        if isinstance(order, np.ndarray):
            array = order.astype(np.int64, copy=False)
            order = None if self.scheduler.preemptive and self._one_type_admission() else array.tolist()
        else:
            array = order.array if isinstance(order, SortedOrder) and len(order.array) == len(order) else None
            order = list(order)
        if self.scheduler.preemptive:
            self._admit_prefix(order, array)
        else:
            waiting = self._backfill(order)
            if self.scheduler.share:
                self._migrate_off_shared(order)
                self._start_shared(waiting)
        if self._variable_speed:
            self._refresh_speeds()
        self._close_event()

    def apply_allocation(self, plan: Allocation) -> None:
        """Decide the pending decision point by running exactly the jobs of ``plan`` on its GPUs:
        preempt or move the others, then start. An invalid plan raises ``ValueError`` and changes
        nothing (the decision stays pending)."""
        self._require_decision(True, "apply_allocation")
        want = check_allocation(plan, self, self.status <= RUNNING)  # (WAITING or RUNNING: active)
        for i in self._running_jobs().tolist():
            if want.get(i) != sorted(self.alloc[i]):
                self._preempt(i)
        for i, gpus in want.items():
            if self.status[i] == WAITING:
                self._start(i, gpus)
        self._refresh_speeds()
        self._close_event()

    def result(self) -> ClusterResult:
        """The :class:`ClusterResult` of the finished run (``RuntimeError`` while jobs are unfinished)."""
        if self.n_done < self.n_jobs:
            raise RuntimeError(f"the cluster simulation has {self.n_jobs - self.n_done} unfinished jobs at "
                               f"t={self.now:.1f} s: call run_until_decision() until it returns None")
        return summarise(trace=self.trace, cluster=self.cluster, scheduler=self.scheduler.name, seed=self.seed,
                         completion=self.completion, first_start=self.first_start, iter_time=self.iter_time,
                         held=self.held, interruptions=self.interruptions, lost=self.lost,
                         busy_gpu_s=self.busy_gpu_s, work_gpu_s=self.work_gpu_s, util_t=np.array(self.util_t),
                         util_v=np.array(self.util_v), every=self.checkpoint_every)

    @property
    def occupants(self) -> list[list[int]]:
        """``G`` lists of the jobs on each GPU (<= 2): the pool's (:attr:`GpuPool.occupants
        <doppler_gym.cluster.gpu_pool.GpuPool.occupants>`, brought up to date when read)."""
        return self.pool.occupants

    @property
    def n_busy(self) -> int:
        """GPUs holding at least one job."""
        return self.pool.n_busy

    # -- GPU types (public: for policies that allocate by type) ------------------------------------------
    def iteration_time(self, i: int, gpu_type: str, k: int | None = None) -> float:
        """[s] job ``i``'s iteration time on ``k`` GPUs (default: its request) of ``gpu_type``; ``inf`` where it
        cannot run (its profile's ``inf`` or missing type: Gavel's zero throughputs)."""
        job = self.jobs[i]
        return float(self.times(job, gpu_type, int(self.requested[i]) if k is None else int(k)))

    def type_ranking(self, i: int, k: int | None = None) -> tuple[str, ...]:
        """The cluster's GPU types job ``i`` can run on at ``k`` GPUs (default: its request), fastest first
        (ties by name); types where its iteration time is ``inf`` are left out. Cached per job and count."""
        k = int(self.requested[i]) if k is None else int(k)
        key = (i, k)
        ranked = self._ranking.get(key)
        if ranked is None:
            t = {g: self.iteration_time(i, g, k) for g in self.gpu_types}
            ranked = tuple(sorted((g for g in self.gpu_types if math.isfinite(t[g])), key=lambda g: (t[g], g)))
            self._ranking[key] = ranked
        return ranked

    def free_gpus(self, k: int, gpu_type: str | None = None) -> list[int] | None:
        """``k`` free GPUs of ``gpu_type`` packed on the fewest nodes of that type, or ``None`` if fewer are free;
        ``gpu_type=None``: of any type (:meth:`GpuPool.free_gpus <doppler_gym.cluster.gpu_pool.GpuPool.free_gpus>`)."""
        return self.pool.free_gpus(k, gpu_type)

    def migration_pays(self, i: int, gpu_type: str, k: int | None = None) -> bool:
        """Whether running job ``i`` finishes sooner moving to ``k`` GPUs (default: the GPUs it holds) of
        ``gpu_type``: its remaining solo time there plus ``preemption_cost`` is below its remaining solo time
        (and restore) where it runs; its progress carries over (iterations done and checkpoint phase)."""
        job, every = self.jobs[i], self.checkpoint_every[i]
        k = int(self.gpus_held[i]) if k is None else int(k)
        t_old, t_new = float(self.iter_time[i]), self.iteration_time(i, gpu_type, k)
        if not t_new < t_old:
            return False
        left_old = self.work[i] - self.progress[i] + max(0.0, self.stall_end[i] - self.now)
        done_new = fl.rescale(self.progress[i], t_old, t_new, every, job.checkpoint_cost)
        left_new = fl.total_work(job.iterations, t_new, every, job.checkpoint_cost) - done_new
        return left_new + self.preemption_cost < left_old * (1 - 1e-12)

    def _pick_type(self, i: int, k: int, room: dict[str, int], current: str | None) -> str | None:
        """The type job ``i`` runs on at ``k`` GPUs given ``room`` (``{type: GPUs it may take}``): the fastest with
        room; a running job (on ``current``) stays unless moving there pays. :data:`SPAN` for a job larger
        than every type it can run on, when their room together holds it; ``None``: it does not fit now."""
        ranked = self.type_ranking(i, k)
        best = None
        for t in ranked:
            if room.get(t, 0) >= k:
                best = t
                break
        if best is None:
            if k > self._largest_type(i, k) and sum(room.get(t, 0) for t in ranked) >= k:
                return SPAN
            return None
        if current is not None and current != best and room.get(current, 0) >= k \
                and not self.migration_pays(i, best, k):
            return current
        return best

    def _largest_type(self, i: int, k: int) -> int:
        """GPUs of the largest type job ``i`` can run on at ``k`` GPUs (cached)."""
        key = (i, -k)  # beside type_ranking's (i, k) entries
        got = self._ranking.get(key)
        if got is None:
            got = self._ranking[key] = max(self.type_capacity[t] for t in self.type_ranking(i, k))
        return got  # type: ignore[return-value]

    def _take(self, room: dict[str, int], i: int, gpu_type: str, k: int) -> None:
        """Book ``k`` GPUs of ``gpu_type`` (for :data:`SPAN`: the fastest types first) out of ``room``."""
        if gpu_type != SPAN:
            room[gpu_type] -= k
            return
        for t in self.type_ranking(i, k):
            got = min(k, room.get(t, 0))
            room[t] = room.get(t, 0) - got
            k -= got

    def _gpus_for(self, i: int, gpu_type: str, k: int) -> list[int] | None:
        """Free GPUs for job ``i``: ``k`` of ``gpu_type`` packed, or for :data:`SPAN` the free GPUs of its types,
        fastest type first, each packed (as :meth:`_take` books them); ``None`` if too few are free."""
        if gpu_type != SPAN:
            return self.pool.free_gpus(k, gpu_type)
        out: list[int] = []
        for t in self.type_ranking(i, k):
            take = min(k - len(out), self.free_by_type[t])
            if take:
                out += self.pool.free_gpus(take, t)
            if len(out) == k:
                return sorted(out)
        return None

    def _over_cap_message(self) -> str:
        """Why the run hit ``max_events``: what is left, and the likely cause."""
        return (f"cluster simulation exceeded max_events={self.max_events:,} loop steps at t={self.now:.6g} s with "
                f"{self.n_jobs - self.n_done} of {self.n_jobs} jobs unfinished after {int(self.interruptions.sum()):,} "
                f"failure interruptions: failures too frequent for the checkpoint interval (checkpoint more often or "
                f"raise gpu_mtbf), or a run this long needs a larger max_events")

    def _count_steps_at_now(self, t_next: float) -> None:
        """Count the loop steps the clock stays at ``now``; :class:`ClusterRunError` past :data:`STUCK_STEPS`."""
        if t_next > self.now:
            self._steps_at_now = 0
            return
        self._steps_at_now += 1
        if self._steps_at_now > STUCK_STEPS:
            raise ClusterRunError(
                f"cluster simulation stuck: the clock has not advanced past t={self.now:.6g} s in {STUCK_STEPS:,} "
                f"loop steps; at that time float64 resolves {math.ulp(self.now):.3g} s, so shorter steps "
                f"(the scheduler's round_s, the time between failures gpu_mtbf / GPUs, restart_delay) vanish: "
                f"give times in seconds and steps longer than that")

    def _require_decision(self, pending: bool, caller: str) -> None:
        if pending and self._pending is None:
            raise RuntimeError(f"ClusterSimulation.{caller}: no decision is pending; call run_until_decision() "
                               "first (and stop once it returns None)")
        if not pending and self._pending is not None:
            raise RuntimeError(f"ClusterSimulation.{caller}: the decision at t={self.now:.6g} s is pending; "
                               "call allocate_in_order() or apply_allocation() first")

    def _view(self) -> JobView | None:
        """What a decision maker reads now (``None`` when no job waits or runs): a :class:`LiveJobView` whose
        ``active`` list, ``remaining`` and ``occupants`` are built (brought up to date) only if read."""
        active_idx = self._active_jobs()
        self._n_active = active_idx.size
        if not active_idx.size:
            return None
        view = LiveJobView(now=self.now, active=None, arrival=self.arrival, gpus=self.requested,
                           running=self._running_mask, attained=self.attained, remaining=None,
                           completion=self.completion, alloc=self.alloc, occupants=None, speed=self.speed,
                           restarting=self._restarting_mask, active_idx=active_idx,
                           arrival_sorted=self._arrival_sorted)
        view.set_remaining_source(lambda: self._fill_remaining(active_idx))
        view.set_occupants_source(lambda: self.pool.occupants)
        return view

    def _active_jobs(self) -> np.ndarray:
        """``(k,) int64``: the waiting and running jobs, ascending: those of the last call updated by the jobs whose
        status entered or left WAITING/RUNNING since (:func:`~doppler_gym.cluster.step_kernels.update_active`,
        O(k) compiled, no scan of the jobs; the same as ``np.flatnonzero(status <= RUNNING)``). The array is
        new whenever the set changed, never changed in place (a view may keep it)."""
        if self._active_changed:
            changed = np.array(self._active_changed, dtype=np.int64)
            self._active_changed = []
            self._active = sk.update_active(self._active, changed, self.status, RUNNING, self._active_scratch)
        return self._active

    def _window(self) -> tuple[int, int]:
        """``[lo, hi)``: the job indices that may be active (waiting, running or restarting): from the lowest job
        not DONE to the last arrived one (to the last job when the trace is not in arrival order)."""
        status, lo = self.status, self._first_undone
        while lo < self.n_jobs and status[lo] == DONE:
            lo += 1
        self._first_undone = lo
        return lo, (self._n_arrived if self._arrival_sorted else self.n_jobs)

    def _fill_remaining(self, active_idx: np.ndarray) -> np.ndarray:
        """``(n,) float64`` [solo s] the JobView's remaining: for the jobs of ``active_idx``, on the current
        allocation, or (never started) on the requested GPUs of the fastest type; the others' entries were set
        when they last changed (0 before arrival and once done)."""
        a, remaining = active_idx, self._remaining
        remaining[a] = np.where(np.isnan(self.iter_time[a]), self.solo_total[a], self.work[a] - self.progress[a])
        return remaining

    def _close_event(self) -> None:
        """After a decision point: queue a round tick if one is due, record the busy GPUs."""
        self._pending = None
        round_s = self.scheduler.round_s
        # a decision moves jobs between waiting and running only: some job waits iff fewer run than were active
        due = self._n_active > 0 if self.scheduler.rounds_while_all_run else (
            self._n_active > len(self._running_jobs()))
        if round_s is not None and not self._round_pending and due:
            self._events.push(self.now + round_s, ROUND)
            self._round_pending = True
        n_busy = self.pool.n_busy
        if n_busy != self.util_v[-1]:
            self.util_t.append(self.now)
            self.util_v.append(n_busy)

    def _running_jobs(self) -> np.ndarray:
        """``(k,) int64``: the running jobs, ascending (cached until the next start or release, the only places a
        job enters or leaves RUNNING; read-only)."""
        return self._running_block().idx

    def _running_block(self) -> RunningBlock:
        """The running jobs with their work, GPUs and speeds gathered (cached until the next start or release;
        its speeds are gathered again after :meth:`_refresh_speeds`)."""
        if self._block is None:
            lo, hi = self._window()
            self._block = RunningBlock.gather(self._running_mask, lo, hi, self.work, self.gpus_held, self.speed)
        return self._block

    # -- time between events -------------------------------------------------------------------------
    def _next_event_time(self, block: RunningBlock) -> float:
        """[s] of the next completion or queued event; ``block``: the running jobs."""
        t_done = math.inf
        if block.size:
            t_done = float(sk.earliest_end(self.now, block.idx, block.work, self.progress, block.speed))
        t_next = min(t_done, self._events.next_time())
        if not math.isfinite(t_next):
            raise ClusterRunError(f"cluster simulation stalled at t={self.now:.1f} s with "
                                  f"{self.n_jobs - self.n_done} jobs unfinished: none runs and no event is queued")
        return t_next

    def _advance_to(self, t_next: float, block: RunningBlock) -> np.ndarray | None:
        """Move the clock to ``t_next`` [s]: the running jobs (``block``) progress at their speeds, the accounts
        grow (one compiled pass, :func:`~doppler_gym.cluster.step_kernels.advance`). Returns their new progress
        (``(k,) float64`` [solo s]) when it moved, else ``None``."""
        dt = t_next - self.now
        progress = None
        if dt > 0 and block.size:
            speed, gpus_held = block.speed, block.gpus
            progress = sk.advance(block.idx, speed, gpus_held, dt, self.progress, self.attained, self.held)
            self.busy_gpu_s += self.pool.n_busy * dt  # GPUs busy since the last event
            self.work_gpu_s += float(speed @ gpus_held) * dt
        self.now = t_next
        return progress

    def _complete_finished(self, block: RunningBlock, progress: np.ndarray | None = None) -> bool:
        """Complete the running jobs (``block``) whose work is done, or whose completion is closer than the clock
        can resolve at ``now`` (:meth:`_check_resolution`); whether any was. ``progress``: their progress now
        (``(k,) float64`` [solo s], as :meth:`_advance_to` returned it; ``None``: read it)."""
        if not block.size:
            return False
        running = block.idx
        if progress is None:
            progress = self.progress[running]
        at, unresolved = sk.finished(self.now, progress, block.done_at, block.work, block.speed)  # (positions)
        for i in running[unresolved].tolist():
            self._check_resolution(i)
        finished = running[at]
        done = finished.tolist()
        self._active_changed += done
        for i in done:
            self.progress[i] = self.work[i]
            self._release(i)  # a partner's solo speed is restored by the decision's _refresh_speeds()
            self.status[i] = DONE
            self._remaining[i] = 0.0
            self.completion[i] = self.now
            self.n_done += 1
        if finished.size:
            gone = np.zeros(block.size, dtype=bool)
            gone[at] = True
            self._block = block.without(gone)  # (the rest keep their work, GPUs and speeds)
        return bool(finished.size)

    def _check_resolution(self, i: int) -> None:
        """:class:`ClusterRunError` unless the clock at ``now`` resolves :data:`RESOLUTION` of job ``i``'s iteration."""
        step, t = math.ulp(self.now), float(self.iter_time[i])
        if step > RESOLUTION * t:
            job = self.jobs[i]
            raise ClusterRunError(
                f"cluster simulation at t={self.now:.6g} s ({self.now / 3.156e7:.3g} years): float64 resolves only "
                f"{step:.3g} s there, too coarse for job {job.job_id}'s {t:.3g} s iterations (arrival "
                f"{job.arrival:.6g} s); give arrival times in seconds (not nanoseconds or milliseconds)")

    # -- events ----------------------------------------------------------------------------------------
    def _handle_due_events(self) -> tuple[bool, bool]:
        """Handle every event due now; ``(scheduling, resumed)``: whether one calls for a decision, and
        whether a checkpoint restore ended (only that job's speed changes)."""
        scheduling = resumed = False
        while (event := self._events.pop_due(self.now)) is not None:
            kind, subject = event
            if kind == ARRIVAL:
                self._on_arrival(subject)
            elif kind == RESTART:
                self.status[subject] = WAITING
                self._active_changed.append(subject)
                self._restarting_mask[subject] = False
            elif kind == ROUND:
                self._round_pending = False
            elif kind == FAILURE:
                self._on_failure()
            elif kind == SLOW_START:
                self._on_slow_start()
            elif kind == SLOW_END:
                self.gpu_slow[subject] = False
            else:  # RESUME: not a decision point
                resumed = True
                self._pace_dirty.add(subject)
                continue
            scheduling = True
        return scheduling, resumed

    def _on_arrival(self, i: int) -> None:
        """Job ``i`` waits; its solo duration on the requested GPUs of its fastest type is set, for SRTF."""
        self.status[i] = WAITING
        self._active_changed.append(i)
        self._n_arrived += 1
        job = self.jobs[i]
        ranked = self.type_ranking(i)
        t = self.times(job, ranked[0], job.gpus) if ranked else max(self.times(job, g, job.gpus)
                                                                    for g in self.gpu_types)
        self.solo_total[i] = fl.total_work(job.iterations, t, self.checkpoint_every[i], job.checkpoint_cost)

    def _on_failure(self) -> None:
        """A GPU drawn at random fails: its jobs roll back and restart after the delay; the next failure is drawn."""
        g = int(self._rng_failures.integers(self.n_gpus))
        for i in list(self.occupants[g]):
            self._interrupt(i)
        if self.n_done < self.n_jobs:
            self._events.push(self.now + float(self._rng_failures.exponential(1.0 / self._failure_rate)), FAILURE)

    def _interrupt(self, i: int) -> None:
        """Job ``i`` loses its GPUs and the work since its last checkpoint; it waits again after the restart delay."""
        job = self.jobs[i]
        back = fl.rollback(self.progress[i], self.iter_time[i], self.checkpoint_every[i], job.checkpoint_cost)
        self.lost[i] += self.progress[i] - back
        self.progress[i] = back
        self._remaining[i] = self.work[i] - back  # (a restarting job is not active: not recomputed by _view)
        self.interruptions[i] += 1
        self._release(i)
        self.stall_end[i] = 0.0
        self.suspended[i] = False
        self.status[i] = RESTARTING
        self._active_changed.append(i)
        self._restarting_mask[i] = True
        self._events.push(self.now + self.failures.restart_delay, RESTART, i)

    def _on_slow_start(self) -> None:
        """A GPU drawn at random turns slow (unless it already is) for an exponential time; the next onset is drawn."""
        g = int(self._rng_slow.integers(self.n_gpus))
        if not self.gpu_slow[g]:
            self.gpu_slow[g] = True
            self._events.push(self.now + float(self._rng_slow.exponential(self.failures.straggler_duration)),
                              SLOW_END, g)
        if self.n_done < self.n_jobs:
            self._events.push(self.now + float(self._rng_slow.exponential(1.0 / self._slow_rate)), SLOW_START)

    # -- a job's GPUs ----------------------------------------------------------------------------------
    def _start(self, i: int, gpus: list[int]) -> None:
        """Run job ``i`` on ``gpus``; a suspended job first restores its checkpoint for ``preemption_cost`` [s]."""
        self.alloc[i] = list(gpus)
        self._block = None
        self.gpus_held[i] = len(gpus)
        spans_nodes = self.pool.take(i, gpus, self._pace_dirty)
        self._pace_dirty.add(i)
        gpu_type = self.gpu_type
        if len(self.gpu_types) == 1:
            self.job_gpu_type[i] = self.gpu_types[0]
        else:
            types = {gpu_type[g] for g in gpus}
            self.job_gpu_type[i] = types.pop() if len(types) == 1 else None
        self.status[i] = RUNNING
        self._running_mask[i] = True
        self.speed[i] = 1.0  # _refresh_speeds() sets the shared, slowed and restoring ones
        if math.isnan(self.first_start[i]):
            self.first_start[i] = self.now
        if self.suspended[i] and self.preemption_cost > 0:
            self.stall_end[i] = self.now + self.preemption_cost
            self._events.push(self.stall_end[i], RESUME, i)
        self.suspended[i] = False
        self._set_iteration_time(i, spans_nodes)

    def _release(self, i: int) -> None:
        """Job ``i`` leaves its GPUs."""
        gpus = self.alloc[i]
        self._block = None  # (its status leaves RUNNING right after)
        self.pool.release(i, gpus, self._pace_dirty)
        self.alloc[i] = []
        self._running_mask[i] = False
        self.job_gpu_type[i] = None
        self.gpus_held[i] = 0
        self.speed[i] = 0.0

    def _preempt(self, i: int) -> None:
        """Suspend running job ``i`` (it keeps its progress; its next start pays ``preemption_cost``)."""
        self._release(i)
        self.status[i] = WAITING
        self.suspended[i] = True
        self.stall_end[i] = 0.0

    def _preempt_many(self, jobs: np.ndarray) -> None:
        """:meth:`_preempt` for each running job of ``jobs`` (``(m,) int64``): with no GPU shared, the GPUs of all
        in one :meth:`GpuPool.release_many <doppler_gym.cluster.gpu_pool.GpuPool.release_many>` call and the
        per-job arrays set at once (the state after the preemptions does not depend on their order)."""
        if not jobs.size:
            return
        if self.pool.n_shared:
            for i in jobs.tolist():
                self._preempt(i)
            return
        jobs_list, alloc = jobs.tolist(), self.alloc
        self._block = None
        self.pool.release_many(list(map(alloc.__getitem__, jobs_list)))
        _set_items(alloc, jobs_list, map(list, repeat((), len(jobs_list))))  # (a new empty list each)
        _set_items(self.job_gpu_type, jobs_list, repeat(None))
        sk.mark_suspended(jobs, WAITING, self.gpus_held, self.status, self._running_mask, self.speed, self.suspended,
                          self.stall_end)

    def _start_many(self, jobs: np.ndarray) -> None:
        """On a cluster of one GPU type: start the waiting jobs ``jobs`` (``(m,) int64``) on their requested GPUs,
        packed one after another (:meth:`GpuPool.take_packed_many
        <doppler_gym.cluster.gpu_pool.GpuPool.take_packed_many>`): the same state and events as
        ``_start(i, pool.pack(requested[i], type))`` per job in that order (the jobs are marked for
        :meth:`_refresh_speeds` only where speeds vary: else every pace is 1, the speed set here)."""
        if not jobs.size:
            return
        jobs_list, t = jobs.tolist(), self.gpu_types[0]
        taken, spans = self.pool.take_packed_many(jobs, self.requested[jobs], t)
        self._block = None
        _set_items(self.alloc, jobs_list, taken)
        _set_items(self.job_gpu_type, jobs_list, repeat(t))
        if self._variable_speed:  # (else every pace is 1, as mark_started sets the speeds)
            self._pace_dirty.update(jobs_list)
        if self.preemption_cost > 0:
            for i in jobs[self.suspended[jobs]].tolist():  # (in order: the RESUME events queue as per job)
                self.stall_end[i] = self.now + self.preemption_cost
                self._events.push(self.stall_end[i], RESUME, i)
        # speed 1: _refresh_speeds() sets the restoring ones
        sk.mark_started(jobs, self.requested, self.now, RUNNING, self.gpus_held, self.status, self._running_mask,
                        self.speed, self.first_start, self.suspended)
        self._set_iteration_times(jobs, spans)

    def _set_iteration_times(self, jobs: np.ndarray, spans: list[bool]) -> None:
        """:meth:`_set_iteration_time` for the jobs ``jobs`` (``(m,) int64``) just started on their requested GPUs
        of the cluster's one type (``spans``: whether each one's GPUs span nodes). A restart on as many GPUs as
        its last start only sets the cross-node bytes (the timeline's record, read from ``_last_gpus`` and
        ``_last_cross`` at once); the others go through :meth:`_set_iteration_time`."""
        other = sk.reuse_cross_bytes(jobs, np.array(spans, dtype=np.bool_), self.requested, self._last_gpus,
                                     self._last_cross, self.cross_bytes)  # (one compiled pass)
        for p in other.tolist():
            self._set_iteration_time(int(jobs[p]), spans[p])

    def _set_iteration_time(self, i: int, spans_nodes: bool) -> None:
        """Iteration time [s] on job ``i``'s current GPUs (its slowest type); rescales its timeline if it changed.
        ``spans_nodes``: its GPUs are on more than one node (then its cross-node bytes count).

        With ``checkpoints="young"`` and finite failures, the first start also fixes its checkpoint
        interval: Young's for the MTBF of its GPU set, in whole iterations. A start on as many GPUs of the
        same types as the job's last one reuses that start's iteration time, work and cross-node bytes (the
        same values: they depend on nothing else once the checkpoint interval is fixed).
        """
        job, gpus, times, gpu_type = self.jobs[i], self.alloc[i], self.times, self.gpu_type
        k = len(gpus)
        types = self._one_type if self._one_type is not None else frozenset(gpu_type[g] for g in gpus)
        last = self._timeline.get(i)
        if last is not None and last[0] == k and last[1] == types:
            self.cross_bytes[i] = last[4] if spans_nodes else 0.0
            return  # iter_time and work as set at that start (no rescale: the time is the same)
        slowest = max(types, key=lambda t: times(job, t, k))
        t = times(job, slowest, k)
        before = self.iter_time[i]  # [s], NaN before the first start
        if np.isnan(before) and self.checkpoints == "young" and math.isfinite(self.failures.gpu_mtbf):
            self.checkpoint_every[i] = fl.young_every(job.checkpoint_cost, self.failures.gpu_mtbf, k, t)
        every = self.checkpoint_every[i]
        if not np.isnan(before) and t != before:
            self.progress[i] = fl.rescale(self.progress[i], before, t, every, job.checkpoint_cost)
        self.iter_time[i] = t
        self.work[i] = fl.total_work(job.iterations, t, every, job.checkpoint_cost)
        cross = times.cross_bytes(job, slowest, k)
        self.cross_bytes[i] = cross if spans_nodes else 0.0
        self._timeline[i] = (k, types, t, self.work[i], cross)
        self._last_gpus[i], self._last_cross[i] = k, cross

    def _shared_gpus(self, i: int) -> list[int] | None:
        """A GPU holding one single-GPU job that waiting single-GPU job ``i`` may share
        (:func:`placement.shared`), on its fastest type that has one, or ``None``."""
        if self.requested[i] != 1 or not self.pool.n_lone:
            return None
        for t in self.type_ranking(i):
            got = pl.shared(self.job_types[i], 1, self.occupants, self.job_types, self.gpu_type, self.interference,
                            gpus_held=self.gpus_held, gpu_types=(t,), candidates=self.pool.lone)
            if got is not None:
                return got
        return None

    # -- speeds ----------------------------------------------------------------------------------------
    def _refresh_speeds(self) -> None:
        """Every running job's speed: the lower of its GPUs' pace and its share of the uplinks. Without
        stragglers or finite uplinks only sharing and restores move a pace off 1, so only the jobs marked
        since the last refresh (started, left alone on a GPU, or at a restore's end) are recomputed."""
        dirty, self._pace_dirty = self._pace_dirty, set()
        if self._slow_rate > 0 or self.link_capacity:
            run = self._running_jobs().tolist()
            shares = self._bandwidth_shares(run) if self.link_capacity else {}
            for i in run:
                self.speed[i] = min(self._gpu_pace(i), shares.get(i, 1.0))
        else:
            status = self.status
            for i in dirty:
                if status[i] == RUNNING:
                    self.speed[i] = self._gpu_pace(i)
        if self._block is not None and (dirty or self._slow_rate > 0 or self.link_capacity):
            self._block.refresh_speed(self.speed)  # (no speed changed otherwise)

    def _gpu_pace(self, i: int) -> float:
        """Solo seconds per second of job ``i`` on its GPUs: the worst sharing fraction over them, times the
        straggler speed if any is slow (synchronous training runs at its slowest GPU's pace); 0 while restoring."""
        f = 1.0
        occupants, job_types, gpu_type, interference = self.occupants, self.job_types, self.gpu_type, self.interference
        for g in self.alloc[i]:
            for o in occupants[g]:
                if o != i:
                    pair = interference(job_types[i], job_types[o], gpu_type[g])
                    f = min(f, pair[0] if pair else 1.0)
        if self._slow_rate > 0 and self.gpu_slow[self.alloc[i]].any():
            f *= self.failures.straggler_speed
        if self.stall_end[i] > self.now:
            f = 0.0
        return f

    def _bandwidth_shares(self, run: list[int]) -> dict[int, float]:
        """Max-min fair progress fractions of the jobs in ``run`` whose traffic crosses node or rack uplinks."""
        demand = {i: bw.link_demands(self.alloc[i], self.gpu_node, self.node_rack, self.cross_bytes[i],
                                     self.iter_time[i]) for i in run if self.cross_bytes[i] > 0}
        return bw.max_min_shares({i: d for i, d in demand.items() if d}, self.link_capacity)

    # -- allocating by an order ----------------------------------------------------------------------
    def _admit_prefix(self, order: list[int], array: np.ndarray | None = None) -> None:
        """Preemptive: run the greedy prefix of ``order`` that fits, each job on the type :meth:`_pick_type` gives
        it within the room the earlier jobs leave (grown into the spare GPUs of its type if elastic:
        :func:`~doppler_gym.cluster.admission.grow`); suspend the running jobs outside it, moved to another type
        or resized; start the admitted waiting ones packed."""
        if self._one_type_admission():
            self._admit_prefix_one_type(order if array is None else array)
            return
        running = self._running_jobs().tolist()
        is_running = set(running)
        need = self._need
        room = dict(self.type_capacity)
        placed: dict[int, str] = {}  # admitted job -> its type (or SPAN)
        alloc = self.alloc  # a local: these loops run over every active job at every decision
        left = self.n_gpus  # GPUs in room, all types
        only = self.gpu_types[0] if len(self.gpu_types) == 1 else None  # one type: every job runs on it
        biggest = max(room.values())  # [GPUs] the most room of one type
        for i in order:
            if need[i] > left:
                if left == 0:
                    break  # the cluster is booked: no later job can be admitted
                continue
            if only is not None:
                placed[i] = only
                room[only] -= need[i]
                left -= need[i]
                continue
            if need[i] > biggest and need[i] <= self._largest_type(i, need[i]):
                continue  # no type has room for it, and it does not span types
            current = self.job_gpu_type[i] if i in is_running else None
            if i in is_running and current is None and self._keeps_span(i, room):
                placed[i] = SPAN
                left -= need[i]
                biggest = max(room.values())
                continue
            t = self._pick_type(i, need[i], room, current)
            if t is not None:
                placed[i] = t
                self._take(room, i, t, need[i])
                left -= need[i]
                biggest = max(room.values())
        size = {i: need[i] for i in placed}
        if self.scheduler.elastic:
            grow({i: t for i, t in placed.items() if t != SPAN}, size, room,  # (a span does not grow)
                 self._speedup_of_one_more_gpu)
        for i in running:  # (the state after the preemptions does not depend on their order)
            if i not in placed or len(alloc[i]) != size[i] or (placed[i] != SPAN and placed[i] != self.job_gpu_type[i]):
                self._preempt(i)
        for i, t in placed.items():
            if self.status[i] != RUNNING:
                gpus = self._gpus_for(i, t, size[i])
                if gpus is not None:  # always, but for a span that took other types than booked (then it waits)
                    self._start(i, gpus)

    def _one_type_admission(self) -> bool:
        """Whether the preemptive admission is :meth:`_admit_prefix_one_type` (one GPU type, not elastic)."""
        return len(self.gpu_types) == 1 and not self.scheduler.elastic

    def _admit_prefix_one_type(self, order: list[int] | np.ndarray) -> None:
        """:meth:`_admit_prefix` on a cluster of one GPU type (not elastic): each job of ``order`` that fits the
        GPUs left, in order (:func:`~doppler_gym.cluster.admission.greedy_changes`, compiled, reading the order
        up to the job that fills the last GPU); the running jobs left out are suspended, then the admitted
        waiting ones started packed one after another, each set in one batch (:meth:`_preempt_many`,
        :meth:`_start_many`): the same decisions and state as the per-job loop."""
        running = self._running_jobs()
        start, stop = greedy_changes(np.asarray(order, dtype=np.int64), self.requested, self.n_gpus, running,
                                     self._running_mask, self._admitted)
        self._preempt_many(stop)
        self._start_many(start)
        if start.size or stop.size:  # the running jobs now, without a pass over the window
            self._block = RunningBlock(sk.merge_running(running, stop, start), self.work, self.gpus_held, self.speed)

    def _keeps_span(self, i: int, room: dict[str, int]) -> bool:
        """Running job ``i`` spans types and ``room`` still holds its GPUs of each type (then they are booked)."""
        count: dict[str, int] = {}
        for g in self.alloc[i]:
            count[self.gpu_type[g]] = count.get(self.gpu_type[g], 0) + 1
        if any(room.get(t, 0) < c for t, c in count.items()) or \
                self.requested[i] <= max((self.type_capacity[t] for t in self.type_ranking(i)), default=0):
            return False
        for t, c in count.items():
            room[t] -= c
        return True

    def _speedup_of_one_more_gpu(self, i: int, k: int, gpu_type: str) -> float:
        """t(k) / t(k + 1) of job ``i`` on ``gpu_type`` (1 at its ``max_gpus`` or the type's size)."""
        job = self.jobs[i]
        if k >= min(job.max_gpus, self.type_capacity[gpu_type]):
            return 1.0
        return self.times(job, gpu_type, k) / self.times(job, gpu_type, k + 1)

    def _backfill(self, order: list[int]) -> list[int]:
        """Non-preemptive: in ``order``, a running job moves to a faster type with free GPUs when that pays
        (:meth:`migration_pays`), a waiting job starts on the fastest type with enough free GPUs; the waiting
        jobs that did not start are returned. Without the scheduler's ``backfill`` (strict FIFO), no waiting
        job starts after the first one that does not fit."""
        is_running = set(self._running_jobs().tolist())
        need = self._need
        backfill = getattr(self.scheduler, "backfill", True)
        several_types = len(self.gpu_types) > 1
        pool = self.pool  # (its n_busy changes with each start)
        left: list[int] = []
        for pos, i in enumerate(order):
            if i in is_running:
                if several_types:
                    self._move_to_faster_type(i)
                continue
            if pool.n_busy == self.n_gpus and not several_types:  # nothing more can start (or move)
                left += [j for j in order[pos:] if j not in is_running] if self.scheduler.share else []
                break
            if (left and not backfill) or need[i] > self.n_gpus - pool.n_busy:
                left.append(i)
                continue
            t = self._pick_type(i, need[i], self.free_by_type, None)
            got = None if t is None else self._gpus_for(i, t, need[i])
            if got is None:
                left.append(i)
            else:
                self._start(i, got)
        return left

    def _move_to_faster_type(self, i: int) -> None:
        """Running job ``i`` moves to the fastest type, faster than where it runs, with enough free GPUs, if
        that pays (:meth:`migration_pays`); the move is a migration (its restore costs ``preemption_cost``)."""
        k = int(self.gpus_held[i])
        for t in self.type_ranking(i, k):
            if t == self.job_gpu_type[i]:
                return  # no faster type
            if self.free_by_type[t] >= k and self.migration_pays(i, t, k):
                self._preempt(i)
                self._start(i, self.free_gpus(k, t))
                return

    def _migrate_off_shared(self, order: list[int]) -> None:
        """Gandiva: a running job sharing a GPU moves to free GPUs when its fastest type with room has enough
        (a migration: its restore costs ``preemption_cost``)."""
        pool = self.pool
        if pool.n_busy == self.n_gpus:
            return  # no free GPU to move to
        alloc = self.alloc
        # only single-GPU jobs share, two to a GPU: the sharing jobs are the occupants of the GPUs that are
        # neither free nor lone, held by a single-GPU job
        single = np.flatnonzero(self.gpus_held == 1)  # (running: only they hold GPUs)
        on = np.array([alloc[j][0] for j in single.tolist()], dtype=np.int64)  # (each one's GPU)
        sharing = set(single[pool.jobs_on_many(on) > 1].tolist())
        for i in [i for i in order if i in sharing]:
            if pool.n_busy < self.n_gpus and pool.jobs_on(alloc[i][0]) > 1:  # (its partner may have moved)
                k = int(self.requested[i])
                t = self._pick_type(i, k, self.free_by_type, None)
                free = None if t is None else self._gpus_for(i, t, k)
                if free is not None:
                    self._preempt(i)
                    self._start(i, free)

    def _start_shared(self, waiting: list[int]) -> None:
        """Start the jobs of ``waiting`` on GPUs they may share, in order, where there are such GPUs."""
        failed: set[tuple[str, tuple[str, ...]]] = set()  # (job type, type ranking) with no GPU to share
        for i in waiting:
            if not self.pool.n_lone:
                return  # no GPU holds a lone single-GPU job (and a start does not make one)
            key = (self.job_types[i], self.type_ranking(i))
            if key in failed:
                continue  # a start only takes shareable GPUs away: it stays without one
            got = self._shared_gpus(i)
            if got is not None:
                self._start(i, got)
            elif self.requested[i] == 1:
                failed.add(key)
