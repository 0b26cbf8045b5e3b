"""The controller side: a group of rank processes, and one execution spread over them.

:class:`RankGroup` owns a ``torch.distributed.TCPStore`` (the control store: jobs, replies, the
abort flag; :mod:`envs_real.distributed.protocol`) and either spawns the ranks on this host
(``torch.multiprocessing``, start method :data:`START_METHOD`, a free localhost port; the ranks
rendezvous through the same store) or waits for ranks launched by ``torchrun`` to connect
(:mod:`envs_real.distributed.worker`). Groups are shared per device spec (:func:`get_group`) and
closed at interpreter exit or by :func:`shutdown`.

Failure handling: the first failing rank sets the job's abort key and its peers stop; a rank that
dies without replying (its process exited) is reported as such and the abort key set for the
others; a job past its deadline is aborted. After any failure the group is closed (every rank
process joined, then terminated, then killed) and the next job starts a fresh one.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import pickle
import socket
import time
import weakref
from datetime import timedelta
from typing import Any

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from envs_real.devices import DeviceSet
from envs_real.distributed.protocol import (
    STOP,
    Hello,
    RankJob,
    RankReply,
    RankRun,
    abort_key,
    bye_key,
    hello_key,
    job_key,
    result_key,
)
from envs_real.distributed.worker import KERNEL_CACHE
from envs_real.plan import PlacedGraph, RunResult

START_TIMEOUT_S = 120.0  # [s] ranks must join within this (spawning imports torch in every rank)
GRACE_S = 30.0  # [s] a job's deadline beyond its runs' timeouts
STOP_GRACE_S = 5.0  # [s] ranks get this long to exit on STOP before they are terminated
POLL_S = 1e-3  # [s]
START_METHOD = "forkserver"
"""How ranks start: ``forkserver`` (a clean server process that imports :data:`PRELOAD` once; every
rank, and every group rebuilt after a failure, forks from it in a fraction of a second) or
``spawn`` (a fresh interpreter per rank, importing torch each time)."""
PRELOAD = ("torch", "torch.distributed", "envs_real.distributed.rank", "envs_real.distributed.worker")


class GroupError(RuntimeError):
    """The group could not start, or lost a rank outside a run."""


class RankGroup:
    """Rank processes (one per logical device) and their control store.

    Args:
        devices: a ``gloo``/``nccl`` :class:`~envs_real.devices.DeviceSet`.
        start_timeout_s: how long to wait for every rank to join [s].
        pg_timeout_s: the ranks' collective timeout [s].

    Attributes:
        hellos: ``(world,)`` the ranks' :class:`~envs_real.distributed.protocol.Hello`.
        processes: the spawned rank processes (empty for ranks launched by torchrun).
    """

    def __init__(self, devices: DeviceSet, start_timeout_s: float = START_TIMEOUT_S, pg_timeout_s: float = 120.0):
        if devices.dist is None:
            raise ValueError(f"RankGroup needs a 'gloo:N' or 'nccl' device spec, got {devices.spec!r}")
        self.devices = devices
        self.world = len(devices.physical)
        self.start_timeout_s = float(start_timeout_s)
        self.pg_timeout_s = float(pg_timeout_s)
        self.store: Any = None
        self.processes: list[Any] = []
        self.hellos: list[Hello] = []
        self._k = 0
        self._sent_graphs: list[int] = []  # mirrors the ranks' kernel cache (first in, first out)

    # ------------------------------------------------------------------ lifecycle
    @property
    def running(self) -> bool:
        return self.store is not None

    @property
    def pids(self) -> list[int]:
        """Process ids of the ranks (spawned or remote)."""
        return [h.pid for h in self.hellos]

    def start(self) -> RankGroup:
        """Spawn (or wait for) the ranks; returns ``self`` once every rank joined."""
        import torch.distributed as dist

        if self.running:
            return self
        if not dist.is_available():
            raise GroupError("torch.distributed is not available in this torch build")
        if self.devices.control is None:
            self.store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                                       timeout=timedelta(seconds=self.pg_timeout_s))
            control = f"127.0.0.1:{self.store.port}"
            self._spawn(control)
        else:
            host, _, port = self.devices.control.rpartition(":")
            self.store = dist.TCPStore(host, int(port), is_master=True, wait_for_workers=False,
                                       timeout=timedelta(seconds=self.pg_timeout_s))
        self._k, self._sent_graphs = 0, []
        try:
            self.hellos = self._wait_hellos()
        except BaseException:
            self.close()
            raise
        return self

    def _spawn(self, control: str) -> None:
        import torch.multiprocessing as mp

        from envs_real.distributed.worker import spawned_main

        ctx = mp.get_context(START_METHOD)
        if START_METHOD == "forkserver":  # ranks fork from a server that imported torch once
            ctx.set_forkserver_preload(list(PRELOAD))
        backend = self.devices.dist
        for rank in range(self.world):
            p = ctx.Process(
                target=spawned_main,
                args=(control, rank, self.world, backend, os.getpid(), self.pg_timeout_s),
                name=f"envs_real-{backend}-rank{rank}",
                daemon=True,
            )
            p.start()
            self.processes.append(p)

    def _wait_hellos(self) -> list[Hello]:
        deadline = time.perf_counter() + self.start_timeout_s
        keys = [hello_key(r) for r in range(self.world)]
        while not self.store.check(keys):
            dead = [(r, p.exitcode) for r, p in enumerate(self.processes) if p.exitcode is not None]
            if dead:
                raise GroupError(f"{self.devices.spec}: rank(s) {dead} (rank, exit code) exited while starting")
            if time.perf_counter() > deadline:
                joined = [r for r, k in enumerate(keys) if self.store.check([k])]
                how = (
                    f"launch them with `torchrun ... -m envs_real.distributed.worker --control {self.devices.control}`"
                    if self.devices.control else "spawned ranks are slow to import torch on a loaded machine"
                )
                raise GroupError(
                    f"{self.devices.spec}: only ranks {joined} of {self.world} joined within "
                    f"{self.start_timeout_s:g} s; {how}"
                )
            time.sleep(0.01)
        return [pickle.loads(self.store.get(k)) for k in keys]

    def close(self) -> None:
        """Stop the ranks (STOP, then terminate, then kill) and drop the store; idempotent."""
        deadline = time.perf_counter() + STOP_GRACE_S
        if self.store is not None:
            for r in range(self.world):
                with contextlib.suppress(Exception):
                    self.store.set(job_key(self._k, r), STOP)
            if not self.processes:  # ranks launched elsewhere: keep the store up until they said bye
                with contextlib.suppress(Exception):
                    while time.perf_counter() < deadline and not self.store.check(
                        [bye_key(r) for r in range(self.world)]
                    ):
                        time.sleep(0.01)
        for p in self.processes:
            p.join(max(0.0, deadline - time.perf_counter()))
        for p in self.processes:
            if p.is_alive():
                p.terminate()
                p.join(2.0)
            if p.is_alive():
                p.kill()
                p.join(2.0)
        self.processes = []
        self.store = None
        self.hellos = []

    # ------------------------------------------------------------------ one execution
    def execute(
        self,
        graph: DataflowGraph,
        graph_key: int,
        assignment: np.ndarray,
        priorities: np.ndarray | None,
        *,
        order: str,
        lanes: int,
        runs: int,
        timeout_s: float | None,
        keep_outputs: bool,
        seed: int,
        synthetic_scale: float | str,
        externals: dict | None,
        intra_op_threads: int | None,
        fault: dict | None = None,
        p2p: str = "tagged",
    ) -> tuple[list[RunResult], dict[int, Any] | None]:
        """Run ``graph`` under ``assignment`` ``runs`` times on the ranks.

        Returns:
            ``(results, outputs)``: one :class:`~envs_real.plan.RunResult` per completed run,
            plus the failed one last (its ``error`` set) if a run failed; the last run's outputs
            ``{op: host tensor}`` with ``keep_outputs``.
        """
        self.start()
        k = self._k
        self._k += 1
        send_graph = graph_key not in self._sent_graphs
        for r in range(self.world):
            job = RankJob(
                k=k, graph=graph if send_graph else None, graph_key=graph_key,
                assignment=np.asarray(assignment, np.int64), priorities=priorities, order=order, lanes=lanes,
                runs=runs, timeout_s=timeout_s, keep_outputs=keep_outputs, seed=seed,
                synthetic_scale=synthetic_scale, externals=externals if send_graph else None,
                intra_op_threads=intra_op_threads, fault=fault, p2p=p2p,
            )
            self.store.set(job_key(k, r), pickle.dumps(job))
        if send_graph:
            self._sent_graphs.append(graph_key)
            del self._sent_graphs[:-KERNEL_CACHE]
        budget = GRACE_S + (runs * timeout_s if timeout_s is not None else 24 * 3600.0)
        replies = self._collect(k, time.perf_counter() + budget)
        placed = PlacedGraph.build(graph, assignment, self.world)
        same_host = len({h.host for h in self.hellos}) == 1 and self.hellos[0].host == socket.gethostname()
        n_runs = min(len(rep.runs) for rep in replies)
        from envs_real.distributed.rank import assemble, root_cause

        results = [assemble(placed, [rep.runs[i] for rep in replies], same_host) for i in range(n_runs)]
        failed = any(rep.exiting or (rep.runs and rep.runs[-1].error) for rep in replies)
        if failed:
            if not results or results[-1].ok:  # a rank failed in a run the others did not reach
                bad = root_cause([rep.runs[-1] for rep in replies if rep.runs])
                res = RunResult(graph.n_ops, graph.n_edges)
                res.error, res.error_kind, res.failed_op = bad.error, bad.error_kind, bad.failed_op
                results.append(res)
            self.close()  # pending transfers cannot be cancelled: a fresh group for the next job
            return results, None
        outputs = None
        if keep_outputs:
            outputs = {}
            for rep in replies:
                outputs.update(rep.runs[-1].outputs or {})
        return results, outputs

    def _collect(self, k: int, deadline: float) -> list[RankReply]:
        replies: dict[int, RankReply] = {}
        aborted_at: float | None = None
        while len(replies) < self.world:
            for r in range(self.world):
                if r in replies:
                    continue
                key = result_key(k, r)
                if self.store.check([key]):
                    replies[r] = pickle.loads(self.store.get(key))
                    self.store.delete_key(key)
                    continue
                p = self.processes[r] if r < len(self.processes) else None
                if p is not None and p.exitcode is not None:
                    msg = (
                        f"rank {r} (pid {p.pid}, {self.hellos[r].device}) died during the run with exit code "
                        f"{p.exitcode}"
                    )
                    replies[r] = RankReply(r, [RankRun(error=msg, error_kind="rank_failed")], exiting=True)
                    self._abort(k, msg)
            now = time.perf_counter()
            if len(replies) < self.world and now > deadline:
                if aborted_at is None:
                    aborted_at = now
                    self._abort(k, f"timeout: the job passed its {deadline:g} s deadline")
                elif now > aborted_at + STOP_GRACE_S:
                    for r in range(self.world):
                        if r not in replies:
                            msg = f"timeout: rank {r} did not answer; its process is stopped"
                            replies[r] = RankReply(r, [RankRun(error=msg, error_kind="timeout")], exiting=True)
            time.sleep(POLL_S)
        return [replies[r] for r in range(self.world)]

    def _abort(self, k: int, message: str) -> None:
        with contextlib.suppress(Exception):
            self.store.compare_set(abort_key(k), "", message)


# ---------------------------------------------------------------------------------- shared groups
_GROUPS: dict[tuple, RankGroup] = {}
_GRAPH_KEYS: weakref.WeakKeyDictionary[DataflowGraph, int] = weakref.WeakKeyDictionary()
_KEY_COUNTER = itertools.count()


def get_group(devices: DeviceSet) -> RankGroup:
    """The shared group of ``devices`` (started on first use by :meth:`RankGroup.execute`)."""
    key = (devices.dist, devices.physical, devices.control)
    group = _GROUPS.get(key)
    if group is None:
        group = _GROUPS[key] = RankGroup(devices)
    return group


def graph_key(graph: DataflowGraph) -> int:
    """A process-wide id of ``graph`` (ranks cache its kernels under it)."""
    key = _GRAPH_KEYS.get(graph)
    if key is None:
        key = _GRAPH_KEYS[graph] = next(_KEY_COUNTER)
    return key


def shutdown() -> None:
    """Close every group of this process (their rank processes exit)."""
    for group in list(_GROUPS.values()):
        group.close()
    _GROUPS.clear()


atexit.register(shutdown)
