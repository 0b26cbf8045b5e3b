"""cluster_sweep against direct doppler_gym.cluster.run calls, locally and as Ray tasks."""

from __future__ import annotations

import numpy as np
import pytest

from doppler_gym import cluster
from doppler_gym.parallel import cluster_grid, cluster_sweep
from tests.doppler_gym.parallel.ray_fixture import RAY_ADDRESS, ray_local  # noqa: F401  (fixture)

FAILURES = cluster.FailureModel(gpu_mtbf=1e5, straggler_mtbs=2e4)  # a few failures: the seed matters


@pytest.fixture(scope="module")
def setup():
    return cluster.traces.generate(12, seed=0), cluster.Cluster.uniform(4, 8)


def _same(a, b):
    assert a.summary() == b.summary()
    for k in a.jobs:
        np.testing.assert_array_equal(a.jobs[k], b.jobs[k])


def test_grid_order():
    cells = cluster_grid(["fifo", "las"], [0, 1], {"checkpoints": ["fixed", "young"]})
    assert len(cells) == 8
    assert cells[0] == {"scheduler": "fifo", "seed": 0, "checkpoints": "fixed"}
    assert cells[1] == {"scheduler": "fifo", "seed": 0, "checkpoints": "young"}
    assert cells[-1] == {"scheduler": "las", "seed": 1, "checkpoints": "young"}
    with pytest.raises(ValueError, match="'seed' is not a grid key"):
        cluster_grid(["fifo"], [0], {"seed": [1]})
    with pytest.raises(ValueError, match="at least one scheduler"):
        cluster_grid([], [0])


def test_sweep_equals_direct_runs(setup):
    trace, c = setup
    out = cluster_sweep(trace, c, ["fifo", "srtf"], [0, 7], failures=FAILURES)
    assert [cell["scheduler"] for cell, _ in out] == ["fifo", "fifo", "srtf", "srtf"]
    for cell, result in out:
        _same(result, cluster.run(trace, c, cell["scheduler"], seed=cell["seed"], failures=FAILURES))
    # the failure seed matters here, so the seeds really were passed on
    assert out[0][1].summary() != out[1][1].summary()
    with pytest.raises(ValueError, match="given both as fixed and swept"):
        cluster_sweep(trace, c, ["fifo"], [0], grid={"checkpoints": ["young"]}, checkpoints="fixed")


@pytest.mark.slow
def test_ray_sweep_equals_local(setup, ray_local):  # noqa: F811
    trace, c = setup
    grid = {"checkpoints": ["fixed", "young"]}
    local = cluster_sweep(trace, c, ["fifo", "las"], [1], grid=grid, failures=FAILURES)
    remote = cluster_sweep(trace, c, ["fifo", "las"], [1], grid=grid, failures=FAILURES, ray_address=RAY_ADDRESS)
    assert [cell for cell, _ in remote] == [cell for cell, _ in local]
    for (_, a), (_, b) in zip(local, remote):
        _same(a, b)
