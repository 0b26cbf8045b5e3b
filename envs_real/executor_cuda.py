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
    import torch

    g = placed.graph
    n, n_dev, lanes = g.n_ops, placed.n_devices, streams.lanes
    res = RunResult(n, g.n_edges, timing="cuda-events" if op_timing else "host")
    if n == 0:
        res.makespan = 0.0
        return res
    dev = placed.device
    queues = [ReadyQueue(order, priorities) for _ in range(n_dev)]
    waiting = list(placed.need)
    values: dict[tuple[int, int], Any] = {}
    arrival: dict[tuple[int, int], Any] = {}  # (op, device) -> event after which the value is there
    inflight = [[deque() for _ in range(lanes)] for _ in range(n_dev)]
    copies: list[tuple[int, int, Any]] = []  # in-flight copies: (op, destination device, arrival event)
    copy_ev: dict[tuple[int, int], tuple[Any, Any, Any]] = {}  # op_timing: (start, end, source GPU)
    copy_times: dict[tuple[int, int], tuple[float, float]] = {}
    timing_ev: dict[int, tuple[Any, Any]] = {}
    seq = 0
    finished = 0
    last_end = 0.0
    deadline = None

    def make_ready(v: int) -> None:
        nonlocal seq
        res.ready_seq[v] = seq
        queues[int(dev[v])].push(v, seq)
        seq += 1

    def arrive(consumers: list[int]) -> None:
        for v in consumers:
            waiting[v] -= 1
            if waiting[v] == 0:
                make_ready(v)

    def launch(v: int, d: int, lane: int) -> None:
        nonlocal seq
        res.pick_seq[v] = seq
        seq += 1
        k = mat.kernels[v]
        s = streams.compute[d][lane]
        with torch.cuda.device(streams.devices[d]), torch.cuda.stream(s):
            operands = []
            for i, src in enumerate(k.sources):
                if src == -1:
                    operands.append(ext[v][i])
                else:
                    s.wait_event(arrival[(src, d)])
                    operands.append(values[(src, d)])
            start_ev = None
            if op_timing:
                start_ev = torch.cuda.Event(enable_timing=True)
                start_ev.record(s)
            res.start[v] = time.perf_counter() - t0
            out = k(operands)
            done = torch.cuda.Event(enable_timing=op_timing)
            done.record(s)
        if op_timing:
            timing_ev[v] = (start_ev, done)
        values[(v, d)] = out
        arrival[(v, d)] = done
        inflight[d][lane].append((v, done))
        for e in placed.remote[v]:
            issue_copy(v, d, e, out, done)

    def issue_copy(v: int, d: int, e: int, out: Any, done: Any) -> None:
        s_src, s_dst = streams.copy_pair(d, e)
        # s_dst current on the destination GPU (the buffer is allocated there, on s_dst), then s_src
        # current on the source GPU (torch runs the device-to-device copy on the source's current
        # stream and makes the destination's current stream wait for it)
        with torch.cuda.stream(s_dst), torch.cuda.stream(s_src):
            s_src.wait_event(done)
            if op_timing:
                start_ev = torch.cuda.Event(enable_timing=True)
                start_ev.record(s_src)
            dst = torch.empty_like(out, device=streams.devices[e])
            dst.copy_(out, non_blocking=True)
            if op_timing:
                end_ev = torch.cuda.Event(enable_timing=True)
                end_ev.record(s_src)
                copy_ev[(v, e)] = (start_ev, end_ev, streams.devices[d])
            arrived = torch.cuda.Event()
            arrived.record(s_dst)
        values[(v, e)] = dst
        arrival[(v, e)] = arrived
        copies.append((v, e, arrived))

    def fail(v: int, d: int, exc: BaseException) -> None:
        if res.error is None:
            phys = streams.phys[d] if d >= 0 else "cuda"
            res.error = describe_failure(g, v, d, phys, exc) if v >= 0 else f"{type(exc).__name__}: {exc}"
            res.error_kind = classify_error(exc)
            res.failed_op = v
            if "illegal" in str(exc).lower() or "device-side assert" in str(exc).lower():
                res.error += " (a sticky CUDA error: restart the process before using this GPU again)"

    streams.synchronize()
    bases = {}
    if op_timing:
        for p in dict.fromkeys(streams.devices):
            ev = torch.cuda.Event(enable_timing=True)
            ev.record(torch.cuda.current_stream(p))
            bases[p] = ev
    t0 = time.perf_counter()
    if timeout_s is not None:
        deadline = t0 + timeout_s
    for v in range(n):
        if waiting[v] == 0:
            make_ready(v)
    interrupted: BaseException | None = None
    try:
        with torch.no_grad():
            while finished < n and res.error is None:
                # launch on free lanes, most urgent ready op first
                # (idle lanes first, then, with queue_depth > 1, the second slot of each lane, ...)
                for d in range(n_dev):
                    q = queues[d]
                    for level in range(queue_depth):
                        for lane in range(lanes):
                            if not q or res.error is not None:
                                break
                            if len(inflight[d][lane]) <= level:
                                v = q.pop()
                                try:
                                    launch(v, d, lane)
                                except Exception as exc:  # noqa: BLE001  OOM, bad shape, ...
                                    fail(v, d, exc)
                    if res.error is not None:
                        break
                if res.error is not None:
                    break
                # completions (a stream runs in order: only the head of each lane can be done)
                for d in range(n_dev):
                    for lane in range(lanes):
                        fl = inflight[d][lane]
                        while fl:
                            v, ev = fl[0]
                            try:
                                if not ev.query():
                                    break
                            except Exception as exc:  # noqa: BLE001  asynchronous CUDA error
                                fail(v, d, exc)
                                break
                            fl.popleft()
                            now = time.perf_counter() - t0
                            res.end[v] = now
                            last_end = max(last_end, now)
                            finished += 1
                            arrive(placed.local[v])
                if copies:
                    pending = []
                    for item in copies:
                        v, e, ev = item
                        if not np.isfinite(res.end[v]):  # producer not seen done yet: keep the
                            pending.append(item)  # host's bookkeeping causal (end <= copy end)
                            continue
                        try:
                            done = ev.query()
                        except Exception as exc:  # noqa: BLE001
                            fail(v, e, exc)
                            break
                        if done:
                            now = time.perf_counter() - t0
                            copy_times[(v, e)] = (float(res.end[v]), now)
                            arrive(placed.remote[v][e])
                        else:
                            pending.append(item)
                    copies = pending
                if deadline is not None and time.perf_counter() > deadline and finished < n:
                    res.error = (
                        f"timeout: the run passed its {timeout_s:g} s limit with {finished} of {n} ops done; "
                        f"raise timeout_s or check for a stuck op"
                    )
                    res.error_kind = "timeout"
    except BaseException as exc:  # noqa: BLE001  a bug of the loop, or Ctrl-C: clean up first
        fail(-1, -1, exc)
        if not isinstance(exc, Exception):
            interrupted = exc
    res.makespan = float(last_end) if res.error is None else float("nan")
    try:
        streams.synchronize()
        if res.error is None and op_timing:
            for v, (a, b) in timing_ev.items():
                base = bases[streams.devices[int(dev[v])]]
                res.start[v] = base.elapsed_time(a) / 1e3
                res.end[v] = base.elapsed_time(b) / 1e3
            for key, (a, b, p) in copy_ev.items():
                copy_times[key] = (bases[p].elapsed_time(a) / 1e3, bases[p].elapsed_time(b) / 1e3)
        if res.error is None and keep_outputs:
            res.outputs = {v: values[(v, int(dev[v]))].cpu() for v in range(n)}
    except Exception as exc:  # noqa: BLE001
        fail(-1, -1, exc)
        res.makespan = float("nan")
    finally:
        res.fill_edges(placed, copy_times)
        values.clear()
        arrival.clear()
        timing_ev.clear()
        copy_ev.clear()
        if res.error is not None:
            with contextlib.suppress(Exception):
                torch.cuda.empty_cache()
    if interrupted is not None:
        raise interrupted
    return res
