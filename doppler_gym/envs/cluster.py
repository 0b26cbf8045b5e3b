"""``Doppler-Cluster-v0``: online job scheduling on the job-level cluster simulator (:mod:`doppler_gym.cluster`)."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from doppler_gym.cluster import placement as pl
from doppler_gym.cluster import schedulers, traces
from doppler_gym.cluster.failures import FailureModel
from doppler_gym.cluster.interference import GavelInterference
from doppler_gym.cluster.metrics import ClusterResult
from doppler_gym.cluster.schedulers import Allocation, JobView
from doppler_gym.cluster.simulation import ClusterSimulation
from doppler_gym.cluster.timing import IterationTimes
from doppler_gym.cluster.types import Cluster, JobTrace
from doppler_gym.envs.masked import MASK_DTYPE, InvalidActions, action_index, episode_over_error, mask_space
from doppler_gym.specs import parse_spec, spec_name

JOB_FEATURES = ("present", "waiting", "running", "shared", "gpus", "nodes", "attained", "age", "speed", "remaining")
NODE_FEATURES = ("free_gpus", "shareable_gpus")
CLUSTER_FEATURES = ("free_gpus", "shareable_gpus", "time", "hidden_jobs")


class _External(schedulers.Scheduler):
    """The simulation's flags for the env's decisions: only ``round_s`` matters (the env sends Allocations)."""

    name = "agent"

    def __init__(self, round_s: float | None) -> None:
        self.round_s = round_s

    def order(self, view: schedulers.JobView) -> list[int]:
        """Never called: the env decides by :meth:`ClusterSimulation.apply_allocation` instead."""
        raise RuntimeError("the env's actions allocate the jobs; ClusterSimulation.apply_allocation does not call "
                           "Scheduler.order")


class ClusterEnv(gym.Env):
    """Decide which waiting or running job gets which GPUs, at each scheduling event of a shared GPU cluster.

    ## Description

    A trace of training jobs (arrival time, GPUs requested, iterations) arrives online at a GPU
    cluster simulated by :mod:`doppler_gym.cluster` (a
    :class:`~doppler_gym.cluster.simulation.ClusterSimulation`, which applies the env's decision as an
    :class:`~doppler_gym.cluster.schedulers.Allocation`). At each event (an arrival, a completion,
    a failure's restart, a round tick every ``round_s`` seconds while a job waits) the agent edits
    the allocation one action at a time: start a waiting job on free GPUs packed on the fewest nodes
    or spread over nodes, start it on GPUs already in use (sharing, at the speeds of the interference
    model, Gavel's measurements by default), or preempt a running job (it keeps its progress; its next
    start pays ``preemption_cost`` seconds of checkpoint restore, holding its GPUs). Preempting a job
    and starting it elsewhere in the same event migrates it. "Advance" hands the allocation to the
    engine, which runs to the next event. Jobs are gang-scheduled on exactly their requested GPUs.
    Failures and stragglers follow ``failures`` (a job hit by a failure rolls back to its last
    checkpoint and is away for the restart delay). The goal is a small total (so average) job
    completion time (JCT).

    The simple mode of the first version (start waiting jobs only, packed; no preemption, no
    sharing) is ``preemption=False, sharing=False, gpu_choices=("pack",)``.

    ## Action Space

    ``Discrete(max_jobs * n_modes + 1)``, ``modes`` = ``gpu_choices`` (``"pack"``, ``"spread"``), then
    ``"share"`` if ``sharing``, then ``"preempt"`` if ``preemption`` (``env.modes``). Action
    ``row * n_modes + m`` applies mode ``m`` to the job in ``row`` of the observation; the last
    action advances. Validity (``obs["action_mask"]``, also :meth:`action_masks` for sb3-contrib's
    MaskablePPO):

    - ``pack`` / ``spread``: the job waits and its GPUs are free (:func:`doppler_gym.cluster.placement.pack`
      / ``spread``); ``spread`` is masked where it would pick the same GPUs as ``pack``;
    - ``share``: the job waits and :func:`~doppler_gym.cluster.placement.shared` finds GPUs holding
      one job each that it may share with;
    - ``preempt``: the job was running at this event and has not been preempted in it (a job
      started in this event cannot be preempted in it, so an event takes at most two actions per job);
    - advance: some job would run (the cluster never idles while jobs wait).

    When advance is the only valid action the env advances by itself. An invalid action, with
    ``invalid_action="penalize"`` (default), leaves the state unchanged, is rewarded
    ``invalid_penalty`` (default -0.01) and flagged ``info["invalid_action"] = True``
    (``info["invalid_streak"]``: how many in a row); ``max_invalid_streak`` in a row (default
    ``None``: no limit) truncate the episode. With ``invalid_action="raise"`` it raises
    ``ValueError`` listing the valid actions. A non-integer action raises ``TypeError``.

    ## Observation Space

    A ``Dict``. Rows are the visible jobs: the first ``max_jobs`` active (arrived, waiting or
    running, not in a restart delay) jobs in arrival order (a sliding window over longer traces);
    padding rows are 0.

    ==================  ===========================  ========  =========================================
    key                 shape                        dtype     content
    ==================  ===========================  ========  =========================================
    ``jobs``            ``(max_jobs, 10)``           float32   per row: present; waiting; running; on
                                                               a shared GPU; GPUs requested / cluster
                                                               GPUs; nodes it spans / nodes; attained
                                                               service (GPU s) / ``time_scale``; age
                                                               (now - arrival) / ``time_scale``; speed
                                                               (solo s per s, 0 restoring or just
                                                               started); remaining solo time /
                                                               ``time_scale`` (0 unless
                                                               ``known_durations``)
    ``nodes``           ``(n_nodes, 2)``             float32   per node: free GPUs, GPUs holding one
                                                               job, / its GPUs
    ``cluster``         ``(4,)``                     float32   free GPUs, GPUs holding one job, / GPUs;
                                                               now / ``time_scale``; active jobs
                                                               outside the window / ``max_jobs``
    ``action_mask``     ``(max_jobs * n_modes + 1,)``  int8    1 where the action is valid
    ==================  ===========================  ========  =========================================

    The observation reflects the allocation edited so far in this event. No future arrivals are shown.

    ## Rewards

    Minus the increase of the summed time in system of all jobs (each arrived job counts from its
    arrival to its completion or to now) since the previous step, divided by ``time_scale`` [s]
    (default 3600: job-hours). Steps that do not advance get 0. The undiscounted return of a
    complete episode is therefore ``-sum(JCT) / time_scale`` (up to float rounding). Invalid
    actions get ``invalid_penalty``.

    ## Starting State

    The first event (the first arrival), nothing running. ``reset(seed=...)`` seeds ``np_random``,
    which draws the engine's seed (failures, stragglers) and, with ``resample_trace``, the trace.

    ## Episode End

    Terminates when the last job completes (the terminal observation's mask marks "advance" alone, so a
    masked policy handed it stays defined; stepping raises until ``reset()``); ``info`` then holds the
    run's scalar metrics (``avg_jct``, ``p99_jct``, ``makespan``, ``utilisation``, ``occupancy``, ``goodput``,
    ``effective_fraction``, ``interruptions``, from :meth:`ClusterResult.summary`) and ``result``
    (the :class:`ClusterResult`). Truncated after ``max_steps`` steps. Every step's ``info`` has
    ``now`` [s], ``n_done``, ``n_running``, ``n_waiting``, ``busy_gpus``.

    ## Arguments

    - ``trace``: a :class:`~doppler_gym.cluster.JobTrace`, a shipped trace name
      (``doppler_gym.cluster.traces.names()``), or ``"generated:N"`` (``traces.generate(N, seed=seed,
      **trace_kwargs)``). Default ``"generated:16"``.
    - ``cluster``: a :class:`~doppler_gym.cluster.Cluster` (default ``Cluster.uniform(2, 8)``: 16 V100).
    - ``max_jobs``: rows of the job window (default ``min(len(trace), 32)``).
    - ``seed``: seeds a generated trace (default 0).
    - ``time_scale``: [s] the unit of the reward and of the time features (default 3600).
    - ``preemption`` (default True), ``sharing`` (default True), ``gpu_choices`` (default
      ``("pack", "spread")``): the action modes.
    - ``preemption_cost``: [s] checkpoint restore after a preemption or migration (default 0).
    - ``failures``: a :class:`~doppler_gym.cluster.FailureModel` (default none); ``checkpoints``:
      ``"fixed"`` or ``"young"`` (as :func:`doppler_gym.cluster.run`).
    - ``round_s``: [s] round ticks while a job waits (default None: none).
    - ``interference``: the sharing model (default :class:`~doppler_gym.cluster.GavelInterference`).
    - ``known_durations``: show each job's remaining solo time (default False).
    - ``resample_trace``: with ``"generated:N"``, draw a new trace at each reset (default False).
    - ``trace_kwargs``: keyword arguments of ``traces.generate`` for ``"generated:N"``.
    - ``max_steps``: truncation (default ``200 * len(trace) + 1000``).
    - ``invalid_action`` (``"penalize"`` or ``"raise"``, default ``"penalize"``), ``invalid_penalty``
      (default -0.01, in the reward's unit), ``max_invalid_streak`` (default ``None``: no limit)
      [steps]: what an invalid action does (see Action Space).

    ## Version History

    - v0: initial version (start, pack/spread, share, preempt; failures and round ticks by argument;
      sliding job window).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, trace: JobTrace | str = "generated:16", cluster: Cluster | None = None,
                 max_jobs: int | None = None, seed: int = 0, time_scale: float = 3600.0, *,
                 preemption: bool = True, sharing: bool = True, gpu_choices: tuple[str, ...] = ("pack", "spread"),
                 preemption_cost: float = 0.0, failures: FailureModel | None = None, checkpoints: str = "fixed",
                 round_s: float | None = None, interference: object | None = None, known_durations: bool = False,
                 resample_trace: bool = False, trace_kwargs: dict[str, Any] | None = None,
                 max_steps: int | None = None, invalid_action: str = "penalize", invalid_penalty: float = -0.01,
                 max_invalid_streak: int | None = None, render_mode: str | None = None) -> None:
        if render_mode is not None:
            raise ValueError(f"render_mode={render_mode!r}: Doppler-Cluster-v0 has no render modes")
        # what an action the mask rules out does (penalty, or ValueError)
        self.invalid_actions = InvalidActions(invalid_action, invalid_penalty, max_invalid_streak)
        self._view = None  # the engine's view at the current event; None: no episode running (set by reset)
        self._truncated = False  # the episode was truncated (max_steps, max_invalid_streak)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"seed must be an int, got {seed!r}")
        self._trace_kwargs = dict(trace_kwargs or {})
        self._trace_spec = trace
        self.trace = _as_trace(trace, int(seed), self._trace_kwargs)
        if resample_trace and not (isinstance(trace, str) and trace.startswith("generated:")):
            raise ValueError("resample_trace=True needs trace='generated:N'")
        if cluster is None:
            cluster = Cluster.uniform(2, 8)
        if not isinstance(cluster, Cluster):
            raise TypeError(f"cluster must be a doppler_gym.cluster.Cluster, got {type(cluster).__name__}")
        self.cluster = cluster
        n = len(self.trace)
        if max_jobs is None:
            max_jobs = min(n, 32)
        if isinstance(max_jobs, bool) or not isinstance(max_jobs, (int, np.integer)) or max_jobs < 1:
            raise ValueError(f"max_jobs must be an int >= 1, got {max_jobs!r}")
        if not (isinstance(time_scale, (int, float)) and np.isfinite(time_scale) and time_scale > 0):
            raise ValueError(f"time_scale must be a finite number > 0 [s], got {time_scale!r}")
        gpu_choices = tuple(gpu_choices)
        bad = [c for c in gpu_choices if c not in pl.GPU_CHOICES]
        if not gpu_choices or bad or len(set(gpu_choices)) != len(gpu_choices):
            raise ValueError(f"gpu_choices must be distinct names among {pl.GPU_CHOICES}, got {gpu_choices!r}")
        if failures is not None and not isinstance(failures, FailureModel):
            raise TypeError(f"failures must be a doppler_gym.cluster.FailureModel or None, got {failures!r}")
        if round_s is not None and not (isinstance(round_s, (int, float)) and round_s > 0):
            raise ValueError(f"round_s must be None or > 0 [s], got {round_s!r}")
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"max_steps must be None or an int >= 1, got {max_steps!r}")
        self.modes = (*gpu_choices, *(("share",) if sharing else ()), *(("preempt",) if preemption else ()))
        self.n_jobs, self.max_jobs, self.time_scale, self.seed_ = n, int(max_jobs), float(time_scale), int(seed)
        self.preemption_cost, self.failures, self.checkpoints = preemption_cost, failures or FailureModel(), checkpoints
        self.round_s, self.known_durations, self.resample_trace = round_s, bool(known_durations), bool(resample_trace)
        self.interference = interference if interference is not None else GavelInterference()
        self.max_steps = max_steps if max_steps is not None else 200 * n + 1000
        self.render_mode = None
        self._times = IterationTimes(cluster)
        self._gpu_node = np.repeat(np.arange(len(cluster.nodes)), [nd.gpus for nd in cluster.nodes])
        self._gpu_type = [cluster.nodes[k].gpu_type for k in self._gpu_node]
        self._node_gpus = np.array([nd.gpus for nd in cluster.nodes], dtype=np.float64)
        self._set_trace(self.trace)
        nm = len(self.modes)
        self.n_actions = self.max_jobs * nm + 1
        self.action_space = spaces.Discrete(self.n_actions)
        self.observation_space = spaces.Dict({
            "jobs": spaces.Box(0.0, np.inf, (self.max_jobs, len(JOB_FEATURES)), np.float32),
            "nodes": spaces.Box(0.0, 1.0, (len(cluster.nodes), len(NODE_FEATURES)), np.float32),
            "cluster": spaces.Box(0.0, np.inf, (len(CLUSTER_FEATURES),), np.float32),
            "action_mask": mask_space(self.n_actions),
        })
        # the constructor checks the trace and options against the cluster now (ValueError), not at reset; the
        # first event also fills the iteration-time cache of the jobs arriving first
        self._new_sim(0).run_until_decision()

    def _set_trace(self, trace: JobTrace) -> None:
        self.trace = trace
        self.n_jobs = len(trace)
        self._arrival = np.array([j.arrival for j in trace.jobs])
        self._req = np.array([j.gpus for j in trace.jobs], dtype=np.int64)
        self._types = [j.job_type for j in trace.jobs]

    def _new_sim(self, seed: int) -> ClusterSimulation:
        return ClusterSimulation(self.trace, self.cluster, _External(self.round_s), seed=seed, failures=self.failures,
                                 interference=self.interference, times=self._times, checkpoints=self.checkpoints,
                                 preemption_cost=self.preemption_cost)

    # -- episode --------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if self.resample_trace:
            n = _generated_count(str(self._trace_spec))
            self._set_trace(traces.generate(n, seed=int(self.np_random.integers(2**31)), **self._trace_kwargs))
        self._sim = self._new_sim(int(self.np_random.integers(2**31)))
        self._view: JobView | None = self._sim.run_until_decision()
        self._result: ClusterResult | None = None
        self._steps = 0
        self._truncated = False
        self.invalid_actions.reset()
        self._in_system = 0.0  # [s] summed time in system at the current event
        self._begin_event()
        self._settle()
        return self._obs(), self._info()

    def step(self, action):
        if self._view is None or self._truncated:
            raise episode_over_error("ClusterEnv.step")
        a = action_index(action, "ClusterEnv.step", "row * n_modes + mode, or n_actions - 1 to advance")
        if not (0 <= a < self.n_actions and self._mask[a]):
            reward, truncated, rejection = self.invalid_actions.reject(lambda: self._invalid_message(a))
            self._steps += 1
            self._truncated = truncated or self._steps >= self.max_steps
            return self._obs(), reward, False, self._truncated, {**self._info(), **rejection}
        self._steps += 1
        self.invalid_actions.accept()
        before = self._in_system
        if a == self.n_actions - 1:
            self._advance()
        else:
            self._apply(self._rows[a // len(self.modes)], self.modes[a % len(self.modes)])
        self._settle()
        reward = -(self._in_system - before) / self.time_scale
        terminated = self._view is None
        info = self._info()
        if terminated:
            info.update(self._result.summary())
            info["result"] = self._result
        self._truncated = not terminated and self._steps >= self.max_steps
        return self._obs(), float(reward), terminated, self._truncated, info

    def action_masks(self) -> np.ndarray:
        """``(n_actions,) int8``: 1 where the action is valid (== ``obs["action_mask"]``)."""
        return self._mask.copy()

    def _invalid_message(self, a: int) -> str:
        valid = np.flatnonzero(self._mask)
        return (f"ClusterEnv.step: action {a} is not valid at this event (valid: {valid[:20].tolist()}"
                f"{' ...' if valid.size > 20 else ''}; {self.n_actions - 1} = advance; action(job, mode) "
                f"gives a job's action); use action_masks()")

    @property
    def job_rows(self) -> np.ndarray:
        """``(k,) int64``, k <= max_jobs: the trace index of the job in each observation row (empty at the end)."""
        return self._rows.copy() if self._view is not None else np.zeros(0, np.int64)

    @property
    def job_view(self) -> JobView | None:
        """The engine's :class:`JobView` at this event (live and read-only; ``None`` after the episode),
        for heuristic policies driven through the env."""
        return self._view

    def action(self, job: int, mode: str) -> int:
        """The action index applying ``mode`` (one of ``self.modes``) to trace job ``job`` in its row."""
        rows = self._rows.tolist() if self._view is not None else []
        if job not in rows or mode not in self.modes:
            raise ValueError(f"job {job} is not in a row ({rows}) or mode {mode!r} not in {self.modes}")
        return rows.index(job) * len(self.modes) + self.modes.index(mode)

    # -- the allocation edited in this event ------------------------------------------------------
    def _begin_event(self) -> None:
        """Copy the engine's allocation at this event into the working plan."""
        if self._view is None:
            return
        v = self._view
        self._plan = {int(i): list(v.alloc[i]) for i in np.flatnonzero(v.running)}
        self._occ = [list(o) for o in v.occupants]
        self._was_running = set(self._plan)
        self._preempted: set[int] = set()
        self._started: set[int] = set()
        arrived = self._arrival <= v.now
        end = np.where(np.isnan(v.completion), v.now, v.completion)
        self._in_system = float((end - self._arrival)[arrived].sum())
        active = np.asarray(v.active, dtype=np.int64)
        self._rows = active[: self.max_jobs]
        self._hidden = len(active) - len(self._rows)
        self._refresh_mask()

    def _candidates(self, i: int) -> dict[str, list[int] | None]:
        """GPUs each start mode would give waiting job ``i`` now (``None``: not possible)."""
        k = int(self._req[i])
        free = pl.free_by_node(self._occ, self._gpu_node)
        out: dict[str, list[int] | None] = {}
        for c in self.modes:
            if c in pl.GPU_CHOICES:
                out[c] = pl.choose(c, free, k)
            elif c == "share":
                out[c] = pl.shared(self._types[i], k, self._occ, self._types, self._gpu_type, self.interference)
        if "spread" in out and "pack" in out and out["spread"] == out["pack"]:
            out["spread"] = None
        return out

    def _refresh_mask(self) -> None:
        nm = len(self.modes)
        mask = np.zeros(self.n_actions, MASK_DTYPE)  # (n_actions,) 1 = valid action
        self._cands: dict[int, dict[str, list[int] | None]] = {}
        for r, i in enumerate(self._rows.tolist()):
            if i in self._plan:
                if "preempt" in self.modes and i in self._was_running and i not in self._preempted:
                    mask[r * nm + self.modes.index("preempt")] = True
                continue
            cands = self._candidates(i)
            self._cands[i] = cands
            for m, c in enumerate(self.modes):
                if cands.get(c) is not None:
                    mask[r * nm + m] = True
        mask[-1] = bool(self._plan)
        self._mask = mask

    def _apply(self, i: int, mode: str) -> None:
        if mode == "preempt":
            for g in self._plan.pop(i):
                self._occ[g].remove(i)
            self._preempted.add(i)
        else:
            gpus = self._cands[i][mode]
            self._plan[i] = list(gpus)
            for g in gpus:
                self._occ[g].append(i)
            self._started.add(i)
        self._refresh_mask()

    # -- simulation -----------------------------------------------------------------------------
    def _advance(self) -> None:
        """Hand the edited allocation to the simulation and run it to the next decision point (or the end)."""
        self._sim.apply_allocation(Allocation({i: tuple(g) for i, g in self._plan.items()}))
        self._view = self._sim.run_until_decision()
        if self._view is None:
            self._result = self._sim.result()
            self._in_system = float(self._result.jobs["jct"].sum())
            self._mask = np.zeros(self.n_actions, MASK_DTYPE)
            self._mask[-1] = 1  # the terminal observation marks "advance" alone: never an all-zero mask
            return
        self._begin_event()

    def _settle(self) -> None:
        """Advance while advancing is the only valid action."""
        while self._view is not None and self._mask[-1] and self._mask.sum() == 1:
            self._advance()

    def _obs(self) -> dict[str, np.ndarray]:
        jobs = np.zeros((self.max_jobs, len(JOB_FEATURES)), np.float32)
        nodes = np.zeros((len(self.cluster.nodes), len(NODE_FEATURES)), np.float32)
        clus = np.zeros(len(CLUSTER_FEATURES), np.float32)
        g, n_nodes = self.cluster.n_gpus, len(self.cluster.nodes)
        if self._view is not None:
            v = self._view
            rows = self._rows
            k = len(rows)
            running = np.array([i in self._plan for i in rows.tolist()], dtype=bool)
            occ_n = np.array([len(o) for o in self._occ])
            jobs[:k, 0] = 1.0
            jobs[:k, 1] = ~running
            jobs[:k, 2] = running
            for r, i in enumerate(rows.tolist()):
                gs = self._plan.get(i, [])
                if gs:
                    jobs[r, 3] = float((occ_n[gs] > 1).any())
                    jobs[r, 5] = len(set(self._gpu_node[gs].tolist())) / n_nodes
            jobs[:k, 4] = self._req[rows] / g
            jobs[:k, 6] = v.attained[rows] / self.time_scale
            jobs[:k, 7] = np.maximum(v.now - self._arrival[rows], 0.0) / self.time_scale
            unchanged = np.array([i in self._was_running and i not in self._started for i in rows.tolist()], bool)
            jobs[:k, 8] = np.where(unchanged, v.speed[rows], 0.0)
            if self.known_durations:
                jobs[:k, 9] = np.maximum(v.remaining[rows], 0.0) / self.time_scale
            free = np.bincount(self._gpu_node[occ_n == 0], minlength=n_nodes)
            single = np.bincount(self._gpu_node[occ_n == 1], minlength=n_nodes)
            nodes[:, 0] = free / self._node_gpus
            nodes[:, 1] = single / self._node_gpus
            clus[:] = (free.sum() / g, single.sum() / g, v.now / self.time_scale, self._hidden / self.max_jobs)
        else:
            nodes[:, 0] = 1.0
            clus[:] = (1.0, 0.0, np.nanmax(self._result.jobs["completion"]) / self.time_scale, 0.0)
        return {"jobs": jobs, "nodes": nodes, "cluster": clus, "action_mask": self._mask.copy()}

    def _info(self) -> dict[str, Any]:
        if self._view is None:
            return {"now": float(np.nanmax(self._result.jobs["completion"])), "n_done": self.n_jobs,
                    "n_running": 0, "n_waiting": 0, "busy_gpus": 0}
        v = self._view
        return {"now": float(v.now), "n_done": int((~np.isnan(v.completion)).sum()), "n_running": len(self._plan),
                "n_waiting": len(v.active) - len(self._plan), "busy_gpus": sum(1 for o in self._occ if o)}


def _as_trace(trace: JobTrace | str, seed: int, kwargs: dict[str, Any]) -> JobTrace:
    if isinstance(trace, JobTrace):
        return trace
    if not isinstance(trace, str):
        raise TypeError(f"trace must be a JobTrace, a shipped trace name or 'generated:N', got {type(trace).__name__}")
    if spec_name(trace) == "generated":
        return traces.generate(_generated_count(trace), seed=seed, **kwargs)
    if trace not in traces.names():
        raise ValueError(f"unknown trace {trace!r}; give a JobTrace, 'generated:N' or one of: "
                         f"{', '.join(traces.names())}")
    return traces.load(trace)


def _generated_count(trace: str) -> int:
    """The job count N of a ``"generated:N"`` trace spec (:mod:`doppler_gym.specs`)."""
    usage = "'generated:N' with an integer N >= 1"
    count = "".join(parse_spec(trace, "trace", max_args=1, params=False, usage=usage).args)
    if not count.isdecimal() or int(count) < 1:
        raise ValueError(f"trace={trace!r}: 'generated:N' needs an integer N >= 1")
    return int(count)
