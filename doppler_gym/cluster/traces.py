"""Job traces: generated (seeded, Philly-like) and shipped ones loaded by name.

- :func:`generate`: Poisson arrivals, log-normal (heavy-tailed) durations and a skewed GPU-count
  mix. The defaults follow the shape of the Microsoft Philly study (Jeon et al., USENIX ATC 2019):
  most jobs use one GPU and run minutes, a few use 8+ GPUs and run days; the GPU mix
  1/2/4/8/16 = 0.70/0.10/0.10/0.07/0.03 and the duration median 30 min with log-sd 1.8 are this
  module's choice, not fitted numbers.
- :func:`load` ``("gavel-msr")``: Gavel's synthetic Philly-like trace (533 jobs, MIT licence; see
  ``data/README.md``) with each job's iteration times taken from Gavel's measured solo throughputs
  on K80, P100 and V100 GPUs.
- :func:`load_gavel_trace`: a trace file in Gavel's 10-column format (its physical-cluster traces,
  or those its generator writes), each job timed by Gavel's measured throughputs (:func:`gavel_profile`).
- :func:`load` ``("pollux-workload-1")``: the Pollux/AdaptDL simulator's workload 1 (160 jobs over
  8 hours: CIFAR-10, NCF, DeepSpeech2, BERT, YOLOv3, ImageNet; Apache-2.0, see ``data/README.md``)
  with iterations and iteration times from Pollux's measured application traces
  (:func:`pollux_iteration_time`).

No shipped or Gavel-format trace carries a checkpoint interval (their files have none): under failures a job
restarts from zero unless ``checkpoint_every`` (or ``checkpoints="young"`` in :func:`doppler_gym.cluster.run`)
says otherwise; a run whose expected restarts never end is refused before it starts
(:class:`doppler_gym.cluster.ClusterRunError`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from doppler_gym.cluster.interference import gavel_table
from doppler_gym.cluster.types import Job, JobTrace

_SHIPPED = {"gavel-msr": "data/gavel_msr_2869ce.csv", "pollux-workload-1": "data/pollux_workload-1.csv"}
POLLUX_MAX_GPUS = 64  # Pollux's simulated cluster: 16 nodes x 4 GPUs


def names() -> tuple[str, ...]:
    """Names of the shipped traces :func:`load` accepts."""
    return tuple(_SHIPPED)


def generate(n_jobs: int, *, seed: int, mean_interarrival: float = 60.0, median_duration: float = 1_800.0,
             duration_sigma: float = 1.8, gpu_counts: tuple[int, ...] = (1, 2, 4, 8, 16),
             gpu_probs: tuple[float, ...] = (0.70, 0.10, 0.10, 0.07, 0.03), iteration_time: float = 1.0,
             checkpoint_every: int | None = None, checkpoint_cost: float = 0.0,
             job_types: tuple[str, ...] = ("generic",), name: str | None = None) -> JobTrace:
    """A seeded trace of ``n_jobs`` jobs whose iteration times come from a flat profile.

    Args:
        n_jobs: number of jobs (>= 1).
        seed: the random seed (same seed, same trace).
        mean_interarrival: mean time between arrivals [s] (Poisson arrivals, first at 0).
        median_duration: median solo run time of a job [s]; durations are log-normal.
        duration_sigma: standard deviation of log(duration) (1.8: a heavy tail).
        gpu_counts, gpu_probs: the GPU-count mix (probabilities summing to 1).
        iteration_time: every job's iteration time at any GPU count [s] (``profile={"*": ...}``);
            ``iterations = max(1, round(duration / iteration_time))``.
        checkpoint_every, checkpoint_cost: every job's checkpoint interval [iterations] and cost [s].
        job_types: job types drawn uniformly (for the interference model).
    """
    if not isinstance(n_jobs, int) or n_jobs < 1:
        raise ValueError(f"generate: n_jobs must be an integer >= 1, got {n_jobs!r}")
    for field_name, value in (("mean_interarrival", mean_interarrival), ("median_duration", median_duration),
                              ("iteration_time", iteration_time)):
        if not (value > 0):
            raise ValueError(f"generate: {field_name} must be > 0 [s], got {value!r}")
    if duration_sigma < 0:
        raise ValueError(f"generate: duration_sigma must be >= 0, got {duration_sigma!r}")
    if len(gpu_counts) != len(gpu_probs) or abs(sum(gpu_probs) - 1) > 1e-9 or min(gpu_probs) < 0:
        raise ValueError("generate: gpu_probs must be non-negative, sum to 1 and match gpu_counts in length")
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(mean_interarrival, n_jobs)
    arrival = np.concatenate([[0.0], np.cumsum(gaps[1:])])
    duration = median_duration * np.exp(duration_sigma * rng.standard_normal(n_jobs))
    gpus = rng.choice(np.asarray(gpu_counts), size=n_jobs, p=np.asarray(gpu_probs))
    types = rng.integers(len(job_types), size=n_jobs)
    jobs = tuple(
        Job(job_id=i, arrival=float(arrival[i]), iterations=max(1, int(round(duration[i] / iteration_time))),
            gpus=int(gpus[i]), workload=None, profile={"*": {int(gpus[i]): iteration_time}},
            checkpoint_every=checkpoint_every, checkpoint_cost=checkpoint_cost, job_type=job_types[types[i]])
        for i in range(n_jobs)
    )
    return JobTrace(jobs, name=name or f"generated-{n_jobs}-seed{seed}")


@lru_cache(maxsize=1)
def pollux_applications() -> dict:
    """The shipped Pollux application data (``data/pollux_applications.json``): per application,
    ``max_epochs``, ``max_local_bsz``, ``step_time_1gpu`` {local batch: s} and ``iterations`` {batch: count}."""
    text = resources.files("doppler_gym.cluster").joinpath("data/pollux_applications.json").read_text("utf-8")
    return {k: v for k, v in json.loads(text).items() if not k.startswith("_")}


def pollux_iteration_time(application: str, batch_size: int, gpus: int) -> float:
    """Iteration time [s] of a Pollux application at global ``batch_size`` on ``gpus`` data-parallel GPUs.

    The local batch ``ceil(batch_size / gpus)`` is split into ``a`` accumulation steps of at most the
    application's ``max_local_bsz`` (as Pollux does); each step takes the one-GPU step time Pollux
    measured at that local batch, linearly interpolated between its measured batches (clamped at the
    ends). Gradient synchronisation is not included (it is the part Pollux measured per placement;
    an optimistic simplification for jobs on several GPUs).
    """
    app = pollux_applications()[application]
    local = math.ceil(batch_size / gpus - 1e-8)
    steps = math.ceil(local / app["max_local_bsz"] - 1e-8)
    atomic = math.ceil(local / steps - 1e-8)
    xs = sorted(int(k) for k in app["step_time_1gpu"])
    ys = [app["step_time_1gpu"][str(x)] for x in xs]
    return steps * float(np.interp(atomic, xs, ys))


def _pollux_jobs(rows: list[dict[str, str]], checkpoint_every: int | None, checkpoint_cost: float) -> list[Job]:
    apps = pollux_applications()
    profiles: dict[tuple[str, int], tuple[dict[int, float], int]] = {}
    jobs = []
    for i, row in enumerate(rows):
        app, bsz, reps = row["application"], int(row["batch_size"]), int(row["num_replicas"])
        if (app, bsz) not in profiles:
            smallest = min(int(k) for k in apps[app]["step_time_1gpu"])
            top = max(1, min(POLLUX_MAX_GPUS, bsz // smallest))
            profiles[app, bsz] = ({k: pollux_iteration_time(app, bsz, k) for k in range(1, top + 1)}, top)
        profile, top = profiles[app, bsz]
        jobs.append(Job(job_id=i, arrival=float(row["time"]), iterations=int(apps[app]["iterations"][str(bsz)]),
                        gpus=reps, max_gpus=max(top, reps), workload=None, profile={"*": profile},
                        checkpoint_every=checkpoint_every, checkpoint_cost=checkpoint_cost, job_type=app))
    return jobs


def load(name: str, *, limit: int | None = None, checkpoint_every: int | None = None,
         checkpoint_cost: float = 0.0) -> JobTrace:
    """A shipped trace by name (:func:`names`); ``limit`` keeps its first jobs.

    ``pollux-workload-1`` jobs request Pollux's ``num_replicas`` GPUs and may use up to
    ``max_gpus`` = min(64, batch size / the smallest measured local batch) (for elastic schedulers);
    their profile covers every count up to it, on any GPU type (``"*"``: Pollux measured on T4s).
    """
    if name not in _SHIPPED:
        raise ValueError(f"unknown trace {name!r}; shipped traces: {', '.join(names())}")
    text = resources.files("doppler_gym.cluster").joinpath(_SHIPPED[name]).read_text("utf-8")
    if name.startswith("pollux"):
        rows = list(csv.DictReader(io.StringIO(text)))[:limit]
        return JobTrace(tuple(_pollux_jobs(rows, checkpoint_every, checkpoint_cost)), name=name)
    jobs = []
    for i, row in enumerate(csv.DictReader(io.StringIO(text))):
        if limit is not None and i >= limit:
            break
        jtype, scale = row["job_type"], int(row["scale_factor"])
        jobs.append(Job(job_id=i, arrival=float(row["arrival_s"]), iterations=int(row["total_steps"]), gpus=scale,
                        workload=None, profile=gavel_profile(jtype), checkpoint_every=checkpoint_every,
                        checkpoint_cost=checkpoint_cost, job_type=jtype))
    return JobTrace(tuple(jobs), name=name)


def gavel_job_types() -> tuple[str, ...]:
    """The job types Gavel measured (``"ResNet-18 (batch size 32)"``, ...), sorted."""
    return tuple(sorted({jt for t in gavel_table().values() for jt in t["solo_steps_per_s"]}))


def gavel_profile(job_type: str) -> dict[str, dict[int, float]]:
    """A Gavel job type's iteration times ``{gpu_type: {scale factor: 1 / throughput [s]}}`` from Gavel's
    measured solo throughputs [steps/s] (``simulation_throughputs.json``, shipped converted); a throughput
    of 0 (the job cannot run there, e.g. ResNet-50 at batch 128 on 2+ K80s) becomes ``inf``, which keeps the
    job off that type at that count. ``ValueError`` for a type Gavel never measured."""
    table = gavel_table()
    profile = {gt: {int(k): (1.0 / v if v > 0 else math.inf) for k, v in t["solo_steps_per_s"][job_type].items()}
               for gt, t in table.items() if job_type in t["solo_steps_per_s"]}
    if not profile:
        raise ValueError(f"job type {job_type!r} was never measured by Gavel; known types: "
                         f"{', '.join(gavel_job_types())}")
    return profile


GAVEL_TRACE_FIELDS = ("job type", "command", "working directory", "num-steps argument", "needs data dir",
                      "total steps", "scale factor", "priority weight", "SLO", "arrival time")


@dataclass(frozen=True)
class GavelJobs:
    """The jobs of a Gavel-format trace as arrays (``n`` jobs in file order).

    Attributes:
        job_type: ``n`` Gavel job-type names (``"ResNet-18 (batch size 128)"``).
        total_steps: ``(n,) int64`` steps to train.
        scale_factor: ``(n,) int64`` [GPUs].
        weight: ``(n,) float64`` priority weights.
        arrival: ``(n,) float64`` [s].
    """

    job_type: tuple[str, ...]
    total_steps: np.ndarray
    scale_factor: np.ndarray
    weight: np.ndarray
    arrival: np.ndarray

    def __len__(self) -> int:
        return len(self.job_type)


def read_gavel_jobs(path: str | os.PathLike, *, limit: int | None = None) -> GavelJobs:
    """The rows of a trace file in Gavel's format (``scheduler/utils.py:parse_trace``): one job per line, 10
    tab-separated fields (:data:`GAVEL_TRACE_FIELDS`: job type, command, working directory, num-steps
    argument, needs-data-dir 0/1, total steps, scale factor [GPUs], priority weight, SLO (-1: none),
    arrival time [s]); the command, directory and SLO are not kept. ``limit`` keeps the first jobs.

    Raises ``ValueError`` naming the file, line and field of the first bad row (a wrong field count, a job type
    Gavel never measured, a non-integer step count or scale factor, a weight that is not > 0, a negative arrival).
    """
    path = Path(path)
    try:
        text = path.read_text("utf-8")
    except OSError as e:
        raise ValueError(f"trace file {str(path)!r} cannot be read ({e.strerror or e}); give a Gavel-format "
                         f".trace file") from None
    known = set(gavel_job_types())
    rows: list[tuple[str, int, int, float, float]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if limit is not None and len(rows) >= limit:
            break
        where = f"{path}:{n}"
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) != len(GAVEL_TRACE_FIELDS):
            raise ValueError(f"{where}: {len(fields)} tab-separated fields, Gavel's trace format has "
                             f"{len(GAVEL_TRACE_FIELDS)} ({', '.join(GAVEL_TRACE_FIELDS)})")
        jtype = fields[0]
        if jtype not in known:
            raise ValueError(f"{where}: field 1 (job type) {jtype!r} was never measured by Gavel, so it has no "
                             f"throughputs; use one of: {', '.join(sorted(known))}")
        steps = _field_int(fields[5], where, 6, "total steps")
        scale = _field_int(fields[6], where, 7, "scale factor")
        weight = _field_float(fields[7], where, 8, "priority weight")
        if not weight > 0:
            raise ValueError(f"{where}: field 8 (priority weight) {fields[7]!r} must be a number > 0")
        arrival = _field_float(fields[9], where, 10, "arrival time")
        if not arrival >= 0:
            raise ValueError(f"{where}: field 10 (arrival time) {fields[9]!r} must be a time >= 0 [s]")
        rows.append((jtype, steps, scale, weight, arrival))
    if not rows:
        raise ValueError(f"{path}: no jobs; a Gavel trace has one job per line, 10 tab-separated fields")
    return GavelJobs(tuple(r[0] for r in rows), np.array([r[1] for r in rows], dtype=np.int64),
                     np.array([r[2] for r in rows], dtype=np.int64), np.array([r[3] for r in rows], dtype=np.float64),
                     np.array([r[4] for r in rows], dtype=np.float64))


def load_gavel_trace(path: str | os.PathLike, *, limit: int | None = None, checkpoint_every: int | None = None,
                     checkpoint_cost: float = 0.0) -> JobTrace:
    """A trace file in Gavel's format (:func:`read_gavel_jobs`, with its errors) as a :class:`JobTrace`: each
    job's iteration times are :func:`gavel_profile` of its type; priority weights are not used."""
    rows = read_gavel_jobs(path, limit=limit)
    jobs = [Job(job_id=k, arrival=float(rows.arrival[k]), iterations=int(rows.total_steps[k]),
                gpus=int(rows.scale_factor[k]), workload=None, profile=gavel_profile(jtype),
                checkpoint_every=checkpoint_every, checkpoint_cost=checkpoint_cost, job_type=jtype)
            for k, jtype in enumerate(rows.job_type)]
    return JobTrace(tuple(jobs), name=Path(path).stem)


def _field_int(text: str, where: str, column: int, label: str) -> int:
    """Field ``column`` of a Gavel trace row as an integer >= 1, else ValueError naming the line and field."""
    if not text.strip().isdecimal() or int(text) < 1:
        raise ValueError(f"{where}: field {column} ({label}) {text!r} must be an integer >= 1")
    return int(text)


def _field_float(text: str, where: str, column: int, label: str) -> float:
    """Field ``column`` of a Gavel trace row as a finite number, else ValueError naming the line and field."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"{where}: field {column} ({label}) {text!r} must be a finite number")
    return value
