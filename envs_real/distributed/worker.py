"""A rank process: joins the process group, then runs the controller's jobs until told to stop.

Spawned by the backend (``devices="gloo:2"``: :func:`spawned_main`) or launched by ``torchrun``
on any number of hosts::

    torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint HOST0:29400 \\
        -m envs_real.distributed.worker --control CONTROLLER:29600 --backend nccl

(the ranks form their group from torchrun's ``MASTER_ADDR``/``MASTER_PORT``, ``RANK``,
``WORLD_SIZE`` and ``LOCAL_RANK``; the controller is the process with
``devices="nccl:8@CONTROLLER:29600"``, listening there). A worker exits when the controller says
stop, when its run failed (pending transfers cannot be cancelled, so the group is rebuilt), when
the controller's store goes away, or (spawned) when its parent process is gone. While it runs, a
thread raises its heartbeat counter in the controller's store (:func:`start_heartbeat`): the
controller names a rank whose counter stopped (a process stopped by SIGSTOP or a debugger, or frozen).
"""

from __future__ import annotations

import argparse
import os
import pickle
import socket
import sys
import threading
import time
from datetime import timedelta
from typing import Any

from doppler_gym.processes import pid_alive
from envs_real.distributed.protocol import (
    HEARTBEAT_S,
    STOP,
    Hello,
    RankJob,
    RankReply,
    RankRun,
    abort_key,
    bye_key,
    heartbeat_key,
    hello_key,
    job_key,
    result_key,
)
from envs_real.plan import classify_error

JOB_POLL_MAX_S = 0.02  # [s] longest pause between two looks for the next job
KERNEL_CACHE = 4  # graphs whose kernels a rank keeps


def failure_outside_an_op(rank: int, exc: BaseException) -> RankRun:
    """The failed run a rank reports when ``exc`` escaped the job outside any op (a barrier or a
    receive posted to a rank that already left raises gloo's "Connection reset by peer": that is
    ``rank_failed``, a consequence, so the other rank's own cause wins in ``root_cause``; a barrier
    or receive past the process group's timeout, "Timed out waiting ...", is ``timeout``)."""
    kind = "timeout" if "timed out" in str(exc).lower() else classify_error(exc)
    return RankRun(error=f"rank {rank}: {type(exc).__name__}: {exc}", error_kind=kind)


def start_heartbeat(control: str, rank: int, timeout_s: float) -> threading.Thread:
    """Raise ``heartbeat/rank`` in the controller's store every :data:`HEARTBEAT_S` from a daemon
    thread with a store connection of its own, so a rank busy in an op, a barrier or a long store
    transfer still beats; it stops when its process is stopped (SIGSTOP) or frozen, which is what the
    controller's watchdog (:class:`envs_real.distributed.group.HeartbeatWatch`) sees, and ends when
    the store is gone."""
    store = connect(control, timeout_s)

    def beat() -> None:
        count = 0
        while True:
            count += 1
            try:
                store.set(heartbeat_key(rank), str(count))
            except Exception:  # noqa: BLE001  the controller closed its store
                return
            time.sleep(HEARTBEAT_S)

    thread = threading.Thread(target=beat, name=f"envs_real-heartbeat{rank}", daemon=True)
    thread.start()
    return thread


def connect(control: str, timeout_s: float) -> Any:
    """A client of the controller's ``TCPStore`` at ``HOST:PORT``."""
    import torch.distributed as dist

    host, _, port = control.rpartition(":")
    return dist.TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=timeout_s))


def serve(
    control: str,
    rank: int,
    world: int,
    backend: str,
    *,
    init: str = "store",
    local_rank: int | None = None,
    parent_pid: int | None = None,
    pg_timeout_s: float = 120.0,
) -> int:
    """Join the group and serve jobs; returns the process exit code.

    Args:
        control: the controller's store address ``HOST:PORT``.
        rank, world: this rank and the world size.
        backend: ``"gloo"`` or ``"nccl"``.
        init: ``"store"`` (rendezvous through the controller's store: spawned ranks) or ``"env"``
            (``MASTER_ADDR``/``MASTER_PORT``: torchrun).
        local_rank: GPU index of an NCCL rank on its host (default: ``LOCAL_RANK``, else ``rank``).
        parent_pid: exit when this process (the controller) is gone (spawned ranks).
        pg_timeout_s: the process group's collective timeout [s].
    """
    import torch
    import torch.distributed as dist

    from envs_real.distributed.rank import RankExecutor
    from envs_real.materialize import materialize

    store = connect(control, pg_timeout_s)
    timeout = timedelta(seconds=pg_timeout_s)
    if init == "store":
        dist.init_process_group(
            backend, store=dist.PrefixStore("pg", store), rank=rank, world_size=world, timeout=timeout
        )
    else:
        dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world, timeout=timeout)
    if backend == "nccl":
        index = int(os.environ.get("LOCAL_RANK", rank)) if local_rank is None else int(local_rank)
        torch.cuda.set_device(index)
        device = f"cuda:{index}"
    else:
        device = "cpu"
    start_heartbeat(control, rank, pg_timeout_s)
    store.set(hello_key(rank), pickle.dumps(Hello(rank, world, socket.gethostname(), os.getpid(), device, backend)))

    def aborted(k: int) -> str | None:
        key = abort_key(k)
        return store.get(key).decode(errors="replace") if store.check([key]) else None

    def set_abort(k: int, message: str) -> None:
        store.compare_set(abort_key(k), "", message)  # first message wins

    def post(key: str, text: str) -> None:
        store.set(key, text)

    def take(key: str) -> str | None:
        if not store.check([key]):
            return None
        value = store.get(key).decode()
        store.delete_key(key)
        return value

    executor = RankExecutor(rank, world, device, aborted, set_abort, post, take)
    kernels: dict[int, Any] = {}
    k = 0
    while True:
        key = job_key(k, rank)
        if not _wait_for(store, key, parent_pid):
            return 0  # the controller or the parent process is gone
        payload = store.get(key)
        store.delete_key(key)
        if payload == STOP:
            dist.destroy_process_group()
            store.set(bye_key(rank), b"1")  # the controller keeps its store up until every rank said bye
            return 0
        job: RankJob = pickle.loads(payload)
        try:
            if job.graph is not None:  # a new graph: every op's kernel (operands are drawn per op and seed)
                kernels[job.graph_key] = (
                    job.graph,
                    materialize(
                        job.graph,
                        seed=job.seed,
                        externals=job.externals,
                        synthetic_scale=job.synthetic_scale,
                        device_kind="cuda" if backend == "nccl" else "cpu",
                    ),
                )
                while len(kernels) > KERNEL_CACHE:
                    kernels.pop(next(iter(kernels)))
            mat = kernels[job.graph_key][1]
            runs = executor.run_job(job, mat)
        except Exception as exc:  # noqa: BLE001  anything outside an op: report it, leave the group
            run = failure_outside_an_op(rank, exc)
            set_abort(job.k, run.error)
            runs = [run]
        failed = bool(runs) and runs[-1].error is not None
        store.set(result_key(job.k, rank), pickle.dumps(RankReply(rank, runs, exiting=failed)))
        if failed:  # pending transfers cannot be cancelled: leave, the controller rebuilds the group
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        k += 1


def _wait_for(store: Any, key: str, parent_pid: int | None) -> bool:
    """Poll ``store`` for ``key`` (1 ms, backing off to :data:`JOB_POLL_MAX_S` while idle): True once
    it is set, False when the store or the parent process is gone. (``TCPStore.wait`` with a short
    timeout would log a warning at every timeout.)"""
    delay = 1e-3
    while True:
        try:
            if store.check([key]):
                return True
        except Exception:  # noqa: BLE001  the store is gone: the controller exited
            return False
        if parent_pid is not None and not pid_alive(parent_pid):
            return False
        time.sleep(delay)
        delay = min(JOB_POLL_MAX_S, delay * 1.5)


def spawned_main(control: str, rank: int, world: int, backend: str, parent_pid: int, pg_timeout_s: float) -> None:
    """Entry point of a rank spawned by :class:`envs_real.distributed.group.RankGroup`."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    code = serve(control, rank, world, backend, init="store", parent_pid=parent_pid, pg_timeout_s=pg_timeout_s)
    sys.stdout.flush()
    os._exit(code)  # skip interpreter teardown of the Gloo threads


def main(argv: list[str] | None = None) -> int:
    """``python -m envs_real.distributed.worker --control HOST:PORT [--backend gloo|nccl]`` under torchrun."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--control", required=True, help="HOST:PORT the controller listens on")
    p.add_argument("--backend", default="gloo", choices=("gloo", "nccl"))
    p.add_argument("--pg-timeout", type=float, default=120.0, help="collective timeout [s]")
    a = p.parse_args(argv)
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except KeyError as exc:
        p.error(f"{exc.args[0]} is not set: launch with torchrun (it sets RANK, WORLD_SIZE, MASTER_ADDR, ...)")
    code = serve(a.control, rank, world, a.backend, init="env", pg_timeout_s=a.pg_timeout)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown of the Gloo/NCCL threads


if __name__ == "__main__":
    main()
