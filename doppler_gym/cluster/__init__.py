"""Job-level simulation of a shared GPU cluster: online training jobs, schedulers, GPU sharing,
node- and rack-uplink bandwidth sharing, preemption and migration costs, failures, stragglers and checkpoints.

>>> from doppler_gym import cluster
>>> trace = cluster.traces.generate(200, seed=0)
>>> c = cluster.Cluster.uniform(8, 8)                       # 64 V100 in DGX-1 nodes
>>> r = cluster.run(trace, c, "las", seed=0)
>>> r.avg_jct, r.p99_jct, r.utilisation                     # doctest: +SKIP

Modules: :mod:`~.types` (Node, Cluster, Job, JobTrace), :mod:`~.traces` (generated and shipped traces),
:mod:`~.timing` (a job's iteration time: its profile, or its graph simulated on a sub-topology),
:mod:`~.interference` (GPU sharing), :mod:`~.failures` (Poisson failures, stragglers, checkpoints,
Young's interval), :mod:`~.schedulers`, :mod:`~.placement` (which GPUs a job gets: pack, spread,
shared), :mod:`~.bandwidth` (max-min fair node and rack uplinks), :mod:`~.events` (event kinds and
queue), :mod:`~.simulation` (:class:`ClusterSimulation`: the event-driven model, advanced one decision
point at a time), :mod:`~.engine` (a scheduler driving it) and :mod:`~.metrics`. Results: ``docs/results/cluster.md``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from doppler_gym.cluster import bandwidth, engine, placement, schedulers, simulation, traces
from doppler_gym.cluster.engine import simulate_cluster
from doppler_gym.cluster.failures import LLAMA3_GPU_MTBF, FailureModel, young_interval
from doppler_gym.cluster.interference import GavelInterference, ParametricInterference
from doppler_gym.cluster.metrics import ClusterResult
from doppler_gym.cluster.schedulers import Allocation, Scheduler
from doppler_gym.cluster.simulation import ClusterRunError, ClusterSimulation
from doppler_gym.cluster.timing import IterationTimes
from doppler_gym.cluster.types import Cluster, Job, JobTrace, Node

__all__ = [
    "LLAMA3_GPU_MTBF", "Allocation", "Cluster", "ClusterResult", "ClusterRunError", "ClusterSimulation", "FailureModel",
    "GavelInterference", "IterationTimes", "Job", "JobTrace", "Node", "ParametricInterference", "Scheduler",
    "placement",
    "run", "bandwidth", "engine", "schedulers", "simulation", "traces", "young_interval",
]


def run(trace: JobTrace | str, cluster: Cluster, scheduler: str | Scheduler, *, seed: int,
        failures: FailureModel | None = None, interference: object | None = None,
        times: IterationTimes | None = None, checkpoints: str = "fixed",
        preemption_cost: float = 0.0, placement: str | Callable | None = None) -> ClusterResult:
    """Simulate ``trace`` on ``cluster`` under ``scheduler``; returns a :class:`ClusterResult`.

    Args:
        trace: a :class:`JobTrace`, or a shipped trace name (``traces.names()``).
        cluster: the :class:`Cluster`.
        scheduler: a name (``schedulers.names()``: fifo, srtf, las, tiresias, gandiva, elastic) or a
            :class:`Scheduler` instance (for options, e.g. ``schedulers.LAS(round_s=300)``).
        seed: seeds the failure process (same seed, same result).
        failures: the :class:`FailureModel` (default: none).
        interference: ``(type_a, type_b, gpu_type) -> (f_a, f_b) | None`` for GPU sharing (default
            :class:`GavelInterference`, with the parametric model for types Gavel did not measure).
        times: an :class:`IterationTimes` to reuse its cache of simulated iteration times across runs.
        checkpoints: the checkpoint-interval policy: ``"fixed"`` (each job's ``checkpoint_every``) or
            ``"young"`` (Young's interval ``sqrt(2 C M)`` for the job's cost ``C`` and the MTBF ``M``
            of its GPU set, rounded to whole iterations at its first start; as fixed without failures).
        preemption_cost: checkpoint-restore time [s] a job pays (holding its GPUs, no progress) each
            time it starts again after a preemption, a migration or an elastic resize (default 0).
        placement: how a graph job's operations are placed on its GPUs (a ``doppler_gym.baselines``
            name or a callable ``(graph, topology) -> assignment``; default ``"critical_path"``); see
            :class:`IterationTimes`. Give it there instead when passing ``times``.

    Raises:
        ValueError: an unknown trace, scheduler or workload name, a job needing more GPUs than the
            cluster has, a job no GPU type of the cluster can run (its profile's time inf or missing on every
            type), unknown workload parameters, or
            failures too frequent for a job's checkpoint interval to ever finish; all checked before the run starts.
        ClusterRunError: a run that cannot go on (a clock too coarse for a job's iterations, a stuck clock,
            or the simulation's event cap); see :mod:`~.simulation`.
    """
    if isinstance(trace, str):
        trace = traces.load(trace)
    if not isinstance(trace, JobTrace):
        raise TypeError(f"trace must be a JobTrace or a shipped trace name ({', '.join(traces.names())}), "
                        f"got {type(trace).__name__}")
    if not isinstance(cluster, Cluster):
        raise TypeError(f"cluster must be a doppler_gym.cluster.Cluster, got {type(cluster).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {seed!r}")
    if times is None:
        times = IterationTimes(cluster, placement if placement is not None else "critical_path")
    elif placement is not None:
        raise ValueError("give placement to IterationTimes(cluster, placement) when passing times=")
    return simulate_cluster(trace, cluster, schedulers.make(scheduler), seed=int(seed),
                            failures=failures or FailureModel(), interference=interference, times=times,
                            checkpoints=checkpoints, preemption_cost=preemption_cost)
