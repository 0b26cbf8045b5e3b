"""torch.distributed mode of the real backend on this CPU machine: 2 Gloo processes on localhost.

Outputs equal the single-device reference bit for bit, every op starts after its inputs arrived
(same-rank producers ended, cross-rank ``irecv`` completed), each rank keeps the WC order, and a
failing op, a dead rank or a timeout ends the run with a clear error, no hang, and no process left.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest
import torch

import doppler_gym as dg
from envs_real import RealBackend
from envs_real.distributed import get_group, shutdown
from envs_real.materialize import reference_outputs
from tests.envs_real.real_helpers import assert_dependencies, assert_wc_order, gone, placements, small_ffnn

pytestmark = pytest.mark.slow  # torch.distributed processes

TOPO = dg.Topology.uniform(2)
FAILURE_S = 20.0  # [s] a failed run must be reported within this (no hang)


@pytest.fixture(scope="module")
def workload():
    return small_ffnn()


@pytest.fixture(scope="module")
def be(workload):
    backend = RealBackend("gloo:2", repeats=1, warmup=0, keep_outputs=True, workload=workload, timeout_s=30.0)
    yield backend
    pids = get_group(backend.devices).pids
    shutdown()
    assert all(gone(p) for p in pids), "rank processes outlived shutdown()"


@pytest.mark.parametrize(("order", "p2p"), [("fifo", "tagged"), ("priority", "tagged"), ("fifo", "ordered"),
                                            ("priority", "ordered")])
def test_outputs_equal_the_single_device_reference(be, workload, order, p2p):
    """``p2p="ordered"`` is NCCL's protocol (messages matched by order, announced in the store), run on Gloo."""
    g = workload.graph
    if p2p != be.p2p:
        be = RealBackend("gloo:2", repeats=1, warmup=0, keep_outputs=True, workload=workload, timeout_s=30.0, p2p=p2p)
    prev = torch.get_num_threads()
    torch.set_num_threads(1)  # the ranks run one thread each: same kernels, same bits
    try:
        ref = reference_outputs(be.materialized(g))
    finally:
        torch.set_num_threads(prev)
    config = dg.SimConfig(queue_order=order)
    prio = np.random.default_rng(1).permutation(g.n_ops).astype(float)
    for a in placements(g.n_ops, 2, seed=3)[1:3]:
        tr = be.execute(g, TOPO, a, prio if order == "priority" else None, config)
        assert tr.error is None, tr.error
        assert set(be.last_outputs) == set(range(g.n_ops))
        for v in range(g.n_ops):
            assert torch.equal(be.last_outputs[v], ref[v]), f"op {v} differs under placement {a.tolist()}"
        assert_dependencies(g, tr)  # start >= producer end, >= the irecv's completion across ranks
        rep = be.last_report
        assert_wc_order(a, rep.ready_seq, rep.pick_seq, order, prio)
        remote = tr.assignment[g.src] != tr.assignment[g.dst]
        assert remote.any() and np.all(tr.edge_end[remote] > tr.edge_start[remote])
        assert tr.makespan == pytest.approx(np.nanmax(tr.end)) and rep.device_kind == "cpu"
        assert rep.monitor["available"] is False and "CPU" in rep.monitor["reason"]
    assert len({h.pid for h in get_group(be.devices).hellos} - {os.getpid()}) == 2  # two other processes


def test_real_env_accepts_gloo_with_the_same_spaces_and_info(workload):
    g = workload.graph
    kw = {"repeats": 1, "warmup": 0, "calibrate": False, "topology": 2}
    with pytest.warns(RuntimeWarning, match="units"):
        env = gym.make("Doppler-Real-v0", graph=g, devices="gloo:2", **kw)
    with pytest.warns(RuntimeWarning, match="units"):
        threads = gym.make("Doppler-Real-v0", graph=g, devices="cpu:2", **kw)
    assert env.observation_space == threads.observation_space and env.action_space == threads.action_space
    infos = []
    for e in (env, threads):
        e.reset(seed=0)
        rng = np.random.default_rng(0)
        while True:
            mask = e.get_wrapper_attr("action_masks")()
            _, r, term, trunc, info = e.step(int(rng.choice(np.flatnonzero(mask))))
            if term or trunc:
                break
        infos.append(info)
    assert infos[0]["error"] is None and np.isfinite(infos[0]["makespan"])
    assert set(infos[0]) == set(infos[1]) and set(infos[0]["real"]) == set(infos[1]["real"])
    np.testing.assert_array_equal(infos[0]["assignment"], infos[1]["assignment"])  # same seed, same actions


def test_the_run_reports_the_failure_that_explains_the_others():
    """Rank 1's op raises (or its deadline passes) and rank 1 leaves the run; rank 0's receive from it
    then fails first in rank order. The run's error is rank 1's own, whatever the ranks' timing."""
    from envs_real.distributed.protocol import RankRun
    from envs_real.distributed.rank import root_cause

    peer = RankRun(error="rank 0: receiving op 21's output from rank 1 failed", error_kind="rank_failed", failed_op=21)
    own = RankRun(error="rank 1: op 5 failed: injected fault", error_kind="op_failed", failed_op=5)
    assert root_cause([peer, own]) is own and root_cause([own, peer]) is own
    late = RankRun(error="timeout: rank 1 passed its deadline", error_kind="timeout")
    assert root_cause([peer, late]) is late  # rank 1's deadline, not rank 0's reset connection
    assert root_cause([RankRun(error="aborted", error_kind="aborted"), late]) is late
    first, second = RankRun(error="a", error_kind="rank_failed"), RankRun(error="b", error_kind="rank_failed")
    assert root_cause([first, second]) is first  # same kind: the lowest rank
    assert root_cause([RankRun(), RankRun()]) is None


def test_topology_must_match_the_rank_count(workload):
    be = RealBackend("gloo:2", repeats=1, warmup=0)
    with pytest.raises(ValueError, match="2 rank"):
        be.execute(workload.graph, dg.Topology.uniform(3), np.zeros(workload.graph.n_ops, np.int64))
    with pytest.raises(ValueError, match="inject_fault"):
        RealBackend("cpu:2", inject_fault={"op": 0, "kind": "raise"})
    from envs_real.devices import DeviceSet

    nccl = DeviceSet("cuda", ("cuda:0", "cuda:1"), "nccl", dist="nccl")
    assert RealBackend(nccl).p2p == "ordered" and RealBackend("gloo:2").p2p == "tagged"
    with pytest.raises(ValueError, match="NCCL ignores message tags"):
        RealBackend(nccl, p2p="tagged")


@pytest.mark.parametrize(
    ("fault", "timeout_s", "kind", "words"),
    [
        ({"op": 5, "kind": "raise"}, 30.0, "op_failed", ("op 5", "injected fault", "rank 1")),
        ({"op": 5, "kind": "exit"}, 30.0, "rank_failed", ("rank 1",)),
        (None, 1e-4, "timeout", ("timeout", "timeout_s")),
    ],
    ids=["failing-op", "dead-rank", "timeout"],
)
def test_failures_end_the_run_with_a_clear_error_and_no_process_left(workload, fault, timeout_s, kind, words):
    g = workload.graph
    bad = RealBackend("gloo:2", repeats=1, warmup=0, inject_fault=fault, timeout_s=timeout_s)
    group = get_group(bad.devices)
    group.start()
    pids = group.pids
    t0 = time.perf_counter()
    tr = bad.execute(g, TOPO, np.arange(g.n_ops) % 2)
    assert time.perf_counter() - t0 < FAILURE_S
    assert tr.error is not None and not np.isfinite(tr.makespan)
    assert bad.last_report.error_kind == kind, tr.error
    for w in words:
        assert w in tr.error, f"{w!r} not in {tr.error!r}"
    assert not group.running and all(gone(p) for p in pids), "a rank process survived the failure"


@pytest.mark.skipif(
    shutil.which("torchrun", path=os.path.dirname(sys.executable)) is None,
    reason="torchrun is not installed next to this Python (it comes with torch's console scripts)",
)
def test_ranks_launched_by_torchrun_connect_to_the_controller(workload):
    """The multi-host path on localhost: torchrun starts 2 workers that join the controller's store."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    be = RealBackend(f"gloo:2@127.0.0.1:{port}", repeats=1, warmup=0, keep_outputs=True, workload=workload)
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    cmd = [torchrun, "--standalone", "--nproc-per-node", "2",
           "-m", "envs_real.distributed.worker", "--control", f"127.0.0.1:{port}"]
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "OMP_NUM_THREADS": "1"}
    group = get_group(be.devices)
    group.start_timeout_s = 90.0
    proc = None
    try:
        # the controller listens first; the workers retry their connection until it is up
        import threading

        started = threading.Thread(target=group.start)
        started.start()
        time.sleep(0.5)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        started.join(100.0)
        assert group.running, proc.stdout.read1().decode() if proc.poll() is not None else "workers did not join"
        g = workload.graph
        a = np.arange(g.n_ops) % 2
        tr = be.execute(g, TOPO, a)
        assert tr.error is None, tr.error
        assert_dependencies(g, tr)
        prev = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            ref = reference_outputs(be.materialized(g))
        finally:
            torch.set_num_threads(prev)
        assert all(torch.equal(be.last_outputs[v], ref[v]) for v in range(g.n_ops))
    finally:
        group.close()
        if proc is not None:
            out = proc.communicate(timeout=30.0)[0].decode(errors="replace")
    assert proc.returncode == 0, out[-2000:]


KILLED_CONTROLLER = """
import time
from envs_real.devices import parse_devices
from envs_real.distributed import get_group
group = get_group(parse_devices("gloo:2")).start()
print(" ".join(str(p) for p in group.pids), flush=True)
time.sleep(600)
"""


def test_ranks_exit_when_their_controller_is_killed():
    """SIGKILL leaves no atexit handler to run: the ranks notice the controller is gone and exit."""
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_CONTROLLER], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        line = proc.stdout.readline().decode()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 2 and all(not gone(p) for p in pids), f"the group did not start: {line!r}"
    finally:
        proc.kill()
        proc.wait(30.0)
        proc.stdout.close()
    deadline = time.perf_counter() + 15.0
    while time.perf_counter() < deadline and not all(gone(p) for p in pids):
        time.sleep(0.1)
    assert all(gone(p) for p in pids), "rank processes outlived their killed controller"


def test_a_lost_peer_is_a_consequence_and_an_op_s_own_error_is_the_cause():
    from envs_real.plan import classify_error

    gloo = RuntimeError("[gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:22451: Connection reset by peer.")
    assert classify_error(gloo) == "rank_failed"  # ranked below "timeout" by root_cause: the other rank's cause wins
    assert classify_error(ConnectionResetError("peer gone")) == "rank_failed"
    assert classify_error(ValueError("shapes (2,3) and (4,5) not aligned")) == "op_failed"
    assert classify_error(MemoryError()) == "out_of_memory"


def test_a_lost_peer_outside_an_op_is_also_a_consequence():
    """The CI failure of 2026-12-03: rank 1's barrier/receive raised gloo's reset outside any op."""
    from envs_real.distributed.worker import failure_outside_an_op

    exc = RuntimeError(
        "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
        "[127.0.0.1]:7087: Connection reset by peer. This is typically caused by a remote worker hanging"
    )
    run = failure_outside_an_op(1, exc)
    assert run.error_kind == "rank_failed"
    assert run.error.startswith("rank 1: RuntimeError: ") and "Connection reset by peer" in run.error
    assert failure_outside_an_op(0, KeyError("W9")).error_kind == "op_failed"
