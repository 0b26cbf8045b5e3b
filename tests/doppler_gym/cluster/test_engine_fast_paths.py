"""The engine's fast paths for 100,000-job traces (issue 36) against straightforward references.

- the view's lazily built ``active`` / ``remaining`` and its live status masks against the same values
  recomputed from the engine's ``status`` at every decision point;
- the schedulers' ``order_array`` against their ``order`` lists, and :func:`array_order`'s choice;
- the preemptive admission on one GPU type (compiled: :func:`~doppler_gym.cluster.admission.greedy_changes`)
  against the greedy loop written out in Python;
- the small helper :func:`_sorted_remove` against brute force;
- ``fifo_strict`` by name and from the CLI against ``FIFO(backfill=False)``.
"""

from __future__ import annotations

import numpy as np
import pytest

from doppler_gym import cluster as C
from doppler_gym.cluster import simulation as S
from doppler_gym.cluster.gavel_engine import GavelRounds
from doppler_gym.cluster.schedulers import FIFO, LAS, SRTF, Tiresias, array_order
from tests.doppler_gym.cli.cli_helpers import run as cli_run


def _trace(n: int = 80, seed: int = 1) -> C.JobTrace:
    return C.traces.generate(n, seed=seed, mean_interarrival=40.0, checkpoint_every=100, checkpoint_cost=5.0)


def _views(scheduler: C.Scheduler, failures: C.FailureModel, check) -> int:
    """Drive a run by ``scheduler.order``, calling ``check(sim, view)`` at each decision; the decisions made."""
    sim = C.ClusterSimulation(_trace(), C.Cluster.uniform(4, 4, preset=None), scheduler, seed=2, failures=failures)
    view, decisions = sim.run_until_decision(), 0
    while view is not None:
        check(sim, view)
        sim.allocate_in_order(scheduler.order(view))
        decisions += 1
        view = sim.run_until_decision()
    return decisions


@pytest.mark.parametrize("scheduler", [SRTF(), FIFO(), Tiresias(starve_limit=2.0)])
def test_view_matches_the_status_recomputed_at_every_decision(scheduler):
    failures = C.FailureModel(gpu_mtbf=16 * 3600.0 * 20, restart_delay=60.0)
    seen_restarting = []

    def check(sim, view):
        status = sim.status
        expected_active = [i for i in range(sim.n_jobs) if status[i] in (S.WAITING, S.RUNNING)]
        assert view.active == expected_active
        np.testing.assert_array_equal(view.active_array(), expected_active)
        np.testing.assert_array_equal(view.running, status == S.RUNNING)
        np.testing.assert_array_equal(view.restarting, status == S.RESTARTING)
        seen_restarting.append(bool(view.restarting.any()))
        for i in expected_active:  # remaining: on the current allocation, or the solo total before a start
            want = sim.solo_total[i] if np.isnan(sim.iter_time[i]) else sim.work[i] - sim.progress[i]
            assert view.remaining[i] == want

    assert _views(scheduler, failures, check) > 50
    assert any(seen_restarting)  # the failures reached the masks


@pytest.mark.parametrize("scheduler", [FIFO(), FIFO(backfill=False), SRTF(), LAS(), Tiresias(),
                                       Tiresias(starve_limit=1.0), C.schedulers.Gandiva(), C.schedulers.Elastic()])
def test_order_array_is_the_order(scheduler):
    twin = type(scheduler).__new__(type(scheduler))  # the same options, its own promotion state
    twin.__dict__.update({k: (dict(v) if isinstance(v, dict) else v) for k, v in scheduler.__dict__.items()})

    def check(sim, view):
        array = twin.order_array(view)
        assert array.dtype == np.int64
        assert array.tolist() == list(scheduler.order(view))

    assert _views(scheduler, C.FailureModel(), check) > 50


def test_array_order_only_where_the_class_defines_both():
    class OnlyOrder(LAS):  # overrides order alone: its own order must drive the run
        def order(self, view):
            return list(reversed(super().order(view)))

    class Both(LAS):
        def order(self, view):
            return list(self.order_array(view))

        def order_array(self, view):
            return super().order_array(view)

    assert array_order(OnlyOrder()) is None
    assert array_order(Both()) is not None
    assert array_order(C.schedulers.Elastic()) is not None  # inherits both from LAS
    assert array_order(GavelRounds.__new__(GavelRounds)) is None  # a third-party order() keeps its list path


def _greedy_admission(order: list[int], need: np.ndarray, n_gpus: int) -> set[int]:
    """The preemptive admission as the module docstring states it: in order, each job that fits the GPUs left."""
    left, admitted = n_gpus, set()
    for i in order:
        if need[i] <= left:
            admitted.add(i)
            left -= int(need[i])
    return admitted


@pytest.mark.parametrize("seed", range(4))
def test_one_type_admission_is_the_greedy_loop(seed):
    """At each decision of a LAS run, a random order is admitted; the running jobs after it are the greedy set."""
    rng = np.random.default_rng(seed)
    trace = C.traces.generate(150, seed=seed, mean_interarrival=10.0)
    sim = C.ClusterSimulation(trace, C.Cluster.uniform(3, 8, preset=None), LAS(), seed=0, failures=C.FailureModel())
    view, decisions = sim.run_until_decision(), 0
    while view is not None:
        order = rng.permutation(view.active_array())
        expected = _greedy_admission(order.tolist(), sim.requested, sim.n_gpus)
        sim.allocate_in_order(order if decisions % 2 else order.tolist())  # the array and the list paths
        assert set(sim._running_jobs().tolist()) == expected
        assert sum(len(sim.alloc[i]) for i in expected) == sim.n_busy <= sim.n_gpus
        decisions += 1
        view = sim.run_until_decision()
    assert decisions > 100


def test_sorted_remove_is_list_remove():
    rng = np.random.default_rng(1)
    values = sorted(rng.choice(10_000, size=500, replace=False).tolist())
    reference = list(values)
    for x in rng.permutation(values).tolist():
        S._sorted_remove(values, x)
        reference.remove(x)
        assert values == reference


def test_fifo_strict_by_name_and_from_the_cli(capsys, tmp_path):
    strict = C.schedulers.make("fifo_strict")
    assert isinstance(strict, FIFO) and strict.backfill is False
    assert "fifo_strict" in C.schedulers.names()
    trace = C.traces.generate(40, seed=3)
    cluster = C.Cluster.uniform(2, 4, preset=None)
    ref = C.run(trace, cluster, FIFO(backfill=False), seed=3)
    backfilled = C.run(trace, cluster, FIFO(), seed=3)
    assert ref.avg_jct != backfilled.avg_jct  # the trace tells the two apart
    code, out, err = cli_run(capsys, "cluster", "--trace", "generated:40", "--cluster", "uniform:2x4",
                             "--scheduler", "fifo_strict", "--seed", "3", "--out", str(tmp_path / "run"))
    assert code == 0, err
    assert f"{ref.avg_jct:,.1f}" in out
    code, out, _ = cli_run(capsys, "cluster", "--help")
    assert "fifo_strict" in " ".join(out.split())
