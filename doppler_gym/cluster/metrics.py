"""The result of a cluster run: summary metrics and a per-job table.

Definitions (every job finishes; times in seconds):

- JCT (job completion time) = completion - arrival; ``avg_jct`` its mean, ``p99_jct`` its 99th
  percentile (numpy's linear interpolation).
- ``makespan`` = last completion - first arrival.
- ``utilisation`` = solo-equivalent GPU-seconds of work delivered (each running job's speed x its
  GPUs, integrated over time; work later lost to failures included) / (GPUs x makespan). Two jobs
  sharing a GPU at 0.68 of their solo speed each count 1.36 there, so sharing can raise it (the
  compute utilisation of Gandiva and AntMan); without sharing it equals ``occupancy``.
- ``occupancy`` = GPU-seconds with at least one job on the GPU / (GPUs x makespan).
- ``goodput`` = iterations of all jobs / busy GPU-hours (a GPU two jobs share counts once; work
  lost to failures and time spent checkpointing lower it) [iterations / GPU h].
- a job's effective-time fraction = useful time (iterations x solo iteration time on its last
  allocation) / (completion - first start); ``effective_fraction`` is the mean over jobs.
- ``interruptions``: failures that stopped a job (a failure of a GPU two jobs share counts twice).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field

import numpy as np

from doppler_gym.cluster.types import Cluster, JobTrace

JOB_COLUMNS = ("job_id", "arrival", "gpus", "iterations", "iter_time", "checkpoint_every", "first_start", "completion",
               "jct", "held", "interruptions", "lost", "effective_fraction")


@dataclass(frozen=True)
class ClusterResult:
    """Summary metrics (floats, see the module docstring) and ``jobs``: column name -> ``(n_jobs,)`` array.

    ``jobs`` columns (trace order, i.e. by arrival): ``job_id`` int64; ``arrival``, ``first_start``,
    ``completion``, ``jct``, ``held`` (wall time holding GPUs), ``lost`` (solo time of work lost to
    failures) [s]; ``iter_time`` [s] on the last allocation; ``gpus``, ``iterations``,
    ``interruptions`` int64; ``checkpoint_every`` int64 (iterations; 0 = none); ``effective_fraction``.
    ``util_t`` [s] / ``util_v`` [GPUs]: the number of busy GPUs from each time on (a step function).
    """

    scheduler: str
    seed: int
    n_jobs: int
    n_gpus: int
    avg_jct: float  # [s]
    p99_jct: float  # [s]
    makespan: float  # [s]
    utilisation: float  # solo-equivalent work / capacity, in [0, 2] (> 1 only with sharing)
    occupancy: float  # in [0, 1]
    goodput: float  # [iterations / GPU h]
    effective_fraction: float  # in [0, 1]
    interruptions: int
    jobs: dict[str, np.ndarray] = field(repr=False)
    util_t: np.ndarray = field(repr=False)  # (n_steps,) [s]
    util_v: np.ndarray = field(repr=False)  # (n_steps,) busy GPUs

    def summary(self) -> dict[str, float]:
        """The scalar metrics as a dict (for tables and JSON)."""
        return {k: getattr(self, k) for k in ("avg_jct", "p99_jct", "makespan", "utilisation", "occupancy", "goodput",
                                              "effective_fraction", "interruptions")}

    def rows(self) -> list[dict[str, float]]:
        """The per-job table as one dict per job (CSV-ready)."""
        return [{c: self.jobs[c][i].item() for c in JOB_COLUMNS} for i in range(self.n_jobs)]

    def to_csv(self, path: str | os.PathLike) -> None:
        """Write the per-job table to ``path`` (a header line, then one line per job, arrival order)."""
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=JOB_COLUMNS)
            writer.writeheader()
            writer.writerows(self.rows())


def summarise(*, trace: JobTrace, cluster: Cluster, scheduler: str, seed: int, completion: np.ndarray,
              first_start: np.ndarray, iter_time: np.ndarray, held: np.ndarray, interruptions: np.ndarray,
              lost: np.ndarray, busy_gpu_s: float, work_gpu_s: float, util_t: np.ndarray,
              util_v: np.ndarray, every: list[int | None]) -> ClusterResult:
    arrival = np.array([j.arrival for j in trace.jobs])
    gpus = np.array([j.gpus for j in trace.jobs], dtype=np.int64)
    iters = np.array([j.iterations for j in trace.jobs], dtype=np.int64)
    jct = completion - arrival
    makespan = float(completion.max() - arrival.min())
    effective = iters * iter_time / (completion - first_start)
    capacity = cluster.n_gpus * makespan  # [GPU s]
    jobs = {"job_id": np.array([j.job_id for j in trace.jobs], dtype=np.int64), "arrival": arrival, "gpus": gpus,
            "iterations": iters, "iter_time": iter_time,
            "checkpoint_every": np.array([e or 0 for e in every], dtype=np.int64), "first_start": first_start,
            "completion": completion,
            "jct": jct, "held": held, "interruptions": interruptions, "lost": lost, "effective_fraction": effective}
    return ClusterResult(
        scheduler=scheduler, seed=seed, n_jobs=len(trace), n_gpus=cluster.n_gpus, avg_jct=float(jct.mean()),
        p99_jct=float(np.percentile(jct, 99)), makespan=makespan,
        utilisation=float(work_gpu_s / capacity) if capacity > 0 else 0.0,
        occupancy=float(busy_gpu_s / capacity) if capacity > 0 else 0.0,
        goodput=float(iters.sum() / (busy_gpu_s / 3600.0)) if busy_gpu_s > 0 else 0.0,
        effective_fraction=float(effective.mean()), interruptions=int(interruptions.sum()),
        jobs=jobs, util_t=util_t, util_v=util_v,
    )
