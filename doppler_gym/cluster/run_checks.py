"""Checks of a cluster run's inputs before it starts: every job can run somewhere, and can finish under failures.

:func:`check_inputs` refuses settings and jobs a run would trip on (a job larger than the cluster, one no
GPU type can run, unknown workload parameters, a bad ``preemption_cost`` or ``checkpoints``);
:func:`check_can_finish` refuses a failure model under which some job's longest stretch of work between
checkpoints expects more than :data:`~doppler_gym.cluster.failures.MAX_RESTARTS_PER_STRETCH` restarts, naming
the checkpoint interval or MTBF that would let it finish. Both raise ``ValueError``;
:class:`~doppler_gym.cluster.simulation.ClusterSimulation` calls them before anything runs.
"""

from __future__ import annotations

import math

from doppler_gym import workloads
from doppler_gym.cluster import failures as fl
from doppler_gym.cluster.timing import IterationTimes
from doppler_gym.cluster.types import Cluster, Job, JobTrace


def _check_runs_somewhere(job: Job, cluster: Cluster, per_type: dict[str, int], times: IterationTimes) -> None:
    """``ValueError`` unless some GPU type of ``cluster`` can run profile job ``job`` at its GPU count (a finite
    iteration time there), or its types together hold it when it needs more GPUs than any one of them has;
    ``per_type``: ``{GPU type: GPUs}`` of the cluster."""
    k, types_here = job.gpus, sorted(per_type)
    able = [t for t in types_here if math.isfinite(times(job, t, k))]
    capacity = sum(per_type[t] for t in able)
    if able and capacity >= k:
        return
    if not able:
        raise ValueError(f"Job {job.job_id} ({job.job_type}) cannot run on any GPU type of cluster {cluster.name!r} "
                         f"({', '.join(types_here)}) at {k} GPU(s): its profile gives no finite iteration time for "
                         f"them (inf: Gavel measured throughput 0; a type left out: not profiled). Add a GPU type it "
                         f"runs on (its profile has {', '.join(sorted(job.profile))}) or drop the job")
    raise ValueError(f"Job {job.job_id} ({job.job_type}): needs {k} GPUs but the types it can run on "
                     f"({', '.join(able)}) have {capacity} in cluster {cluster.name!r}; add GPUs of those types")


def check_inputs(trace: JobTrace, cluster: Cluster, checkpoints: str, preemption_cost: float,
                  times: IterationTimes) -> None:
    """Raise ``ValueError`` for anything a run could trip on, before it starts."""
    if not (isinstance(preemption_cost, (int, float)) and math.isfinite(preemption_cost) and preemption_cost >= 0):
        raise ValueError(f"preemption_cost must be a finite time >= 0 [s], got {preemption_cost!r}")
    if checkpoints not in ("fixed", "young"):
        raise ValueError(f"checkpoints={checkpoints!r}: must be 'fixed' (each job's checkpoint_every) or 'young'")
    per_type: dict[str, int] = {}
    for nd in cluster.nodes:
        per_type[nd.gpu_type] = per_type.get(nd.gpu_type, 0) + nd.gpus
    n_gpus = cluster.n_gpus
    for j in trace.jobs:
        if j.gpus > n_gpus:
            raise ValueError(f"Job {j.job_id}: gpus={j.gpus} exceeds the cluster's {n_gpus} GPUs ({cluster.name})")
        if j.profile is not None:
            _check_runs_somewhere(j, cluster, per_type, times)
        else:
            unknown = sorted(set(j.workload_params) - set(workloads.params(j.workload)))  # unknown name raises
            if unknown:
                raise ValueError(f"Job {j.job_id}: workload_params {unknown} are not parameters of workload "
                                 f"{j.workload!r}; valid: {sorted(workloads.params(j.workload))}")


def check_can_finish(trace: JobTrace, cluster: Cluster, times: IterationTimes, failures: fl.FailureModel,
                      checkpoints: str) -> None:
    """``ValueError`` if a job's longest stretch of work between checkpoints expects more than
    :data:`~doppler_gym.cluster.failures.MAX_RESTARTS_PER_STRETCH` restarts at full speed on its requested GPUs
    (a lower bound: sharing, stragglers and slower GPU types only lengthen a stretch). The message names the
    job that needs the highest MTBF, so its fix covers every job, and counts the others."""
    mtbf = failures.gpu_mtbf
    if not math.isfinite(mtbf):
        return
    types_here = sorted({nd.gpu_type for nd in cluster.nodes})
    failing = []
    for job in trace.jobs:
        t = min(times(job, gpu_type, job.gpus) for gpu_type in types_here)  # [s] per iteration, the fastest type
        check = _StretchCheck(job, t, checkpoints == "young")
        if check.restarts(mtbf) > fl.MAX_RESTARTS_PER_STRETCH:
            failing.append(check)
    if failing:
        worst = max(failing, key=lambda c: c.mtbf_needed(mtbf))
        others = f" ({len(failing)} of the {len(trace)} jobs cannot finish; this one needs the highest MTBF)" \
            if len(failing) > 1 else ""
        raise ValueError(worst.message(mtbf) + others)


class _StretchCheck:
    """One job's longest stretch between checkpoints and its expected restarts as a function of the per-GPU
    MTBF (at Young's interval for that MTBF when ``young``, else at the job's ``checkpoint_every``)."""

    def __init__(self, job: Job, iter_time: float, young: bool) -> None:
        self.job, self.iter_time, self.young = job, iter_time, young

    def every(self, mtbf: float) -> int | None:
        """Iterations between checkpoints at ``mtbf`` (``None``: no checkpoints)."""
        job = self.job
        return fl.young_every(job.checkpoint_cost, mtbf, job.gpus, self.iter_time) if self.young \
            else job.checkpoint_every

    def stretch(self, mtbf: float, every: int | None = None) -> float:
        """[solo s] the longest stretch at ``mtbf``, with ``every`` iterations between checkpoints if given."""
        job = self.job
        return fl.longest_stretch(job.iterations, self.iter_time, every or self.every(mtbf), job.checkpoint_cost)

    def restarts(self, mtbf: float, every: int | None = None) -> float:
        """Expected restarts of the longest stretch at ``mtbf`` (with ``every`` if given)."""
        return fl.expected_restarts(self.stretch(mtbf, every), self.job.gpus / mtbf)

    def mtbf_needed(self, mtbf: float) -> float:
        """[s] the least per-GPU MTBF (>= ``mtbf``) that passes: ``g x stretch / ln(1 + bound)``, iterated
        because Young's interval, and so the stretch, grows with the MTBF."""
        limit = math.log1p(fl.MAX_RESTARTS_PER_STRETCH)
        for _ in range(100):
            mtbf = max(mtbf, self.job.gpus * self.stretch(mtbf) / limit)
            if self.restarts(mtbf) <= fl.MAX_RESTARTS_PER_STRETCH:
                break
            mtbf *= 1.0 + 1e-6
        return mtbf

    def message(self, mtbf: float) -> str:
        """Why the job cannot finish at ``mtbf``, and the checkpoint interval or MTBF that would let it."""
        job, t = self.job, self.iter_time
        g, cost, every, stretch = job.gpus, job.checkpoint_cost, self.every(mtbf), self.stretch(mtbf)
        x = g * stretch / mtbf  # expected failures during one stretch
        how = "no checkpoints" if every is None else f"checkpoint every {every} iterations, {cost:g} s each"
        need = self.mtbf_needed(mtbf)
        fix = f"raise gpu_mtbf to >= {_round_up(need)} s (--mtbf-hours {_round_up(need / 3600)})"
        young = fl.young_every(cost, mtbf, g, t)
        if self.restarts(mtbf, young) <= fl.MAX_RESTARTS_PER_STRETCH:
            young_too = (f"; Young's interval for {cost:g} s checkpoints: checkpoints='young', --checkpoint young"
                         if cost > 0 else "")
            fix = f"checkpoint_every={young} iterations (--checkpoint-every {young}{young_too}), or {fix}"
        else:
            fix = (f"{fix} or a lower checkpoint_cost (even checkpoints at Young's interval, every {young} "
                   f"iterations, leave stretches too long)")
        return (f"Job {job.job_id} cannot finish under failures: on {g} GPU(s) with gpu_mtbf={mtbf:.6g} s it fails "
                f"every {mtbf / g:.4g} s on average, and its longest stretch of work between checkpoints is "
                f"{stretch:,.4g} s ({job.iterations} iterations of {t:.4g} s, {how}): P(the stretch runs without "
                f"a failure) = exp(-{x:.4g}), so it expects {_big(self.restarts(mtbf), x)} restarts (more than "
                f"{fl.MAX_RESTARTS_PER_STRETCH:,}). Fix: {fix}")


def _big(value: float, exponent: float) -> str:
    """``value`` = exp(``exponent``) - 1 as text, as a power of ten past float range."""
    return f"{value:.3g}" if math.isfinite(value) else f"~1e{exponent / math.log(10):.0f}"


def _round_up(x: float, digits: int = 3) -> str:
    """``x`` > 0 rounded up to ``digits`` significant digits, as text."""
    scale = 10.0 ** (math.floor(math.log10(x)) - digits + 1)
    return f"{math.ceil(x / scale - 1e-9) * scale:,.{digits + 3}g}"
