"""The check of an explicit :class:`~doppler_gym.cluster.schedulers.Allocation` before the engine applies it.

:meth:`ClusterSimulation.apply_allocation <doppler_gym.cluster.simulation.ClusterSimulation.apply_allocation>`
runs exactly the jobs of a plan on its GPUs; :func:`check_allocation` refuses (``ValueError``, naming the job
or GPU and what to change) a plan that names an inactive job, repeats or invents GPU ids, gives a job fewer
GPUs than its ``gpus`` or more than its ``max_gpus``, puts it on a type where it cannot run, puts three jobs
on one GPU, or pairs jobs that may not share. It reads the simulation's public state only.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from doppler_gym.cluster.schedulers import Allocation

if TYPE_CHECKING:  # (the simulation imports this module)
    from doppler_gym.cluster.simulation import ClusterSimulation


def check_allocation(plan: Allocation, sim: ClusterSimulation, active: np.ndarray) -> dict[int, list[int]]:
    """``plan`` as ``{job: sorted GPU ids}``, checked against ``sim`` now: active jobs (``active``: ``(n,) bool``,
    the waiting or running jobs), distinct GPU ids, a GPU count between the job's ``gpus`` and ``max_gpus``,
    a type where it can run, at most two jobs per GPU and only pairs that may share."""
    where = f"Allocation at t={sim.now:.6g} s"
    want = {i: _checked_gpus(sim, active, where, i, gs) for i, gs in plan.gpus.items()}
    _check_sharing(sim, where, want)
    return want


def _checked_gpus(sim: ClusterSimulation, active: np.ndarray, where: str, i: int, gpus) -> list[int]:
    """Job ``i``'s GPU ids ``gpus`` sorted, checked (``ValueError`` prefixed with ``where``): ``i`` is an active
    job, the ids are distinct GPUs of the cluster, as many as the job may hold, of types where it can run."""
    if not (0 <= i < len(active)) or not active[i]:
        raise ValueError(f"{where}: job index {i} is not waiting or running (only active jobs can run)")
    gs = sorted(int(g) for g in gpus)
    if len(set(gs)) != len(gs) or not all(0 <= g < sim.n_gpus for g in gs):
        raise ValueError(f"{where}: job {i}'s GPUs {gs} must be distinct ids in [0, {sim.n_gpus})")
    if not (sim.requested[i] <= len(gs) <= sim.jobs[i].max_gpus):
        raise ValueError(f"{where}: job {i} got {len(gs)} GPUs; it needs between gpus={sim.requested[i]} "
                         f"and max_gpus={sim.jobs[i].max_gpus}")
    slow = [t for t in sorted({sim.gpu_type[g] for g in gs})
            if not math.isfinite(sim.iteration_time(i, t, len(gs)))]
    if slow:
        raise ValueError(f"{where}: job {i} cannot run on {len(gs)} GPUs of type {slow[0]!r} (iteration time "
                         f"inf: Gavel measured throughput 0, or its profile leaves the type out); give it GPUs "
                         f"of {', '.join(sim.type_ranking(i, len(gs))) or 'another size'}")
    return gs


def _check_sharing(sim: ClusterSimulation, where: str, want: dict[int, list[int]]) -> None:
    """``ValueError`` (prefixed with ``where``) unless every GPU of ``want`` (``{job: GPU ids}``) holds at most two
    jobs, and two only when both are single-GPU jobs the interference model lets share it."""
    count = np.zeros(sim.n_gpus, dtype=np.int64)  # (G,) jobs per GPU
    for gs in want.values():
        count[gs] += 1
    if count.max(initial=0) > 2:
        raise ValueError(f"{where}: GPU {int(np.argmax(count))} would hold {int(count.max())} jobs (2 at most)")
    on: list[list[int]] = [[] for _ in range(sim.n_gpus)]
    for i, gs in want.items():
        for g in gs:
            on[g].append(i)
    types = sim.job_types
    for g in np.flatnonzero(count == 2).tolist():
        a, b = on[g]
        if len(want[a]) > 1 or len(want[b]) > 1:
            raise ValueError(f"{where}: jobs {a} and {b} cannot share GPU {g}: only single-GPU jobs share (Gavel "
                             f"measured co-location at one GPU only)")
        pair = sim.interference(types[a], types[b], sim.gpu_type[g])
        if pair is None or not (pair[0] > 0 and pair[1] > 0):
            raise ValueError(f"{where}: jobs {a} and {b} cannot share GPU {g} (interference model: "
                             f"{types[a]!r} with {types[b]!r} on {sim.gpu_type[g]!r})")
