"""The controller side: a group of rank processes, and one execution spread over them.

:class:`RankGroup` owns a ``torch.distributed.TCPStore`` (the control store: jobs, replies, the
abort flag; :mod:`envs_real.distributed.protocol`) and either spawns the ranks on this host
(``torch.multiprocessing``, start method :data:`START_METHOD`, a free localhost port; the ranks
rendezvous through the same store) or waits for ranks launched by ``torchrun`` to connect
(:mod:`envs_real.distributed.worker`). Groups are shared per device spec (:func:`get_group`) and
closed at interpreter exit or by :func:`shutdown`.

Failure handling: the first failing rank sets the job's abort key and its peers stop; a rank that
dies without replying (its process exited) is reported as such and the abort key set for the
others; a rank whose heartbeat (:mod:`envs_real.distributed.protocol`) stopped for
:data:`HUNG_AFTER_S` (stopped by SIGSTOP or a debugger, or frozen) is named (``rank_hung``), killed
when it is one of ours, and the job aborted; a job past its deadline is aborted; ranks that do not
answer within :data:`STOP_GRACE_S` of a failure are given up. After any failure the group is
closed (every rank process joined, then terminated, then killed) and the next job starts a fresh
one. The ranks' process-group timeout (barriers, transfers) follows the job's run timeout
(:func:`pg_timeout_for`). A script that starts a group from its top level, without an
``if __name__ == "__main__":`` guard, is caught in the rank processes that re-import it
(:func:`reimported_main_script`) and reported as :class:`UnguardedMainError`.
"""

from __future__ import annotations

import atexit
import contextlib
import inspect
import itertools
import os
import pickle
import socket
import sys
import time
import weakref
from datetime import timedelta
from typing import Any

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from envs_real.devices import DeviceSet
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
from envs_real.distributed.worker import KERNEL_CACHE
from envs_real.plan import PlacedGraph, RunResult

START_TIMEOUT_S = 120.0  # [s] ranks must join within this (spawning imports torch in every rank)
GRACE_S = 30.0  # [s] a job's deadline beyond its runs' timeouts
STOP_GRACE_S = 5.0  # [s] ranks get this long to exit on STOP (or to answer after a failure)
HUNG_AFTER_S = 5.0  # [s] a rank whose heartbeat stayed unchanged this long is hung (25 missed beats)
PG_TIMEOUT_MARGIN_S = GRACE_S  # [s] the process-group timeout beyond a run's timeout
PG_TIMEOUT_NO_LIMIT_S = 24 * 3600.0  # [s] the process-group timeout of runs without a timeout
MAIN_REIMPORTED_EXIT_CODE = 14
"""Exit code of a rank process that found itself running its parent's main script's top level."""
POLL_S = 1e-3  # [s]
START_METHOD = "forkserver"
"""How ranks start: ``forkserver`` (a clean server process that imports :data:`PRELOAD` once; every
rank, and every group rebuilt after a failure, forks from it in a fraction of a second) or
``spawn`` (a fresh interpreter per rank, importing torch each time)."""
PRELOAD = ("torch", "torch.distributed", "envs_real.distributed.rank", "envs_real.distributed.worker")


class GroupError(RuntimeError):
    """The group could not start, or lost a rank outside a run."""


class UnguardedMainError(GroupError):
    """The ranks could not start because the main script starts a group from its top level: every
    rank process re-imports the main module (start method :data:`START_METHOD`), so the script needs
    an ``if __name__ == "__main__":`` guard."""


def pg_timeout_for(timeout_s: float | None) -> float:
    """The ranks' process-group timeout [s] for runs of ``timeout_s`` each: the run's timeout plus
    :data:`PG_TIMEOUT_MARGIN_S` (a barrier waits for the slowest rank's previous run), or
    :data:`PG_TIMEOUT_NO_LIMIT_S` without a run timeout."""
    return PG_TIMEOUT_NO_LIMIT_S if timeout_s is None else float(timeout_s) + PG_TIMEOUT_MARGIN_S


def reimported_main_script() -> str | None:
    """The main script whose top level is calling this, when it runs as ``__mp_main__``: a
    ``spawn``/``forkserver`` child of multiprocessing re-importing its parent's main module, which
    reached code that starts processes because the script has no ``if __name__ == "__main__":``
    guard. ``None`` otherwise (a guarded script, or a function defined there called later)."""
    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__mp_main__":
            return frame.f_code.co_filename
        frame = frame.f_back
    return None


def unguarded_main_message(spec: str) -> str:
    """What :class:`UnguardedMainError` says: the script, why it ran again, and the fix."""
    script = getattr(sys.modules.get("__main__"), "__file__", None) or "the main script"
    return (
        f"{spec}: the rank processes re-ran the top level of {script} (multiprocessing's {START_METHOD!r} start "
        f"method imports the main module in every rank) and reached code that starts ranks again; put the "
        f"script's code under `if __name__ == \"__main__\":`"
    )


def process_state(pid: int) -> str | None:
    """The state letter of local process ``pid`` from ``/proc`` (``"T"``: stopped), or ``None``."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None


class HeartbeatWatch:
    """The controller's watchdog over the ranks' heartbeat counters (``heartbeat/r`` in the store).

    Every :data:`~envs_real.distributed.protocol.HEARTBEAT_S` it reads each rank's counter and notes,
    on the controller's clock, when it last changed; a rank whose counter stayed unchanged for more
    than ``hung_after_s`` is hung. A pause of the controller itself never makes a rank look hung: a
    live rank's counter has changed by the next look.

    Args:
        store: the control store (``check(keys)`` and ``get(key)``).
        world: number of ranks.
        hung_after_s: silence that makes a rank hung [s].
    """

    def __init__(self, store: Any, world: int, hung_after_s: float = HUNG_AFTER_S) -> None:
        now = time.perf_counter()
        self.store, self.hung_after_s = store, float(hung_after_s)
        self.seen: list[bytes | None] = [None] * world
        self.changed = [now] * world
        self.next_look = now

    def silent(self, ranks: list[int]) -> dict[int, float]:
        """``{rank: seconds since its counter last changed}`` of the ``ranks`` silent for more than
        ``hung_after_s`` (``{}`` between two looks)."""
        now = time.perf_counter()
        if now < self.next_look:
            return {}
        self.next_look = now + HEARTBEAT_S
        hung = {}
        for r in ranks:
            key = heartbeat_key(r)
            value = self.store.get(key) if self.store.check([key]) else None
            if value != self.seen[r]:
                self.seen[r], self.changed[r] = value, now
            elif now - self.changed[r] > self.hung_after_s:
                hung[r] = now - self.changed[r]
        return hung


class RankGroup:
    """Rank processes (one per logical device) and their control store.

    Args:
        devices: a ``gloo``/``nccl`` :class:`~envs_real.devices.DeviceSet`.
        start_timeout_s: how long to wait for every rank to join [s].
        pg_timeout_s: the ranks' collective timeout [s] until a job asks for another; spawned ranks are
            restarted with :func:`pg_timeout_for` of each job's run timeout (ranks launched by
            torchrun keep their ``--pg-timeout``).
        hung_after_s: heartbeat silence after which a rank is reported hung (:class:`HeartbeatWatch`) [s].

    Attributes:
        hellos: ``(world,)`` the ranks' :class:`~envs_real.distributed.protocol.Hello`.
        processes: the spawned rank processes (empty for ranks launched by torchrun).
    """

    def __init__(
        self,
        devices: DeviceSet,
        start_timeout_s: float = START_TIMEOUT_S,
        pg_timeout_s: float = 120.0,
        hung_after_s: float = HUNG_AFTER_S,
    ):
        if devices.dist is None:
            raise ValueError(f"RankGroup needs a 'gloo:N' or 'nccl' device spec, got {devices.spec!r}")
        self.devices = devices
        self.world = len(devices.physical)
        self.start_timeout_s = float(start_timeout_s)
        self.pg_timeout_s = float(pg_timeout_s)
        self.hung_after_s = float(hung_after_s)
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
        """Spawn (or wait for) the ranks; returns ``self`` once every rank joined.

        Raises:
            GroupError: a rank exited while starting, or not every rank joined in time.
            UnguardedMainError: the ranks exited because the main script has no ``__main__`` guard.
        """
        import torch.distributed as dist

        if self.running:
            return self
        if reimported_main_script() is not None:  # a rank re-running an unguarded script: tell the parent
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(MAIN_REIMPORTED_EXIT_CODE)
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
            if any(code == MAIN_REIMPORTED_EXIT_CODE for _, code in dead):
                raise UnguardedMainError(unguarded_main_message(self.devices.spec))
            if dead:
                raise GroupError(f"{self.devices.spec}: rank(s) {dead} (rank, exit code) exited while starting")
            if time.perf_counter() > deadline:
                joined = [r for r, k in enumerate(keys) if self.store.check([k])]
                how = (
                    f"launch them with `torchrun ... -m envs_real.distributed.worker --control {self.devices.control}`"
                    if self.devices.control else self._slow_start_hint()
                )
                raise GroupError(
                    f"{self.devices.spec}: only ranks {joined} of {self.world} joined within "
                    f"{self.start_timeout_s:g} s; {how}"
                )
            time.sleep(0.01)
        return [pickle.loads(self.store.get(k)) for k in keys]

    @staticmethod
    def _slow_start_hint() -> str:
        """Why spawned ranks may not have joined: a slow torch import, or (with a main script) ranks
        still busy re-running its top level."""
        script = getattr(sys.modules.get("__main__"), "__file__", None)
        hint = "spawned ranks are slow to import torch on a loaded machine"
        if script:
            hint += (
                f", or they are still running the top level of {script}, which every rank re-imports: keep its "
                f"work under `if __name__ == \"__main__\":`"
            )
        return hint

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
        self._follow_timeout(timeout_s)
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
        failed = any(_failed(rep) for rep in replies)
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

    def _follow_timeout(self, timeout_s: float | None) -> None:
        """Spawned ranks get the process-group timeout of ``timeout_s`` (:func:`pg_timeout_for`): a
        running group with another one is closed, to start again with it."""
        if self.devices.control is not None:  # torchrun ranks: their own --pg-timeout
            return
        wanted = pg_timeout_for(timeout_s)
        if wanted != self.pg_timeout_s:
            self.close()
            self.pg_timeout_s = wanted

    def _collect(self, k: int, deadline: float) -> list[RankReply]:
        """Every rank's reply to job ``k``: its own, or one written here for a rank that died, hung
        (:class:`HeartbeatWatch`) or did not answer by ``deadline`` or :data:`STOP_GRACE_S` after the
        job failed."""
        replies: dict[int, RankReply] = {}
        watch = HeartbeatWatch(self.store, self.world, self.hung_after_s)
        give_up_at: float | None = None
        while len(replies) < self.world:
            for r in self._waiting(replies):
                reply = self._reply(k, r)
                if reply is not None:
                    replies[r] = reply
            for r, silence in watch.silent(self._waiting(replies)).items():
                replies[r] = self._hung(k, r, silence)
            now = time.perf_counter()
            if give_up_at is None and now > deadline:
                self._abort(k, f"timeout: the job passed its {deadline:g} s deadline")
                give_up_at = now + STOP_GRACE_S
            elif give_up_at is None and any(_failed(rep) for rep in replies.values()):
                give_up_at = now + STOP_GRACE_S
            elif give_up_at is not None and now > give_up_at:
                for r in self._waiting(replies):
                    replies[r] = self._unanswered(r, timed_out=now > deadline)
            time.sleep(POLL_S)
        return [replies[r] for r in range(self.world)]

    def _waiting(self, replies: dict[int, RankReply]) -> list[int]:
        return [r for r in range(self.world) if r not in replies]

    def _reply(self, k: int, r: int) -> RankReply | None:
        """Rank ``r``'s reply to job ``k`` from the store; one written here when its process exited
        (and the job aborted); else ``None``."""
        key = result_key(k, r)
        if self.store.check([key]):
            reply = pickle.loads(self.store.get(key))
            self.store.delete_key(key)
            return reply
        p = self.processes[r] if r < len(self.processes) else None
        if p is None or p.exitcode is None:
            return None
        msg = f"rank {r} (pid {p.pid}, {self.hellos[r].device}) died during the run with exit code {p.exitcode}"
        self._abort(k, msg)
        return RankReply(r, [RankRun(error=msg, error_kind="rank_failed")], exiting=True)

    def _hung(self, k: int, r: int, silence: float) -> RankReply:
        """The reply of rank ``r``, silent for ``silence`` seconds: the job is aborted and the rank's
        process, when spawned here, killed (its peers' pending transfers with it then fail at once)."""
        hello = self.hellos[r]
        p = self.processes[r] if r < len(self.processes) else None
        why = "its process is frozen or its host unreachable"
        if p is not None:
            state = process_state(p.pid)
            why = "its process is stopped (SIGSTOP or a debugger)" if state in ("T", "t") else "its process is frozen"
        msg = (
            f"rank {r} (pid {hello.pid} on {hello.host}, {hello.device}) stopped answering: no heartbeat for "
            f"{silence:.1f} s, {why}; the run was ended"
            + ("; the process was killed" if p is not None else "")
        )
        self._abort(k, msg)
        if p is not None:
            with contextlib.suppress(Exception):
                p.kill()
        return RankReply(r, [RankRun(error=msg, error_kind="rank_hung")], exiting=True)

    @staticmethod
    def _unanswered(r: int, timed_out: bool) -> RankReply:
        """The reply of rank ``r``, still silent :data:`STOP_GRACE_S` after the job's deadline
        (``timeout``) or after another rank's failure (``aborted``: a consequence)."""
        if timed_out:
            msg, kind = f"timeout: rank {r} did not answer; its process is stopped", "timeout"
        else:
            msg = f"rank {r} did not answer within {STOP_GRACE_S:g} s of the run's failure; its process is stopped"
            kind = "aborted"
        return RankReply(r, [RankRun(error=msg, error_kind=kind)], exiting=True)

    def _abort(self, k: int, message: str) -> None:
        with contextlib.suppress(Exception):
            self.store.compare_set(abort_key(k), "", message)


def _failed(reply: RankReply) -> bool:
    """Whether ``reply`` ends the job: the rank leaves, or its last run failed."""
    return reply.exiting or bool(reply.runs and reply.runs[-1].error)


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
