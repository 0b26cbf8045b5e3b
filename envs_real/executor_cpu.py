"""CPU executor: every logical device is a set of worker threads with one ready queue.

Same semantics as the CUDA executor and the simulator's WC runtime (:mod:`envs_real.plan`):
``lanes`` compute threads per device pop ready ops by the queue order; one copy thread per
destination device performs that device's incoming transfers (a ``clone``, standing in for a
peer copy) first come first served, starting when the producer ends. torch kernels release the
GIL, so threads overlap as far as the cores allow.

**CPU timings are not GPU timings.** All "devices" share this machine's cores and memory; a
"transfer" is a memory copy plus a thread hand-off; Python overhead per op (~0.1 ms) is far above
a GPU kernel launch. Use the CPU path to test correctness and the WC order, not speed-ups.

Threads: torch's intra-op thread count is process-wide; the run sets it to ``intra_op_threads``
(default 1, so worker threads do not oversubscribe the cores) and restores it afterwards.

Timeouts and failures: a failing op (any exception, e.g. a bad shape or ``MemoryError``) or the
deadline sets an abort flag; no new op starts, and the run returns at once with the error. An op
already inside a torch kernel cannot be interrupted: its thread (a daemon) finishes that op and
exits; ``RunResult.leaked_threads`` counts such threads. Every tensor of the run is dropped when
it returns.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from envs_real.materialize import Materialized
from envs_real.plan import PlacedGraph, ReadyQueue, RunResult, classify_error, describe_failure

JOIN_GRACE_S = 0.5  # [s] how long a returning run waits for its threads


def run_cpu(
    placed: PlacedGraph,
    mat: Materialized,
    ext: Sequence[dict[int, Any]],
    *,
    order: str = "fifo",
    priorities: np.ndarray | None = None,
    lanes: int = 1,
    timeout_s: float | None = None,
    keep_outputs: bool = False,
    intra_op_threads: int | None = 1,
) -> RunResult:
    """Execute the placed graph once with worker threads; returns a :class:`RunResult`.

    Args:
        placed: graph and assignment bookkeeping.
        mat: the kernels.
        ext: per op, its external operands (CPU tensors).
        order: ``"fifo"`` or ``"priority"``.
        priorities: ``(n_ops,)`` lower first (priority order).
        lanes: compute threads per device (the sim config's ``streams``).
        timeout_s: wall-clock limit of the run [s]; ``None`` = none.
        keep_outputs: keep every op's output tensor in ``RunResult.outputs``.
        intra_op_threads: torch threads during the run (``None`` leaves the setting alone).
    """
    import torch

    prev_threads = torch.get_num_threads()
    if intra_op_threads is not None and intra_op_threads != prev_threads:
        torch.set_num_threads(int(intra_op_threads))
    try:
        return _Run(placed, mat, ext, order, priorities, lanes, timeout_s, keep_outputs).run()
    finally:
        if intra_op_threads is not None and torch.get_num_threads() != prev_threads:
            torch.set_num_threads(prev_threads)


class _Run:
    def __init__(self, placed, mat, ext, order, priorities, lanes, timeout_s, keep_outputs) -> None:
        g = placed.graph
        self.placed, self.mat, self.ext = placed, mat, ext
        self.n, self.d = g.n_ops, placed.n_devices
        self.lanes = int(lanes)
        self.timeout_s = timeout_s
        self.keep = keep_outputs
        self.lock = threading.Lock()
        self.dev_cv = [threading.Condition(self.lock) for _ in range(self.d)]
        self.copy_cv = [threading.Condition(self.lock) for _ in range(self.d)]
        self.done_cv = threading.Condition(self.lock)
        self.queues = [ReadyQueue(order, priorities) for _ in range(self.d)]
        self.copies: list[deque] = [deque() for _ in range(self.d)]
        self.waiting = list(placed.need)
        self.values: dict[tuple[int, int], Any] = {}
        self.copy_times: dict[tuple[int, int], tuple[float, float]] = {}
        self.seq = 0
        self.finished = 0
        self.abort = False
        self.t0 = 0.0
        self.res = RunResult(self.n, g.n_edges)

    # ------------------------------------------------------------------ main thread
    def run(self) -> RunResult:
        res = self.res
        if self.n == 0:
            res.makespan = 0.0
            return res
        threads = [
            threading.Thread(target=self._worker, args=(d,), name=f"envs_real-dev{d}-lane{lane}", daemon=True)
            for d in range(self.d)
            for lane in range(self.lanes)
        ]
        threads += [
            threading.Thread(target=self._copier, args=(d,), name=f"envs_real-copy{d}", daemon=True)
            for d in range(self.d)
        ]
        for t in threads:
            t.start()
        with self.lock:
            self.t0 = time.perf_counter()
            for v in range(self.n):
                if self.waiting[v] == 0:
                    self._make_ready(v)
            try:
                finished = self.done_cv.wait_for(
                    lambda: self.finished == self.n or self.abort, self.timeout_s
                )
            except BaseException:  # Ctrl-C: stop the workers before re-raising
                self.abort = True
                for cv in (*self.dev_cv, *self.copy_cv):
                    cv.notify_all()
                raise
            if not finished and res.error is None:
                res.error = (
                    f"timeout: the run passed its {self.timeout_s:g} s limit with {self.finished} of "
                    f"{self.n} "
                    f"ops done; raise timeout_s or check for a stuck op"
                )
                res.error_kind = "timeout"
            self.abort = True
            for cv in (*self.dev_cv, *self.copy_cv):
                cv.notify_all()
        deadline = time.perf_counter() + JOIN_GRACE_S
        for t in threads:
            t.join(max(0.0, deadline - time.perf_counter()))
        res.leaked_threads = sum(t.is_alive() for t in threads)
        with self.lock:
            if res.error is None:
                res.makespan = float(np.nanmax(res.end)) if self.n else 0.0
                if self.keep:
                    res.outputs = {v: self.values[(v, int(self.placed.device[v]))] for v in range(self.n)}
            res.fill_edges(self.placed, self.copy_times)
            self.values.clear()  # free every tensor of the run
            self.ext = ()
        return res

    # ------------------------------------------------------------------ under the lock
    def _make_ready(self, v: int) -> None:
        d = int(self.placed.device[v])
        self.res.ready_seq[v] = self.seq
        self.queues[d].push(v, self.seq)
        self.seq += 1
        self.dev_cv[d].notify()

    def _arrive(self, consumers: list[int]) -> None:
        for v in consumers:
            self.waiting[v] -= 1
            if self.waiting[v] == 0:
                self._make_ready(v)

    def _fail(self, v: int, d: int, exc: BaseException) -> None:
        if self.res.error is None:
            self.res.error = describe_failure(self.placed.graph, v, d, "cpu", exc)
            self.res.error_kind = classify_error(exc)
            self.res.failed_op = v
        self.abort = True
        self.done_cv.notify_all()
        for cv in (*self.dev_cv, *self.copy_cv):
            cv.notify_all()

    # ------------------------------------------------------------------ threads
    def _worker(self, d: int) -> None:
        import torch

        placed, res, kernels = self.placed, self.res, self.mat.kernels
        with torch.no_grad():
            while True:
                with self.lock:
                    while not self.abort and not self.queues[d] and self.finished < self.n:
                        self.dev_cv[d].wait()
                    if self.abort or self.finished >= self.n:
                        return
                    v = self.queues[d].pop()
                    res.pick_seq[v] = self.seq
                    self.seq += 1
                    k = kernels[v]
                    ext = self.ext[v]
                    operands = [self.values[(s, d)] if s != -1 else ext[i] for i, s in enumerate(k.sources)]
                    t0 = self.t0
                start = time.perf_counter()
                try:
                    out = k(operands)
                except BaseException as exc:  # noqa: BLE001  any failure ends the run with a message
                    del operands
                    exc.__traceback__ = None  # its frames would keep the run's tensors alive
                    with self.lock:
                        res.start[v] = start - t0
                        self._fail(v, d, exc)
                    return
                end = time.perf_counter()
                del operands
                with self.lock:
                    res.start[v], res.end[v] = start - t0, end - t0
                    self.values[(v, d)] = out
                    self.finished += 1
                    self._arrive(placed.local[v])
                    for e in placed.remote[v]:
                        self.copies[e].append(v)
                        self.copy_cv[e].notify()
                    if self.finished == self.n:
                        self.done_cv.notify_all()
                        for cv in self.dev_cv:
                            cv.notify_all()
                        for cv in self.copy_cv:
                            cv.notify_all()

    def _copier(self, e: int) -> None:
        placed = self.placed
        while True:
            with self.lock:
                while not self.abort and not self.copies[e] and self.finished < self.n:
                    self.copy_cv[e].wait()
                if self.abort or not self.copies[e]:
                    return
                u = self.copies[e].popleft()
                src = self.values[(u, int(placed.device[u]))]
                t0 = self.t0
            start = time.perf_counter()
            try:
                dst = src.clone()
            except BaseException as exc:  # noqa: BLE001
                with self.lock:
                    self._fail(u, e, RuntimeError(f"copy of its output to device {e} failed: {exc}"))
                return
            end = time.perf_counter()
            with self.lock:
                self.values[(u, e)] = dst
                self.copy_times[(u, e)] = (start - t0, end - t0)
                self._arrive(placed.remote[u][e])
