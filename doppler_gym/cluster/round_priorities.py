"""Gavel's per-round bookkeeping: when to recompute the allocation, the priorities, and which jobs run.

The part of Gavel's ``scheduler.py`` (Narayanan et al., OSDI 2020, section 5; MIT) that turns a
policy's allocation ``X`` into one round's choice of jobs and GPU types, shared by the round simulator
(:mod:`doppler_gym.cluster.rounds`) and the driver of the event engine
(:mod:`doppler_gym.cluster.gavel_engine`):

- time received: ``job_time[i, t]`` [s] job ``i`` ran on type ``t`` since the last recomputation, starting
  at half a round (Gavel's ``_job_time_so_far``); ``worker_time[t]`` the type's total, reset to half a
  round per active job at each recomputation (not counting jobs that arrive later);
- recomputation: when the active jobs changed and at least ``reset_s`` passed since the last one (or
  the last happened at time 0), deficits grow by ``X x elapsed - received`` and the policy computes a
  new ``X`` for the active jobs; jobs that arrive in between have no row in ``X``;
- priorities: ``X[i, t] / (job_time[i, t] / worker_time[t])`` (``X x 1e9`` when that share is 0; 0 without
  a row, without throughput on the type, or with ``X = 0``);
- a round: for each GPU type in turn (the given order for heterogeneity-aware policies; shuffled each
  round by ``random.Random(seed + 5)`` for the agnostic ones, as Gavel does), jobs by descending
  (priority, deficit, X), arrival order on ties, while they fit its free GPUs; one type per job per
  round; FIFO policies skip priority 0; a job without a row in ``X`` takes its GPUs but does not run
  (they idle that round, as in Gavel).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np

from doppler_gym.cluster.gavel_policies import Policy, PolicyInput


class RoundState:
    """Priorities and allocation state of one Gavel-policy run.

    Args:
        throughputs: ``(n, m) float64`` [steps/s] each job's throughput on all its GPUs of each type (0: cannot run).
        scale_factors: ``(n,) int64`` [GPUs]; weights: ``(n,) float64`` priority weights; arrival: ``(n,)`` [s].
        capacity: ``(m,) int64`` [GPUs] per type; types: ``m`` type names, fastest first.
        policy: the :class:`~doppler_gym.cluster.gavel_policies.Policy`.
        round_s: [s] the round length; reset_s: [s] the least time between recomputations.
        seed: seeds the agnostic policies' per-round type shuffle (``random.Random(seed + 5)``).
    """

    def __init__(self, throughputs: np.ndarray, scale_factors: np.ndarray, weights: np.ndarray, arrival: np.ndarray,
                 capacity: np.ndarray, types: Sequence[str], policy: Policy, round_s: float, reset_s: float,
                 seed: int) -> None:
        if not (round_s > 0) or not (reset_s >= 0):
            raise ValueError(f"round_s must be > 0 and reset_s >= 0 [s], got {round_s!r}, {reset_s!r}")
        self.tp = np.asarray(throughputs, dtype=np.float64)
        n, m = self.tp.shape
        self.sf = np.asarray(scale_factors, dtype=np.int64)
        self.weights = np.asarray(weights, dtype=np.float64)
        self.arrival = np.asarray(arrival, dtype=np.float64)
        self.cap = np.asarray(capacity, dtype=np.int64)
        self.types = tuple(types)
        self.policy, self.round_s, self.reset_s = policy, round_s, reset_s
        self.shuffler = None if policy.aware else random.Random(seed + 5)
        self.job_time = np.zeros((n, m))  # [s]
        self.deficit = np.zeros((n, m))  # [s]
        self.alloc = np.zeros((n, m))
        self.in_alloc = np.zeros(n, dtype=bool)  # has a row in the current allocation
        self.worker_time = np.zeros(m)  # [s]
        self.active: list[int] = []  # arrival order
        self.last_reset = 0.0  # [s]
        self.need_update = False
        self.n_allocations = 0

    def arrive(self, i: int) -> None:
        """Job ``i`` joins (at a round start)."""
        self.active.append(i)
        self.job_time[i] = self.round_s / 2
        self.deficit[i] = 0.0
        self.need_update = True

    def leave(self, i: int) -> None:
        """Job ``i`` completed."""
        self.active.remove(i)
        self.need_update = True

    def credit(self, i: int, t: int, seconds: float) -> None:
        """Job ``i`` ran ``seconds`` [s] on type ``t``."""
        self.job_time[i, t] += seconds
        self.worker_time[t] += seconds

    def allow_reset(self) -> None:
        """Let the next round recompute regardless of ``reset_s`` (Gavel does when nothing runs or is left)."""
        self.last_reset = 0.0

    def start_round(self, now: float, remaining: Callable[[np.ndarray], np.ndarray],
                    eligible: np.ndarray | None = None) -> list[tuple[int, int, bool]]:
        """Recompute ``X`` if due, then pick this round's jobs.

        Args:
            now: [s] the round's start.
            remaining: ``(k,) job indices -> (k,) steps left`` (for the policies that use it).
            eligible: ``(n,) bool`` jobs that may run now (default: every active job).

        Returns:
            ``(job, type index, runs)`` per job picked, types in pass order; ``runs`` is False for a job
            without a row in ``X`` (its GPUs idle this round).
        """
        if not self.active:
            return []
        if self.need_update and (now - self.last_reset >= self.reset_s or self.last_reset == 0):
            self._reset(now, remaining)
        return self._pick(eligible)

    def _reset(self, now: float, remaining: Callable[[np.ndarray], np.ndarray]) -> None:
        """Gavel's ``_reset_time_run_so_far``, then a new allocation for the active jobs."""
        act = np.asarray(self.active, dtype=np.int64)
        half = self.round_s / 2
        owed = np.where(self.in_alloc[act, None], self.alloc[act], 0.0) * (now - self.last_reset)
        self.deficit[act] += owed - (self.job_time[act] - half)
        self.job_time[act] = half
        self.worker_time[:] = half * act.size
        p = PolicyInput(self.tp[act], self.sf[act], self.cap, self.weights[act], remaining(act),
                        now - self.arrival[act], self.types)
        x = self.policy(act.tolist(), p)
        self.alloc[:] = 0.0
        self.in_alloc[:] = False
        self.alloc[act] = x
        self.in_alloc[act] = True
        self.last_reset, self.need_update = now, False
        self.n_allocations += 1

    def _pick(self, eligible: np.ndarray | None) -> list[tuple[int, int, bool]]:
        act = np.asarray(self.active, dtype=np.int64)
        tp, alloc = self.tp[act], self.alloc[act]
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(self.worker_time[None, :] > 0, self.job_time[act] / self.worker_time[None, :], 0.0)
            prio = np.where(frac > 0, alloc / frac, alloc * 1e9)
        prio = np.where((alloc == 0) | (tp == 0) | ~self.in_alloc[act, None], 0.0, prio)
        deficit = self.deficit[act]
        order = list(range(len(self.types)))
        if self.shuffler is not None:
            self.shuffler.shuffle(order)
        left = self.cap.copy()
        taken = np.zeros(act.size, dtype=bool) if eligible is None else ~eligible[act]
        sf = self.sf[act]
        fifo = self.policy.fifo
        picks = []
        for t in order:
            rank = np.lexsort((-alloc[:, t], -deficit[:, t], -prio[:, t]))  # descending, stable
            for r in rank.tolist():
                if left[t] == 0:
                    break
                if taken[r] or tp[r, t] <= 0 or (fifo and prio[r, t] <= 0) or sf[r] > left[t]:
                    continue
                left[t] -= sf[r]
                taken[r] = True
                picks.append((int(act[r]), t, bool(self.in_alloc[act[r]])))
        return picks
