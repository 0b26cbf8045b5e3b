"""Event-driven simulation of a trace of jobs on a cluster under a scheduler.

Events: job arrivals, completions, GPU failures, restarts (end of a restart delay) and, for
schedulers with ``round_s``, round ticks (every ``round_s`` while some job waits: with none waiting,
a new order could not change the allocation). Between two events every running job advances along its
work timeline (:mod:`doppler_gym.cluster.failures`) at its speed (1 alone, the interference fraction
when it shares a GPU). At each event the scheduler orders the active jobs and the engine allocates
GPUs in that order (see :mod:`doppler_gym.cluster.schedulers` for the rules), or an external decision
maker (the env) sends an :class:`~doppler_gym.cluster.schedulers.Allocation` through :func:`decisions`.
A job started again after a preemption, a migration or an elastic resize first restores its checkpoint
for ``preemption_cost`` seconds, holding its GPUs without progress.

Stragglers: a GPU of the failure model's slow periods runs every job on it at ``straggler_speed``
of its pace (a synchronous job at its slowest GPU's pace).

Bandwidth: with a finite ``Cluster.node_uplink_bandwidth`` or ``rack_uplink_bandwidth``, jobs spanning
nodes (racks) share each node's (rack's) uplink max-min fairly in their pace
(:mod:`doppler_gym.cluster.bandwidth`); a job runs at the lower of that share and its
sharing/straggler speed. The model is conservative: it
treats a job's cross-node traffic as on its critical path.

Placement: a job's GPUs are taken from the nodes with the most free GPUs first (consolidating it on
as few nodes as possible); its iteration time depends on its GPU count and the slowest GPU type it
got (:class:`doppler_gym.cluster.timing.IterationTimes`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Generator

import numpy as np

from doppler_gym import workloads
from doppler_gym.cluster import bandwidth as bw
from doppler_gym.cluster import failures as fl
from doppler_gym.cluster import placement as pl
from doppler_gym.cluster.interference import GavelInterference
from doppler_gym.cluster.metrics import ClusterResult, summarise
from doppler_gym.cluster.schedulers import Allocation, JobView, Scheduler
from doppler_gym.cluster.timing import IterationTimes
from doppler_gym.cluster.types import Cluster, Trace

_ARRIVAL, _RESTART, _ROUND, _FAILURE, _SLOW_START, _SLOW_END, _RESUME = 0, 1, 2, 3, 4, 5, 6
_WAITING, _RUNNING, _RESTARTING, _DONE, _FUTURE = 0, 1, 2, 3, 4
_EPS = 1e-9


def simulate_cluster(trace: Trace, cluster: Cluster, scheduler: Scheduler, *, seed: int,
                     failures: fl.FailureModel, interference=None, times: IterationTimes | None = None,
                     checkpoints: str = "fixed", max_events: int = 10_000_000,
                     preemption_cost: float = 0.0) -> ClusterResult:
    """Run the simulation; see :func:`doppler_gym.cluster.run` for the arguments."""
    sim = decisions(trace, cluster, scheduler, seed=seed, failures=failures, interference=interference, times=times,
                    checkpoints=checkpoints, max_events=max_events, preemption_cost=preemption_cost)
    try:
        view = next(sim)
        while True:
            view = sim.send(scheduler.order(view))
    except StopIteration as stop:
        return stop.value


def decisions(trace: Trace, cluster: Cluster, scheduler: Scheduler, *, seed: int,
              failures: fl.FailureModel, interference=None, times: IterationTimes | None = None,
              checkpoints: str = "fixed", max_events: int = 10_000_000, preemption_cost: float = 0.0
              ) -> Generator[JobView, list[int] | Allocation, ClusterResult]:
    """The simulation as a generator of its scheduling decisions (the hook for an external scheduler).

    Yields a :class:`JobView` at each event where some job is active and takes, through ``send``,
    either the order the engine then allocates by, under ``scheduler``'s flags (``preemptive``,
    ``share``, ``round_s``), or an :class:`Allocation` (the GPUs of every job that runs from now on;
    running jobs left out are preempted) that the engine applies as given. ``scheduler.order`` is
    not called; its ``round_s`` still sets the round ticks. Returns (``StopIteration.value``) the
    :class:`ClusterResult`. :func:`simulate_cluster` is this generator driven by ``scheduler.order``.
    Validation errors are raised by the first ``next``; an invalid :class:`Allocation` raises
    ``ValueError`` from ``send`` (the generator is then finished).

    ``preemption_cost`` [s]: a job preempted or moved to other GPUs (migrated) while running spends
    this long restoring its checkpoint when it starts again, holding its GPUs without progress.
    """
    rng = np.random.default_rng(seed)
    interference = interference if interference is not None else GavelInterference()
    times = times if times is not None else IterationTimes(cluster)
    jobs = trace.jobs
    n = len(jobs)
    n_gpus = cluster.n_gpus
    if not (isinstance(preemption_cost, (int, float)) and math.isfinite(preemption_cost) and preemption_cost >= 0):
        raise ValueError(f"preemption_cost must be a finite time >= 0 [s], got {preemption_cost!r}")
    if checkpoints not in ("fixed", "young"):
        raise ValueError(f"checkpoints={checkpoints!r}: must be 'fixed' (each job's checkpoint_every) or 'young'")
    types_here = sorted({nd.gpu_type for nd in cluster.nodes})
    for j in jobs:  # validate everything a run could trip on, before it starts
        if j.gpus > n_gpus:
            raise ValueError(f"Job {j.job_id}: gpus={j.gpus} exceeds the cluster's {n_gpus} GPUs ({cluster.name})")
        if j.profile is not None:
            missing = [t for t in types_here if t not in j.profile and "*" not in j.profile]
            if missing:
                raise ValueError(f"Job {j.job_id}: profile has no iteration times for GPU type(s) {missing} of "
                                 f"cluster {cluster.name!r}; give them or a '*' entry")
        else:
            unknown = sorted(set(j.workload_params) - set(workloads.params(j.workload)))  # unknown name raises
            if unknown:
                raise ValueError(f"Job {j.job_id}: workload_params {unknown} are not parameters of workload "
                                 f"{j.workload!r}; valid: {sorted(workloads.params(j.workload))}")
    gpu_node = np.repeat(np.arange(len(cluster.nodes)), [nd.gpus for nd in cluster.nodes])
    gpu_type = [cluster.nodes[k].gpu_type for k in gpu_node]

    arrival = np.array([j.arrival for j in jobs], dtype=np.float64)  # (n,) [s]
    req = np.array([j.gpus for j in jobs], dtype=np.int64)  # (n,)
    status = np.full(n, _FUTURE, dtype=np.int8)
    progress = np.zeros(n)  # (n,) [solo s] along the work timeline
    work = np.zeros(n)  # (n,) [solo s] total, at the current iteration time
    iter_time = np.full(n, np.nan)  # (n,) [s] on the current/last allocation
    speed = np.zeros(n)  # (n,) solo seconds per second while running
    solo_total = np.zeros(n)  # (n,) [s] solo work on the requested GPUs, set at arrival
    # checkpoint interval [iterations] per job: its own, or Young's for its GPU set (set at first start)
    every: list[int | None] = [j.checkpoint_every for j in jobs]
    attained = np.zeros(n)  # (n,) [GPU s] held
    held = np.zeros(n)  # (n,) [s] wall time holding GPUs
    first_start = np.full(n, np.nan)
    completion = np.full(n, np.nan)
    interruptions = np.zeros(n, dtype=np.int64)
    lost = np.zeros(n)  # (n,) [solo s] of work lost to failures
    ngpu = np.zeros(n, dtype=np.int64)  # (n,) GPUs held now (0 unless running)
    suspended = np.zeros(n, dtype=bool)  # (n,) preempted or migrated while running: pays the restore on start
    stall_end = np.zeros(n)  # (n,) [s] end of the current checkpoint restore (no progress before it)
    types = [j.job_type for j in jobs]
    alloc: list[list[int]] = [[] for _ in range(n)]
    occupants: list[list[int]] = [[] for _ in range(n_gpus)]
    n_busy = [0]  # GPUs holding at least one job (a cell the closures update)
    busy_gpu_s = 0.0  # [GPU s] with at least one job
    work_gpu_s = 0.0  # [GPU s] solo-equivalent work delivered: sum of speed x GPUs over running jobs
    util_t: list[float] = [0.0]
    util_v: list[int] = [0]

    events: list[tuple[float, int, int, int]] = []  # (time [s], kind, seq, job)
    seq = 0
    for i in range(n):
        heapq.heappush(events, (arrival[i], _ARRIVAL, seq, i))
        seq += 1
    fail_rate = n_gpus / failures.gpu_mtbf  # [1/s], whole cluster
    if fail_rate > 0:
        heapq.heappush(events, (float(rng.exponential(1.0 / fail_rate)), _FAILURE, seq, -1))
        seq += 1
    round_pending = False  # a round tick is queued (ticks run only while some job waits)
    # Stragglers: slowdown onsets at rate 1/straggler_mtbs per GPU, ignored on a GPU already slow, so
    # each GPU alternates Exp(straggler_mtbs) healthy and Exp(straggler_duration) slow periods.
    rng_slow = np.random.default_rng([seed, 1])  # its own stream: failures draw the same with or without it
    slow_rate = n_gpus / failures.straggler_mtbs  # [1/s], whole cluster
    gpu_slow = np.zeros(n_gpus, dtype=bool)  # (n_gpus,)
    if slow_rate > 0:
        heapq.heappush(events, (float(rng_slow.exponential(1.0 / slow_rate)), _SLOW_START, seq, -1))
        seq += 1
    uplink = cluster.node_uplink_bandwidth  # [B/s] per node
    cross = np.zeros(n)  # (n,) [B] per iteration crossing between the job's nodes (0 on one node)
    node_rack = np.asarray(cluster.node_rack, dtype=np.int64)  # (n_nodes,)
    capacity: dict[tuple[str, int], float] = {}  # [B/s] of the finite shared links
    if math.isfinite(uplink):
        capacity.update({("node", k): uplink for k in range(len(cluster.nodes))})
    if math.isfinite(cluster.rack_uplink_bandwidth):
        capacity.update({("rack", r): cluster.rack_uplink_bandwidth for r in sorted(set(cluster.node_rack))})
    variable_speed = scheduler.share or slow_rate > 0 or bool(capacity) or preemption_cost > 0

    def job_speeds(i: int) -> float:
        """Solo seconds per second: the worst sharing fraction over its GPUs, times the straggler speed
        if any of its GPUs is slow (synchronous training runs at its slowest GPU's pace)."""
        f = 1.0
        for g in alloc[i]:
            for o in occupants[g]:
                if o != i:
                    pair = interference(jobs[i].job_type, jobs[o].job_type, gpu_type[g])
                    f = min(f, pair[0] if pair else 1.0)
        if slow_rate > 0 and gpu_slow[alloc[i]].any():
            f *= failures.straggler_speed
        if stall_end[i] > now:
            f = 0.0
        return f

    def set_time(i: int) -> None:
        """Iteration time on the job's current allocation; rescales its timeline if it changed."""
        job = jobs[i]
        slow = max({gpu_type[g] for g in alloc[i]}, key=lambda t: times(job, t, len(alloc[i])))
        t = times(job, slow, len(alloc[i]))
        if np.isnan(iter_time[i]) and checkpoints == "young" and math.isfinite(failures.gpu_mtbf):
            interval = fl.young_interval(job.checkpoint_cost, failures.gpu_mtbf / len(alloc[i]))  # [s]
            every[i] = max(1, round(interval / t))
        if not np.isnan(iter_time[i]) and t != iter_time[i]:
            progress[i] = fl.rescale(progress[i], iter_time[i], t, every[i], job.checkpoint_cost)
        iter_time[i] = t
        work[i] = fl.total_work(job.iterations, t, every[i], job.checkpoint_cost)
        cross[i] = times.cross_bytes(job, slow, len(alloc[i])) if len({gpu_node[g] for g in alloc[i]}) > 1 else 0.0

    def release(i: int) -> None:
        for g in alloc[i]:
            occupants[g].remove(i)
            n_busy[0] -= not occupants[g]
        alloc[i] = []
        ngpu[i] = 0
        speed[i] = 0.0

    def preempt(i: int) -> None:
        """Suspend a running job (it keeps its progress; its next start pays ``preemption_cost``)."""
        release(i)
        status[i] = _WAITING
        suspended[i] = True
        stall_end[i] = 0.0

    def pick_free(k: int) -> list[int] | None:
        if k > n_gpus - n_busy[0]:
            return None
        return pl.pack(pl.free_by_node(occupants, gpu_node), k)

    def pick_shared(i: int) -> list[int] | None:
        return pl.shared(types[i], int(req[i]), occupants, types, gpu_type, interference)

    def start(i: int, gpus_: list[int]) -> None:
        nonlocal seq
        alloc[i] = list(gpus_)
        ngpu[i] = len(gpus_)
        for g in gpus_:
            n_busy[0] += not occupants[g]
            occupants[g].append(i)
        status[i] = _RUNNING
        speed[i] = 1.0  # refresh_speeds() sets the shared, slowed and restoring ones
        if np.isnan(first_start[i]):
            first_start[i] = now
        if suspended[i] and preemption_cost > 0:
            stall_end[i] = now + preemption_cost
            heapq.heappush(events, (stall_end[i], _RESUME, seq, i))
            seq += 1
        suspended[i] = False
        set_time(i)

    def apply(plan: Allocation) -> None:
        """Run exactly the jobs of ``plan`` on its GPUs: preempt or move the others, then start."""
        where = f"Allocation at t={now:.6g} s"
        want: dict[int, list[int]] = {}
        count = np.zeros(n_gpus, dtype=np.int64)
        for i, gs in plan.gpus.items():
            if not (0 <= i < n) or status[i] not in (_WAITING, _RUNNING):
                raise ValueError(f"{where}: job index {i} is not waiting or running (only active jobs can run)")
            gs = sorted(int(g) for g in gs)
            if len(set(gs)) != len(gs) or not all(0 <= g < n_gpus for g in gs):
                raise ValueError(f"{where}: job {i}'s GPUs {gs} must be distinct ids in [0, {n_gpus})")
            if not (req[i] <= len(gs) <= jobs[i].max_gpus):
                raise ValueError(f"{where}: job {i} got {len(gs)} GPUs; it needs between gpus={req[i]} and "
                                 f"max_gpus={jobs[i].max_gpus}")
            want[i] = gs
            count[gs] += 1
        if count.max(initial=0) > 2:
            raise ValueError(f"{where}: GPU {int(np.argmax(count))} would hold {int(count.max())} jobs (2 at most)")
        on: list[list[int]] = [[] for _ in range(n_gpus)]
        for i, gs in want.items():
            for g in gs:
                on[g].append(i)
        for g in np.flatnonzero(count == 2).tolist():
            a, b = on[g]
            pair = interference(types[a], types[b], gpu_type[g])
            if pair is None or not (pair[0] > 0 and pair[1] > 0):
                raise ValueError(f"{where}: jobs {a} and {b} cannot share GPU {g} (interference model: "
                                 f"{types[a]!r} with {types[b]!r} on {gpu_type[g]!r})")
        for i in np.flatnonzero(status == _RUNNING).tolist():
            if want.get(i) != sorted(alloc[i]):
                preempt(i)
        for i, gs in want.items():
            if status[i] == _WAITING:
                start(i, gs)
        refresh_speeds()

    def bandwidth_shares(run: list[int]) -> dict[int, float]:
        """Max-min fair progress fractions of the jobs whose traffic crosses node or rack uplinks."""
        demand = {i: bw.link_demands(alloc[i], gpu_node, node_rack, cross[i], iter_time[i]) for i in run
                  if cross[i] > 0}
        return bw.max_min_shares({i: d for i, d in demand.items() if d}, capacity)

    def refresh_speeds() -> None:
        run = np.flatnonzero(status == _RUNNING).tolist()
        x = bandwidth_shares(run) if capacity else {}
        for i in run:
            speed[i] = min(job_speeds(i), x.get(i, 1.0))

    def view_now() -> JobView | None:
        # Trace order is arrival order, so the active jobs come out of flatnonzero already sorted.
        active = np.flatnonzero((status == _WAITING) | (status == _RUNNING)).tolist()
        if not active:
            return None
        # remaining solo time: on the current allocation, or (never started) on the requested GPUs
        remaining = np.where(np.isnan(iter_time), solo_total, work - progress)
        return JobView(now=now, active=active, arrival=arrival, gpus=req, running=status == _RUNNING,
                       attained=attained, remaining=remaining, completion=completion, alloc=alloc,
                       occupants=occupants, speed=speed, restarting=status == _RESTARTING)

    def grow(keep: list[int], size: dict[int, int], spare: int) -> None:
        """Give ``spare`` GPUs one at a time to the admitted job with the largest t(k) / t(k + 1) > 1."""
        def gain(i: int) -> float:
            k = size[i]
            if k >= min(jobs[i].max_gpus, n_gpus):
                return 1.0
            return times(jobs[i], gpu_type[0], k) / times(jobs[i], gpu_type[0], k + 1)
        heap = [(-gain(i), pos, i) for pos, i in enumerate(keep)]
        heapq.heapify(heap)
        while spare > 0 and heap:
            g, pos, i = heapq.heappop(heap)
            if -g <= 1.0 + 1e-12:
                break
            size[i] += 1
            spare -= 1
            heapq.heappush(heap, (-gain(i), pos, i))

    def reschedule(order: list[int]) -> None:
        is_running = (status == _RUNNING).tolist()
        need = req.tolist()
        if scheduler.preemptive:
            budget, keep = n_gpus, []
            for i in order:
                if need[i] <= budget:
                    keep.append(i)
                    budget -= need[i]
            size = {i: need[i] for i in keep}
            if scheduler.elastic:
                grow(keep, size, budget)
            for i in order:
                if is_running[i] and (i not in size or len(alloc[i]) != size[i]):
                    preempt(i)
            for i in keep:
                if status[i] != _RUNNING:
                    start(i, pick_free(size[i]))
        else:
            left = []
            for i in order:
                if not is_running[i]:
                    got = pick_free(need[i])
                    if got is None:
                        left.append(i)
                    else:
                        start(i, got)
            if scheduler.share:
                for i in order:  # a job sharing GPUs moves to free ones when they exist (migration, no cost)
                    if status[i] == _RUNNING and any(len(occupants[g]) > 1 for g in alloc[i]):
                        free = pick_free(int(req[i]))
                        if free is not None:
                            preempt(i)  # a migration: its restore costs preemption_cost
                            start(i, free)
                for i in left:
                    got = pick_shared(i)
                    if got is not None:
                        start(i, got)
        if variable_speed:
            refresh_speeds()

    now = 0.0
    n_done = 0
    n_events = 0
    while n_done < n:
        n_events += 1
        if n_events > max_events:
            raise RuntimeError(f"cluster simulation exceeded max_events={max_events} at t={now:.1f} s")
        running = np.flatnonzero(status == _RUNNING)
        t_done = math.inf
        if running.size:
            with np.errstate(divide="ignore"):
                ends = now + (work[running] - progress[running]) / speed[running]
            t_done = float(ends.min())
        t_evt = events[0][0] if events else math.inf
        t_next = min(t_done, t_evt)
        if not math.isfinite(t_next):
            raise RuntimeError(f"cluster simulation stalled at t={now:.1f} s with {n - n_done} jobs unfinished")
        dt = t_next - now
        if dt > 0 and running.size:
            progress[running] += speed[running] * dt
            attained[running] += ngpu[running] * dt
            held[running] += dt
            busy_gpu_s += n_busy[0] * dt  # GPUs busy since the last event
            work_gpu_s += float(speed[running] @ ngpu[running]) * dt
        now = t_next
        changed = False
        resumed = False
        finished = running[progress[running] >= work[running] * (1 - 1e-12) - _EPS] if running.size else running
        for i in finished.tolist():
            progress[i] = work[i]
            release(i)  # a partner's solo speed is restored by refresh_speeds() in reschedule()
            status[i] = _DONE
            completion[i] = now
            n_done += 1
            changed = True
        while events and events[0][0] <= now:
            _, kind, _, i = heapq.heappop(events)
            if kind in (_ARRIVAL, _RESTART):
                status[i] = _WAITING
                if kind == _ARRIVAL:  # solo duration on the requested GPUs (of the first node's type), for SRTF
                    job = jobs[i]
                    t = times(job, gpu_type[0], job.gpus)
                    solo_total[i] = fl.total_work(job.iterations, t, every[i], job.checkpoint_cost)
            elif kind == _ROUND:
                round_pending = False
            elif kind == _FAILURE:
                g = int(rng.integers(n_gpus))
                for v in list(occupants[g]):
                    job = jobs[v]
                    back = fl.rollback(progress[v], iter_time[v], every[v], job.checkpoint_cost)
                    lost[v] += progress[v] - back
                    progress[v] = back
                    interruptions[v] += 1
                    release(v)
                    stall_end[v] = 0.0
                    suspended[v] = False
                    status[v] = _RESTARTING
                    heapq.heappush(events, (now + failures.restart_delay, _RESTART, seq, v))
                    seq += 1
                if n_done < n:
                    heapq.heappush(events, (now + float(rng.exponential(1.0 / fail_rate)), _FAILURE, seq, -1))
                    seq += 1
            elif kind == _SLOW_START:
                g = int(rng_slow.integers(n_gpus))
                if not gpu_slow[g]:
                    gpu_slow[g] = True
                    heapq.heappush(events, (now + float(rng_slow.exponential(failures.straggler_duration)),
                                            _SLOW_END, seq, g))
                    seq += 1
                if n_done < n:
                    heapq.heappush(events, (now + float(rng_slow.exponential(1.0 / slow_rate)), _SLOW_START, seq, -1))
                    seq += 1
            elif kind == _SLOW_END:
                gpu_slow[i] = False  # here i is a GPU id
            elif kind == _RESUME:  # a restore ended: not a scheduling decision, only the job's speed changes
                resumed = True
                continue
            changed = True
        if resumed and not changed:
            refresh_speeds()
        if changed:
            view = view_now()
            if view is not None:
                order = yield view
                if isinstance(order, Allocation):
                    apply(order)
                else:
                    reschedule(list(order))
            if scheduler.round_s is not None and not round_pending and (status == _WAITING).any():
                heapq.heappush(events, (now + scheduler.round_s, _ROUND, seq, -1))
                seq += 1
                round_pending = True
            if n_busy[0] != util_v[-1]:
                util_t.append(now)
                util_v.append(n_busy[0])

    return summarise(trace=trace, cluster=cluster, scheduler=scheduler.name, seed=seed, completion=completion,
                     first_start=first_start, iter_time=iter_time, held=held, interruptions=interruptions,
                     lost=lost, busy_gpu_s=busy_gpu_s, work_gpu_s=work_gpu_s, util_t=np.array(util_t),
                     util_v=np.array(util_v), every=every)
