"""``Doppler-Cluster-v0``: online job scheduling on the job-level cluster simulator (:mod:`doppler_gym.cluster`).

The observation is built by :mod:`doppler_gym.envs.cluster_obs`, the reward by
:mod:`doppler_gym.envs.cluster_reward`; this module holds the env: its arguments, the allocation the
agent edits within an event, and the simulation it hands that allocation to.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from doppler_gym.cli.cluster_cmd import parse_cluster
from doppler_gym.cluster import placement as pl
from doppler_gym.cluster import schedulers, traces
from doppler_gym.cluster.engine import simulate_cluster
from doppler_gym.cluster.failures import FailureModel
from doppler_gym.cluster.interference import GavelInterference
from doppler_gym.cluster.metrics import ClusterResult
from doppler_gym.cluster.schedulers import Allocation, JobView
from doppler_gym.cluster.simulation import ClusterSimulation
from doppler_gym.cluster.timing import IterationTimes
from doppler_gym.cluster.types import Cluster, JobTrace
from doppler_gym.envs.cluster_obs import CLUSTER_FEATURES, JOB_FEATURES, NODE_FEATURES, ClusterObservation
from doppler_gym.envs.cluster_reward import REWARDS, BaselineTimeInSystem, time_in_system
from doppler_gym.envs.masked import MASK_DTYPE, InvalidActions, action_index, episode_over_error, reset_options
from doppler_gym.specs import parse_spec, spec_name

__all__ = ["CLUSTER_FEATURES", "DEFAULT_PREEMPTION_COST", "JOB_FEATURES", "NODE_FEATURES", "ClusterEnv",
           "ObservationInputs"]

# [s] checkpoint restore a job pays when it starts again after a preemption or a migration: the 30 s
# re-allocation delay of the Pollux/AdaptDL simulator (petuum/adaptdl, simulator/simulator.py,
# Job.reallocate: rescale_time = 30), the figure docs/results/cluster.md uses for the Pollux workload
DEFAULT_PREEMPTION_COST = 30.0


class ObservationInputs(NamedTuple):
    """:meth:`ClusterEnv.observation_inputs`: the arguments of ``ClusterObservation.build``, in its order."""

    view: JobView | None  # the engine's view at this event (None after the last completion)
    rows: np.ndarray  # (k,) int64, k <= max_jobs: the trace index of the job in each observation row
    plan: dict[int, list[int]]  # {job: GPU ids} of the jobs running in the edited allocation
    occupants: list[list[int]]  # (n_gpus,) the jobs on each GPU in the edited allocation
    unchanged: np.ndarray  # (k,) bool: the row's job runs as it ran when the event began
    hidden: int  # active jobs outside the window
    mask: np.ndarray  # (n_actions,) int8 the valid actions
    head_speed: dict[str, float]  # {GPU type: speed} of the head waiting job ({} on a one-type cluster)


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

    ``Discrete(max_jobs * n_modes + 1)``, ``modes`` = ``gpu_choices`` (``"pack"``, ``"spread"``), then, on a
    cluster of several GPU types (``env.gpu_types``, sorted), ``"pack:T"``/``"spread:T"`` for each choice and
    type ``T``, then ``"share"`` if ``sharing``, then ``"preempt"`` if ``preemption`` (``env.modes``). Action
    ``row * n_modes + m`` applies mode ``m`` to the job in ``row`` of the observation; the last
    action advances. Validity (``obs["action_mask"]``, int8, also :meth:`action_masks` for
    sb3-contrib's MaskablePPO):

    - ``pack`` / ``spread``: the job waits and its GPUs are free (:func:`doppler_gym.cluster.placement.pack`
      / ``spread``), of the fastest GPU type for the job with enough free (the engine's rule: a job larger
      than every type it can run on spans those types); ``spread`` is masked where it would pick the same
      GPUs as ``pack``; ``pack:T`` / ``spread:T``: the same on type ``T``, masked where the job cannot run on
      ``T`` (iteration time ``inf``) or where it gives what ``pack`` / ``spread`` gives; restarting a
      job preempted in this event on exactly the GPUs it held (undoing the preemption) is masked,
      unless the mask would otherwise be all zero or advancing is blocked (below) with no other start
      on free GPUs valid;
    - ``share``: the job waits, needs one GPU, and :func:`~doppler_gym.cluster.placement.shared` finds a
      GPU (of its fastest type that has one) holding one single-GPU job that it may share with;
    - ``preempt``: the job was running at this event and has not been preempted in it (a job
      started in this event cannot be preempted in it, so an event takes at most two actions per job)
      and, with ``preempt_to_fit`` (default), some visible waiting job does not fit on the free GPUs
      (a preemption can only make room for one; without the rule a policy can preempt and restart
      jobs to no end, each restart elsewhere paying ``preemption_cost``);
    - advance: some job would run and, with ``work_conserving`` (default), no visible waiting job
      fits on the free GPUs (``pack`` or ``spread`` would place it): the cluster never idles GPUs a
      waiting job could use, so a policy chooses which jobs run and in what order, not whether to
      leave GPUs idle. Preempting a job therefore only pays where another job takes its GPUs.

    When advance is the only valid action the env advances by itself. An invalid action, with
    ``invalid_action="penalize"`` (default), leaves the state unchanged, is rewarded
    ``invalid_penalty`` (default -0.01) and flagged ``info["invalid_action"] = True``
    (``info["invalid_streak"]``: how many in a row); ``max_invalid_streak`` in a row (default
    ``None``: no limit) truncate the episode. With ``invalid_action="raise"`` it raises
    ``ValueError`` listing the valid actions. A non-integer action raises ``TypeError``.

    ## Observation Space

    A ``Dict`` of finite boxes; every float lies in ``[0, 1]``, so an MLP (SB3's ``MultiInputPolicy``)
    can take it as it is. Rows of ``jobs`` are the visible jobs: the first ``max_jobs`` active
    (arrived, waiting or running, not in a restart delay) jobs in arrival order (a sliding window over
    longer traces); padding rows are 0. Times are squashed, ``sq(x) = x / (x + time_scale)``
    (:func:`doppler_gym.envs.cluster_obs.squash`: 0 at 0, 0.5 at ``time_scale``, monotone).

    ==================  ==============================  =======  ===============================================
    key                 shape                           dtype    columns (all in [0, 1])
    ==================  ==============================  =======  ===============================================
    ``jobs``            ``(max_jobs, 12)``              float32  ``present``: 1 for a job, 0 padding;
                                                                 ``waiting``, ``running``: 0/1 in the edited
                                                                 allocation; ``shared``: 1 if a GPU it runs on
                                                                 holds another job; ``gpus``: GPUs requested /
                                                                 cluster GPUs; ``nodes``: nodes it spans /
                                                                 nodes; ``attained``: sq(attained service
                                                                 [GPU s]); ``age``: sq(now - arrival [s]);
                                                                 ``speed``: solo seconds per second (0 while
                                                                 restoring, or started or preempted in this
                                                                 event); ``remaining``: sq(remaining solo time
                                                                 [s]) with ``known_durations``, else 0;
                                                                 ``attained_rank``: the fraction of the other
                                                                 visible jobs with less attained service;
                                                                 ``remaining_rank``: the same for remaining
                                                                 GPU-seconds (remaining solo time x GPUs) with
                                                                 ``known_durations``, else 0
    ``nodes``           ``(n_nodes, 2)``, or            float32  ``free_gpus``, ``shareable_gpus`` (holding one
                        ``(n_nodes, 3 + T)`` on a                job) / the node's GPUs; on a cluster of T > 1
                        cluster of T > 1 GPU types               types also ``type:T...`` (one-hot of the node's
                                                                 type, ``env.gpu_types`` order) and
                                                                 ``head_speed``: the head job's (first waiting
                                                                 job of the window) speed on the node's type, its
                                                                 fastest type's iteration time over this type's
                                                                 (1 on its fastest type, 0 where it cannot run
                                                                 or no job waits); ``env.node_features`` names
                                                                 the columns
    ``cluster``         ``(4,)``                        float32  ``free_gpus``, ``shareable_gpus`` / cluster
                                                                 GPUs; ``jobs_in_system``: J / (J +
                                                                 max_jobs), J the jobs arrived and unfinished
                                                                 (what the reward charges for); ``hidden_jobs``:
                                                                 h / (h + max_jobs), h the active jobs outside
                                                                 the window
    ``action_mask``     ``(max_jobs * n_modes + 1,)``   int8     1 where the action is valid
    ==================  ==============================  =======  ===============================================

    The observation reflects the allocation edited so far in this event. No future arrivals are shown.

    ## Rewards

    Charged per unit of simulated time (:mod:`doppler_gym.envs.cluster_reward`): an action that
    hands the allocation to the engine earns minus the job-seconds the jobs in the system (J:
    arrived and unfinished) accrue until the next decision, ``integral of J dt``, divided by
    ``time_scale`` [s] (default 3600: the unit is the job-hour). Actions within one event take no
    simulated time and earn 0. ``reward="time"`` (default; DeepRM's and Decima's reward): the
    undiscounted return of a complete episode is ``-sum(JCT) / time_scale`` exactly (up to float
    rounding). ``reward="relative"``: minus the same less what ``reward_baseline``'s run of the same
    trace (``dg.cluster.run``, same seed and options) accrues over the same interval, so the
    undiscounted return is ``(sum(JCT_baseline) - sum(JCT)) / time_scale``: 0 when the agent does
    what the baseline does, above 0 when it does better, and the arrivals' load, which both runs
    share, cancels out of each reward. Invalid actions get ``invalid_penalty``.

    Discount per step (SB3's ``gamma``) is per decision, not per second: with ``gamma < 1`` the
    zero-time edits within an event postpone, so shrink, every later reward, which under
    ``"time"`` (all rewards <= 0) favours churn. Use ``gamma = 1``, as DeepRM and Decima do (the
    shipped MaskablePPO recipe, ``agents/recipes/hyperparams/maskable_ppo.yml``, does).

    ## Starting State

    The first event (the first arrival), nothing running. ``reset(seed=...)`` seeds ``np_random``,
    which draws the engine's seed (failures, stragglers) and, with ``resample_trace``, the trace.

    ## Episode End

    Terminates when the last job completes (the terminal observation's mask marks "advance" alone, so a
    masked policy handed it stays defined; stepping raises until ``reset()``); ``info`` then holds the
    run's scalar metrics (``avg_jct``, ``p99_jct``, ``makespan``, ``utilisation``, ``occupancy``, ``goodput``,
    ``effective_fraction``, ``interruptions``, from :meth:`ClusterResult.summary`) and ``result``
    (the :class:`ClusterResult`), and with ``reward="relative"`` ``baseline_avg_jct`` [s]. Truncated
    after ``max_steps`` steps. Every step's ``info`` has ``now`` [s], ``n_done``, ``n_running``,
    ``n_waiting``, ``busy_gpus``.

    ## Arguments

    - ``trace``: a :class:`~doppler_gym.cluster.JobTrace`, a shipped trace name
      (``doppler_gym.cluster.traces.names()``), or ``"generated:N"`` (``traces.generate(N, seed=seed,
      **trace_kwargs)``). Default ``"generated:16"``.
    - ``cluster``: a :class:`~doppler_gym.cluster.Cluster` or a spec in the grammar of ``doppler
      cluster --cluster``, ``[uniform:]NODESxGPUS[:TYPE]`` (``"2x8"``, ``"uniform:4x8:p100"``; 8-GPU V100
      nodes are DGX-1) or ``TYPE:GPUS,...[/PER_NODE]`` (``"v100:8,p100:16,k80:24/4"``). Default
      ``Cluster.uniform(2, 8)``: 16 V100.
    - ``max_jobs``: rows of the job window (default ``min(len(trace), 32)``).
    - ``seed``: seeds a generated trace (default 0).
    - ``time_scale``: [s] the unit of the reward and the scale of the squashed time features
      (default 3600).
    - ``reward``: ``"time"`` (default) or ``"relative"`` (see Rewards); ``reward_baseline``: the
      scheduler of ``"relative"`` (a ``doppler_gym.cluster.schedulers.names()`` name, default ``"fifo"``).
    - ``preemption`` (default True), ``sharing`` (default True), ``gpu_choices`` (default
      ``("pack", "spread")``): the action modes.
    - ``preemption_cost``: [s] checkpoint restore after a preemption or migration (default
      :data:`DEFAULT_PREEMPTION_COST`, 30 s: the Pollux/AdaptDL simulator's re-allocation delay).
    - ``failures``: a :class:`~doppler_gym.cluster.FailureModel` (default none); ``checkpoints``:
      ``"fixed"`` or ``"young"`` (as :func:`doppler_gym.cluster.run`).
    - ``round_s``: [s] round ticks while a job waits (default None: none).
    - ``interference``: the sharing model (default :class:`~doppler_gym.cluster.GavelInterference`).
    - ``known_durations``: show each job's remaining solo time (default False).
    - ``work_conserving``: mask "advance" while a visible waiting job fits on the free GPUs (default
      True); ``preempt_to_fit``: mask "preempt" unless a visible waiting job does not fit on the free
      GPUs (default True). See Action Space.
    - ``resample_trace``: with ``"generated:N"``, draw a new trace at each reset (default False); the
      seed of the current generated trace is ``env.trace_seed`` (``None`` for other traces).
    - ``trace_kwargs``: keyword arguments of ``traces.generate`` for ``"generated:N"``.
    - ``max_steps``: truncation (default ``200 * len(trace) + 1000``).
    - ``invalid_action`` (``"penalize"`` or ``"raise"``, default ``"penalize"``), ``invalid_penalty``
      (default -0.01, in the reward's unit), ``max_invalid_streak`` (default ``None``: no limit)
      [steps]: what an invalid action does (see Action Space).

    ## Version History

    - v0: start, pack/spread, share, preempt; failures and round ticks by argument; sliding job
      window; observations in [0, 1]; reward per unit of simulated time (``"time"``, ``"relative"``);
      a 30 s default preemption cost; cluster specs; the work-conserving and preempt-to-fit mask rules;
      on clusters of several GPU types, the type modes (``pack:T``), type one-hot and head-job speed node
      features, type-aware ``pack``/``spread``; only single-GPU jobs share (the observation and modes of a
      one-type cluster are unchanged).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, trace: JobTrace | str = "generated:16", cluster: Cluster | str | None = None,
                 max_jobs: int | None = None, seed: int = 0, time_scale: float = 3600.0, *,
                 reward: str = "time", reward_baseline: str = "fifo",
                 preemption: bool = True, sharing: bool = True, gpu_choices: tuple[str, ...] = ("pack", "spread"),
                 preemption_cost: float = DEFAULT_PREEMPTION_COST, failures: FailureModel | None = None,
                 checkpoints: str = "fixed", round_s: float | None = None, interference: object | None = None,
                 known_durations: bool = False, work_conserving: bool = True, preempt_to_fit: bool = True,
                 resample_trace: bool = False,
                 trace_kwargs: dict[str, Any] | None = None, max_steps: int | None = None,
                 invalid_action: str = "penalize", invalid_penalty: float = -0.01,
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
        # the seed of traces.generate behind self.trace ("generated:N"; None for a JobTrace or a shipped trace)
        self.trace_seed: int | None = int(seed) if isinstance(trace, str) and spec_name(trace) == "generated" else None
        if resample_trace and not (isinstance(trace, str) and trace.startswith("generated:")):
            raise ValueError("resample_trace=True needs trace='generated:N'")
        self.cluster = cluster = _as_cluster(cluster)
        n = len(self.trace)
        if max_jobs is None:
            max_jobs = min(n, 32)
        if isinstance(max_jobs, bool) or not isinstance(max_jobs, (int, np.integer)) or max_jobs < 1:
            raise ValueError(f"max_jobs must be an int >= 1, got {max_jobs!r}")
        if isinstance(time_scale, bool) or not (isinstance(time_scale, (int, float)) and np.isfinite(time_scale)
                                                and time_scale > 0):
            raise ValueError(f"time_scale must be a finite number > 0 [s], got {time_scale!r}")
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
        if reward_baseline not in schedulers.names():
            raise ValueError(f"reward_baseline must be a scheduler name among {schedulers.names()}, "
                             f"got {reward_baseline!r}")
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
        self.gpu_types = tuple(sorted({nd.gpu_type for nd in cluster.nodes}))
        typed = tuple(f"{c}:{t}" for c in gpu_choices for t in self.gpu_types) if len(self.gpu_types) > 1 else ()
        self.modes = (*gpu_choices, *typed, *(("share",) if sharing else ()), *(("preempt",) if preemption else ()))
        self.n_jobs, self.max_jobs, self.time_scale, self.seed_ = n, int(max_jobs), float(time_scale), int(seed)
        self.reward_name, self.reward_baseline = reward, reward_baseline
        self.preemption_cost, self.failures, self.checkpoints = preemption_cost, failures or FailureModel(), checkpoints
        self.round_s, self.known_durations, self.resample_trace = round_s, bool(known_durations), bool(resample_trace)
        self.work_conserving, self.preempt_to_fit = bool(work_conserving), bool(preempt_to_fit)
        self.interference = interference if interference is not None else GavelInterference()
        self.max_steps = max_steps if max_steps is not None else 200 * n + 1000
        self.render_mode = None
        self._times = IterationTimes(cluster)
        self._gpu_node = np.repeat(np.arange(len(cluster.nodes)), [nd.gpus for nd in cluster.nodes])
        self._gpu_type = [cluster.nodes[k].gpu_type for k in self._gpu_node]
        self._node_type = [nd.gpu_type for nd in cluster.nodes]
        self._set_trace(self.trace)
        self.n_actions = self.max_jobs * len(self.modes) + 1
        self.action_space = spaces.Discrete(self.n_actions)
        self._observe = ClusterObservation(cluster, self.max_jobs, self.time_scale, self.known_durations,
                                           self.n_actions)
        self.node_features = self._observe.node_features
        self.observation_space = self._observe.space
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

    def _baseline(self, seed: int) -> BaselineTimeInSystem:
        """The time in system of ``reward_baseline``'s run of this trace, with the episode's seed and options."""
        ref = simulate_cluster(self.trace, self.cluster, schedulers.make(self.reward_baseline), seed=seed,
                               failures=self.failures, interference=self.interference, times=self._times,
                               checkpoints=self.checkpoints, preemption_cost=self.preemption_cost)
        return BaselineTimeInSystem(self._arrival, ref.jobs["completion"])

    # -- episode --------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode on the trace (a new one with ``resample_trace``); the env reads no ``options``:
        any key is a ``ValueError`` (:func:`~doppler_gym.envs.masked.reset_options`)."""
        reset_options(options, (), "ClusterEnv.reset")
        super().reset(seed=seed)
        if self.resample_trace:
            n = _generated_count(str(self._trace_spec))
            self.trace_seed = int(self.np_random.integers(2**31))
            self._set_trace(traces.generate(n, seed=self.trace_seed, **self._trace_kwargs))
        sim_seed = int(self.np_random.integers(2**31))
        self._sim = self._new_sim(sim_seed)
        self._base = self._baseline(sim_seed) if self.reward_name == "relative" else None
        self._view: JobView | None = self._sim.run_until_decision()
        self._result: ClusterResult | None = None
        self._steps = 0
        self._truncated = False
        self.invalid_actions.reset()
        self._in_system = 0.0  # [job s] summed time in system at the current event
        self._clock = 0.0  # [s] the current event's time (the makespan after the last completion)
        self._begin_event()
        self._settle()
        return self._obs(), self._info()

    def step(self, action):
        reward, terminated, truncated, info = self.transition(action)
        return self._obs(), reward, terminated, truncated, info

    def transition(self, action) -> tuple[float, bool, bool, dict[str, Any]]:
        """:meth:`step` without building the observation: ``(reward, terminated, truncated, info)``. For batched
        envs that write the observation themselves from :meth:`observation_inputs`
        (:mod:`doppler_gym.envs.cluster_vector`)."""
        if self._view is None or self._truncated:
            raise episode_over_error("ClusterEnv.step")
        a = action_index(action, "ClusterEnv.step", "row * n_modes + mode, or n_actions - 1 to advance")
        if not (0 <= a < self.n_actions and self._mask[a]):
            reward, truncated, rejection = self.invalid_actions.reject(lambda: self._invalid_message(a))
            self._steps += 1
            self._truncated = truncated or self._steps >= self.max_steps
            return reward, False, self._truncated, {**self._info(), **rejection}
        self._steps += 1
        self.invalid_actions.accept()
        before, clock = self._in_system, self._clock
        if a == self.n_actions - 1:
            self._advance()
        else:
            self._apply(self._rows[a // len(self.modes)], self.modes[a % len(self.modes)])
        self._settle()
        terminated = self._view is None
        accrued = self._in_system - before  # [job s] over [clock, self._clock]; 0 within an event
        if self._base is not None and (terminated or self._clock != clock):
            accrued -= self._base.at(np.inf if terminated else self._clock) - self._base.at(clock)
        reward = -accrued / self.time_scale
        info = self._info()
        if terminated:
            info.update(self._result.summary())
            info["result"] = self._result
            if self._base is not None:
                info["baseline_avg_jct"] = self._base.total / self.n_jobs
        self._truncated = not terminated and self._steps >= self.max_steps
        return float(reward), terminated, self._truncated, info

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
        self._held = {i: sorted(g) for i, g in self._plan.items()}  # the GPUs each running job held at the event
        self._preempted: set[int] = set()
        self._started: set[int] = set()
        self._clock = float(v.now)
        self._in_system = time_in_system(self._arrival, v.completion, v.now)
        active = np.asarray(v.active, dtype=np.int64)
        self._rows = active[: self.max_jobs]
        self._hidden = len(active) - len(self._rows)
        self._refresh_mask()

    def _candidates(self, i: int, free: dict[int, list[int]], memo: dict) -> dict[str, list[int] | None]:
        """GPUs each start mode would give waiting job ``i`` now (``None``: not possible); ``free``: the free
        GPUs by node; ``memo``: this refresh's answers by (GPU count, sharing type, type ranking), which decide
        them. ``pack``/``spread``: on the fastest type for the job with enough free GPUs (the engine's rule; a job
        larger than every type it can run on: over the nodes of those types); ``pack:T``/``spread:T``: on type
        ``T`` (masked where it gives what ``pack``/``spread`` gives); ``share``: a GPU of one single-GPU job."""
        k = int(self._req[i])
        ranked = self._sim.type_ranking(i)
        key = (k, self._types[i] if "share" in self.modes else None, ranked)
        if key in memo:
            return memo[key]
        node_type = self._node_type
        free_of = {t: 0 for t in self.gpu_types}
        for nd, v in free.items():
            free_of[node_type[nd]] += len(v)
        capacity = self._sim.type_capacity
        first = next((t for t in ranked if free_of[t] >= k), None)
        if first is not None:
            engine_free = pl.of_types(free, node_type, (first,))
        elif k > max(capacity[t] for t in ranked):
            engine_free = pl.of_types(free, node_type, ranked)
        else:
            engine_free = {}
        out: dict[str, list[int] | None] = {}
        for c in self.modes:
            if c in pl.GPU_CHOICES:
                out[c] = pl.choose(c, engine_free, k)
            elif c == "share":
                held = {j: len(g) for j, g in self._plan.items()}
                out[c] = next((g for t in ranked if (g := pl.shared(
                    self._types[i], k, self._occ, self._types, self._gpu_type, self.interference,
                    gpus_held=held, gpu_types=(t,))) is not None), None)
        for c in self.modes:
            choice, _, t = c.partition(":")
            if t:
                got = pl.choose(choice, pl.of_types(free, node_type, (t,)), k) if t in ranked else None
                out[c] = None if got is None or got == out.get(choice) else got
        if "spread" in out and "pack" in out and out["spread"] == out["pack"]:
            out["spread"] = None
        memo[key] = out
        return out

    def _refresh_mask(self) -> None:
        nm = len(self.modes)
        mask = np.zeros(self.n_actions, MASK_DTYPE)  # (n_actions,) 1 = valid action
        self._cands: dict[int, dict[str, list[int] | None]] = {}
        free = pl.free_by_node(self._occ, self._gpu_node)
        memo: dict = {}
        preempt = self.modes.index("preempt") if "preempt" in self.modes else None
        undo: list[int] = []  # actions restarting a job preempted in this event on the GPUs it held
        fits = False  # a visible waiting job fits on free GPUs
        short = False  # a visible waiting job does not fit on free GPUs
        starts = 0  # valid start actions on free GPUs (undoing a preemption aside)
        victims: list[int] = []  # preempt actions of the jobs running since the event began, not preempted in it
        for r, i in enumerate(self._rows.tolist()):
            if i in self._plan:
                if preempt is not None and i in self._was_running and i not in self._preempted:
                    victims.append(r * nm + preempt)
                continue
            cands = self._candidates(i, free, memo)
            self._cands[i] = cands
            fit = any(cands.get(c) is not None for c in pl.GPU_CHOICES)  # the typed modes only add to these
            fits, short = fits or fit, short or not fit
            for m, c in enumerate(self.modes):
                gpus = cands.get(c)
                if gpus is not None:
                    if i in self._preempted and sorted(gpus) == self._held[i]:
                        undo.append(r * nm + m)
                    else:
                        mask[r * nm + m] = True
                        starts += c != "share"
        if short or not self.preempt_to_fit:  # a preemption can make room for a waiting job
            mask[victims] = True
        blocked = self.work_conserving and fits  # advancing would leave a fitting job waiting on free GPUs
        mask[-1] = bool(self._plan) and not blocked
        if not mask.any() or (blocked and not starts):  # undoing a preemption is the only way on: allow it
            mask[undo] = True
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
            self._clock = float(np.nanmax(self._result.jobs["completion"]))
            self._mask = np.zeros(self.n_actions, MASK_DTYPE)
            self._mask[-1] = 1  # the terminal observation marks "advance" alone: never an all-zero mask
            return
        self._begin_event()

    def _settle(self) -> None:
        """Advance while advancing is the only valid action."""
        while self._view is not None and self._mask[-1] and self._mask.sum() == 1:
            self._advance()

    def observation_inputs(self) -> ObservationInputs:
        """What the observation is built from now (after :meth:`reset`): the arguments of
        :meth:`ClusterObservation.build <doppler_gym.envs.cluster_obs.ClusterObservation.build>`. ``view``,
        ``plan``, ``occupants`` and ``mask`` are the env's live state (read-only; valid until the next step or
        reset); after the last completion ``view`` is ``None`` and only ``mask`` counts."""
        if self._view is None:
            return ObservationInputs(None, np.zeros(0, np.int64), {}, [], np.zeros(0, bool), 0, self._mask, {})
        unchanged = np.array([i in self._was_running and i not in self._started for i in self._rows.tolist()], bool)
        return ObservationInputs(self._view, self._rows, self._plan, self._occ, unchanged, self._hidden, self._mask,
                                 self._head_speed())

    def _obs(self) -> dict[str, np.ndarray]:
        inputs = self.observation_inputs()
        if inputs.view is None:
            return self._observe.terminal(inputs.mask)
        return self._observe.build(*inputs)

    def _head_speed(self) -> dict[str, float]:
        """``{GPU type: speed}`` of the head job (the first waiting job of the window) at its GPU count: its
        fastest type's iteration time over this type's (1 on its fastest type, 0 where it cannot run); ``{}``
        when no job waits or the cluster has one type."""
        if len(self.gpu_types) < 2:
            return {}
        head = next((i for i in self._rows.tolist() if i not in self._plan), None)
        if head is None:
            return {}
        t = {g: self._sim.iteration_time(head, g) for g in self.gpu_types}
        best = min(t.values())
        return {g: (best / x if np.isfinite(x) else 0.0) for g, x in t.items()}

    def _info(self) -> dict[str, Any]:
        if self._view is None:
            return {"now": self._clock, "n_done": self.n_jobs, "n_running": 0, "n_waiting": 0, "busy_gpus": 0}
        v = self._view
        return {"now": float(v.now), "n_done": int((~np.isnan(v.completion)).sum()), "n_running": len(self._plan),
                "n_waiting": len(v.active) - len(self._plan), "busy_gpus": sum(1 for o in self._occ if o)}


def _as_cluster(cluster: Cluster | str | None) -> Cluster:
    """``cluster`` as a :class:`Cluster`: ``None`` is ``Cluster.uniform(2, 8)``; a string is a ``doppler cluster
    --cluster`` spec, ``[uniform:]NODESxGPUS[:TYPE]``."""
    if cluster is None:
        return Cluster.uniform(2, 8)
    if isinstance(cluster, str):
        try:
            return parse_cluster(cluster)
        except ValueError as e:
            raise ValueError(f"cluster={cluster!r} is not a cluster spec ([uniform:]NODESxGPUS[:TYPE] or "
                             f"TYPE:GPUS,...[/PER_NODE], as `doppler cluster --cluster` takes, e.g. '2x8', "
                             f"'uniform:4x8:p100' or 'v100:8,k80:8/4'): {e}") from None
    if not isinstance(cluster, Cluster):
        raise TypeError(f"cluster must be a doppler_gym.cluster.Cluster or a spec such as '2x8', "
                        f"got {type(cluster).__name__}")
    return cluster


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
