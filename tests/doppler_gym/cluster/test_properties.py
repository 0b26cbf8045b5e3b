"""Invariants of doppler_gym.cluster on hypothesis-drawn small traces, clusters, schedulers and failures."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doppler_gym import cluster as C
from doppler_gym.cluster import failures as fl


@st.composite
def cases(draw):
    n_nodes = draw(st.integers(1, 3))
    n_jobs = draw(st.integers(1, 12))
    every = draw(st.sampled_from([None, 3, 20]))
    jobs = tuple(
        C.Job(job_id=i, arrival=draw(st.floats(0, 500)), iterations=draw(st.integers(1, 300)),
              gpus=(g := draw(st.sampled_from([1, 2, 4, 8][: 2 + n_nodes]))), workload=None,
              profile={"*": {g: draw(st.sampled_from([0.5, 1.0, 3.0]))}}, checkpoint_every=every,
              checkpoint_cost=draw(st.sampled_from([0.0, 2.0])))
        for i in range(n_jobs)
    )
    failures = C.FailureModel(gpu_mtbf=draw(st.sampled_from([float("inf"), 2_000.0])), restart_delay=10.0)
    return C.JobTrace(jobs), C.Cluster.uniform(n_nodes, 4, preset=None), draw(st.sampled_from(C.schedulers.names())), \
        failures, draw(st.integers(0, 2**16))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_every_job_finishes_and_time_adds_up(case):
    trace, cluster, scheduler, failures, seed = case
    r = C.run(trace, cluster, scheduler, seed=seed, failures=failures)
    j = r.jobs
    assert np.all(j["arrival"] <= j["first_start"]) and np.all(j["first_start"] < j["completion"])
    solo = np.array([fl.total_work(job.iterations, j["iter_time"][k], job.checkpoint_every, job.checkpoint_cost)
                     for k, job in enumerate(trace.jobs)])
    assert np.all(j["jct"] >= solo * (1 - 1e-9))
    assert np.all(j["lost"] >= 0) and (failures.gpu_mtbf < np.inf or r.interruptions == 0)
    if scheduler != "gandiva":  # alone on its GPUs a job runs at speed 1: held time = work done, kept or lost
        np.testing.assert_allclose(j["held"], solo + j["lost"], rtol=1e-9, atol=1e-6)
    else:
        assert np.all(j["held"] >= (solo + j["lost"]) * (1 - 1e-9))
    assert r.util_v.max() <= cluster.n_gpus and 0 < r.occupancy <= 1 + 1e-9 and r.utilisation <= 2 * r.occupancy
    again = C.run(trace, cluster, scheduler, seed=seed, failures=failures)
    assert again.summary() == r.summary()


@pytest.mark.parametrize("name", C.schedulers.names())
def test_each_scheduler_finishes_a_shipped_trace_prefix(name):
    r = C.run(C.traces.load("gavel-msr", limit=25), C.Cluster.uniform(4, 8), name, seed=0)
    assert r.n_jobs == 25 and np.all(np.isfinite(r.jobs["completion"]))
