"""``Doppler-Cluster-v0``: online job scheduling on the job-level cluster simulator (:mod:`doppler_gym.cluster`)."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from doppler_gym.cluster import schedulers, traces
from doppler_gym.cluster.engine import decisions
from doppler_gym.cluster.failures import FailureModel
from doppler_gym.cluster.metrics import ClusterResult
from doppler_gym.cluster.schedulers import JobView
from doppler_gym.cluster.timing import IterationTimes
from doppler_gym.cluster.types import Cluster, Trace

JOB_FEATURES = ("waiting", "running", "done", "gpus", "attained", "age")
CLUSTER_FEATURES = ("free_gpus", "time")
INVALID_PENALTY = -0.01


class _External(schedulers.Scheduler):
    """The engine's flags for the env's decisions: non-preemptive, no sharing, no round ticks."""

    name = "agent"

    def order(self, view: schedulers.JobView) -> list[int]:
        """Never called: :func:`decisions` takes the order from the env's actions instead."""
        raise RuntimeError("the env's actions order the jobs; decisions() does not call Scheduler.order")


class ClusterEnv(gym.Env):
    """Pick which waiting job starts next on a shared GPU cluster, at each scheduling event.

    ## Description

    A trace of training jobs (arrival time, GPUs requested, iterations) arrives online at a GPU
    cluster simulated by :mod:`doppler_gym.cluster` (its event engine, through the
    :func:`~doppler_gym.cluster.engine.decisions` hook). At each event where some job waits and
    fits in the free GPUs (an arrival or a completion), the agent starts waiting jobs one at a
    time, then advances the simulation to the next event. Jobs are gang-scheduled, never
    preempted and never share a GPU (the engine's non-preemptive mode without sharing; GPUs are
    taken best-fit, as in :func:`doppler_gym.cluster.run`). No failures or stragglers. Events at
    which nothing fits are advanced through without asking the agent. The goal is a small total
    (equivalently average) job completion time (JCT).

    ## Action Space

    ``Discrete(max_jobs + 1)``: action ``i < n_jobs`` starts job ``i`` (trace order, i.e. arrival
    order); it is valid when the job has arrived, waits, and requests at most the free GPUs.
    Action ``max_jobs`` ("advance") hands the started jobs to the engine and runs it to the next
    event; it is valid unless the cluster would stall (no job running or just started and none
    still to arrive). After a start, if no other waiting job fits, the env advances by itself.
    :meth:`action_masks` (for sb3-contrib's MaskablePPO) equals ``obs["action_mask"]``. An invalid
    action leaves the state unchanged, is rewarded ``-0.01`` and flagged
    ``info["invalid_action"] = True``.

    ## Observation Space

    A ``Dict``:

    ==================  ===================  ========  ================================================
    key                 shape                dtype     content
    ==================  ===================  ========  ================================================
    ``jobs``            ``(max_jobs, 6)``    float32   per job (trace order; rows of jobs not yet
                                                       arrived and padding rows are 0): waiting,
                                                       running, done flags; GPUs requested / cluster
                                                       GPUs; attained service (GPU s held) /
                                                       ``time_scale``; age (now - arrival) /
                                                       ``time_scale``
    ``cluster``         ``(2,)``             float32   free GPUs (after this event's starts) / cluster
                                                       GPUs; now / ``time_scale``
    ``action_mask``     ``(max_jobs + 1,)``  int8      1 where the action is valid
    ==================  ===================  ========  ================================================

    Nothing reveals a job's duration or iterations, nor future arrivals (only the requested GPUs
    of jobs that have arrived). The running jobs' progress is not shown either.

    ## Rewards

    Minus the increase of the summed time in system of all jobs (each arrived job counts from its
    arrival to its completion or to now) since the previous step, divided by ``time_scale`` [s]
    (default 3600: job-hours). Steps that start a job without advancing get 0. The undiscounted
    return of an episode is therefore ``-sum(JCT) / time_scale`` exactly (up to float rounding).
    Invalid actions get ``-0.01``.

    ## Starting State

    The first event with a job that fits (the first arrival), nothing running. The env is
    deterministic: the trace is fixed at construction (``generated:N`` draws it with ``seed``) and
    the engine draws nothing (no failures); ``reset(seed=...)`` only seeds ``np_random``.

    ## Episode End

    Terminates when the last job completes; ``info`` then holds the run's scalar metrics
    (``avg_jct``, ``p99_jct``, ``makespan``, ``utilisation``, ... from
    :meth:`ClusterResult.summary`) and ``result`` (the :class:`ClusterResult`). No truncation.

    ## Arguments

    - ``trace``: a :class:`~doppler_gym.cluster.Trace`, a shipped trace name
      (``doppler_gym.cluster.traces.names()``), or ``"generated:N"`` (``traces.generate(N, seed=seed)``).
      Default ``"generated:16"``.
    - ``cluster``: a :class:`~doppler_gym.cluster.Cluster` (default ``Cluster.uniform(2, 8)``: 16 V100).
    - ``max_jobs``: padding of the job rows and actions (default: the trace's length; must be >= it).
    - ``seed``: seeds a generated trace (default 0).
    - ``time_scale``: [s] the unit of the reward and of the time features (default 3600).

    ## Version History

    - v0: initial version.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, trace: Trace | str = "generated:16", cluster: Cluster | None = None,
                 max_jobs: int | None = None, seed: int = 0, time_scale: float = 3600.0,
                 render_mode: str | None = None) -> None:
        if render_mode is not None:
            raise ValueError(f"render_mode={render_mode!r}: Doppler-Cluster-v0 has no render modes")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"seed must be an int, got {seed!r}")
        self.trace = _as_trace(trace, int(seed))
        if cluster is None:
            cluster = Cluster.uniform(2, 8)
        if not isinstance(cluster, Cluster):
            raise TypeError(f"cluster must be a doppler_gym.cluster.Cluster, got {type(cluster).__name__}")
        self.cluster = cluster
        n = len(self.trace)
        if max_jobs is None:
            max_jobs = n
        if isinstance(max_jobs, bool) or not isinstance(max_jobs, (int, np.integer)) or max_jobs < n:
            raise ValueError(f"max_jobs must be an int >= the trace's {n} jobs, got {max_jobs!r}")
        if not (isinstance(time_scale, (int, float)) and np.isfinite(time_scale) and time_scale > 0):
            raise ValueError(f"time_scale must be a finite number > 0 [s], got {time_scale!r}")
        self.n_jobs, self.max_jobs, self.time_scale, self.seed_ = n, int(max_jobs), float(time_scale), int(seed)
        self.render_mode = None
        self._times = IterationTimes(cluster)
        self._arrival = np.array([j.arrival for j in self.trace.jobs])
        self._req = np.array([j.gpus for j in self.trace.jobs], dtype=np.int64)
        self.action_space = spaces.Discrete(self.max_jobs + 1)
        self.observation_space = spaces.Dict({
            "jobs": spaces.Box(0.0, np.inf, (self.max_jobs, len(JOB_FEATURES)), np.float32),
            "cluster": spaces.Box(0.0, np.inf, (len(CLUSTER_FEATURES),), np.float32),
            "action_mask": spaces.Box(0, 1, (self.max_jobs + 1,), np.int8),
        })
        next(self._new_sim())  # validate the trace against the cluster now (ValueError), not at reset

    def _new_sim(self):
        return decisions(self.trace, self.cluster, _External(), seed=self.seed_, failures=FailureModel(),
                         times=self._times)

    # -- episode --------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._sim = self._new_sim()
        self._view: JobView | None = next(self._sim)
        self._result: ClusterResult | None = None
        self._picks: list[int] = []
        self._in_system = 0.0  # [s] summed time in system at the current event
        self._settle()
        return self._obs(), self._info()

    def step(self, action):
        if self._view is None:
            raise RuntimeError("step() after the episode ended; call reset()")
        a = int(action)
        mask = self._mask()
        if not (0 <= a <= self.max_jobs) or not mask[a]:
            info = self._info()
            info["invalid_action"] = True
            return self._obs(mask), INVALID_PENALTY, False, False, info
        before = self._in_system
        if a < self.max_jobs:
            self._picks.append(a)
            if self._fitting().size == 0:
                self._advance()
        else:
            self._advance()
        reward = -(self._in_system - before) / self.time_scale
        terminated = self._view is None
        info = self._info()
        if terminated:
            info.update(self._result.summary())
            info["result"] = self._result
        return self._obs(), float(reward), terminated, False, info

    def action_masks(self) -> np.ndarray:
        """``(max_jobs + 1,) bool``: the valid actions (``obs["action_mask"]`` as bools)."""
        return self._mask().astype(bool)

    # -- engine ---------------------------------------------------------------------------------
    def _advance(self) -> None:
        order, self._picks = self._picks, []
        try:
            self._view = self._sim.send(order)
        except StopIteration as stop:
            self._view, self._result = None, stop.value
            self._in_system = float(self._result.jobs["jct"].sum())
            return
        self._settle()

    def _settle(self) -> None:
        """Advance through events where no waiting job fits; update the summed time in system."""
        while self._view is not None and self._fitting().size == 0:
            try:
                self._view = self._sim.send([])
            except StopIteration as stop:
                self._view, self._result = None, stop.value
                self._in_system = float(self._result.jobs["jct"].sum())
                return
        v = self._view
        arrived = self._arrival <= v.now
        end = np.where(np.isnan(v.completion), v.now, v.completion)
        self._in_system = float((end - self._arrival)[arrived].sum())

    def _free(self) -> int:
        v = self._view
        return int(self.cluster.n_gpus - self._req[v.running].sum() - self._req[self._picks].sum())

    def _waiting(self) -> np.ndarray:
        v = self._view
        w = np.zeros(self.n_jobs, bool)
        w[v.active] = True
        w &= ~v.running
        w[self._picks] = False
        return w

    def _fitting(self) -> np.ndarray:
        return np.flatnonzero(self._waiting() & (self._req <= self._free()))

    def _mask(self) -> np.ndarray:
        mask = np.zeros(self.max_jobs + 1, np.int8)
        if self._view is None:
            return mask
        mask[self._fitting()] = 1
        v = self._view
        if v.running.any() or self._picks or (self._arrival > v.now).any():
            mask[self.max_jobs] = 1
        return mask

    def _obs(self, mask: np.ndarray | None = None) -> dict[str, np.ndarray]:
        jobs = np.zeros((self.max_jobs, len(JOB_FEATURES)), np.float32)
        clus = np.zeros(len(CLUSTER_FEATURES), np.float32)
        n, g = self.n_jobs, self.cluster.n_gpus
        if self._view is not None:
            v = self._view
            arrived = self._arrival <= v.now
            waiting = self._waiting()
            running = v.running.copy()
            running[self._picks] = True
            done = arrived & ~np.isnan(v.completion)
            jobs[:n, 0] = waiting
            jobs[:n, 1] = running
            jobs[:n, 2] = done
            jobs[:n, 3] = self._req / g
            jobs[:n, 4] = v.attained / self.time_scale
            jobs[:n, 5] = np.maximum(v.now - self._arrival, 0.0) / self.time_scale
            jobs[:n][~arrived] = 0.0
            clus[:] = (self._free() / g, v.now / self.time_scale)
        else:
            jobs[:n, 2] = 1.0
            jobs[:n, 3] = self._req / g
            clus[:] = (1.0, np.nanmax(self._result.jobs["completion"]) / self.time_scale)
        return {"jobs": jobs, "cluster": clus, "action_mask": self._mask() if mask is None else mask.copy()}

    def _info(self) -> dict[str, Any]:
        if self._view is None:
            return {"now": float(np.nanmax(self._result.jobs["completion"])), "n_done": self.n_jobs}
        return {"now": float(self._view.now), "n_done": int((~np.isnan(self._view.completion)).sum())}


def _as_trace(trace: Trace | str, seed: int) -> Trace:
    if isinstance(trace, Trace):
        return trace
    if not isinstance(trace, str):
        raise TypeError(f"trace must be a Trace, a shipped trace name or 'generated:N', got {type(trace).__name__}")
    if trace.startswith("generated:"):
        count = trace.split(":", 1)[1]
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"trace={trace!r}: 'generated:N' needs an integer N >= 1")
        return traces.generate(int(count), seed=seed)
    if trace not in traces.names():
        raise ValueError(f"unknown trace {trace!r}; give a Trace, 'generated:N' or one of: {', '.join(traces.names())}")
    return traces.load(trace)
