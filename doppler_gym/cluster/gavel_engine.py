"""Gavel's policies driving the event engine: round-based time sharing on :class:`ClusterSimulation`.

:func:`run_gavel_policy` runs a :class:`~doppler_gym.cluster.types.JobTrace` on a (heterogeneous)
:class:`~doppler_gym.cluster.types.Cluster` under a policy of
:mod:`~doppler_gym.cluster.gavel_policies`, deciding through the engine's public API
(:meth:`~doppler_gym.cluster.simulation.ClusterSimulation.apply_allocation`), so failures, checkpoints,
stragglers, preemption costs and uplinks apply as under any scheduler. The per-round bookkeeping is
Gavel's (:class:`~doppler_gym.cluster.round_priorities.RoundState`): at a round start the jobs that
arrived join, the allocation is recomputed when due, and the round's jobs get GPUs of the type the
priorities pick (a job staying on its type keeps its GPUs; one moving is migrated and pays the run's
``preemption_cost``). Between round starts the plan holds: a finished or failed job's GPUs idle until
the next round, as in Gavel.

Where this differs from Gavel's own simulator (:mod:`~doppler_gym.cluster.rounds` reproduces that one):
jobs progress continuously (no integer steps per round), a round lasts ``round_s`` (Gavel's ends at its
last job's last step), and the engine ticks rounds only while some job waits, so with every active job
running the next round starts at the next arrival, completion or failure instead.

A job's throughput on a type is ``1 / iteration time`` on its requested GPU count, from the engine's
:class:`~doppler_gym.cluster.timing.IterationTimes` (0 where the time is infinite). Heterogeneity-aware
policies try the types fastest first (by the median throughput over the trace's jobs).
"""

from __future__ import annotations

import math

import numpy as np

from doppler_gym.cluster import failures as fl
from doppler_gym.cluster.gavel_policies import Policy
from doppler_gym.cluster.metrics import ClusterResult
from doppler_gym.cluster.round_priorities import RoundState
from doppler_gym.cluster.schedulers import Allocation, JobView, Scheduler
from doppler_gym.cluster.simulation import ClusterSimulation
from doppler_gym.cluster.timing import IterationTimes
from doppler_gym.cluster.types import Cluster, JobTrace


class GavelRounds(Scheduler):
    """The flags the engine reads for a Gavel policy: preemptive, with round ticks every ``round_s`` [s].

    Its :meth:`order` is not used by :func:`run_gavel_policy`, which applies allocations directly.
    """

    preemptive = True
    rounds_while_all_run = True  # Gavel re-solves every round, moving running jobs between types too

    def __init__(self, policy: str, round_s: float = 360.0) -> None:
        if not (round_s > 0):
            raise ValueError(f"GavelRounds: round_s must be > 0 [s], got {round_s!r}")
        self.name = policy
        self.round_s = round_s

    def order(self, view: JobView) -> list[int]:
        return list(view.active)


def run_gavel_policy(trace: JobTrace, cluster: Cluster, policy: str | Policy, *, seed: int,
                     round_s: float = 360.0, reset_s: float = 1920.0, failures: fl.FailureModel | None = None,
                     interference=None, times: IterationTimes | None = None, checkpoints: str = "fixed",
                     preemption_cost: float = 0.0) -> ClusterResult:
    """Simulate ``trace`` on ``cluster`` under a Gavel policy on the event engine (module docstring).

    Args:
        policy: a :data:`~doppler_gym.cluster.gavel_policies.POLICIES` name or a :class:`Policy`.
        seed: seeds the failure draws, the agnostic policies' type shuffle and ``fifo``'s type choice.
        round_s: [s] the round length; reset_s: [s] the least time between allocation recomputations.
        failures, interference, times, checkpoints, preemption_cost: as :func:`doppler_gym.cluster.run`.
    """
    pol = policy if isinstance(policy, Policy) else Policy(policy, seed=seed)
    times = times if times is not None else IterationTimes(cluster)
    sim = ClusterSimulation(trace, cluster, GavelRounds(pol.name, round_s), seed=seed,
                            failures=failures or fl.FailureModel(), interference=interference, times=times,
                            checkpoints=checkpoints, preemption_cost=preemption_cost)
    driver = _Driver(sim, trace, cluster, pol, times, round_s, reset_s, seed)
    return driver.run()


class _Driver:
    """Feeds one :class:`ClusterSimulation` the rounds of a :class:`RoundState`."""

    def __init__(self, sim: ClusterSimulation, trace: JobTrace, cluster: Cluster, policy: Policy,
                 times: IterationTimes, round_s: float, reset_s: float, seed: int) -> None:
        names = sorted({nd.gpu_type for nd in cluster.nodes})
        jobs = trace.jobs
        with np.errstate(divide="ignore"):
            tp = np.array([[1.0 / times(j, t, j.gpus) for t in names] for j in jobs])  # [iterations/s]
        tp[~np.isfinite(tp)] = 0.0
        speed = [float(np.median(tp[tp[:, k] > 0, k])) if (tp[:, k] > 0).any() else 0.0 for k in range(len(names))]
        order = sorted(range(len(names)), key=lambda k: (-speed[k], names[k]))  # fastest first
        self.types = tuple(names[k] for k in order)
        self.tp = tp[:, order]
        gpu_type = [nd.gpu_type for nd in cluster.nodes for _ in range(nd.gpus)]
        gpu_node = [k for k, nd in enumerate(cluster.nodes) for _ in range(nd.gpus)]
        self.gpus_of = [[g for g, t in enumerate(gpu_type) if t == name] for name in self.types]  # per type
        self.gpu_node = gpu_node
        cap = np.array([len(g) for g in self.gpus_of], dtype=np.int64)
        sf = np.array([j.gpus for j in jobs], dtype=np.int64)
        fits = (self.tp > 0) & (sf[:, None] <= cap[None, :])
        if not fits.any(axis=1).all():
            bad = jobs[int(np.flatnonzero(~fits.any(axis=1))[0])]
            raise ValueError(f"Job {bad.job_id}: no GPU type of cluster {cluster.name!r} has {bad.gpus} GPUs on which "
                             f"it can run (a finite iteration time); it could never be scheduled")
        self.sim, self.round_s = sim, round_s
        self.iterations = np.array([j.iterations for j in jobs], dtype=np.float64)
        self.state = RoundState(self.tp, sf, np.ones(len(jobs)), sim.arrival, cap, self.types, policy, round_s,
                                reset_s, seed)

    def run(self) -> ClusterResult:
        sim, state = self.sim, self.state
        plan: dict[int, tuple[int, list[int]]] = {}  # job -> (type index, GPU ids)
        known: set[int] = set()
        pending: list[int] = []  # arrived, joining at the next round start
        last, next_round = 0.0, -math.inf
        view = sim.run_until_decision()
        while view is not None:
            now = view.now
            for i, (t, _) in plan.items():
                state.credit(i, t, now - last)
            for i in [i for i in plan if not view.running[i]]:
                del plan[i]
                if not np.isnan(view.completion[i]):
                    state.leave(i)
            pending += [i for i in view.active if i not in known]
            known.update(view.active)
            if now >= next_round - 1e-9 * max(1.0, now):
                for i in sorted(pending):
                    state.arrive(i)
                pending = []
                eligible = np.zeros(len(self.iterations), dtype=bool)
                eligible[view.active] = True
                picks = state.start_round(now, self._remaining, eligible)
                plan = self._place(plan, [(i, t) for i, t, runs in picks if runs])
                next_round = now + self.round_s
            sim.apply_allocation(Allocation({i: tuple(g) for i, (_, g) in plan.items()}))
            last = now
            view = sim.run_until_decision()
        return sim.result()

    def _remaining(self, act: np.ndarray) -> np.ndarray:
        """``(k,)`` iterations left of jobs ``act`` (progress over work along the engine's timeline)."""
        sim = self.sim
        done = np.where(sim.work[act] > 0, sim.progress[act] / np.where(sim.work[act] > 0, sim.work[act], 1.0), 0.0)
        return self.iterations[act] * np.clip(1.0 - done, 0.0, 1.0)

    def _place(self, plan: dict[int, tuple[int, list[int]]], runs: list[tuple[int, int]]):
        """GPU ids for this round's ``(job, type)`` picks: a job staying on its type keeps its GPUs; the others
        take free GPUs of their type from the nodes with the most free ones."""
        new: dict[int, tuple[int, list[int]]] = {}
        used: set[int] = set()
        for i, t in runs:
            if i in plan and plan[i][0] == t:
                new[i] = plan[i]
                used.update(plan[i][1])
        for i, t in runs:
            if i in new:
                continue
            free_by_node: dict[int, list[int]] = {}
            for g in self.gpus_of[t]:
                if g not in used:
                    free_by_node.setdefault(self.gpu_node[g], []).append(g)
            need, got = int(self.state.sf[i]), []
            for node in sorted(free_by_node, key=lambda k: (-len(free_by_node[k]), k)):
                got += free_by_node[node][: need - len(got)]
                if len(got) == need:
                    break
            new[i] = (t, got)
            used.update(got)
        return new
