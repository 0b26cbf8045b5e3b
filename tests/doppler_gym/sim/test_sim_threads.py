"""Threads of the simulator: simulate_batch leaves torch's thread count as it found it (Numba's
OpenMP layer would change it); numba_threads sets Numba's for a block and restores it."""

from __future__ import annotations

import subprocess
import sys
import time

import numba
import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.sim.threads import LOAD_WINDOW_S, ThreadTuner, busy_core_seconds, numba_threads, process_cores

SCRIPT = """
import numpy as np, torch, doppler_gym as dg
torch.set_num_threads(1)
x = torch.randn(64, 64); x @ x  # torch's OpenMP pool is up
g = dg.load_graph("paper/chainmm")
a = np.random.default_rng(0).integers(0, 4, (32, g.n_ops))
for _ in range(2):
    dg.simulate_batch(g, a, config=dg.SimConfig.reference())
    assert torch.get_num_threads() == 1, torch.get_num_threads()
"""


def test_simulate_batch_keeps_torch_threads():
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_simulate_batch_does_not_import_torch():
    code = ("import sys, numpy as np, doppler_gym as dg; g = dg.load_graph('paper/chainmm'); "
            "dg.simulate_batch(g, np.zeros((2, g.n_ops), np.int64)); assert 'torch' not in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_the_block_runs_with_the_given_threads_and_the_count_comes_back() -> None:
    before = numba.get_num_threads()
    with numba_threads(1):
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == before
    with pytest.raises(RuntimeError, match="inside"), numba_threads(1):
        raise RuntimeError("inside")
    assert numba.get_num_threads() == before  # restored after an error too
    with numba_threads(10_000):  # capped at the threads Numba started with
        assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS


def test_one_thread_gives_the_makespans_of_the_default_threads() -> None:
    graph = dg.workloads.make("random", n_ops=60, levels=8, seed=2)
    rows = np.random.default_rng(0).integers(0, 3, (40, graph.n_ops))
    want = dg.simulate_batch(graph, rows, 3)
    with numba_threads(1):
        got = dg.simulate_batch(graph, rows, 3)
    np.testing.assert_array_equal(got, want)
    assert got[7] == dg.simulate(graph, rows[7], 3).makespan  # and each is the single run's


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_a_bad_thread_count_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="threads must be an integer >= 1"), numba_threads(bad):
        pass


def _two_counts() -> int:
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs two Numba threads (a machine with two CPU cores or more, NUMBA_NUM_THREADS unset or "
                    ">= 2): with one there is no second thread count to choose")
    return 2


def _feed(tuner: ThreadTuner, calls: int, cost: dict, share_run: float, change_at: int | None = None,
          cost_after: dict | None = None) -> list[int]:
    """The thread counts ``tuner`` picks over ``calls`` calls of 10 rows each costing ``cost[k]`` s per
    row with ``k`` threads, whose threads run ``share_run`` of their wall clock (a CPU-time reading)."""
    seen = []
    for call in range(calls):
        if call == change_at:
            cost = cost_after
        k = tuner.threads()
        seen.append(k)
        tuner.record(k, cost[k] * 10, 10, cpu_seconds=cost[k] * 10 * k * share_run)
    return seen


def test_the_tuner_tries_one_thread_only_when_its_threads_do_not_get_the_cores():
    two = _two_counts()
    # alone: the threads run all their time, so one thread is never tried (even were it faster)
    alone = ThreadTuner((1, two), window=2, revisit=3)
    assert alone.candidates == [2, 1]
    assert _feed(alone, 10, {1: 1.0, 2: 3.0}, share_run=1.0) == [2] * 10
    assert alone.utilisation == pytest.approx(1.0)
    # shared cores (the threads run half their time): each round measures 2 threads, then 1, keeps the
    # faster; measuring cost little (1% more per row with 2 threads), so the next round comes after 3 calls
    cheap = ThreadTuner((1, two), window=2, revisit=3)
    seen = _feed(cheap, 14, {1: 1.0, 2: 1.01}, share_run=0.5, change_at=7, cost_after={1: 1.0, 2: 0.5})
    # a round: 2 calls with 2 threads, 2 with 1, then 3 with the faster; the machine frees up at call 7
    assert seen == [2, 2, 1, 1, 1, 1, 1, 2, 2, 1, 1, 2, 2, 2]
    assert cheap.chosen == 2 and cheap.utilisation == pytest.approx(0.5)


def test_the_tuner_measures_less_often_when_measuring_costs_more_than_its_overhead():
    two = _two_counts()
    busy = ThreadTuner((1, two), window=2, revisit=3, overhead=0.05, max_revisit=20)
    seen = _feed(busy, 30, {1: 1.0, 2: 3.0}, share_run=0.5, change_at=7, cost_after={1: 1.0, 2: 0.5})
    # round 1: two 2-thread calls took 60 s where one thread would have taken 20: 40 s extra, against
    # 5% of a 10 s kept call: 80 calls, capped at 20. Round 2 (call 24, the machine free since call 7):
    # two 1-thread calls took 20 s where two threads would have taken 10: 10 / (0.05 x 5) = 40 -> 20
    assert seen == [2, 2, 1, 1] + [1] * 20 + [2, 2, 1, 1] + [2, 2]
    assert busy.chosen == 2
    # with an overhead of 1, the same 40 s extra is 40 / 10 = 4 kept calls, one more than revisit
    loose = ThreadTuner((1, two), window=2, revisit=3, overhead=1.0, max_revisit=20)
    assert _feed(loose, 12, {1: 1.0, 2: 3.0}, share_run=0.5) == [2, 2, 1, 1, 1, 1, 1, 1, 2, 2, 1, 1]


def test_the_tuner_reads_what_other_processes_took_from_its_cores_when_its_threads_spin():
    two = _two_counts()
    slow = LOAD_WINDOW_S  # s per call with 2 threads: two calls make a window long enough to read the load

    def feed(tuner: ThreadTuner, seconds: float, others_cores: float) -> list[int]:
        seen = []
        for _ in range(6):  # the threads spin: CPU time says they ran all their time
            k = tuner.threads()
            seen.append(k)
            wall = seconds if k == 2 else seconds / 2  # one thread runs twice as fast while shared
            tuner.record(k, wall, 10, cpu_seconds=wall * k, others_seconds=wall * others_cores)
        return seen

    shared = ThreadTuner((1, two), window=2, revisit=3)
    shared.cores = 2
    assert feed(shared, slow, others_cores=1.0) == [2, 2, 1, 1, 1, 1]  # the other process took a core
    assert shared.chosen == 1 and shared.utilisation == pytest.approx(0.5)
    alone = ThreadTuner((1, two), window=2, revisit=3)
    alone.cores = 2
    assert feed(alone, slow, others_cores=0.05) == [2] * 6  # background noise: the threads had the cores
    assert alone.utilisation == pytest.approx(0.975)
    short = ThreadTuner((1, two), window=2, revisit=3)
    short.cores = 2
    assert feed(short, slow / 4, others_cores=1.0) == [2] * 6  # too short a window for /proc/stat's ticks
    unknown = ThreadTuner((1, two), window=2, revisit=3)
    unknown.record(2, slow, 10, cpu_seconds=2 * slow, others_seconds=None)
    unknown.record(2, slow, 10, cpu_seconds=2 * slow, others_seconds=slow)
    assert unknown.threads() == 2 and unknown.utilisation == pytest.approx(1.0)  # one reading missing: CPU only


def test_busy_core_seconds_counts_at_least_the_process_s_own_cpu_time():
    assert process_cores() >= 1
    before, cpu = busy_core_seconds(), time.process_time()
    if before is None:
        pytest.skip("needs Linux's /proc/stat and os.sched_getaffinity: elsewhere the tuner reads CPU time only")
    x = 0
    while time.process_time() - cpu < 0.5:  # half a second of this process's CPU time
        x += 1
    grown, own = busy_core_seconds() - before, time.process_time() - cpu
    assert own - 0.05 <= grown  # every core's busy time includes this process's, to the 10 ms tick


def test_the_tuner_weighs_by_work_and_has_one_candidate_when_capped():
    tuner = ThreadTuner((1, _two_counts()), window=1, revisit=1)
    tuner.record(2, 0.5, 2, cpu_seconds=0.2)  # 0.25 s per row, its threads ran 20% of the time
    tuner.record(1, 1.0, 10)  # 0.1 s per row: more time, but faster per row
    assert tuner.chosen == 1 and tuner.threads() == 1
    single = ThreadTuner([1], window=3, revisit=5)
    for _ in range(9):  # one candidate: nothing to measure
        assert single.threads() == 1
        single.record(1, 1.0, 1)
    assert ThreadTuner([10_000]).candidates == [numba.config.NUMBA_NUM_THREADS]  # capped
    with numba_threads(1):  # the default candidates: the count set now, and one
        assert ThreadTuner().candidates == [1]
    assert ThreadTuner().candidates == sorted({1, numba.get_num_threads()}, reverse=True)
    for bad in ({"window": 0}, {"revisit": 0}, {"busy": 0.0}, {"busy": 1.5}, {"overhead": 0.0},
                {"revisit": 8, "max_revisit": 4}):
        with pytest.raises(ValueError, match="window and revisit must be >= 1, max_revisit >= revisit"):
            ThreadTuner(**bad)
    for bad in ([], [0], [True], [1.5]):
        with pytest.raises(ValueError, match="thread counts must be integers >= 1"):
            ThreadTuner(bad)


def test_local_search_gives_the_same_placement_with_one_thread_or_all():
    graph = dg.workloads.make("random", n_ops=80, levels=8, seed=2)
    results = []
    for threads in (1, _two_counts()):
        p = dg.baselines.local_search(graph, 3, seed=1, max_evals=1024, seconds=None, batch_size=64, threads=threads)
        results.append((p.assignment.tolist(), p.makespan))
    assert results[0] == results[1]


@pytest.mark.parametrize("bad", [0, -1, 1.0, True])
def test_local_search_refuses_a_bad_thread_count(bad):
    graph = dg.workloads.make("random", n_ops=10, levels=3, seed=0)
    with pytest.raises(ValueError, match="threads must be an integer >= 1 or None"):
        dg.baselines.local_search(graph, 2, max_evals=10, threads=bad)
