"""One rank's share of a work-conserving run: its ops on its device, point-to-point transfers.

The rank runs the ops assigned to it (logical device = rank) with the WC rule of
:mod:`envs_real.plan`: an op is ready once every input is here (same-rank inputs when their
producer ends, others when their ``irecv`` completed), and each of ``lanes`` compute threads
starts the most urgent ready op (``"fifo"``: ready order, ``"priority"``: lowest priority first).
When an op ends, its output goes once to every other rank that consumes it (``dist.isend``) and
the rank moves on: the transfer overlaps with compute, as the simulator's model has it. Matching
(``job.p2p``): ``"tagged"`` (Gloo) posts every ``irecv`` of the run at its start, tag = the
producer's op id, into a buffer of the producer's shape and dtype; ``"ordered"`` (NCCL, which
ignores tags and matches a pair's messages in order) announces each send in the control store
(:func:`seq_key`) just before posting it, and one receiver thread per source rank posts the
matching ``irecv`` in that order. A thread per Gloo work (whose send/recv works complete only
inside ``wait()``), or polling for NCCL works, notes when each transfer completes (the arrival
time) and makes consumers ready; the main thread checks the run's deadline and the job's abort key.

A run ends when every op of the rank ran and every send completed. A failing op (an exception in
its kernel), a failed receive (a peer died: Gloo reports the closed connection), another rank's
failure (the abort key) or the deadline stops it; the rank sets the abort key itself so that its
peers stop too, and reports. Pending Gloo/NCCL operations cannot be cancelled, so a rank leaves
the group after a failed run (:mod:`envs_real.distributed.worker`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from envs_real.distributed.protocol import RankJob, RankRun
from envs_real.materialize import Materialized, torch_dtype
from envs_real.plan import PlacedGraph, ReadyQueue, classify_error, describe_failure

POLL_S = 2e-4  # [s] polling period of receives and sends
ABORT_POLL_S = 0.01  # [s] how often the abort key is checked
FAULT_EXIT_CODE = 13


class RankExecutor:
    """Runs one rank's ops of a placed graph, run after run (see the module docstring).

    Args:
        rank, world: this rank and the number of ranks.
        device: the rank's torch device (``"cpu"`` or ``"cuda:i"``).
        aborted: returns the abort message of the current job, or ``None``.
        set_abort: publishes this rank's failure to its peers.
        post: ``post(key, text)`` sets a control-store key (the ordered transfer protocol).
        take: ``take(key)`` returns and deletes a control-store key, or ``None`` if it is not set.
    """

    def __init__(
        self,
        rank: int,
        world: int,
        device: str,
        aborted: Callable[[int], str | None],
        set_abort: Callable[[int, str], None],
        post: Callable[[str, str], None] | None = None,
        take: Callable[[str], str | None] | None = None,
    ) -> None:
        self.rank, self.world, self.device = rank, world, device
        self.backend = "nccl" if device.startswith("cuda") else "gloo"
        self.aborted, self.set_abort = aborted, set_abort
        self.post, self.take = post, take

    def run_job(self, job: RankJob, mat: Materialized) -> list[RankRun]:
        """All runs of ``job`` (stops after the first failed run)."""
        import torch
        import torch.distributed as dist

        placed = PlacedGraph.build(mat.graph, job.assignment, self.world)
        mine = [v for v in range(mat.graph.n_ops) if int(placed.device[v]) == self.rank]
        ext = {v: mat.kernels[v].external_operands(self.device) for v in mine}
        prev = torch.get_num_threads()
        if job.intra_op_threads is not None:
            torch.set_num_threads(int(job.intra_op_threads))
        runs: list[RankRun] = []
        try:
            for r in range(job.runs):
                self._barrier(dist)
                t0 = time.perf_counter()
                keep = job.keep_outputs and r == job.runs - 1
                run = _Run(self, job, mat, placed, mine, ext, keep, t0, r).run()
                runs.append(run)
                if run.error is not None:
                    break
        finally:
            if torch.get_num_threads() != prev:
                torch.set_num_threads(prev)
        return runs

    def _barrier(self, dist: Any) -> None:
        if self.device.startswith("cuda"):
            dist.barrier(device_ids=[int(self.device.partition(":")[2] or 0)])
        else:
            dist.barrier()


def seq_key(k: int, run: int, src: int, dst: int, i: int) -> str:
    """Control-store key of the ``i``-th transfer from rank ``src`` to rank ``dst`` (ordered protocol)."""
    return f"seq/{k}/{run}/{src}/{dst}/{i}"


class _Run:
    def __init__(self, ex: RankExecutor, job: RankJob, mat, placed: PlacedGraph, mine, ext, keep, t0, r=0) -> None:
        self.ex, self.job, self.mat, self.placed = ex, job, mat, placed
        self.run_index = r
        self.ordered = job.p2p == "ordered"
        self.send_locks = [threading.Lock() for _ in range(ex.world)]
        self.send_count = [0] * ex.world
        self.mine, self.ext, self.keep = mine, ext, keep
        self.out = RankRun(t_barrier=t0)
        self.deadline = None if job.timeout_s is None else t0 + float(job.timeout_s)
        self.lock = threading.Lock()
        self.cv = threading.Condition(self.lock)
        self.queue = ReadyQueue(job.order, job.priorities)
        self.waiting = {v: placed.need[v] for v in mine}
        self.values: dict[int, Any] = {}
        self.seq = 0
        self.finished = 0
        self.stop = False
        self.sends_pending = 0  # posted sends not yet completed
        self.recvs: dict[int, None] = {}  # producers whose output has not arrived yet
        self.polled: list[tuple[Any, Callable, tuple]] = []  # NCCL works to poll

    # ------------------------------------------------------------------ main thread
    def run(self) -> RankRun:
        import torch
        import torch.distributed as dist

        rank, out = self.ex.rank, self.out
        g = self.mat.graph
        with self.lock:  # the sources first: a receive may complete as soon as it is posted
            for v in self.mine:
                if self.waiting[v] == 0:
                    self._ready(v)
        per_source: dict[int, int] = {}
        for u in range(g.n_ops):  # every input this rank needs from another rank, once per producer
            if int(self.placed.device[u]) != rank and rank in self.placed.remote[u]:
                src = int(self.placed.device[u])
                with self.lock:
                    self.recvs[u] = None
                if self.ordered:
                    per_source[src] = per_source.get(src, 0) + 1
                    continue
                k = self.mat.kernels[u]
                buf = torch.empty(k.out_shape, dtype=torch_dtype(k.dtype), device=self.ex.device)
                self._watch(dist.irecv(buf, src=src, tag=u), self._received, u, buf)
        for src, count in per_source.items():  # ordered: one receiver thread per source rank
            threading.Thread(
                target=self._ordered_receiver, args=(src, count), name=f"envs_real-recv{src}", daemon=True
            ).start()
        threads = [
            threading.Thread(target=self._lane, name=f"envs_real-rank{rank}-lane{i}", daemon=True)
            for i in range(max(1, int(self.job.lanes)))
        ]
        for t in threads:
            t.start()
        next_abort_check = 0.0
        try:
            while True:
                self._poll()
                with self.lock:
                    done = self.finished == len(self.mine) and not self.recvs and self.sends_pending == 0
                    if out.error is not None or done:
                        break
                    self.cv.wait(POLL_S if self.polled else ABORT_POLL_S)
                now = time.perf_counter()
                if self.deadline is not None and now > self.deadline:
                    self._fail_run(
                        f"timeout: rank {rank} passed the {self.job.timeout_s:g} s limit with {self.finished} of "
                        f"{len(self.mine)} of its ops done; raise timeout_s or check for a stuck op",
                        "timeout",
                    )
                    break
                if now >= next_abort_check:
                    next_abort_check = now + ABORT_POLL_S
                    msg = self.ex.aborted(self.job.k)
                    if msg is not None:
                        with self.lock:
                            if out.error is None:
                                out.error, out.error_kind = f"stopped: {msg}", "aborted"
                        break
        finally:
            with self.lock:
                self.stop = True
                self.cv.notify_all()
            for t in threads:
                t.join(1.0)
        if out.error is not None and out.error_kind != "aborted":
            self.ex.set_abort(self.job.k, out.error)  # idempotent: peers stop on the first message
        if out.error is None and self.keep:
            out.outputs = {v: self.values[v].detach().to("cpu") for v in self.mine}
        self.values.clear()
        return out

    def _ordered_receiver(self, src: int, count: int) -> None:
        """Ordered protocol (NCCL matches point-to-point messages by order, not by tag): receive the
        ``count`` transfers from ``src`` one after the other, each announced in the control store
        (:func:`seq_key`: which op's output comes next) before its ``isend`` was posted."""
        import torch
        import torch.distributed as dist

        cuda = self.ex.device.startswith("cuda")
        stream = torch.cuda.Stream(self.ex.device) if cuda else None
        for i in range(count):
            key = seq_key(self.job.k, self.run_index, src, self.ex.rank, i)
            delay = 1e-4
            while (text := self.ex.take(key)) is None:
                if self.stop:
                    return
                time.sleep(delay)
                delay = min(2e-3, delay * 1.5)
            u = int(text)
            k = self.mat.kernels[u]
            buf = torch.empty(k.out_shape, dtype=torch_dtype(k.dtype), device=self.ex.device)
            try:
                work = dist.irecv(buf, src=src, tag=0)
                if cuda:  # wait() orders our stream after NCCL's; synchronising it waits for the data
                    with torch.cuda.stream(stream):
                        work.wait()
                    stream.synchronize()
                else:
                    work.wait()
            except Exception as exc:  # noqa: BLE001  a peer died or the group broke
                self._received(u, buf, time.perf_counter(), exc)
                return
            self._received(u, buf, time.perf_counter(), None)

    def _watch(self, work: Any, callback: Callable, *args: Any) -> None:
        """Call ``callback(*args, time, exception)`` when ``work`` completes. Gloo's send/recv works
        complete only inside ``wait()``, so a daemon thread waits on each; NCCL works are polled."""
        if self.ex.backend == "gloo":

            def waiter() -> None:
                try:
                    work.wait()
                except Exception as exc:  # noqa: BLE001  a peer died or the group broke
                    callback(*args, time.perf_counter(), exc)
                    return
                callback(*args, time.perf_counter(), None)

            threading.Thread(target=waiter, name="envs_real-p2p-wait", daemon=True).start()
        else:
            self.polled.append((work, callback, args))

    def _poll(self) -> None:
        """NCCL: complete the works whose CUDA work finished."""
        if not self.polled:
            return
        pending = []
        for work, callback, args in self.polled:
            if work.is_completed():
                try:
                    work.wait()
                except Exception as exc:  # noqa: BLE001
                    callback(*args, time.perf_counter(), exc)
                    continue
                callback(*args, time.perf_counter(), None)
            else:
                pending.append((work, callback, args))
        self.polled = pending

    def _received(self, u: int, buf: Any, t: float, exc: BaseException | None) -> None:
        if exc is not None:
            src = int(self.placed.device[u])
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            self._fail_run(
                f"rank {self.ex.rank}: receiving op {u}'s output from rank {src} failed "
                f"({type(exc).__name__}: {first}); is rank {src} alive?",
                "rank_failed",
                op=u,
            )
            return
        with self.lock:
            self.recvs.pop(u, None)
            self.out.arrival[u] = t
            self.values[u] = buf
            for v in self.placed.remote[u][self.ex.rank]:
                self.waiting[v] -= 1
                if self.waiting[v] == 0:
                    self._ready(v)
            self.cv.notify_all()

    def _sent(self, u: int, e: int, payload: Any, t: float, exc: BaseException | None) -> None:
        if exc is not None:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            self._fail_run(
                f"rank {self.ex.rank}: sending op {u}'s output to rank {e} failed ({type(exc).__name__}: "
                f"{first}); is rank {e} alive?",
                "rank_failed",
                op=u,
            )
            return
        with self.lock:
            self.sends_pending -= 1
            self.cv.notify_all()

    def _fail_run(self, message: str, kind: str, op: int = -1) -> None:
        with self.lock:
            if self.out.error is None:
                self.out.error, self.out.error_kind, self.out.failed_op = message, kind, op
            self.stop = True
            self.cv.notify_all()
        self.ex.set_abort(self.job.k, message)

    # ------------------------------------------------------------------ under the lock
    def _ready(self, v: int) -> None:
        self.out.ready_seq[v] = self.seq
        self.seq += 1
        self.queue.push(v, self.seq - 1)
        self.cv.notify()

    # ------------------------------------------------------------------ compute lanes
    def _lane(self) -> None:
        import torch
        import torch.distributed as dist

        kernels, placed, rank = self.mat.kernels, self.placed, self.ex.rank
        cuda = self.ex.device.startswith("cuda")
        fault = self.job.fault or {}
        with torch.no_grad():
            while True:
                with self.lock:
                    while not self.stop and not self.queue and self.finished < len(self.mine):
                        self.cv.wait()
                    if self.stop or self.finished >= len(self.mine) or not self.queue:
                        return
                    v = self.queue.pop()
                    self.out.pick_seq[v] = self.seq
                    self.seq += 1
                    k = kernels[v]
                    operands = [self.values.get(s) if s != -1 else self.ext[v][i] for i, s in enumerate(k.sources)]
                start = time.perf_counter()
                try:
                    if any(x is None for x in operands):  # a bookkeeping bug, never a hang
                        raise RuntimeError(f"op {v} started before all its inputs arrived")
                    if fault.get("op") == v:
                        if fault.get("kind") == "exit":
                            os._exit(FAULT_EXIT_CODE)
                        raise RuntimeError(f"injected fault in op {v}")
                    result = k(operands)
                    if cuda:
                        torch.cuda.current_stream(self.ex.device).synchronize()
                except BaseException as exc:  # noqa: BLE001  any failure ends the run with a message
                    del operands
                    exc.__traceback__ = None
                    msg = describe_failure(placed.graph, v, rank, self.ex.device, exc)
                    self.out.start[v] = start
                    self._fail_run(f"rank {rank}: {msg}", classify_error(exc), op=v)
                    return
                end = time.perf_counter()
                del operands
                # post the sends first (non-blocking), then count the op as done: a rank's run
                # ends only when every op is done and every posted send completed
                payload = result.contiguous()
                with self.lock:
                    self.sends_pending += len(placed.remote[v])
                for e in placed.remote[v]:
                    if self.ordered:  # announce, then send, atomically per destination
                        with self.send_locks[e]:
                            i = self.send_count[e]
                            self.send_count[e] += 1
                            self.ex.post(seq_key(self.job.k, self.run_index, rank, e, i), str(v))
                            self.out.sent[(v, e)] = time.perf_counter()
                            work = dist.isend(payload, dst=e, tag=0)
                    else:
                        self.out.sent[(v, e)] = time.perf_counter()
                        work = dist.isend(payload, dst=e, tag=v)
                    self._watch(work, self._sent, v, e, payload)
                with self.lock:
                    self.out.start[v], self.out.end[v] = start, end
                    self.values[v] = result
                    self.finished += 1
                    for w in placed.local[v]:
                        self.waiting[w] -= 1
                        if self.waiting[w] == 0:
                            self._ready(w)
                    if self.finished == len(self.mine):
                        self.cv.notify_all()


# error kinds in the order a run reports them when several ranks fail: a rank's own failure first (an op
# raising, running out of memory, invalid input, its process stopping or freezing: "rank_hung", its
# deadline passing, which a hung peer also causes), then what that causes in the others (a transfer to or
# from the rank that left failing, "rank_failed"; the abort)
CAUSE_ORDER = ("op_failed", "out_of_memory", "invalid", "rank_hung", "timeout", "rank_failed", "aborted")


def root_cause(runs: list[RankRun]) -> RankRun | None:
    """The failed run that explains the others (:data:`CAUSE_ORDER`, then the lowest rank), or ``None``.

    When rank 1's op raises (or its deadline passes), rank 1 reports ``op_failed`` (``timeout``) and
    leaves the run; rank 0, waiting on a transfer from rank 1, may then see its connection reset and
    report ``rank_failed`` first in rank order. The run's error is rank 1's. A rank whose process died
    is ``rank_failed`` too (:class:`~envs_real.distributed.group.RankGroup` sees the exit); one whose
    heartbeat stopped is ``rank_hung``, ahead of the timeouts it causes in its peers.
    """
    failed = [r for r in runs if r.error is not None]
    if not failed:
        return None
    position = {kind: i for i, kind in enumerate(CAUSE_ORDER)}
    return min(failed, key=lambda r: position.get(r.error_kind, len(CAUSE_ORDER)))


def assemble(placed: PlacedGraph, runs: list[RankRun], same_host: bool) -> Any:
    """Merge the ranks' records of one run into a :class:`envs_real.plan.RunResult`.

    Times are seconds from the run's start: on one host (one monotonic clock) from the earliest
    barrier exit, across hosts from each rank's own barrier exit (their skew is the barrier's).
    Edge times of a cross-rank edge: the ``isend`` post on the producer's rank and the ``irecv``
    completion on the consumer's.
    """
    from envs_real.plan import RunResult

    g = placed.graph
    res = RunResult(g.n_ops, g.n_edges)
    base = [min(r.t_barrier for r in runs) if same_host else r.t_barrier for r in runs]
    for rank, r in enumerate(runs):
        for v, t in r.start.items():
            res.start[v] = t - base[rank]
        for v, t in r.end.items():
            res.end[v] = t - base[rank]
        for v, s in r.ready_seq.items():
            res.ready_seq[v] = s
        for v, s in r.pick_seq.items():
            res.pick_seq[v] = s
    for k in range(g.n_edges):
        u, v = int(g.src[k]), int(g.dst[k])
        du, dv = int(placed.device[u]), int(placed.device[v])
        if du == dv:
            res.edge_end[k] = res.end[u]
            continue
        sent = runs[du].sent.get((u, dv))
        arrived = runs[dv].arrival.get(u)
        if sent is not None:
            res.edge_start[k] = sent - base[du]
        if arrived is not None:
            res.edge_end[k] = arrived - base[dv]
    first = root_cause(runs)
    if first is not None:
        res.error, res.error_kind, res.failed_op = first.error, first.error_kind, first.failed_op
    else:
        res.makespan = float(np.nanmax(res.end)) if g.n_ops else 0.0
    return res
