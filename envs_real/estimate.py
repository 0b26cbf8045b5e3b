"""How long and how much memory a real run will take, estimated from the simulator before it runs.

A workload at its default (GPU-sized) parameters can take hours and many gigabytes on the CPU
path (``chainmm`` at its defaults: 11 TFLOP and 7.2 GB of operands per run), so
:class:`~envs_real.backend.RealBackend` and ``Doppler-Real-v0`` estimate every call first and
refuse one above their limits (:class:`WorkloadTooLarge`, with the estimate and how to shrink the
workload or raise the limit).

**Time.** The graph is simulated (:func:`doppler_gym.simulate`, work-conserving, FIFO) under the
call's assignment on ``Topology.uniform(D)`` whose speed is the assumed compute speed, with each
op's cost ``FLOPs + (bytes touched / MEMORY_BANDWIDTH + OP_OVERHEAD_S) * speed`` (so elementwise
ops cost their memory traffic and every op its dispatch) and links of ``COPY_BANDWIDTH`` and
``COPY_LATENCY_S``. FLOPs are the executed ones: a spec'd op's graph FLOPs, a synthetic op's
``2 n^3`` at the backend's synthetic scale (:mod:`envs_real.materialize`). The speed is, on CPU,
a measured single-thread fp32 matmul rate (:func:`cpu_flops_per_s`, once per process; under load
it measures lower, so the estimate errs long) shared by the logical devices when they outnumber
the cores; on CUDA the conservative :data:`GPU_FLOPS_PER_S`. A call's time is
``runs x simulated makespan``.

**Memory.** The bytes the run materialises: external operands (weights, inputs; drawn on the
host, and on CUDA also put on the device), every op's output (a run keeps all outputs until it
ends), one copy per cross-device (producer, destination) pair, and a synthetic op's two
``n x n`` matrices. On CPU the limit is on their sum (one host); on CUDA on the busiest device.
"""

from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import dataclass

import numpy as np

from doppler_gym.graph.types import DataflowGraph

DEFAULT_MAX_ESTIMATED_SECONDS = 120.0
"""Default limit of one :meth:`RealBackend.execute` call's estimated time [s]."""
DEFAULT_MEMORY_FRACTION = 0.5
"""Default memory limit: this fraction of the host's available memory (CPU) or of a GPU's memory."""
GPU_FLOPS_PER_S = 5e12  # [FLOP/s] conservative fp32 rate of one GPU
MEMORY_BANDWIDTH = 2e9  # [B/s] conservative bytes touched per second by an elementwise op
COPY_BANDWIDTH = 1e9  # [B/s] conservative cross-device copy rate (CPU clone, Gloo on localhost)
COPY_LATENCY_S = 2e-4  # [s] per copy
OP_OVERHEAD_S = 2e-4  # [s] per op: Python dispatch and thread hand-off
PROGRESS_AFTER_S = 5.0
"""Calls estimated above this many seconds show a progress bar (``progress="auto"``)."""
_ITEMSIZE = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2, "int64": 8, "int32": 4}


class WorkloadTooLarge(ValueError):
    """A run's estimate is above a limit; ``estimate`` holds the :class:`RunEstimate`."""

    def __init__(self, message: str, estimate: RunEstimate) -> None:
        super().__init__(message)
        self.estimate = estimate


@dataclass(frozen=True)
class RunEstimate:
    """The estimate of one call.

    Attributes:
        seconds: the whole call, ``runs * seconds_per_run`` [s].
        seconds_per_run: simulated makespan of one run [s].
        runs: runs in the call (warm-up, measured, calibration).
        flops: executed FLOPs of one run [FLOP].
        memory_bytes: peak bytes held: the host's sum (CPU) or the busiest GPU's (CUDA) [B].
        flops_per_s: compute speed assumed per device [FLOP/s] (before sharing cores).
        speed_source: where the speed comes from (``"measured"``, ``"given"``, ``"default GPU"``).
        device_kind: ``"cpu"`` or ``"cuda"``.
    """

    seconds: float
    seconds_per_run: float
    runs: int
    flops: float
    memory_bytes: float
    flops_per_s: float
    speed_source: str
    device_kind: str

    def describe(self) -> str:
        """One line: time, work, speed and memory."""
        return (
            f"{_fmt_s(self.seconds)} ({self.runs} run(s) of {_fmt_s(self.seconds_per_run)}, "
            f"{self.flops / 1e9:.3g} GFLOP per run at {self.flops_per_s / 1e9:.3g} GFLOP/s "
            f"{self.speed_source}) and {self.memory_bytes / 1e9:.3g} GB of memory"
        )

    def as_dict(self) -> dict[str, float | int | str]:
        return {
            "seconds": self.seconds,
            "seconds_per_run": self.seconds_per_run,
            "runs": self.runs,
            "flops": self.flops,
            "memory_bytes": self.memory_bytes,
            "flops_per_s": self.flops_per_s,
            "speed_source": self.speed_source,
        }


@functools.lru_cache(maxsize=4)
def cpu_flops_per_s(threads: int = 1) -> float:
    """Measured fp32 matmul rate of this CPU with ``threads`` torch threads [FLOP/s]: the best of
    five ``256 x 256`` matmuls (a few milliseconds, once per process and thread count)."""
    import torch

    prev = torch.get_num_threads()
    torch.set_num_threads(max(1, int(threads)))
    try:
        a = torch.rand(256, 256)
        a @ a
        best = math.inf
        for _ in range(5):
            t0 = time.perf_counter()
            a @ a
            best = min(best, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(prev)
    return 2.0 * 256**3 / max(best, 1e-9)


def available_memory() -> float:
    """Host memory available now [B] (``MemAvailable``, else physical memory)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 16e9


def default_memory_limit(device_kind: str, physical: tuple[str, ...] = ()) -> float:
    """:data:`DEFAULT_MEMORY_FRACTION` of the available host memory (CPU) or of the smallest GPU's [B]."""
    if device_kind == "cuda" and physical:
        import torch

        total = min(torch.cuda.get_device_properties(p).total_memory for p in dict.fromkeys(physical))
        return DEFAULT_MEMORY_FRACTION * float(total)
    return DEFAULT_MEMORY_FRACTION * available_memory()


def op_footprint(graph: DataflowGraph, scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Executed work and bytes of each op at synthetic scale ``scale``.

    Returns:
        ``(flops, ext_bytes, out_bytes)``, each ``(n_ops,) float64``: executed FLOPs [FLOP],
        external operand bytes (a synthetic op's two matrices) [B], output bytes [B].
    """
    n = graph.n_ops
    flops, ext, out = np.zeros(n), np.zeros(n), np.zeros(n)
    specs = graph.specs if graph.specs is not None else (None,) * n
    madds = graph.flops if graph.units == "paper" else graph.flops / 2.0
    for v, spec in enumerate(specs):
        if spec is None:
            side = max(1, round(float(madds[v] * scale) ** (1.0 / 3.0)))
            flops[v] = 2.0 * side**3
            ext[v] = 2.0 * 4 * side * side
            m = side * side if graph.units == "paper" else max(1, round(float(graph.out_bytes[v]) * scale / 4.0))
            out[v] = 4.0 * m
            continue
        size = _ITEMSIZE.get(spec.dtype, 4)
        flops[v] = float(graph.flops[v])
        ext[v] = sum(
            float(np.prod(shape)) * size
            for shape, src in zip(spec.operand_shapes, spec.operand_sources)
            if src == -1
        )
        out[v] = float(np.prod(spec.output_shape)) * size
    return flops, ext, out


def estimate_run(
    graph: DataflowGraph,
    n_devices: int,
    device_kind: str = "cpu",
    *,
    assignment: np.ndarray | None = None,
    runs: int = 1,
    synthetic_scale: float | str = "auto",
    flops_per_s: float | None = None,
    threads: int = 1,
) -> RunEstimate:
    """Estimate ``runs`` executions of ``graph`` under ``assignment`` (default: all on device 0).

    Args:
        graph: the executable graph (spec'd or cost-only).
        n_devices: logical devices.
        device_kind: ``"cpu"`` or ``"cuda"``.
        assignment: ``(n_ops,)`` device of each op; ``None``: every op on device 0 (calibration).
        runs: executions in the call.
        synthetic_scale: the backend's synthetic scale (``"auto"`` or a factor).
        flops_per_s: the compute speed of one device [FLOP/s]; default: measured (CPU) or
            :data:`GPU_FLOPS_PER_S` (CUDA).
        threads: torch threads per CPU device (the backend's ``intra_op_threads``).
    """
    from doppler_gym.sim.api import simulate
    from doppler_gym.sim.config import SimConfig
    from doppler_gym.topology.types import Topology
    from envs_real.materialize import resolve_scale

    kind = "cuda" if device_kind == "cuda" else "cpu"
    if flops_per_s is not None:
        speed, source = float(flops_per_s), "given"
    elif kind == "cuda":
        speed, source = GPU_FLOPS_PER_S, "(default GPU rate)"
    else:
        speed, source = cpu_flops_per_s(threads), "measured on this CPU"
    n_dev = max(1, int(n_devices))
    per_device = speed
    if kind == "cpu":  # logical CPU devices share the cores
        per_device = speed * min(1.0, (os.cpu_count() or 1) / (n_dev * max(1, threads)))
    has_synthetic = graph.specs is None or any(s is None for s in graph.specs)
    scale = resolve_scale(graph, synthetic_scale, kind) if has_synthetic else 1.0
    flops, ext, out = op_footprint(graph, scale)
    in_bytes = np.zeros(graph.n_ops)
    np.add.at(in_bytes, graph.dst, out[graph.src])
    touched = ext + out + in_bytes
    cost = flops + (touched / MEMORY_BANDWIDTH + OP_OVERHEAD_S) * per_device
    assign = np.zeros(graph.n_ops, np.int64) if assignment is None else np.asarray(assignment, np.int64)
    sim_graph = DataflowGraph(
        src=graph.src, dst=graph.dst, flops=cost, out_bytes=out, name=f"{graph.name}@estimate", units="physical"
    )
    topo = Topology.uniform(n_dev, speed=per_device, bandwidth=COPY_BANDWIDTH, latency=COPY_LATENCY_S)
    per_run = float(simulate(sim_graph, assign, topo, config=SimConfig(cost_model="topology")).makespan)
    # memory: externals, outputs, one copy per cross-device (producer, destination)
    copies = np.zeros(n_dev)
    pairs = {(int(u), int(assign[v])) for u, v in zip(graph.src, graph.dst) if assign[u] != assign[v]}
    for u, d in pairs:
        copies[d] += out[u]
    per_dev = np.bincount(assign, weights=ext + out, minlength=n_dev) + copies
    memory = float(per_dev.sum()) if kind == "cpu" else float(per_dev.max()) if n_dev else 0.0
    if kind == "cpu" and has_synthetic:
        memory += float(np.max(out, initial=0.0))  # the matmul's temporary
    return RunEstimate(
        seconds=per_run * max(1, int(runs)),
        seconds_per_run=per_run,
        runs=max(1, int(runs)),
        flops=float(flops.sum()),
        memory_bytes=memory,
        flops_per_s=speed,
        speed_source=source,
        device_kind=kind,
    )


def check_limits(
    est: RunEstimate,
    graph: DataflowGraph,
    *,
    max_seconds: float | None,
    max_memory_bytes: float | None,
    where: str,
) -> None:
    """Raise :class:`WorkloadTooLarge` when ``est`` is above a limit (``None``: no limit).

    The message gives the estimate, the limit, how to shrink the workload (its size parameters
    when ``graph`` is a built-in workload) and the argument that raises the limit."""
    over = []
    if max_seconds is not None and est.seconds > max_seconds:
        over.append(f"time limit max_estimated_seconds={max_seconds:g}")
    if max_memory_bytes is not None and est.memory_bytes > max_memory_bytes:
        over.append(f"memory limit max_memory_bytes={max_memory_bytes:.3g} ({max_memory_bytes / 1e9:.3g} GB)")
    if not over:
        return
    raise WorkloadTooLarge(
        f"{where}: running graph {graph.name!r} ({graph.n_ops} ops) on {est.device_kind} is estimated at "
        f"{est.describe()}, above the {' and the '.join(over)}. {shrink_hint(graph)}; or raise the limit "
        f"(max_estimated_seconds=..., max_memory_bytes=...; None disables it)",
        est,
    )


def shrink_hint(graph: DataflowGraph) -> str:
    """How to make ``graph`` smaller: its workload family's size parameters, when it is one."""
    from doppler_gym import workloads

    family = graph.name.split("@")[0]
    if family in workloads.names():
        params = workloads.params(family)
        sizes = {k: v for k, v in params.items() if isinstance(v, int) and not isinstance(v, bool)}
        if sizes:
            key, value = max(sizes.items(), key=lambda kv: kv[1])
            listing = ", ".join(f"{k}={v}" for k, v in sizes.items())
            small = max(1, int(value) // 16)
            return (
                f"Shrink the workload: {family}'s sizes are {listing}; e.g. `--param {key}={small}` on the "
                f"command line, or graph=dg.workloads.make({family!r}, {key}={small})"
            )
    return "Shrink the workload (a smaller graph or workload parameters, or synthetic_scale=... for cost-only graphs)"


def _fmt_s(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"
