"""Gavel's round-based mechanism: the simulator that realises a policy's allocation in rounds.

A faithful model of the simulation loop of Gavel's ``scheduler.py`` (Narayanan et al., OSDI 2020,
section 5; MIT), written for :mod:`doppler_gym.cluster.gavel_policies`:

- Time runs in rounds of ``round_s`` (default 360 s). At a round's start every job that arrived by then
  joins; the policy's allocation ``X`` is recomputed only when the set of jobs changed and at least
  ``reset_s`` (default 1,920 s, Gavel's ``minimum_time_between_allocation_resets``) have passed since
  the last recomputation (or none has happened at a time > 0). A job that arrives in between has no
  allocation: it waits, and the GPUs the greedy pass below reserves for it stay idle, as in Gavel.
- Priorities: ``X[i, j] / f[i, j]`` with ``f[i, j]`` the share of the time type ``j`` served that went to
  job ``i`` since the last recomputation (each job starts at half a round, as Gavel's
  ``_job_time_so_far``); deficits (time owed under the old ``X``) break ties, then ``X``.
- Each round, for the GPU types in order (fastest first, v100, p100, k80, for the heterogeneity-aware
  policies; shuffled each round by ``random.Random(seed + 5)`` for the agnostic ones, as Gavel does),
  jobs are taken greedily by descending priority while they fit in that type's free GPUs; a job runs on
  one type per round; FIFO policies skip jobs of priority 0.
- A job runs ``min(int(T x round_s), remaining)`` steps in the round (``truncate=False``: without the
  ``int``), taking ``steps / T`` seconds; the round ends when the last of them ends, and the next round
  starts then (or at the next arrival when nothing ran). A job completes at the end of its last steps.

The recomputation, priority and greedy-pass bookkeeping is
:class:`~doppler_gym.cluster.round_priorities.RoundState`; this module adds the clock and the steps.

Why a simulator of its own beside :mod:`doppler_gym.cluster.gavel_engine` (the same policies and
bookkeeping on :class:`~doppler_gym.cluster.simulation.ClusterSimulation`, with failures, checkpoints
and interference): the engine decides at arrivals, completions and round ticks that fire only while
some job waits, and advances jobs continuously; Gavel decides only at round starts, moves jobs between
types every round even when none waits, truncates steps per round, and ends a round at its last job's
last step. The comparison with Gavel's own figures depends on those mechanics, so they live here.
Failures, checkpoints, interference and preemption costs are not modelled (Gavel's simulator models
none of them either). :func:`to_job_trace` turns the jobs into a trace for the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from doppler_gym.cluster.gavel_policies import Policy
from doppler_gym.cluster.interference import gavel_table
from doppler_gym.cluster.round_priorities import RoundState
from doppler_gym.cluster.traces import GavelJobs, read_gavel_jobs
from doppler_gym.cluster.types import Job, JobTrace

GPU_TYPES = ("v100", "p100", "k80")
"""Gavel's GPU types, fastest first (its round order for the heterogeneity-aware policies)."""


def read_gavel_trace(path: str | Path) -> GavelJobs:
    """Gavel's 10-column trace file (:func:`doppler_gym.cluster.traces.read_gavel_jobs`, with its errors), for
    the round mechanism: every job type must also have a measured throughput entry at its scale factor on
    every Gavel GPU type (0 where it cannot run), and arrivals must not decrease (Gavel's traces do not)."""
    jobs = read_gavel_jobs(path)
    table = gavel_table()
    for k, (jtype, sf) in enumerate(zip(jobs.job_type, jobs.scale_factor.tolist())):
        if not all(str(sf) in table[t]["solo_steps_per_s"].get(jtype, {}) for t in GPU_TYPES):
            raise ValueError(f"{path}: job {k} ({jtype!r}) at scale factor {sf} has no measured Gavel throughput "
                             f"on every GPU type; Gavel measured scale factors 1, 2, 4 and 8")
    if (np.diff(jobs.arrival) < 0).any():
        raise ValueError(f"{path}: arrival times must be non-decreasing (Gavel's traces are)")
    return jobs


def parse_cluster(spec: str) -> dict[str, int]:
    """Gavel's cluster string ``"V:P:K"`` (V100, P100 and K80 GPUs, e.g. ``"36:36:36"``) as ``{type: GPUs}``
    (types with 0 GPUs left out)."""
    parts = spec.split(":")
    if len(parts) != 3 or not all(p.strip().isdecimal() for p in parts):
        raise ValueError(f"cluster {spec!r}: expected Gavel's 'V100:P100:K80' GPU counts, e.g. '36:36:36'")
    out = {t: int(p) for t, p in zip(GPU_TYPES, parts) if int(p) > 0}
    if not out:
        raise ValueError(f"cluster {spec!r} has no GPUs")
    return out


def throughput_matrix(jobs: GavelJobs, types: tuple[str, ...]) -> np.ndarray:
    """``(n, m) float64`` [steps/s] each job's measured solo throughput on ``types`` (Gavel's table)."""
    table = gavel_table()
    return np.array([[table[t]["solo_steps_per_s"][jt][str(sf)] for t in types]
                     for jt, sf in zip(jobs.job_type, jobs.scale_factor.tolist())], dtype=np.float64)


def to_job_trace(jobs: GavelJobs, name: str = "gavel") -> JobTrace:
    """The jobs as a :class:`~doppler_gym.cluster.types.JobTrace` for the event engine: each job's profile
    holds ``1 / throughput`` [s per step] on its scale factor for every Gavel GPU type where it can run."""
    tp = throughput_matrix(jobs, GPU_TYPES)
    out = []
    for k, (jtype, sf) in enumerate(zip(jobs.job_type, jobs.scale_factor.tolist())):
        profile = {t: {sf: 1.0 / tp[k, c]} for c, t in enumerate(GPU_TYPES) if tp[k, c] > 0}
        out.append(Job(job_id=k, arrival=float(jobs.arrival[k]), iterations=int(jobs.total_steps[k]), gpus=sf,
                       workload=None, profile=profile, job_type=jtype))
    return JobTrace(tuple(out), name=name)


@dataclass(frozen=True)
class RoundResult:
    """A finished round-based run.

    Attributes:
        completion: ``(n,) float64`` [s] each job's completion time; jct: ``(n,)`` completion - arrival [s].
        avg_jct: [s] mean JCT; makespan: [s] end of the last round.
        rounds: rounds run; allocations: times the allocation was recomputed.
        gpu_s: ``{type: GPU seconds busy}``.
    """

    completion: np.ndarray
    jct: np.ndarray
    avg_jct: float
    makespan: float
    rounds: int
    allocations: int
    gpu_s: dict[str, float]


def simulate_rounds(jobs: GavelJobs, cluster: dict[str, int], policy: str | Policy, *, round_s: float = 360.0,
                    reset_s: float = 1920.0, seed: int = 0, truncate: bool = True,
                    max_rounds: int = 10_000_000) -> RoundResult:
    """Run ``jobs`` on ``cluster`` (``{gpu type: GPUs}``, types of :data:`GPU_TYPES`) under a Gavel policy
    with Gavel's round mechanism (module docstring).

    Args:
        policy: a :data:`~doppler_gym.cluster.gavel_policies.POLICIES` name or a :class:`Policy`.
        round_s: [s] round length (Gavel's ``time_per_iteration``).
        reset_s: [s] the least time between allocation recomputations (0: whenever the jobs change).
        seed: seeds the agnostic policies' per-round type shuffle (``random.Random(seed + 5)``, as Gavel)
            and ``fifo``'s type choice.
        truncate: run ``int(T x round_s)`` steps per round, as Gavel; ``False``: ``T x round_s``.
        max_rounds: a guard; ``RuntimeError`` past it.
    """
    sim = _RoundSim(jobs, cluster, policy if isinstance(policy, Policy) else Policy(policy, seed=seed),
                    round_s, reset_s, seed, truncate)
    return sim.run(max_rounds)


class _RoundSim:
    """One round-based run (see :func:`simulate_rounds`): the clock, the steps, and a :class:`RoundState`."""

    def __init__(self, jobs: GavelJobs, cluster: dict[str, int], policy: Policy, round_s: float, reset_s: float,
                 seed: int, truncate: bool) -> None:
        unknown = sorted(set(cluster) - set(GPU_TYPES))
        if unknown or not cluster or any(int(v) < 0 for v in cluster.values()):
            raise ValueError(f"cluster must map GPU types of {GPU_TYPES} to counts >= 0, got {cluster!r}")
        types = tuple(t for t in GPU_TYPES if cluster.get(t, 0) > 0)
        cap = np.array([cluster[t] for t in types], dtype=np.int64)
        too_big = np.flatnonzero(jobs.scale_factor > cap.max())
        if too_big.size:
            raise ValueError(f"job {int(too_big[0])} needs {int(jobs.scale_factor[too_big[0]])} GPUs; the largest "
                             f"GPU type of the cluster has {int(cap.max())}")
        self.tp = throughput_matrix(jobs, types)  # (n, m) [steps/s]
        runnable = (self.tp > 0) & (jobs.scale_factor[:, None] <= cap[None, :])
        if not runnable.any(axis=1).all():
            bad = int(np.flatnonzero(~runnable.any(axis=1))[0])
            raise ValueError(f"job {bad} ({jobs.job_type[bad]!r} on {int(jobs.scale_factor[bad])} GPUs) has zero "
                             f"throughput on every GPU type of the cluster that fits it")
        self.jobs, self.types, self.round_s, self.truncate = jobs, types, round_s, truncate
        self.state = RoundState(self.tp, jobs.scale_factor, jobs.weight, jobs.arrival, cap, types, policy, round_s,
                                reset_s, seed)
        n = len(jobs)
        self.done_steps = np.zeros(n, dtype=np.float64)
        self.completion = np.full(n, np.nan)
        self.gpu_s = np.zeros(len(types))

    def run(self, max_rounds: int) -> RoundResult:
        jobs, n, state = self.jobs, len(self.jobs), self.state
        now = float(jobs.arrival[0])
        nxt = 0  # next job to arrive
        round_end = None
        running: list[tuple[float, int, int, float]] = []  # (finish [s], job, type, steps)
        n_left, rounds = n, 0
        while n_left > 0:
            if rounds > max_rounds:
                raise RuntimeError(f"simulate_rounds: more than {max_rounds} rounds with {n_left} jobs left")
            if nxt >= n and not running:
                state.allow_reset()  # Gavel forces a reset when nothing runs and nothing is left to arrive
            if running:
                round_start = round_end if round_end is not None else 0.0
                round_end = now = max(r[0] for r in running)
            elif nxt < n:
                now = max(now, float(jobs.arrival[nxt]))
            for finish, i, t, steps in running:
                self.done_steps[i] += steps
                state.credit(i, t, finish - round_start)  # Gavel's execution time: from the round's start
                self.gpu_s[t] += steps / self.tp[i, t] * jobs.scale_factor[i]
                if self.done_steps[i] >= jobs.total_steps[i] - 1e-9:
                    self.completion[i] = finish
                    state.leave(i)
                    n_left -= 1
            while nxt < n and jobs.arrival[nxt] <= now:
                state.arrive(nxt)
                nxt += 1
            picks = state.start_round(now, lambda act: jobs.total_steps[act] - self.done_steps[act])
            running = [self._steps(now, i, t) for i, t, runs in picks if runs]
            rounds += bool(state.active)
        jct = self.completion - jobs.arrival
        return RoundResult(self.completion, jct, float(jct.mean()), float(now), rounds, state.n_allocations,
                           {t: float(g) for t, g in zip(self.types, self.gpu_s)})

    def _steps(self, now: float, i: int, t: int) -> tuple[float, int, int, float]:
        """Job ``i``'s steps on type ``t`` this round: ``(finish [s], i, t, steps)``."""
        tp = self.tp[i, t]
        steps = tp * self.round_s
        steps = float(max(int(steps), 1)) if self.truncate else steps
        steps = min(steps, float(self.jobs.total_steps[i] - self.done_steps[i]))
        return now + steps / tp, i, t, steps
