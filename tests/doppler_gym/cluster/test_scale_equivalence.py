"""The cluster engine's speed-ups for 100,000-job traces (issue 36) leave every run bit-identical.

Two independent references:

1. ``scale_equivalence.json``: the per-job completion and first-start times [s] and failure
   interruptions of every scheduler on the traces of :func:`cases`, recorded with the engine as it was
   before the speed-ups (commit ``fb3cebf``'s ``doppler_gym/cluster``), by::

       PYTHONPATH=<checkout of fb3cebf> python tests/doppler_gym/cluster/test_scale_equivalence.py --write

   (as a script, so that ``doppler_gym`` comes from ``PYTHONPATH``).
2. The orders of SRTF, LAS and Tiresias from a straightforward reference: Python's ``sorted`` on the
   (key, arrival, job index) tuple of every active job, as the schedulers were defined, driving the same
   simulation; the runs must match the schedulers' own exactly.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from doppler_gym import cluster as C
from doppler_gym.cluster.schedulers import LAS, SRTF, JobView, Tiresias

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = Path(__file__).with_name("scale_equivalence.json")
SCHEDULERS = ("fifo", "srtf", "las", "tiresias", "gandiva", "elastic", "tiresias_starve")
COLUMNS = ("completion", "first_start", "interruptions")


def cases() -> dict[str, tuple[C.JobTrace, C.Cluster, C.FailureModel, float]]:
    """name -> (trace, cluster, failures, preemption_cost [s]): homogeneous (64 GPUs, 300 generated jobs at
    the load of ``bench_cluster``) and heterogeneous (Gavel's T3 trace, 60 jobs, on 8 V100 + 8 P100 + 8 K80),
    with and without failures and preemption costs, and elastic jobs (``max_gpus`` twice the request)."""
    homog = C.traces.generate(300, seed=3, mean_interarrival=30.0 * 256 / 64, checkpoint_every=200,
                              checkpoint_cost=5.0)
    uniform = C.Cluster.uniform(8, 8)
    gavel = C.traces.load_gavel_trace(ROOT / "benchmarks/data/gavel/t3_gen150.trace", limit=60)
    het = C.Cluster(tuple(C.Node(4, t, None) for t in ("v100", "p100", "k80") for _ in range(2)), name="het")
    none = C.FailureModel()
    elastic = C.JobTrace(tuple(dataclasses.replace(j, max_gpus=2 * j.gpus) for j in homog.jobs), name="el")
    return {
        "homog": (homog, uniform, none, 0.0),
        "homog_fail_cost": (homog, uniform, C.FailureModel(gpu_mtbf=64 * 3600.0 * 4, restart_delay=120.0), 30.0),
        "het": (gavel, het, none, 0.0),
        "homog_elastic": (elastic, uniform, none, 20.0),
        "het_fail_cost": (gavel, het, C.FailureModel(gpu_mtbf=12 * 3600.0 * 50, restart_delay=60.0), 60.0),
    }


def scheduler(name: str) -> C.Scheduler | str:
    """A scheduler of :data:`SCHEDULERS` (``tiresias_starve``: Tiresias with starvation promotion at 2)."""
    return Tiresias(starve_limit=2.0) if name == "tiresias_starve" else name


def run(case: str, name: str, sched: C.Scheduler | str | None = None) -> C.ClusterResult:
    trace, cl, failures, cost = cases()[case]
    return C.run(trace, cl, scheduler(name) if sched is None else sched, seed=7, failures=failures,
                 preemption_cost=cost)


def record() -> dict[str, dict[str, list[float]]]:
    """``{"case/scheduler": {column: per-job values}}`` for every case and scheduler."""
    return {f"{case}/{s}": {k: [float(x) for x in run(case, s).jobs[k]] for k in COLUMNS}
            for case in cases() for s in SCHEDULERS}


@pytest.mark.slow
@pytest.mark.parametrize("case", ["homog", "homog_fail_cost", "het", "homog_elastic", "het_fail_cost"])
def test_runs_match_the_engine_before_the_speedups(case):
    expected = json.loads(FIXTURE.read_text())
    for s in SCHEDULERS:
        r = run(case, s)
        for k in COLUMNS:
            np.testing.assert_array_equal(r.jobs[k], np.array(expected[f"{case}/{s}"][k]), err_msg=f"{case}/{s} {k}")


def _reference_order(view: JobView, key) -> list[int]:
    """The active jobs sorted by ``(key(j), arrival, j)`` with Python's ``sorted``."""
    return sorted(view.active, key=lambda j: (key(j), float(view.arrival[j]), j))


class _RefSRTF(SRTF):
    def order(self, view):
        return _reference_order(view, lambda j: float(view.remaining[j] * view.gpus[j]))


class _RefLAS(LAS):
    def order(self, view):
        return _reference_order(view, lambda j: float(view.attained[j]))


class _RefTiresias(Tiresias):
    def order(self, view):
        if self.starve_limit is not None:
            self._promote(view)
        return _reference_order(view, lambda j: sum(t <= self.queue_service(view, j) for t in self.thresholds))


@pytest.mark.parametrize("case", ["homog_fail_cost", "het"])
@pytest.mark.parametrize("name, ref", [("srtf", _RefSRTF()), ("las", _RefLAS()), ("tiresias", _RefTiresias()),
                                       ("tiresias_starve", _RefTiresias(starve_limit=2.0))])
def test_orders_match_a_sorted_reference(case, name, ref):
    fast, slow = run(case, name), run(case, name, ref)
    for k in COLUMNS:
        np.testing.assert_array_equal(fast.jobs[k], slow.jobs[k], err_msg=f"{case}/{name} {k}")


def test_sorted_by_breaks_ties_by_arrival_then_index():
    """Equal keys: arrival first, then index; with and without the sorted-arrival fast path."""
    rng = np.random.default_rng(0)
    arrival = np.sort(rng.integers(0, 5, size=40).astype(float))
    key = rng.integers(0, 3, size=40).astype(float)
    jobs = np.flatnonzero(rng.random(40) < 0.7)
    view = JobView(now=0.0, active=jobs.tolist(), arrival=arrival, gpus=np.ones(40, dtype=np.int64),
                   running=np.zeros(40, dtype=bool), attained=key, remaining=key, active_idx=jobs)
    expected = sorted(jobs.tolist(), key=lambda j: (key[j], arrival[j], j))
    assert LAS().order(view) == expected
    assert LAS().order(dataclasses.replace(view, arrival_sorted=True)) == expected


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python tests/doppler_gym/cluster/test_scale_equivalence.py --write")
    print(f"recording with {C.__file__}")
    FIXTURE.write_text(json.dumps(record()))
