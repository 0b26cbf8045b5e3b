"""A scheduler driving the cluster simulation: at each decision point, the order it gives.

The model (events, speeds, sharing, failures, uplinks, placement) is
:class:`doppler_gym.cluster.simulation.ClusterSimulation`; ``Doppler-Cluster-v0`` drives the same
object with the agent's :class:`~doppler_gym.cluster.schedulers.Allocation` instead.
"""

from __future__ import annotations

from doppler_gym.cluster import failures as fl
from doppler_gym.cluster.metrics import ClusterResult
from doppler_gym.cluster.schedulers import Scheduler, array_order
from doppler_gym.cluster.simulation import ClusterSimulation
from doppler_gym.cluster.timing import IterationTimes
from doppler_gym.cluster.types import Cluster, JobTrace


def simulate_cluster(trace: JobTrace, cluster: Cluster, scheduler: Scheduler, *, seed: int,
                     failures: fl.FailureModel, interference=None, times: IterationTimes | None = None,
                     checkpoints: str = "fixed", max_events: int = 10_000_000,
                     preemption_cost: float = 0.0) -> ClusterResult:
    """Run the simulation, allocating by ``scheduler.order`` (or the same order as an array,
    :func:`~doppler_gym.cluster.schedulers.array_order`) at every decision point; see
    :func:`doppler_gym.cluster.run` for the arguments and :class:`ClusterSimulation` for ``max_events``."""
    sim = ClusterSimulation(trace, cluster, scheduler, seed=seed, failures=failures, interference=interference,
                            times=times, checkpoints=checkpoints, max_events=max_events,
                            preemption_cost=preemption_cost)
    order = array_order(scheduler) or scheduler.order  # the built-in schedulers' orders as arrays (no list)
    view = sim.run_until_decision()
    while view is not None:
        sim.allocate_in_order(order(view))
        view = sim.run_until_decision()
    return sim.result()
