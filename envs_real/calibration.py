"""Calibrate the simulator on real devices, and measure how well it then predicts them.

:func:`calibrate` profiles, on the real devices:

1. **op times**: every op's kernel alone on the first device (median of ``reps``; CUDA: timing
   events, CPU: ``perf_counter``), with random inputs of the right shapes;
2. **per-op executor overhead**: the whole graph on one device (one lane), where the WC
   makespan is the sum of op times plus one overhead per op (host dispatch, thread hand-off, event
   polling): ``overhead = max(0, (makespan - sum of op times) / n_ops)``, added to every op;
3. **transfers**: a chain of synthetic ops alternating between two devices, with outputs of
   several sizes spanning the graph's output sizes; each edge's delay (consumer start minus
   producer end, as the executor observes it: copy, hand-off and wake-up, less the per-op
   overhead already in the op times) is fitted by ``latency + bytes / bandwidth`` (least
   squares). One fit per kind of device pair: two GPUs (each ordered pair), two logical devices
   on one GPU (a local memcpy), and CPU workers (one fit for all pairs).

It returns a :class:`Calibration`: the same DAG (names, kinds, specs kept) with ``flops`` = the
calibrated op time [s] and ``out_bytes`` = the real output size [B], a topology with ``speed = 1``
(so an op takes ``flops / speed`` = its time; relative speeds when GPUs differ), the fitted
bandwidths and latencies, and ``SimConfig(cost_model="topology")`` with the backend's queue order
and lanes. Simulations of it are in seconds and track the real makespans; :func:`fidelity`
measures how well (Kendall tau of the ranking of placements, mean relative error).

Caveats. The simulator models devices that run in parallel without interference. CPU worker
threads share two or a few cores and the GIL, and logical devices that share one GPU share its
SMs, so concurrent work is slower than calibrated in isolation and the simulator under-estimates
multi-device makespans there; on CPU, timings are also noisy. Fidelity figures from the CPU path
say nothing about GPUs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from doppler_gym.graph.analysis import b_level, topological_order
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.api import simulate
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.placement_state import PlacementState
from doppler_gym.topology.types import Topology
from envs_real.backend import RealBackend
from envs_real.estimate import PROGRESS_AFTER_S
from envs_real.materialize import Materialized, torch_dtype

CPU_TRANSFER_SIZES = (4e3, 64e3, 1e6, 4e6)  # [B] default probe sizes on CPU
CUDA_TRANSFER_SIZES = (64e3, 1e6, 16e6, 128e6)  # [B] default probe sizes on CUDA


@dataclass(frozen=True, eq=False)
class Calibration:
    """A graph and topology whose simulations track real executions.

    Attributes:
        graph: the source DAG with ``flops`` = calibrated op time [s] (at ``speed = 1``) and
            ``out_bytes`` = real output size [B]; ``units="physical"``.
        topology: ``speed`` ``(D,)`` relative speed (1 = the profiled device), fitted ``bandwidth``
            [B/s] and ``latency`` [s] per ordered pair, ``memory`` [B].
        config: ``SimConfig(cost_model="topology")`` with the backend's queue order and lanes.
        source: the executable graph (what the real backend runs for ``graph``).
        op_time: ``(n_ops,) float64`` isolated kernel time of each op [s].
        overhead_s: per-op executor overhead added to every op [s].
        transfer_fits: per pair kind, ``{"latency_s", "bandwidth_Bps", "pairs", "samples"}``.
        devices: physical device of each logical device.
        notes: caveats.
    """

    graph: DataflowGraph
    topology: Topology
    config: SimConfig
    source: DataflowGraph
    op_time: np.ndarray
    overhead_s: float
    transfer_fits: dict[str, dict[str, Any]]
    devices: tuple[str, ...]
    notes: tuple[str, ...] = ()

    def simulate(self, assignment: np.ndarray, priorities: np.ndarray | None = None) -> float:
        """Simulated makespan of ``assignment`` on the calibrated instance [s]."""
        return float(simulate(self.graph, assignment, self.topology, priorities, self.config).makespan)

    def bind(self, backend: RealBackend) -> None:
        """Make ``backend`` run the source's kernels whenever it executes :attr:`graph`."""
        backend.bind(self.graph, source=self.source)


@dataclass
class FidelityReport:
    """Simulated vs measured makespans over placements.

    Attributes:
        names: placement labels.
        simulated: ``(k,)`` simulated makespans [s, or the sim's unit when uncalibrated].
        measured: ``(k,)`` measured (median) makespans [s].
        kendall_tau: rank correlation (``scipy.stats.kendalltau``; NaN when undefined).
        p_value: its p-value.
        mean_relative_error: mean of ``|sim - real| / real`` (NaN when the units differ).
        max_relative_error: max of the same.
        device_kind: ``"cpu"`` or ``"cuda"``.
        caveat: what the figures do not say.
        errors: per placement, the real run's error (``None`` if it ran).
    """

    names: list[str]
    simulated: np.ndarray
    measured: np.ndarray
    kendall_tau: float
    p_value: float
    mean_relative_error: float
    max_relative_error: float
    device_kind: str
    caveat: str = ""
    errors: list[str | None] = field(default_factory=list)

    def summary(self) -> str:
        """A small table plus the headline figures."""
        lines = [f"{'placement':<16} {'simulated':>12} {'measured':>12} {'rel.err':>8}"]
        for name, s, m in zip(self.names, self.simulated, self.measured):
            rel = abs(s - m) / m if m > 0 and np.isfinite(m) else float("nan")
            lines.append(f"{name:<16} {s:>12.6g} {m:>12.6g} {rel:>8.1%}")
        lines.append(
            f"Kendall tau {self.kendall_tau:.3f} (p={self.p_value:.3g}), mean relative error "
            f"{self.mean_relative_error:.1%}, max {self.max_relative_error:.1%} [{self.device_kind}]"
        )
        if self.caveat:
            lines.append(self.caveat)
        return "\n".join(lines)


# ---------------------------------------------------------------------------------- calibrate
def calibrate(
    graph: DataflowGraph,
    devices: object = "auto",
    *,
    n_devices: int | None = None,
    backend: RealBackend | None = None,
    queue_order: str = "fifo",
    lanes: int = 1,
    reps: int = 5,
    transfer_sizes: Sequence[float] | None = None,
) -> Calibration:
    """Profile ``graph``'s ops and the device links; returns a :class:`Calibration`.

    Args:
        graph: the graph to calibrate (spec'd or cost-only; the backend's materialisation is used).
        devices: a device spec, used when ``backend`` is not given.
        n_devices: logical devices of the calibrated topology; default: the device spec's count.
        backend: the :class:`RealBackend` whose kernels and executor are profiled (its
            ``synthetic_scale``, seed, timing mode); the calibrated graph is bound to it. Default:
            ``RealBackend(devices, repeats=reps, warmup=1)``.
        queue_order: ``"fifo"`` or ``"priority"`` for the calibrated config.
        lanes: worker threads / streams per device (the config's ``streams``).
        reps: repetitions per measurement (medians).
        transfer_sizes: probe sizes [B]; default: 4 sizes spanning the graph's output sizes.

    Raises:
        envs_real.estimate.WorkloadTooLarge: the calibration's estimate (:meth:`RealBackend.estimate`)
            is above the backend's limits; checked before anything is allocated.
    """
    be = backend if backend is not None else RealBackend(devices, repeats=reps, warmup=1)
    n_dev = int(n_devices) if n_devices is not None else be.devices.n_default
    phys = be.devices.mapping(n_dev)
    # every op alone (reps + 1 times), then warm-up and measured runs on one device: all serial
    runs = reps + 1 + be.warmup + be.repeats
    est = be.estimate(graph, n_dev, None, runs)
    be.check(est, graph, where="calibrate (profiles every op, then one device)")
    progress = be.progress is True or (be.progress == "auto" and est.seconds > PROGRESS_AFTER_S)
    mat = be.materialized(graph)
    notes = [f"calibrated on {be.devices.describe(n_dev)}"]
    if be.devices.kind == "cpu":
        who = "rank processes share the cores" if be.devices.dist else "worker threads share the cores and the GIL"
        notes.append(
            f"CPU: {who}, so concurrent ops run slower than profiled; CPU timings are not GPU timings"
        )
    op_time = profile_ops(mat, phys[0], reps=reps, intra_op_threads=be.intra_op_threads, progress=progress)
    # per-op executor overhead: everything on device 0, one lane, FIFO
    single = be.execute(
        graph, Topology.uniform(max(1, n_dev)), np.zeros(graph.n_ops, np.int64), None, SimConfig()
    )
    if single.error is not None:
        raise RuntimeError(f"calibrate: the single-device run failed: {single.error}")
    overhead = max(0.0, (float(single.makespan) - float(op_time.sum())) / max(1, graph.n_ops))
    # relative device speeds (only distinct GPUs can differ)
    speed = np.ones(n_dev)
    if be.devices.kind == "cuda" and len(set(phys)) > 1:
        ref = {p: _matmul_time(p, reps) for p in dict.fromkeys(phys)}
        speed = np.array([ref[phys[0]] / ref[p] for p in phys])
    # transfers
    sizes = (
        _probe_sizes(mat, be.devices.kind)
        if transfer_sizes is None
        else tuple(float(s) for s in transfer_sizes)
    )
    latency = np.zeros((n_dev, n_dev))
    bandwidth = np.zeros((n_dev, n_dev))
    fits: dict[str, dict[str, Any]] = {}
    if n_dev > 1:
        for kind, pairs in _pair_kinds(phys, be.devices.kind).items():
            i, j = pairs[0]
            lat, bw, samples = _fit_transfer(be, n_dev, i, j, sizes, reps, overhead)
            fits[kind] = {"latency_s": lat, "bandwidth_Bps": bw, "pairs": pairs, "samples": samples}
            for a, b in pairs:
                latency[a, b], bandwidth[a, b] = lat, bw
    memory = np.array([_memory(p) for p in phys])
    topo = Topology(
        speed=speed,
        memory=memory,
        bandwidth=bandwidth if n_dev > 1 else 0.0,
        latency=latency,
        name=f"calibrated-{be.devices.kind}{n_dev}",
        device_names=tuple(f"{d}:{p}" for d, p in enumerate(phys)),
    )
    cal_graph = DataflowGraph(
        src=graph.src,
        dst=graph.dst,
        flops=op_time + overhead,
        out_bytes=mat.out_nbytes,
        names=graph.names,
        kinds=graph.kinds,
        specs=graph.specs,
        name=f"{graph.name}@calibrated",
        units="physical",
    )
    config = SimConfig(cost_model="topology", link_model="ideal", streams=int(lanes), queue_order=queue_order)
    cal = Calibration(cal_graph, topo, config, be.source(graph), op_time, overhead, fits, phys, tuple(notes))
    cal.bind(be)
    return cal


def profile_ops(
    mat: Materialized, device: str, reps: int = 5, intra_op_threads: int | None = 1, progress: bool = False
) -> np.ndarray:
    """``(n_ops,) float64`` median time of each op's kernel run alone on ``device`` [s] (``progress``:
    a tqdm bar over the ops)."""
    import torch

    g = mat.graph
    out = np.zeros(g.n_ops)
    cuda = device.startswith("cuda")
    prev = torch.get_num_threads()
    if not cuda and intra_op_threads is not None:
        torch.set_num_threads(int(intra_op_threads))
    ctx = torch.cuda.device(device) if cuda else contextlib.nullcontext()
    try:
        with torch.no_grad(), ctx:
            ops = enumerate(mat.kernels)
            if progress:
                from tqdm.auto import tqdm

                ops = tqdm(ops, total=g.n_ops, desc=f"profiling the ops of {g.name}", unit="op", leave=False)
            for v, k in ops:
                gen = torch.Generator().manual_seed(v)
                ext = k.external_operands(device)
                operands = []
                for i, s in enumerate(k.sources):
                    if s == -1:
                        operands.append(ext[i])
                    else:  # an input of the producer's shape (its values do not change the time)
                        pk = mat.kernels[s]
                        t = torch.rand(pk.out_shape, generator=gen) - 0.5
                        operands.append(t.to(device=device, dtype=torch_dtype(pk.dtype)))
                k(operands)  # warm-up
                times = []
                if cuda:
                    stream = torch.cuda.current_stream(device)
                    pairs = []
                    for _ in range(reps):
                        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        a.record(stream)
                        k(operands)
                        b.record(stream)
                        pairs.append((a, b))
                    torch.cuda.synchronize(device)
                    times = [a.elapsed_time(b) / 1e3 for a, b in pairs]
                else:
                    for _ in range(reps):
                        t0 = time.perf_counter()
                        k(operands)
                        times.append(time.perf_counter() - t0)
                out[v] = float(np.median(times))
    finally:
        if torch.get_num_threads() != prev:
            torch.set_num_threads(prev)
    return out


def _matmul_time(device: str, reps: int) -> float:
    """Median time of a 2048^3 fp32 matmul on ``device`` [ms] (relative device speeds)."""
    import torch

    with torch.cuda.device(device):
        a = torch.rand(2048, 2048, device=device)
        a @ a
        torch.cuda.synchronize(device)
        evs = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            a @ a
            e.record()
            evs.append((s, e))
        torch.cuda.synchronize(device)
        return float(np.median([s.elapsed_time(e) for s, e in evs]))


def _probe_sizes(mat: Materialized, kind: str) -> tuple[float, ...]:
    default = CPU_TRANSFER_SIZES if kind == "cpu" else CUDA_TRANSFER_SIZES
    nbytes = mat.out_nbytes
    lo, hi = float(max(4.0, nbytes.min())), float(nbytes.max())
    cap = default[-1]
    hi = min(max(hi, lo * 16), cap)
    lo = min(lo, hi / 16)
    return tuple(float(x) for x in np.geomspace(lo, hi, 4))


def _pair_kinds(phys: tuple[str, ...], kind: str) -> dict[str, list[tuple[int, int]]]:
    n = len(phys)
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    if kind == "cpu":
        return {"cpu": pairs}
    out: dict[str, list[tuple[int, int]]] = {}
    for i, j in pairs:
        key = f"local:{phys[i]}" if phys[i] == phys[j] else f"{phys[i]}->{phys[j]}"
        out.setdefault(key, []).append((i, j))
    return out


def _fit_transfer(
    be: RealBackend, n_dev: int, i: int, j: int, sizes: Sequence[float], reps: int, overhead: float
) -> tuple[float, float, list[tuple[float, float]]]:
    """Latency [s] and bandwidth [B/s] of ``i -> j`` (and back) from a chain that alternates devices."""
    chain = 4 * len(sizes)
    out_bytes = np.array([sizes[k % len(sizes)] for k in range(chain)], dtype=np.float64)
    g = DataflowGraph(
        src=np.arange(chain - 1),
        dst=np.arange(1, chain),
        flops=np.full(chain, 2.0),
        out_bytes=out_bytes,
        name="transfer-probe",
        units="physical",
    )
    probe = RealBackend(
        be.devices,
        repeats=reps,
        warmup=1,
        timeout_s=be.timeout_s,
        synthetic_scale=1.0,
        op_timing=be.op_timing,
        intra_op_threads=be.intra_op_threads,
        queue_depth=be.queue_depth,
    )
    assign = np.array([i if k % 2 == 0 else j for k in range(chain)], dtype=np.int64)
    tr = probe.execute(g, Topology.uniform(n_dev), assign, None, SimConfig())
    probe.close()
    if tr.error is not None:
        raise RuntimeError(f"calibrate: the transfer probe failed: {tr.error}")
    samples = []
    real_bytes = [4.0 * max(1, round(b / 4.0)) for b in out_bytes]
    for k in range(chain - 1):
        # producer end -> consumer start on the other device (copy, hand-off, wake-up), less the
        # gap between two ops of one device, which the calibrated op times already hold
        delay = float(tr.start[k + 1] - tr.end[k]) - overhead
        if np.isfinite(delay):
            samples.append((real_bytes[k], max(0.0, delay)))
    x = np.array([s[0] for s in samples])
    y = np.array([s[1] for s in samples])
    lat, bw = fit_latency_bandwidth(x, y)
    return lat, bw, samples


def fit_latency_bandwidth(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Fit the transfer model ``delay = latency + bytes / bandwidth`` to measured transfers.

    A least-squares line ``y = icpt + slope * x`` gives ``latency = max(0, icpt)`` and
    ``bandwidth = 1 / slope``, capped where the largest transfer's size-dependent part would fall
    below a thousandth of the largest delay: a slope that small (zero, negative, or rounding noise
    of a flat fit) is not resolved by the measurements, and the cap keeps the bandwidth finite and
    the same for all of them.

    Args:
        x: ``(k,) float64`` transfer sizes [B].
        y: ``(k,) float64`` measured delays [s].

    Returns:
        ``(latency [s] >= 0, bandwidth [B/s] > 0 and finite)``.
    """
    if x.size >= 2 and np.ptp(x) > 0:
        slope, icpt = np.polyfit(x, y, 1)
    else:
        slope, icpt = 0.0, float(np.mean(y)) if y.size else 0.0
    lat = max(0.0, float(icpt))
    largest_delay = max(float(np.max(y)) if y.size else 1e-9, 1e-9)  # [s]
    largest_size = max(float(np.max(x)) if x.size else 1.0, 1.0)  # [B]
    min_slope = 1e-3 * largest_delay / largest_size  # [s/B]
    return lat, float(1.0 / max(float(slope), min_slope))


def _memory(device: str) -> float:
    if device.startswith("cuda"):
        import torch

        return float(torch.cuda.get_device_properties(device).total_memory)
    try:
        import os

        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 16e9


# ---------------------------------------------------------------------------------- placements
def sample_placements(
    graph: DataflowGraph,
    topology: Topology,
    n_random: int = 4,
    seed: int = 0,
    config: SimConfig | None = None,
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """A spread of placements ``(name, assignment, priorities)``: all on one device, round-robin
    and contiguous blocks of the topological order, the critical-path list heuristic (highest
    b-level first, device of earliest estimated start; its SEL order as priorities) and
    ``n_random`` uniformly random ones. Priorities are topological positions except for the
    heuristic."""
    n, d = graph.n_ops, topology.n_devices
    topo_order = topological_order(graph)
    pos = np.empty(n, np.float64)
    pos[topo_order] = np.arange(n, dtype=np.float64)
    out = [("single", np.zeros(n, np.int64), pos)]
    if d > 1:
        rr = np.empty(n, np.int64)
        rr[topo_order] = np.arange(n) % d
        blocks = np.empty(n, np.int64)
        blocks[topo_order] = np.minimum(np.arange(n) * d // max(1, n), d - 1)
        out += [("round_robin", rr, pos), ("blocks", blocks, pos)]
    assign, prio = critical_path_placement(graph, topology, config)
    out.append(("critical_path", assign, prio))
    rng = np.random.default_rng(seed)
    for r in range(n_random if d > 1 else 0):
        out.append((f"random{r}", rng.integers(0, d, n).astype(np.int64), pos))
    return out


def critical_path_placement(
    graph: DataflowGraph, topology: Topology, config: SimConfig | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The critical-path list heuristic: ready op of highest b-level (mean compute and transfer
    times), on the device of earliest estimated start. Returns ``(assignment, priorities)``."""
    import heapq

    config = config if config is not None else SimConfig()
    state = PlacementState(graph, topology, config)
    comp = state.schedule.comp_time.mean(axis=1)
    d = topology.n_devices
    if config.cost_model == "raw":
        comm = graph.out_bytes.copy() if d > 1 else np.zeros(graph.n_ops)
    elif d > 1:
        pairs = [(i, j) for i in range(d) for j in range(d) if i != j]
        lat = np.mean([topology.transfer_time(0.0, i, j) for i, j in pairs])
        per_byte = np.mean(
            [topology.transfer_time(1.0, i, j) - topology.transfer_time(0.0, i, j) for i, j in pairs]
        )
        comm = lat + graph.out_bytes * per_byte
    else:
        comm = np.zeros(graph.n_ops)
    bl = b_level(graph, comp, comm).tolist()
    heap = [(-bl[v], v) for v in state.ready]  # highest b-level first, lowest id on ties
    heapq.heapify(heap)
    while heap:
        _, v = heapq.heappop(heap)
        earliest = state.select(v)[:, 4]
        for s in state.place(int(np.argmin(earliest))):  # the ops it made ready
            heapq.heappush(heap, (-bl[s], s))
    prio = np.empty(graph.n_ops)
    prio[state.order] = np.arange(graph.n_ops, dtype=np.float64)
    return state.assignment, prio


# ---------------------------------------------------------------------------------- fidelity
def fidelity(
    target: Calibration | DataflowGraph,
    backend: RealBackend | None = None,
    placements: Sequence[Any] | None = None,
    *,
    topology: Topology | None = None,
    config: SimConfig | None = None,
    devices: object = "auto",
    n_random: int = 4,
    seed: int = 0,
) -> FidelityReport:
    """Simulated vs measured makespans over placements: Kendall tau and mean relative error.

    Args:
        target: a :class:`Calibration` (simulate its graph/topology/config in seconds, run its
            source), or a plain graph (then ``topology`` is required and the simulation is in the
            sim config's own unit: tau is meaningful, the relative error is reported as NaN unless
            the unit is seconds).
        backend: the real backend; default ``RealBackend(devices)``.
        placements: ``(name, assignment[, priorities])`` tuples, objects with ``assignment`` (and
            ``order``), or plain assignments; default :func:`sample_placements`.
        topology: the topology of a plain graph (ignored for a calibration).
        config: the sim config of a plain graph (default ``SimConfig()``; ignored for a calibration).
        devices: device spec when ``backend`` is None.
        n_random, seed: random placements of the default set.
    """
    from scipy.stats import kendalltau

    be = backend if backend is not None else RealBackend(devices)
    if isinstance(target, Calibration):
        sim_graph, topo, cfg = target.graph, target.topology, target.config
        target.bind(be)
        same_unit = True
    else:
        if topology is None:
            raise ValueError(
                "fidelity: a plain graph needs topology=...; or pass a Calibration from calibrate()"
            )
        sim_graph, topo, cfg = target, topology, config if config is not None else SimConfig()
        same_unit = cfg.cost_model == "topology" and cfg.time_divisor == 1.0
    items = _normalise_placements(
        placements if placements is not None else sample_placements(sim_graph, topo, n_random, seed, cfg),
        sim_graph,
    )
    names, sims, reals, errors = [], [], [], []
    for name, assign, prio in items:
        sims.append(float(simulate(sim_graph, assign, topo, prio, cfg).makespan))
        tr = be.execute(sim_graph, topo, assign, prio, cfg)
        reals.append(float(tr.makespan) if tr.error is None else float("nan"))
        errors.append(tr.error)
        names.append(name)
    s, m = np.array(sims), np.array(reals)
    ok = np.isfinite(s) & np.isfinite(m)
    tau, p = (float("nan"), float("nan"))
    if ok.sum() >= 2:
        res = kendalltau(s[ok], m[ok])
        tau, p = float(res.statistic), float(res.pvalue)
    if same_unit and ok.any():
        rel = np.abs(s[ok] - m[ok]) / m[ok]
        mre, mx = float(rel.mean()), float(rel.max())
    else:
        mre = mx = float("nan")
    caveat = ""
    if be.devices.kind == "cpu":
        caveat = (
            "CPU path: devices are threads sharing this machine's cores and GIL; these figures test the "
            "pipeline, not GPU fidelity (CPU timings are not GPU timings)"
        )
    elif be.devices.shares_devices(topo.n_devices):
        caveat = "logical devices share a GPU (streams stand in for devices): concurrency is not modelled"
    return FidelityReport(names, s, m, tau, p, mre, mx, be.devices.kind, caveat, errors)


def _normalise_placements(
    placements: Sequence[Any], graph: DataflowGraph
) -> list[tuple[str, np.ndarray, np.ndarray | None]]:
    out = []
    for k, item in enumerate(placements):
        if isinstance(item, tuple) and item and isinstance(item[0], str):
            name, assign = item[0], np.asarray(item[1], dtype=np.int64)
            prio = None if len(item) < 3 or item[2] is None else np.asarray(item[2], dtype=np.float64)
        elif hasattr(item, "assignment"):
            name, assign = f"placement{k}", np.asarray(item.assignment, dtype=np.int64)
            order = getattr(item, "order", None)
            prio = None
            if order is not None:
                prio = np.empty(graph.n_ops)
                prio[np.asarray(order)] = np.arange(graph.n_ops, dtype=np.float64)
        else:
            name, assign, prio = f"placement{k}", np.asarray(item, dtype=np.int64), None
        if prio is None:
            prio = np.empty(graph.n_ops)
            prio[topological_order(graph)] = np.arange(graph.n_ops, dtype=np.float64)
        out.append((name, assign, prio))
    return out
