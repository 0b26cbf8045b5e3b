"""Faults of the real backend (issue 35): the memory guard holds with ``workload=``, a stopped rank is
named within the run's own timeout, and a script without a ``__main__`` guard gets one clear error."""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import resource
import signal
import subprocess
import sys
import threading
import time
import tracemalloc

import numpy as np
import pytest
import torch  # noqa: F401  imported before any allocation is traced

import doppler_gym as dg
from envs_real import RealBackend
from envs_real.distributed import get_group, shutdown
from envs_real.distributed.group import (
    PG_TIMEOUT_MARGIN_S,
    PG_TIMEOUT_NO_LIMIT_S,
    HeartbeatWatch,
    pg_timeout_for,
    process_state,
    reimported_main_script,
)
from envs_real.distributed.protocol import RankRun, heartbeat_key
from envs_real.distributed.rank import root_cause
from envs_real.distributed.worker import failure_outside_an_op
from envs_real.estimate import WorkloadTooLarge
from envs_real.materialize import WorkloadExternals, materialize, workload_externals
from tests.envs_real.real_helpers import gone, small_ffnn

TOPO = dg.Topology.uniform(2)


def huge_ffnn() -> dg.workloads.Workload:
    """The issue's workload: 4.6 GB of float32 inputs, 14.5 GB estimated on two CPU devices."""
    return dg.workloads.build("ffnn", batch=4096, d_in=16384, hidden=16384, layers=4, blocks=2)


def max_rss_bytes() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0  # Linux: kB


def test_a_workload_over_the_memory_limit_is_refused_before_its_inputs_are_drawn():
    w = huge_ffnn()
    inputs_bytes = 4.0 * sum(math.prod(shape) for shape in w.inputs.values())
    assert inputs_bytes > 4e9
    assignment = np.arange(w.graph.n_ops) % 2
    rss0 = max_rss_bytes()
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        be = RealBackend("cpu:2", workload=w, max_memory_bytes=1e9, max_estimated_seconds=None)
        with pytest.raises(WorkloadTooLarge) as err:
            be.execute(w.graph, TOPO, assignment)
        wall = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert wall < 20.0, f"the guard took {wall:.1f} s"
    assert peak < 64e6, f"{peak / 1e6:.0f} MB allocated before the guard refused (inputs: {inputs_bytes / 1e9:.1f} GB)"
    assert max_rss_bytes() - rss0 < 512e6
    msg = str(err.value)
    assert "memory limit max_memory_bytes=1e+09" in msg and "ffnn" in msg and "Shrink the workload" in msg
    assert err.value.estimate.memory_bytes > 1e9


def test_workload_externals_are_drawn_when_materialising_and_pickle_without_their_tiles():
    w = small_ffnn()
    lazy = WorkloadExternals(w, seed=3)
    eager = workload_externals(w, 3)
    drawn = lazy.draw()
    assert set(drawn) == set(eager) and all(np.array_equal(drawn[k], eager[k]) for k in eager)
    a, b = materialize(w.graph, externals=lazy), materialize(w.graph, externals=eager)
    for ka, kb in zip(a.kernels, b.kernels):
        assert set(ka.externals) == set(kb.externals)
        assert all(np.array_equal(ka.externals[i], kb.externals[i]) for i in kb.externals)
    copy = pickle.loads(pickle.dumps(lazy))
    assert copy.seed == 3 and all(np.array_equal(copy.draw()[k], eager[k]) for k in eager)
    tiles_bytes = sum(t.nbytes for t in eager.values())
    assert len(pickle.dumps(lazy)) < len(pickle.dumps(w)) + 1024 < tiles_bytes


# ------------------------------------------------------------------------------- hung ranks (fast)
class FakeStore:
    """The two calls of the control store that :class:`HeartbeatWatch` makes."""

    def __init__(self) -> None:
        self.keys: dict[str, bytes] = {}

    def check(self, keys: list[str]) -> bool:
        return all(k in self.keys for k in keys)

    def get(self, key: str) -> bytes:
        return self.keys[key]


def test_the_watchdog_names_the_rank_whose_heartbeat_stopped_and_only_that_one():
    store = FakeStore()
    watch = HeartbeatWatch(store, 3, hung_after_s=0.4)
    found: dict[int, float] = {}
    t0 = time.perf_counter()
    beat = 0
    while time.perf_counter() - t0 < 1.5:
        beat += 1
        store.keys[heartbeat_key(0)] = str(beat).encode()  # alive
        store.keys[heartbeat_key(1)] = b"7"  # stopped at its 7th beat
        found.update(watch.silent([0, 1]))  # rank 2 never beat but is not asked about (it answered)
        time.sleep(0.02)
    assert set(found) == {1} and found[1] > 0.4
    store.keys[heartbeat_key(0)] = str(beat + 1).encode()  # rank 0's last beat
    time.sleep(0.6)  # the controller itself paused: a rank that beat meanwhile is not hung
    assert watch.silent([0]) == {}
    t1 = time.perf_counter()
    while not (hung := watch.silent([0])) and time.perf_counter() - t1 < 2.0:
        time.sleep(0.02)
    assert set(hung) == {0} and hung[0] > 0.4  # silent since that look


def test_a_hung_rank_is_the_cause_of_its_peers_timeouts_and_lost_connections():
    hung = RankRun(error="rank 1 (pid 9) stopped answering: no heartbeat for 5.0 s", error_kind="rank_hung")
    peer_timeout = RankRun(error="timeout: rank 0 passed the 10 s limit", error_kind="timeout")
    peer_reset = RankRun(error="rank 0: Connection reset by peer", error_kind="rank_failed")
    assert root_cause([peer_timeout, hung]) is hung and root_cause([peer_reset, hung]) is hung
    own = RankRun(error="rank 0: op 3 failed", error_kind="op_failed")
    assert root_cause([own, hung]) is own  # an op's own failure still comes first


def test_a_barrier_past_the_process_group_timeout_is_a_timeout_not_an_op_failure():
    exc = RuntimeError("[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 40000ms "
                       "for recv operation to complete")
    run = failure_outside_an_op(0, exc)
    assert run.error_kind == "timeout" and run.error.startswith("rank 0: RuntimeError: ")
    assert "Timed out waiting 40000ms" in run.error
    reset = RuntimeError("[gloo/transport/tcp/pair.cc:537] Read error: Connection reset by peer")
    assert failure_outside_an_op(0, reset).error_kind == "rank_failed"


def test_the_process_group_timeout_follows_the_run_timeout():
    assert pg_timeout_for(10.0) == 10.0 + PG_TIMEOUT_MARGIN_S
    assert pg_timeout_for(None) == PG_TIMEOUT_NO_LIMIT_S >= 3600.0
    assert pg_timeout_for(1e-4) > 1.0  # a barrier waits for the slowest rank's previous run


def test_the_main_guard_check_is_silent_outside_a_re_imported_script():
    assert reimported_main_script() is None  # pytest's own main is guarded
    assert process_state(os.getpid()) in ("R", "S")
    assert process_state(2**31 - 2) is None


# ------------------------------------------------------------------ hung ranks and scripts (processes)
@pytest.mark.slow
@pytest.mark.parametrize("when", ["between-calls", "mid-call"])
def test_a_stopped_rank_is_named_within_the_run_s_timeout_and_no_process_is_left(when):
    """Rank 1 SIGSTOPped while idle (rank 0 then waits in the run's first barrier) or during a call
    (rank 0 waits on a transfer or a barrier): the call ends within ``timeout_s``, naming rank 1."""
    w = small_ffnn()
    g = w.graph
    assignment = np.arange(g.n_ops) % 2
    be = RealBackend("gloo:2", repeats=1, warmup=0, timeout_s=10.0, workload=w)
    assert be.execute(g, TOPO, assignment).error is None  # the group is up, the kernels cached
    group = get_group(be.devices)
    pids = group.pids
    stopper = threading.Timer(0.0 if when == "between-calls" else 0.5, os.kill, (pids[1], signal.SIGSTOP))
    stopper.start()
    if when == "mid-call":
        be = RealBackend("gloo:2", repeats=2000, warmup=0, timeout_s=10.0, workload=w)  # a call of seconds
    else:
        stopper.join()
    t0 = time.perf_counter()
    try:
        tr = be.execute(g, TOPO, assignment)
        wall = time.perf_counter() - t0
    finally:
        stopper.join()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pids[1], signal.SIGCONT)
        shutdown()
    assert wall < be.timeout_s + 2.0, f"the call took {wall:.1f} s"
    assert be.last_report.error_kind == "rank_hung", tr.error
    assert tr.error.startswith(f"rank 1 (pid {pids[1]} ") and "stopped (SIGSTOP" in tr.error
    assert not np.isfinite(tr.makespan) and not group.running
    assert all(gone(p) for p in pids), "a rank process survived the failure"


SCRIPT = """
import numpy as np
import doppler_gym as dg
from envs_real import RealBackend

def run():
    w = dg.workloads.build("ffnn", batch=64, d_in=64, hidden=64, layers=2, blocks=2)
    be = RealBackend("gloo:2", repeats=1, warmup=0, workload=w)
    tr = be.execute(w.graph, dg.Topology.uniform(2), np.arange(w.graph.n_ops) % 2)
    print("error:", tr.error)
"""


@pytest.mark.slow
@pytest.mark.parametrize("guarded", [False, True], ids=["no-main-guard", "main-guard"])
def test_a_script_without_a_main_guard_gets_one_clear_error(tmp_path, guarded):
    """Every rank re-imports the main script (forkserver); without the guard it used to wait 120 s per
    call and blame a slow torch import."""
    script = tmp_path / "place_real.py"
    script.write_text(SCRIPT + ('if __name__ == "__main__":\n    run()\n' if guarded else "run()\n"))
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=180)
    wall = time.perf_counter() - t0
    if guarded:
        assert proc.returncode == 0 and "error: None" in proc.stdout, proc.stderr[-2000:]
        return
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and last.startswith("envs_real.distributed.group.UnguardedMainError: "), last
    assert str(script) in last and 'if __name__ == "__main__":' in last and "torch" not in last
    assert "error:" not in proc.stdout
    assert wall < 90.0, f"took {wall:.0f} s"
