"""CUDA executor: a work-conserving event loop over CUDA streams and events (one host thread).

Exercised only on a machine with a GPU (``tests/envs_real`` marks those tests ``gpu``; CI has none).

Design:

- Every logical device ``d`` has ``lanes`` compute streams (the sim config's ``streams``) on its
  physical GPU and a ready queue (:class:`envs_real.plan.ReadyQueue`, FIFO or priority). When a
  lane has fewer than ``queue_depth`` ops in flight (default 1: the lane is idle), the host pops the
  most urgent ready op and launches it there. ``queue_depth > 1`` lets a lane queue ready ops behind
  the running one, hiding launch gaps at the cost of committing the order earlier.
- An op's completion is an event recorded after its kernel on its stream; the host polls
  ``Event.query()`` (non-blocking) and makes consumers ready when their inputs have arrived.
- Cross-device edges: when a producer is launched, its output's copy to every other device that
  consumes it is enqueued at once on that ordered pair's copy streams, which first
  ``wait_event`` on the producer's event, so the copy starts on the GPU the moment the producer
  ends and overlaps compute. The destination buffer is allocated on the destination's copy stream
  and filled with ``dst.copy_(src, non_blocking=True)``. torch runs a device-to-device copy on the
  *source* device's current stream and makes the destination's current stream wait for it, so both
  pair streams (one per device) are made current around the copy. When two logical devices share
  a GPU, the copy is a device-local memcpy on the pair's stream, standing in for a peer copy.
  Copy streams come from the high-priority stream pool, so they never alias compute streams.
- A consumer's stream ``wait_event``-s on every input's arrival event before its kernel, so the
  order is enforced on the GPU even when ``queue_depth > 1``.
- Memory safety: every tensor of a run (outputs and copies) lives until all devices are
  synchronised at the end of the run, so no buffer used on a second stream can be recycled early
  (the event-sync alternative to ``Tensor.record_stream``). Peak memory is therefore the sum of all
  outputs plus copies.

Timing: the makespan is host wall-clock time from the start (after a synchronise of every device)
to the host's observation of the last completion. Per-op start/end are host times (launch,
observed completion) unless ``op_timing=True``, which records a timing event pair per op and
reads ``elapsed_time`` against a base event recorded on each GPU at the start (events of one
device only are compared).

Failures: an exception at launch (``torch.OutOfMemoryError``, a shape error) or at an event query
(an asynchronous CUDA error), or the deadline, stops all launches; the executor then synchronises
every device (kernels already enqueued cannot be cancelled, there are at most ``lanes x
queue_depth`` ops and their copies per device), drops every tensor of the run and calls
``torch.cuda.empty_cache()``. A sticky CUDA error (illegal address) leaves the CUDA context unusable
for the rest of the process; the error message says so.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from envs_real.materialize import Materialized
from envs_real.plan import PlacedGraph, ReadyQueue, RunResult, classify_error, describe_failure


class CudaStreams:
    """Streams of a mapping of logical devices to GPUs, created once and reused across runs.

    Args:
        phys: physical device (``"cuda:i"``) of each logical device.
        lanes: compute streams per logical device.
    """

    def __init__(self, phys: Sequence[str], lanes: int) -> None:
        import torch

        self.phys = tuple(phys)
        self.lanes = int(lanes)
        self.devices = [torch.device(p) for p in self.phys]
        self.compute = [[torch.cuda.Stream(device=dev) for _ in range(self.lanes)] for dev in self.devices]
        self._copy: dict[tuple[int, int], tuple[Any, Any]] = {}

    def copy_pair(self, src: int, dst: int) -> tuple[Any, Any]:
        """``(stream on src's GPU, stream on dst's GPU)`` of the ordered pair (the same stream when
        both logical devices share a GPU)."""
        import torch

        key = (src, dst)
        if key not in self._copy:
            s_src = torch.cuda.Stream(device=self.devices[src], priority=-1)
            if self.devices[src] == self.devices[dst]:
                s_dst = s_src
            else:
                s_dst = torch.cuda.Stream(device=self.devices[dst], priority=-1)
            self._copy[key] = (s_src, s_dst)
        return self._copy[key]

    def synchronize(self) -> None:
        """Wait until every GPU of the mapping has finished its queued work."""
        import torch

        for dev in dict.fromkeys(self.devices):
            torch.cuda.synchronize(dev)


def run_cuda(
    placed: PlacedGraph,
    mat: Materialized,
    ext: Sequence[dict[int, Any]],
    streams: CudaStreams,
    *,
    order: str = "fifo",
    priorities: np.ndarray | None = None,
    timeout_s: float | None = None,
    keep_outputs: bool = False,
    op_timing: bool = False,
    queue_depth: int = 1,
) -> RunResult:
    """Execute the placed graph once on CUDA streams; returns a :class:`RunResult`.

    Args:
        placed: graph and assignment bookkeeping (logical devices index ``streams``).
        mat: the kernels.
        ext: per op, its external operands, already on the op's GPU.
        streams: the streams (:class:`CudaStreams`) of the logical devices.
        order: ``"fifo"`` or ``"priority"``.
        priorities: ``(n_ops,)`` lower first (priority order).
        timeout_s: wall-clock limit of the run [s]; ``None`` = none.
        keep_outputs: copy every op's output to the host into ``RunResult.outputs``.
        op_timing: per-op times from CUDA timing events instead of host observation.
        queue_depth: ops a lane may hold in flight (1 = launch only on an idle lane).
    """
    run = _CudaRun(
        placed,
        mat,
        ext,
        streams,
        order=order,
        priorities=priorities,
        timeout_s=timeout_s,
        keep_outputs=keep_outputs,
        op_timing=op_timing,
        queue_depth=queue_depth,
    )
    return run.run()


class _CudaRun:
    """One execution of :func:`run_cuda`: the run's state is its fields, each step of the loop a method.

    Op ids index ``placed.graph``; ``d`` and ``e`` are logical devices, times are seconds from the
    run's start ``t0``.

    Attributes:
        res: the :class:`RunResult` being filled.
        queues: per device, its ready ops (:class:`ReadyQueue`).
        waiting: ``(n_ops,)`` inputs each op still waits for.
        values: ``{(op, device): tensor}``: an op's output on a device (its own, or a copy).
        arrival: ``{(op, device): event}`` after which that value is there.
        inflight: per device and lane, the ``(op, completion event)`` pairs launched there, oldest first.
        copies: in-flight copies, ``(op, destination device, arrival event)``.
        copy_events: with ``op_timing``, ``{(op, destination): (start event, end event, source GPU)}``.
        copy_times: ``{(op, destination): (start, end)}`` [s].
        op_events: with ``op_timing``, ``{op: (start event, end event)}``.
        base_events: with ``op_timing``, ``{GPU: event recorded on it at the start}``.
        seq: the shared counter of ``RunResult.ready_seq`` and ``pick_seq``.
        finished: ops observed complete.
        last_end: latest observed completion [s].
        t0: the run's start, ``time.perf_counter()`` [s]; deadline: ``t0 + timeout_s`` or ``None``.
    """

    def __init__(
        self,
        placed: PlacedGraph,
        mat: Materialized,
        ext: Sequence[dict[int, Any]],
        streams: CudaStreams,
        *,
        order: str,
        priorities: np.ndarray | None,
        timeout_s: float | None,
        keep_outputs: bool,
        op_timing: bool,
        queue_depth: int,
    ) -> None:
        g = placed.graph
        self.placed, self.mat, self.ext, self.streams = placed, mat, ext, streams
        self.n, self.n_dev, self.lanes = g.n_ops, placed.n_devices, streams.lanes
        self.timeout_s = timeout_s
        self.keep_outputs = keep_outputs
        self.op_timing = op_timing
        self.queue_depth = queue_depth
        self.res = RunResult(self.n, g.n_edges, timing="cuda-events" if op_timing else "host")
        self.queues = [ReadyQueue(order, priorities) for _ in range(self.n_dev)]
        self.waiting = list(placed.need)
        self.values: dict[tuple[int, int], Any] = {}
        self.arrival: dict[tuple[int, int], Any] = {}
        self.inflight: list[list[deque]] = [[deque() for _ in range(self.lanes)] for _ in range(self.n_dev)]
        self.copies: list[tuple[int, int, Any]] = []
        self.copy_events: dict[tuple[int, int], tuple[Any, Any, Any]] = {}
        self.copy_times: dict[tuple[int, int], tuple[float, float]] = {}
        self.op_events: dict[int, tuple[Any, Any]] = {}
        self.base_events: dict[Any, Any] = {}
        self.seq = 0
        self.finished = 0
        self.last_end = 0.0
        self.t0 = 0.0
        self.deadline: float | None = None

    def run(self) -> RunResult:
        """Start, poll until every op is done or the run fails, then finish; returns the result.

        Re-raises a ``KeyboardInterrupt`` (any non-``Exception``) after the cleanup of :meth:`finish`.
        """
        import torch

        res = self.res
        if self.n == 0:
            res.makespan = 0.0
            return res
        self.start()
        interrupted: BaseException | None = None
        try:
            with torch.no_grad():
                while self.finished < self.n and res.error is None:
                    self.launch_ready_ops()
                    if res.error is not None:
                        break
                    self.collect_op_completions()
                    if self.copies:
                        self.collect_copy_arrivals()
                    self.check_deadline()
        except BaseException as exc:  # noqa: BLE001  a bug of the loop, or Ctrl-C: clean up first
            self.fail(-1, -1, exc)
            if not isinstance(exc, Exception):
                interrupted = exc
        self.finish()
        if interrupted is not None:
            raise interrupted
        return self.res

    # ------------------------------------------------------------------ steps of the run
    def start(self) -> None:
        """Synchronise every GPU, record the base timing events (``op_timing``), set ``t0`` and the
        deadline, and make the ops without inputs ready."""
        import torch

        self.streams.synchronize()
        if self.op_timing:
            for p in dict.fromkeys(self.streams.devices):
                ev = torch.cuda.Event(enable_timing=True)
                ev.record(torch.cuda.current_stream(p))
                self.base_events[p] = ev
        self.t0 = time.perf_counter()
        if self.timeout_s is not None:
            self.deadline = self.t0 + self.timeout_s
        for v in range(self.n):
            if self.waiting[v] == 0:
                self.make_ready(v)

    def launch_ready_ops(self) -> None:
        """Launch ready ops on lanes with room, most urgent first: idle lanes first, then (with
        ``queue_depth > 1``) the second slot of each lane, and so on; a launch failure ends the run."""
        res = self.res
        for d in range(self.n_dev):
            q = self.queues[d]
            for level in range(self.queue_depth):
                for lane in range(self.lanes):
                    if not q or res.error is not None:
                        break
                    if len(self.inflight[d][lane]) <= level:
                        v = q.pop()
                        try:
                            self.launch(v, d, lane)
                        except Exception as exc:  # noqa: BLE001  OOM, bad shape, ...
                            self.fail(v, d, exc)
            if res.error is not None:
                return

    def collect_op_completions(self) -> None:
        """Record the end [s] of every op whose completion event has fired and make its same-device
        consumers ready. A stream runs in order, so only the head of each lane can be done."""
        res, local = self.res, self.placed.local
        for d in range(self.n_dev):
            for lane in range(self.lanes):
                fl = self.inflight[d][lane]
                while fl:
                    v, ev = fl[0]
                    try:
                        if not ev.query():
                            break
                    except Exception as exc:  # noqa: BLE001  asynchronous CUDA error
                        self.fail(v, d, exc)
                        break
                    fl.popleft()
                    now = time.perf_counter() - self.t0
                    res.end[v] = now
                    self.last_end = max(self.last_end, now)
                    self.finished += 1
                    self.arrive(local[v])

    def collect_copy_arrivals(self) -> None:
        """Record ``(producer end, arrival)`` [s] of every copy whose arrival event has fired and make
        its consumers on the destination ready. A copy whose producer is not yet seen done waits, so
        the host's bookkeeping stays causal (producer end <= copy end)."""
        res = self.res
        pending = []
        for item in self.copies:
            v, e, ev = item
            if not np.isfinite(res.end[v]):
                pending.append(item)
                continue
            try:
                done = ev.query()
            except Exception as exc:  # noqa: BLE001
                self.fail(v, e, exc)
                break
            if done:
                now = time.perf_counter() - self.t0
                self.copy_times[(v, e)] = (float(res.end[v]), now)
                self.arrive(self.placed.remote[v][e])
            else:
                pending.append(item)
        self.copies = pending

    def check_deadline(self) -> None:
        """Stop the run with a ``"timeout"`` error once the deadline has passed with ops left."""
        if self.deadline is not None and time.perf_counter() > self.deadline and self.finished < self.n:
            self.res.error = (
                f"timeout: the run passed its {self.timeout_s:g} s limit with {self.finished} of {self.n} "
                f"ops done; raise timeout_s or check for a stuck op"
            )
            self.res.error_kind = "timeout"

    def finish(self) -> None:
        """Set the makespan [s] (NaN on error), synchronise every GPU, read the event times
        (``op_timing``) and the outputs (``keep_outputs``), fill the edge times, then drop every
        tensor and event of the run (and empty the CUDA cache after an error)."""
        import torch

        res, dev = self.res, self.placed.device
        res.makespan = float(self.last_end) if res.error is None else float("nan")
        try:
            self.streams.synchronize()
            if res.error is None and self.op_timing:
                self.read_event_times()
            if res.error is None and self.keep_outputs:
                res.outputs = {v: self.values[(v, int(dev[v]))].cpu() for v in range(self.n)}
        except Exception as exc:  # noqa: BLE001
            self.fail(-1, -1, exc)
            res.makespan = float("nan")
        finally:
            res.fill_edges(self.placed, self.copy_times)
            self.values.clear()
            self.arrival.clear()
            self.op_events.clear()
            self.copy_events.clear()
            if res.error is not None:
                with contextlib.suppress(Exception):
                    torch.cuda.empty_cache()

    def read_event_times(self) -> None:
        """Op start/end and copy start/end [s] from the timing events, each against the base event of
        the GPU it ran on (after the final synchronise)."""
        res, dev, bases = self.res, self.placed.device, self.base_events
        for v, (a, b) in self.op_events.items():
            base = bases[self.streams.devices[int(dev[v])]]
            res.start[v] = base.elapsed_time(a) / 1e3
            res.end[v] = base.elapsed_time(b) / 1e3
        for key, (a, b, p) in self.copy_events.items():
            self.copy_times[key] = (bases[p].elapsed_time(a) / 1e3, bases[p].elapsed_time(b) / 1e3)

    # ------------------------------------------------------------------ readiness, launches, copies
    def make_ready(self, v: int) -> None:
        """Push op ``v`` on its device's ready queue, numbering it in ``ready_seq``."""
        self.res.ready_seq[v] = self.seq
        self.queues[int(self.placed.device[v])].push(v, self.seq)
        self.seq += 1

    def arrive(self, consumers: list[int]) -> None:
        """One more input of each consumer has arrived; those with none left become ready."""
        for v in consumers:
            self.waiting[v] -= 1
            if self.waiting[v] == 0:
                self.make_ready(v)

    def launch(self, v: int, d: int, lane: int) -> None:
        """Enqueue op ``v``'s kernel on lane ``lane`` of device ``d`` behind its inputs' arrival events,
        record its completion event, and enqueue the copies of its output to the other devices."""
        import torch

        res = self.res
        res.pick_seq[v] = self.seq
        self.seq += 1
        k = self.mat.kernels[v]
        s = self.streams.compute[d][lane]
        with torch.cuda.device(self.streams.devices[d]), torch.cuda.stream(s):
            operands = []
            for i, src in enumerate(k.sources):
                if src == -1:
                    operands.append(self.ext[v][i])
                else:
                    s.wait_event(self.arrival[(src, d)])
                    operands.append(self.values[(src, d)])
            start_ev = None
            if self.op_timing:
                start_ev = torch.cuda.Event(enable_timing=True)
                start_ev.record(s)
            res.start[v] = time.perf_counter() - self.t0
            out = k(operands)
            done = torch.cuda.Event(enable_timing=self.op_timing)
            done.record(s)
        if self.op_timing:
            self.op_events[v] = (start_ev, done)
        self.values[(v, d)] = out
        self.arrival[(v, d)] = done
        self.inflight[d][lane].append((v, done))
        for e in self.placed.remote[v]:
            self.issue_copy(v, d, e, out, done)

    def issue_copy(self, v: int, d: int, e: int, out: Any, done: Any) -> None:
        """Enqueue the copy of op ``v``'s output ``out`` from device ``d`` to device ``e`` on the pair's
        copy streams, after ``v``'s completion event ``done``; record its arrival event."""
        import torch

        s_src, s_dst = self.streams.copy_pair(d, e)
        # s_dst current on the destination GPU (the buffer is allocated there, on s_dst), then s_src
        # current on the source GPU (torch runs the device-to-device copy on the source's current
        # stream and makes the destination's current stream wait for it)
        with torch.cuda.stream(s_dst), torch.cuda.stream(s_src):
            s_src.wait_event(done)
            if self.op_timing:
                start_ev = torch.cuda.Event(enable_timing=True)
                start_ev.record(s_src)
            dst = torch.empty_like(out, device=self.streams.devices[e])
            dst.copy_(out, non_blocking=True)
            if self.op_timing:
                end_ev = torch.cuda.Event(enable_timing=True)
                end_ev.record(s_src)
                self.copy_events[(v, e)] = (start_ev, end_ev, self.streams.devices[d])
            arrived = torch.cuda.Event()
            arrived.record(s_dst)
        self.values[(v, e)] = dst
        self.arrival[(v, e)] = arrived
        self.copies.append((v, e, arrived))

    def fail(self, v: int, d: int, exc: BaseException) -> None:
        """Record the run's first failure (op ``v`` on device ``d``; -1 when neither is known)."""
        res = self.res
        if res.error is None:
            phys = self.streams.phys[d] if d >= 0 else "cuda"
            g = self.placed.graph
            res.error = describe_failure(g, v, d, phys, exc) if v >= 0 else f"{type(exc).__name__}: {exc}"
            res.error_kind = classify_error(exc)
            res.failed_op = v
            if "illegal" in str(exc).lower() or "device-side assert" in str(exc).lower():
                res.error += " (a sticky CUDA error: restart the process before using this GPU again)"
