"""``RealBackend``: runs a placed graph for real with PyTorch, the simulator's Backend protocol.

>>> import doppler_gym as dg, envs_real
>>> g = dg.workloads.make("ffnn", batch=64, d_in=64, hidden=64, layers=2, blocks=2)
>>> be = envs_real.RealBackend("cpu:2", repeats=3, warmup=1)
>>> tr = be.execute(g, dg.Topology.uniform(2), assignment, priorities, dg.SimConfig())
>>> tr.makespan, be.last_report.makespans          # median [s], each measured run [s]

Per call of :meth:`RealBackend.execute`:

1. The graph's kernels are materialised (:mod:`envs_real.materialize`; cached per graph): spec'd
   ops run their torch op, cost-only ops run synthetic matmuls sized by their costs.
2. Every op's external operands are put on its device (outside the timed region, like weights
   resident on their GPU).
3. ``warmup`` unmeasured runs, then ``repeats`` measured runs, each a fresh work-conserving
   execution (:mod:`envs_real.executor_cpu` with worker threads, or :mod:`envs_real.executor_cuda`
   with streams and events) in the queue order of the sim config (``"fifo"``: ready order,
   ``"priority"``: the ``priorities`` argument), with ``config.streams`` lanes per device.
4. The trace's makespan is the **median** of the measured runs; its per-op start/end (and edge
   times) are those of the measured run closest to the median. Times are seconds from the run's
   start, divided by ``config.time_divisor`` when ``config.cost_model == "topology"`` (so they are
   in the sim config's ``time_unit``); under ``cost_model="raw"`` they stay in seconds (``"s"``),
   which is not the unit of raw-cost simulations: calibrate (:func:`envs_real.calibrate`) to get
   a graph and topology whose simulations are in seconds.

The returned :class:`RealTrace` is a :class:`~doppler_gym.sim.trace.Trace` with a ``report``
(:class:`RunReport`: per-run makespans, devices, NVML figures, notes) and an ``error``.
``backend.last_report`` holds the same report.

Failures (an op raising, out of memory, a run past ``timeout_s``; on torch.distributed devices also
a rank that died, ``rank_failed``, or stopped answering, ``rank_hung``: its heartbeat stopped, see
:mod:`envs_real.distributed.group`): the run stops, every tensor
of the call is dropped (and the CUDA cache emptied), and either a :class:`RealExecutionError` is
raised (``on_error="raise"``) or a trace with ``makespan = failure_makespan`` (default ``inf``),
NaN times for ops that never ran and ``error`` set is returned (``on_error="info"``, the default).
Nothing large is allocated before the call's estimate passed the limits, ``workload=`` inputs
included.

**CPU timings are not GPU timings**: on the CPU path devices are worker threads that share the
machine's cores; use it for correctness and ordering (see :mod:`envs_real.executor_cpu`).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.assignment import check_assignment
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.trace import Trace
from doppler_gym.topology.types import Topology
from envs_real.devices import DeviceSet, parse_devices
from envs_real.distributed.group import UnguardedMainError
from envs_real.estimate import (
    DEFAULT_MAX_ESTIMATED_SECONDS,
    PROGRESS_AFTER_S,
    RunEstimate,
    check_limits,
    default_memory_limit,
    estimate_run,
)
from envs_real.materialize import Materialized, WorkloadExternals, external_tensors, materialize
from envs_real.monitor import DEFAULT_INTERVAL_S, NvmlMonitor, unavailable
from envs_real.plan import PlacedGraph, RunResult, classify_error

ON_ERROR = ("info", "raise")
CPU_TIMING_NOTE = (
    "CPU path: devices are worker threads sharing this machine's cores; CPU timings are not GPU timings"
)


class RealExecutionError(RuntimeError):
    """A real run failed (``on_error="raise"``); ``report`` says what, where and which kind."""

    def __init__(self, message: str, report: RunReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class RunReport:
    """What one :meth:`RealBackend.execute` call measured.

    Attributes:
        makespan: median of the measured runs [s] (``failure_makespan`` on error).
        makespans: ``(repeats,)`` each measured run's makespan [s].
        warmup_makespans: the warm-up runs' makespans [s].
        median_run: index (into ``makespans``) of the run the trace's times come from.
        device_kind: ``"cpu"`` or ``"cuda"``.
        devices: physical device of each logical device.
        lanes: worker threads / streams per device.
        queue_order: ``"fifo"`` or ``"priority"``.
        timing: ``"host"`` or ``"cuda-events"`` (per-op times).
        error, error_kind, failed_op: the failure, if any (see :mod:`envs_real.plan`).
        ready_seq, pick_seq: ``(n_ops,)`` WC order counters of the median run.
        monitor: the NVML report (``{"available": False, "reason": ...}`` when not sampled).
        estimate: the pre-run estimate (:meth:`envs_real.estimate.RunEstimate.as_dict`).
        synthetic_ops: number of synthetic ops; synthetic_scale: their scale.
        wall_s: wall-clock time of the whole call (materialising, warm-up, runs) [s].
        notes: caveats (CPU timings, synthetic ops, shared GPUs).
    """

    makespan: float
    makespans: list[float] = field(default_factory=list)
    warmup_makespans: list[float] = field(default_factory=list)
    median_run: int = -1
    device_kind: str = "cpu"
    devices: tuple[str, ...] = ()
    lanes: int = 1
    queue_order: str = "fifo"
    timing: str = "host"
    error: str | None = None
    error_kind: str | None = None
    failed_op: int = -1
    ready_seq: np.ndarray | None = None
    pick_seq: np.ndarray | None = None
    monitor: dict[str, Any] = field(default_factory=lambda: unavailable("monitor=False"))
    estimate: dict[str, Any] | None = None
    synthetic_ops: int = 0
    synthetic_scale: float = 1.0
    leaked_threads: int = 0
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def as_info(self) -> dict[str, Any]:
        """A flat, JSON-friendly summary for an env's ``info`` (no per-op arrays, no samples)."""
        mon = dict(self.monitor)
        if mon.get("devices"):
            mon["devices"] = [{k: v for k, v in d.items() if k != "series"} for d in mon["devices"]]
        return {
            "error": self.error,
            "error_kind": self.error_kind,
            "failed_op": self.failed_op,
            "real_makespan_s": self.makespan,
            "real_makespans_s": list(self.makespans),
            "device_kind": self.device_kind,
            "devices": list(self.devices),
            "monitor": mon,
            "estimate": self.estimate,
            "wall_s": self.wall_s,
            "notes": list(self.notes),
        }


@dataclass(frozen=True, eq=False)
class RealTrace(Trace):
    """A measured :class:`~doppler_gym.sim.trace.Trace` plus the :class:`RunReport`.

    Attributes:
        report: what the call measured (per-run makespans, NVML figures, errors).
        error: ``None``, or what failed (the makespan is then ``failure_makespan``).
    """

    report: RunReport | None = None
    error: str | None = None


class RealBackend:
    """Executes placed graphs on real torch devices (CPU worker threads or CUDA GPUs).

    Args:
        devices: a device spec (:func:`envs_real.devices.parse_devices`): ``"auto"``,
            ``"cpu:4"``, ``"cuda"``, ``"cuda:0,1"`` or a list.
        repeats: measured runs per call; the makespan is their median.
        warmup: unmeasured runs first (allocator, cuBLAS and thread warm-up).
        timeout_s: wall-clock limit of each run [s]; ``None`` = none. On spawned torch.distributed
            ranks it also sets their process-group timeout (barriers, transfers):
            :func:`envs_real.distributed.group.pg_timeout_for`.
        on_error: ``"info"`` (return a trace with ``error`` set) or ``"raise"``
            (:class:`RealExecutionError`).
        failure_makespan: makespan of a failed call's trace [s] (``on_error="info"``).
        op_timing: CUDA: per-op times from timing events (else host-observed); CPU: always measured.
        monitor: sample NVML metrics during the measured runs: ``"auto"`` (default) on GPUs, not on
            CPU, where the report says ``available: False`` and why; ``True``/``False`` force it.
        monitor_interval_s: NVML sampling period [s].
        synthetic_scale: ``"auto"`` or a factor on the costs of synthetic ops (see
            :mod:`envs_real.materialize`).
        seed: seed of the external operands.
        workload: optional :class:`~doppler_gym.workloads.Workload`; runs of its graph use its
            input tiles (so assembled outputs equal the untiled computation). The inputs are drawn
            at the first call whose estimate passed ``max_memory_bytes`` and
            ``max_estimated_seconds``, not here (:class:`~envs_real.materialize.WorkloadExternals`).
        queue_depth: CUDA ops a stream may hold in flight (1 = launch on an idle stream only).
        intra_op_threads: CPU: torch threads during a run (process-wide setting, restored after).
        keep_outputs: keep the last measured run's outputs (host tensors) in :attr:`last_outputs`.
        max_estimated_seconds: refuse a call whose estimated time (:mod:`envs_real.estimate`, all
            its runs) is above this [s]; ``None``: no limit.
        max_memory_bytes: refuse a call whose estimated memory is above this [B]; ``"auto"``: half
            the available host memory (CPU) or of the smallest GPU's memory; ``None``: no limit.
        progress: show a progress bar over the runs of a call estimated above
            :data:`~envs_real.estimate.PROGRESS_AFTER_S` (``"auto"``), always (``True``) or never.
        flops_per_s: compute speed of one device for the estimate [FLOP/s]; default: measured on
            CPU, a conservative GPU rate on CUDA.
        inject_fault: torch.distributed devices only, for tests and failure drills:
            ``{"op": V, "kind": "raise"}`` makes op ``V`` raise, ``"exit"`` kills its rank's process.
        p2p: torch.distributed devices only: how transfers are matched, ``"tagged"`` (Gloo: all
            receives posted up front, matched by op id) or ``"ordered"`` (NCCL ignores tags: each
            transfer is announced in the control store and received in the sender's order);
            ``"auto"``: ordered on NCCL, tagged on Gloo.

    Attributes:
        name: ``"real"``.
        last_report: :class:`RunReport` of the last call.
        last_outputs: ``{op: tensor}`` of the last measured run (``keep_outputs=True``).
    """

    name = "real"

    def __init__(
        self,
        devices: object = "auto",
        *,
        repeats: int = 3,
        warmup: int = 1,
        timeout_s: float | None = 60.0,
        on_error: str = "info",
        failure_makespan: float = float("inf"),
        op_timing: bool = False,
        monitor: bool | str = "auto",
        monitor_interval_s: float = DEFAULT_INTERVAL_S,
        synthetic_scale: float | str = "auto",
        seed: int = 0,
        workload: Any = None,
        queue_depth: int = 1,
        intra_op_threads: int | None = 1,
        keep_outputs: bool = False,
        max_estimated_seconds: float | None = DEFAULT_MAX_ESTIMATED_SECONDS,
        max_memory_bytes: float | str | None = "auto",
        progress: bool | str = "auto",
        flops_per_s: float | None = None,
        inject_fault: dict | None = None,
        p2p: str = "auto",
    ) -> None:
        for label, value, lo in (
            ("repeats", repeats, 1),
            ("warmup", warmup, 0),
            ("queue_depth", queue_depth, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
                raise ValueError(f"RealBackend: {label} must be an integer >= {lo}, got {value!r}")
        if timeout_s is not None and not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise ValueError(
                f"RealBackend: timeout_s must be a positive number of seconds or None, got {timeout_s!r}"
            )
        if on_error not in ON_ERROR:
            raise ValueError(f"RealBackend: on_error must be one of {ON_ERROR}, got {on_error!r}")
        self.devices: DeviceSet = parse_devices(devices)
        self.repeats, self.warmup, self.queue_depth = int(repeats), int(warmup), int(queue_depth)
        self.timeout_s = None if timeout_s is None else float(timeout_s)
        self.on_error = on_error
        self.failure_makespan = float(failure_makespan)
        self.op_timing = bool(op_timing)
        if monitor not in ("auto", True, False):
            raise ValueError(f"RealBackend: monitor must be 'auto', True or False, got {monitor!r}")
        self.monitor = self.devices.kind == "cuda" if monitor == "auto" else bool(monitor)
        for label, value in (("max_estimated_seconds", max_estimated_seconds), ("flops_per_s", flops_per_s)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ValueError(f"RealBackend: {label} must be a positive number or None, got {value!r}")
        if max_memory_bytes is not None and max_memory_bytes != "auto" and (
            isinstance(max_memory_bytes, bool)
            or not isinstance(max_memory_bytes, (int, float))
            or max_memory_bytes <= 0
        ):
            raise ValueError(
                f"RealBackend: max_memory_bytes must be a positive number of bytes, 'auto' or None, "
                f"got {max_memory_bytes!r}"
            )
        if progress not in ("auto", True, False):
            raise ValueError(f"RealBackend: progress must be 'auto', True or False, got {progress!r}")
        self.max_estimated_seconds = None if max_estimated_seconds is None else float(max_estimated_seconds)
        self.max_memory_bytes = max_memory_bytes
        self.progress = progress
        self.flops_per_s = flops_per_s
        if inject_fault is not None and (
            self.devices.dist is None
            or not isinstance(inject_fault, dict)
            or inject_fault.get("kind") not in ("raise", "exit")
        ):
            raise ValueError(
                "RealBackend: inject_fault is {'op': V, 'kind': 'raise' | 'exit'} and only applies to "
                f"torch.distributed devices ('gloo:N', 'nccl'); got {inject_fault!r} with devices {self.devices.spec!r}"
            )
        self.inject_fault = inject_fault
        if p2p not in ("auto", "tagged", "ordered"):
            raise ValueError(f"RealBackend: p2p must be 'auto', 'tagged' or 'ordered', got {p2p!r}")
        if p2p == "tagged" and self.devices.dist == "nccl":
            raise ValueError("RealBackend: NCCL ignores message tags; use p2p='ordered' (the 'auto' default)")
        self.p2p = ("ordered" if self.devices.dist == "nccl" else "tagged") if p2p == "auto" else p2p
        self.monitor_interval_s = float(monitor_interval_s)
        self.synthetic_scale = synthetic_scale
        self.seed = int(seed)
        self.intra_op_threads = intra_op_threads
        self.keep_outputs = bool(keep_outputs)
        self.last_report: RunReport | None = None
        self.last_outputs: dict[int, Any] | None = None
        # graph -> (executable graph, externals): calibrated or workload graphs
        self._bound: weakref.WeakKeyDictionary[
            DataflowGraph, tuple[DataflowGraph, Mapping | WorkloadExternals | None]
        ] = (
            weakref.WeakKeyDictionary()
        )
        self._mats: weakref.WeakKeyDictionary[DataflowGraph, tuple[tuple, Materialized]] = (
            weakref.WeakKeyDictionary()
        )
        self._streams: dict[tuple, Any] = {}
        if workload is not None:
            self.bind(workload.graph, externals=WorkloadExternals(workload, self.seed))

    # ------------------------------------------------------------------ public API
    def bind(
        self,
        graph: DataflowGraph,
        *,
        source: DataflowGraph | None = None,
        externals: Mapping | WorkloadExternals | None = None,
    ) -> None:
        """Run ``source``'s kernels (and ``externals``) whenever ``graph`` is executed.

        A calibrated graph (:func:`envs_real.calibrate`) has costs in seconds but must run the
        original ops; ``bind(calibrated, source=original)`` says so. ``source`` must have the
        same ops and edges. ``externals`` (a mapping) is copied; a
        :class:`~envs_real.materialize.WorkloadExternals` is kept, drawn at the first
        materialisation (after a call's estimate passed the limits).
        """
        src = graph if source is None else source
        if src.n_ops != graph.n_ops or not (
            np.array_equal(src.src, graph.src) and np.array_equal(src.dst, graph.dst)
        ):
            raise ValueError(
                f"bind: graph {graph.name!r} and source {src.name!r} differ in ops or edges; a source must "
                f"be "
                f"the same DAG"
            )
        if externals is not None and not isinstance(externals, WorkloadExternals):
            externals = dict(externals)
        self._bound[graph] = (src, externals)
        self._mats.pop(src, None)

    def source(self, graph: DataflowGraph) -> DataflowGraph:
        """The graph whose kernels run when ``graph`` is executed (``graph`` itself unless bound)."""
        return self._bound.get(graph, (graph, None))[0]

    def materialized(self, graph: DataflowGraph) -> Materialized:
        """The kernels this backend runs for ``graph`` (after :meth:`bind` resolution)."""
        src, ext = self._bound.get(graph, (graph, None))
        key = (self.seed, self.synthetic_scale, self.devices.kind, id(ext))
        cached = self._mats.get(src)
        if cached is not None and cached[0] == key:
            return cached[1]
        mat = materialize(
            src,
            seed=self.seed,
            externals=ext,
            synthetic_scale=self.synthetic_scale,
            device_kind=self.devices.kind,
        )
        self._mats[src] = (key, mat)
        return mat

    def estimate(
        self, graph: DataflowGraph, n_devices: int, assignment: np.ndarray | None = None, runs: int | None = None
    ) -> RunEstimate:
        """The estimate (:mod:`envs_real.estimate`) of ``runs`` runs (default: a call's
        ``warmup + repeats``) of ``graph``'s kernels under ``assignment`` (default: all on device 0)."""
        return estimate_run(
            self.source(graph),
            n_devices,
            self.devices.kind,
            assignment=assignment,
            runs=self.warmup + self.repeats if runs is None else runs,
            synthetic_scale=self.synthetic_scale,
            flops_per_s=self.flops_per_s,
            threads=1 if self.intra_op_threads is None else int(self.intra_op_threads),
        )

    def check(self, est: RunEstimate, graph: DataflowGraph, where: str = "RealBackend") -> None:
        """Raise :class:`~envs_real.estimate.WorkloadTooLarge` when ``est`` is above this backend's limits."""
        limit = self.max_memory_bytes
        if limit == "auto":
            limit = default_memory_limit(self.devices.kind, self.devices.physical)
        check_limits(
            est, self.source(graph), max_seconds=self.max_estimated_seconds, max_memory_bytes=limit, where=where
        )

    def execute(
        self,
        graph: DataflowGraph,
        topology: Topology,
        assignment: np.ndarray,
        priorities: np.ndarray | None = None,
        config: SimConfig | None = None,
    ) -> RealTrace:
        """Run ``graph`` under ``assignment`` ``warmup + repeats`` times; returns a :class:`RealTrace`.

        Args:
            graph: the graph (a bound calibrated graph runs its source's kernels).
            topology: only its device count is used (logical devices, mapped onto ``devices``).
            assignment: ``(n_ops,)`` integer device of each op.
            priorities: ``(n_ops,)`` lower first; needed when ``config.queue_order == "priority"``.
            config: queue order, streams (lanes per device) and time divisor; default ``SimConfig()``.

        Raises:
            ValueError: an assignment or priorities of the wrong shape or range, or an invalid op spec
                (found before anything runs; always raised).
            RealExecutionError: a failed run, with ``on_error="raise"``.
            WorkloadTooLarge: the call's estimate is above ``max_estimated_seconds`` or
                ``max_memory_bytes`` (checked before anything is allocated; always raised).
            UnguardedMainError: torch.distributed devices, the main script starts ranks from its top
                level: its code needs an ``if __name__ == "__main__":`` guard (always raised).
        """
        t_call = time.perf_counter()
        config = SimConfig() if config is None else config
        n_dev = topology.n_devices
        assign = check_assignment(graph, assignment, topology, where="RealBackend: assignment").astype(np.int64)
        prio = _check_priorities(graph, priorities, config)
        phys = self.devices.mapping(n_dev)
        report = RunReport(
            makespan=float("nan"),
            device_kind=self.devices.kind,
            devices=phys,
            lanes=config.streams,
            queue_order=config.queue_order,
        )
        est = self.estimate(graph, n_dev, assign)
        self.check(est, graph, where="RealBackend.execute")
        report.estimate = est.as_dict()
        if self.devices.kind == "cpu":
            report.monitor = unavailable("CPU devices: NVML monitors NVIDIA GPUs only")
            report.notes.append(CPU_TIMING_NOTE)
        elif self.devices.shares_devices(n_dev):
            report.notes.append(
                f"{n_dev} logical devices share {len(set(phys))} GPU(s): streams stand in for devices, so "
                f"they share SMs and memory bandwidth"
            )
        mat = self.materialized(graph)
        report.synthetic_ops = int(mat.synthetic.sum())
        report.synthetic_scale = mat.scale
        report.notes.extend(mat.notes)
        if config.cost_model == "raw":
            report.notes.append(
                "config.cost_model='raw': real times are reported in seconds, not raw cost units"
            )
        placed = PlacedGraph.build(mat.graph, assign, n_dev)
        runs: list[RunResult] = []
        failure: RunResult | None = None
        ext = None
        mon = None
        try:
            if self.devices.dist is not None:  # one process per device (envs_real.distributed)
                if self.monitor:
                    mon = self._start_monitor(phys)
                results = self._dist_runs(mat, self._bound.get(graph, (graph, None))[1], assign, prio, config)
                for r, res in enumerate(results):
                    if not res.ok:
                        failure = res
                        break
                    (report.warmup_makespans if r < self.warmup else report.makespans).append(res.makespan)
                    runs.append(res)
            else:
                ext = external_tensors(mat, [phys[d] for d in assign])
                for r in self._run_indices(est, graph):
                    if r == self.warmup and self.monitor:
                        mon = self._start_monitor(phys)
                    res = self._run_once(
                        placed,
                        mat,
                        ext,
                        phys,
                        config,
                        prio,
                        keep=self.keep_outputs and r == self.warmup + self.repeats - 1,
                    )
                    report.leaked_threads += res.leaked_threads
                    if not res.ok:
                        failure = res
                        break
                    (report.warmup_makespans if r < self.warmup else report.makespans).append(res.makespan)
                    runs.append(res)
        except UnguardedMainError:  # the user's script, not the run: always raised
            raise
        except Exception as exc:  # noqa: BLE001  e.g. OOM while placing the externals
            failure = RunResult(graph.n_ops, graph.n_edges)
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            failure.error = f"preparing the run failed: {type(exc).__name__}: {first_line}"
            failure.error_kind = classify_error(exc)
        finally:
            if mon is not None:
                report.monitor = mon.stop()
            elif self.monitor:
                report.monitor = (
                    unavailable("no measured run completed")
                    if self.devices.kind == "cuda"
                    else unavailable("CPU devices: NVML monitors NVIDIA GPUs only")
                )
            ext = None
            if failure is not None:
                self._free_device_memory()
        measured = runs[self.warmup :]
        if failure is not None:
            report.error, report.error_kind, report.failed_op = (
                failure.error,
                failure.error_kind,
                failure.failed_op,
            )
            report.makespan = self.failure_makespan
            report.ready_seq, report.pick_seq = failure.ready_seq, failure.pick_seq
            report.wall_s = time.perf_counter() - t_call
            self.last_report = report
            self.last_outputs = None
            if self.on_error == "raise":
                raise RealExecutionError(report.error, report)
            return self._trace(failure, assign, n_dev, config, self.failure_makespan, report)
        spans = np.array([r.makespan for r in measured])
        median = float(np.median(spans))
        pick = int(np.argmin(np.abs(spans - median)))
        best = measured[pick]
        report.makespan, report.median_run, report.timing = median, pick, best.timing
        report.ready_seq, report.pick_seq = best.ready_seq, best.pick_seq
        report.wall_s = time.perf_counter() - t_call
        self.last_report = report
        self.last_outputs = measured[-1].outputs if self.keep_outputs else None
        return self._trace(best, assign, n_dev, config, median, report)

    def _run_indices(self, est: RunEstimate, graph: DataflowGraph) -> Any:
        """``range(warmup + repeats)``, under a progress bar when the call is long (see ``progress``)."""
        runs = range(self.warmup + self.repeats)
        if self.progress is True or (self.progress == "auto" and est.seconds > PROGRESS_AFTER_S):
            from tqdm.auto import tqdm

            return tqdm(runs, desc=f"real runs of {graph.name} (est. {est.seconds:.3g} s)", unit="run", leave=False)
        return runs

    def close(self) -> None:
        """Drop cached kernels, streams and device memory."""
        self._mats = weakref.WeakKeyDictionary()
        self._streams.clear()
        self.last_outputs = None
        self._free_device_memory()

    def __repr__(self) -> str:
        return f"RealBackend(devices={self.devices.spec!r}, repeats={self.repeats}, warmup={self.warmup})"

    # ------------------------------------------------------------------ internals
    def _run_once(self, placed, mat, ext, phys, config, prio, keep) -> RunResult:
        if self.devices.kind == "cpu":
            from envs_real.executor_cpu import run_cpu

            return run_cpu(
                placed,
                mat,
                ext,
                order=config.queue_order,
                priorities=prio,
                lanes=config.streams,
                timeout_s=self.timeout_s,
                keep_outputs=keep,
                intra_op_threads=self.intra_op_threads,
            )
        from envs_real.executor_cuda import CudaStreams, run_cuda

        key = (phys, config.streams)
        streams = self._streams.get(key)
        if streams is None:
            streams = self._streams[key] = CudaStreams(phys, config.streams)
        return run_cuda(
            placed,
            mat,
            ext,
            streams,
            order=config.queue_order,
            priorities=prio,
            timeout_s=self.timeout_s,
            keep_outputs=keep,
            op_timing=self.op_timing,
            queue_depth=self.queue_depth,
        )

    def _dist_runs(
        self, mat: Materialized, externals: Mapping | WorkloadExternals | None, assign: np.ndarray, prio,
        config: SimConfig,
    ) -> list[RunResult]:
        """All runs of a call on the rank processes; the last one failed if a run failed."""
        from envs_real.distributed.group import get_group, graph_key

        results, outputs = get_group(self.devices).execute(
            mat.graph,
            graph_key(mat.graph),
            assign,
            prio,
            order=config.queue_order,
            lanes=config.streams,
            runs=self.warmup + self.repeats,
            timeout_s=self.timeout_s,
            keep_outputs=self.keep_outputs,
            seed=self.seed,
            synthetic_scale=self.synthetic_scale,
            externals=externals,
            intra_op_threads=self.intra_op_threads,
            fault=self.inject_fault,
            p2p=self.p2p,
        )
        if outputs is not None and results:
            results[-1].outputs = outputs
        return results

    def _start_monitor(self, phys: tuple[str, ...]) -> NvmlMonitor | None:
        if self.devices.kind != "cuda":
            return None
        return NvmlMonitor(sorted(set(phys)), self.monitor_interval_s).start()

    def _free_device_memory(self) -> None:
        if self.devices.kind != "cuda":
            return
        try:
            import torch

            for p in dict.fromkeys(self.devices.physical):
                torch.cuda.synchronize(p)
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001  a sticky CUDA error: nothing more to free
            pass

    @staticmethod
    def _trace(res: RunResult, assign, n_dev, config: SimConfig, makespan, report) -> RealTrace:
        div = config.time_divisor if config.cost_model == "topology" else 1.0
        unit = config.time_unit if config.cost_model == "topology" else "s"
        return RealTrace(
            makespan=float(makespan) / div if np.isfinite(makespan) else float(makespan),
            start=res.start / div,
            end=res.end / div,
            assignment=assign.astype(np.int32),
            edge_start=res.edge_start / div,
            edge_end=res.edge_end / div,
            n_devices=n_dev,
            time_unit=unit,
            report=report,
            error=report.error,
        )


def _check_priorities(graph: DataflowGraph, priorities: object, config: SimConfig) -> np.ndarray | None:
    if priorities is None:
        if config.queue_order == "priority":
            raise ValueError(
                "RealBackend: queue_order='priority' needs priorities of shape (n_ops,), lower first"
            )
        return None
    p = np.asarray(priorities, dtype=np.float64)
    if p.shape != (graph.n_ops,):
        raise ValueError(f"RealBackend: priorities must have shape ({graph.n_ops},), got {p.shape}")
    return p
