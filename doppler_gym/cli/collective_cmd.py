"""``doppler collective``: schedule a collective on a GPU topology (TE-CCL) and compare with baselines.

Example::

    doppler collective --topology ndv2-2 --collective allgather --buffer 1GB --epoch slow --method milp,ring

prints one row per method (epochs, epoch length, finish time, algorithmic bandwidth, solver time,
whether optimality is proven, the validator's verdict, the analytic lower bound in epochs) and the
NCCL-like ring model. ``--plot PNG`` draws algorithmic bandwidth against the output buffer size
(1 KB to 1 GB by default) for each method, the ring baseline and the ring model.

The solver methods (milp, lp, rounds, auto) call :func:`doppler_gym.comm.solve.solve`; ring and
direct are the baselines of :mod:`doppler_gym.comm.baselines`. Sizes are decimal (1 GB = 1e9 B,
as in the paper); KiB/MiB/GiB are binary. The exit status is 1 when the validator rejects a
schedule (its errors are printed), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from doppler_gym.cli import common
from doppler_gym.comm.baselines import direct_schedule, nccl_time, ring_schedule
from doppler_gym.comm.bounds import lower_bound
from doppler_gym.comm.demand import COLLECTIVES, canonical_kind, composition, is_composite
from doppler_gym.comm.epochs import EPOCH_KINDS
from doppler_gym.comm.schedule import Schedule
from doppler_gym.comm.solve import METHODS as SOLVER_METHODS
from doppler_gym.comm.solve import (
    PhasedSchedule,
    collective_phases,
    phase_demand,
    phase_timing,
    read_size,
    solve,
)
from doppler_gym.comm.topology import CommTopology, comm_topology, names
from doppler_gym.comm.validate import validate
from doppler_gym.extras import require

BASELINES = {"ring": ring_schedule, "direct": direct_schedule}
METHODS = SOLVER_METHODS + tuple(BASELINES)
PLOT_SIZES = (1e3, 4e3, 16e3, 64e3, 256e3, 1e6, 4e6, 16e6, 64e6, 256e6, 1e9)  # [B] the paper's grid


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "collective", help="schedule a GPU collective (TE-CCL) and compare it with ring/direct baselines",
        description="Schedule a collective as a multi-commodity flow over time (TE-CCL) on a GPU topology; "
        "every schedule is replayed by the validator. Sizes are decimal: 1GB = 1e9 B.",
    )
    p.add_argument("--topology", default="dgx1", metavar="NAME",
                   help=f"{', '.join(names())} (K chassis, L x L mesh), or a doppler topology preset (default dgx1)")
    p.add_argument("--collective", default="allgather", metavar="KIND",
                   help=f"{', '.join(COLLECTIVES)} (default allgather)")
    p.add_argument("--buffer", default="1GB", metavar="SIZE",
                   help="output buffer per GPU, e.g. 1GB, 64MB, 1e9 (default 1GB)")
    p.add_argument("--chunks", type=int, default=1, metavar="C", help="chunks per GPU (alltoall: per pair), default 1")
    p.add_argument("--root", metavar="GPU",
                   help="root of broadcast/scatter/gather: node id or name (default the first GPU)")
    p.add_argument("--epoch", default="fast", metavar="fast|slow|SECONDS",
                   help="epoch length: one chunk on the fastest link (fast), on the slowest (slow), or seconds")
    p.add_argument("--method", default="milp", metavar="M[,M...]",
                   help=f"one or more of {', '.join(METHODS)}, comma separated (default milp)")
    p.add_argument("--time-limit", type=float, metavar="S", help="solver time limit per solve [s]")
    p.add_argument("--json", metavar="PATH", help="write the rows and the schedules as JSON")
    p.add_argument("--plot", metavar="PNG",
                   help="plot algorithmic bandwidth against buffer size for each method, the ring baseline and the "
                   "NCCL ring model (solver runs at KB sizes have many epochs: set --time-limit or --plot-sizes)")
    p.add_argument("--plot-sizes", metavar="SIZES",
                   help="comma-separated buffer sizes for --plot (default 1KB, 4KB, ..., 256MB, 1GB)")
    p.set_defaults(func=run)


# ---------------------------------------------------------------------- parsing
def parse_size(text: str, flag: str = "--buffer") -> float:
    """Bytes from ``"1GB"``, ``"64 MB"``, ``"1e9"``, ``"1GiB"`` (KB = 1e3 B, KiB = 1024 B)."""
    value = read_size(str(text))
    if value is None:
        raise ValueError(
            f"{flag} {text!r}: expected a size like 1GB, 64MB, 512KB or 1e9 (decimal units: 1 GB = 1e9 B; "
            f"KiB/MiB/GiB are binary)"
        )
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{flag} {text!r}: the size must be positive")
    return value


def parse_epoch(text: str) -> str | float:
    """``"fast"``, ``"slow"`` or a positive number of seconds."""
    key = str(text).strip().lower()
    if key in EPOCH_KINDS:
        return key
    try:
        value = float(key)
    except ValueError:
        raise ValueError(f"--epoch {text!r}: use fast, slow or an epoch length in seconds (e.g. 1e-6)") from None
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"--epoch {text!r}: an epoch length must be a positive number of seconds")
    return value


def parse_methods(text: str) -> list[str]:
    methods = [m.strip().lower() for m in str(text).split(",") if m.strip()]
    if not methods:
        raise ValueError(f"--method: give one or more of {', '.join(METHODS)}")
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"--method {m!r}: use one or more of {', '.join(METHODS)}, comma separated")
    return list(dict.fromkeys(methods))


def topology_from_spec(spec: str) -> CommTopology:
    try:
        return comm_topology(spec)
    except ValueError as exc:
        from doppler_gym.topology.presets import preset_names
        from doppler_gym.topology.types import Topology

        if spec in preset_names() or re.fullmatch(r"uniform\d+", spec):
            return comm_topology(Topology.preset(spec))
        raise ValueError(f"--topology: {exc}; doppler presets work too: {', '.join(preset_names())}") from None


# ---------------------------------------------------------------------- running
@dataclass
class Row:
    """One method's result. ``schedule`` holds its phases (one, or one/two for REDUCE-SCATTER/ALLREDUCE)
    and their totals (epochs, finish time [s], algorithmic bandwidth [B/s], solver time [s], optimal)."""

    method: str
    schedule: PhasedSchedule
    valid: bool
    errors: list[str]
    bound_epochs: int | None

    @property
    def phases(self) -> tuple[Schedule, ...]:
        return self.schedule.phases


def _baseline(method: str, topo: CommTopology, kind: str, buffer_bytes: float, chunks: int,
              root: str | None, epoch: str | float) -> PhasedSchedule:
    name, parts = collective_phases(kind)
    out = []
    for part, backwards in parts:
        t, demand = phase_demand(topo, part, backwards, chunks=chunks, root=_root(root))
        chunk, tau = phase_timing(t, demand, buffer_bytes, epoch)
        out.append(BASELINES[method](t, demand, chunk, tau))
    return PhasedSchedule(name=name, phases=tuple(out), backwards=tuple(b for _, b in parts), buffer_bytes=buffer_bytes)


def _root(root: str | None) -> int | str | None:
    if root is None:
        return None
    return int(root) if root.isdigit() else root


def _solve(method: str, topo: CommTopology, kind: str, buffer_bytes: float, chunks: int, root: str | None,
           epoch: str | float, time_limit: float | None) -> PhasedSchedule:
    extra = {} if root is None else {"root": _root(root)}
    result = solve(topo, kind, buffer_bytes, chunks=chunks, epoch=epoch, method=method, time_limit=time_limit, **extra)
    if isinstance(result, PhasedSchedule):
        return result
    return PhasedSchedule(name=kind, phases=(result,), backwards=(False,), buffer_bytes=buffer_bytes)


def run_method(method: str, topo: CommTopology, kind: str, buffer_bytes: float, chunks: int = 1,
               root: str | None = None, epoch: str | float = "fast", time_limit: float | None = None) -> Row:
    """Schedule ``kind`` with ``method``, validate every phase, and compute the lower bound."""
    if method in BASELINES:
        schedule = _baseline(method, topo, kind, buffer_bytes, chunks, root, epoch)
    else:
        schedule = _solve(method, topo, kind, buffer_bytes, chunks, root, epoch, time_limit)
    errors: list[str] = []
    bound = 0
    for p in schedule.phases:
        rep = validate(p)
        errors.extend(rep.errors)
        bound += lower_bound(p.topology, p.demand, p.chunk_bytes, p.tau).epochs
    return Row(method=method, schedule=schedule, valid=not errors, errors=errors, bound_epochs=bound)


def run(args: argparse.Namespace) -> int:
    topo = topology_from_spec(args.topology)
    kind = canonical_kind(args.collective)
    buffer_bytes = parse_size(args.buffer)
    epoch = parse_epoch(args.epoch)
    methods = parse_methods(args.method)
    if args.chunks < 1:
        raise ValueError(f"--chunks {args.chunks}: use a positive number of chunks per GPU")
    if args.time_limit is not None and not args.time_limit > 0:
        raise ValueError(f"--time-limit {args.time_limit}: use a positive number of seconds")
    if args.root is not None and kind not in ("broadcast", "scatter", "gather"):
        raise ValueError(f"--root applies to broadcast, scatter and gather, not {kind}")
    sizes = [parse_size(s, "--plot-sizes") for s in args.plot_sizes.split(",")] if args.plot_sizes else list(PLOT_SIZES)
    if args.plot_sizes and not args.plot:
        raise ValueError("--plot-sizes needs --plot PNG")

    n_sw = topo.n_nodes - topo.n_gpus
    print(f"topology     {topo.name}: {topo.n_gpus} GPUs, {n_sw} switches, {topo.n_links} directed links")
    print(f"collective   {kind}{' (composed: ' + _describe(kind) + ')' if is_composite(kind) else ''}, "
          f"buffer {_fmt_bytes(buffer_bytes)}, {args.chunks} chunk(s) per GPU, epoch {args.epoch}")
    rows = [run_method(m, topo, kind, buffer_bytes, args.chunks, args.root, epoch, args.time_limit) for m in methods]
    print_table(rows)
    model = _nccl(topo, kind, buffer_bytes)
    if model is not None:
        print(f"nccl ring model  {common.fmt_time(model, 's')}, {buffer_bytes / model / 1e9:.4g} GB/s")
    for row in rows:
        if not row.valid:
            print(f"validator errors for {row.method}:")
            for e in row.errors[:10]:
                print(f"  {e}")
    if args.json:
        write_json(args.json, topo, kind, buffer_bytes, args.chunks, args.epoch, rows, model)
        print(f"result       {args.json}")
    if args.plot:
        plot_bandwidth(args.plot, topo, kind, sizes, methods, args.chunks, args.root, epoch, args.time_limit)
        print(f"plot         {args.plot}")
    return 0 if all(r.valid for r in rows) else 1


def _describe(kind: str) -> str:
    return " then ".join(f"{p} on the reversed topology, backwards" if r else p for p, r in composition(kind))


def _nccl(topo: CommTopology, kind: str, buffer_bytes: float) -> float | None:
    try:
        return nccl_time(topo, kind, buffer_bytes)
    except ValueError:
        return None


# ---------------------------------------------------------------------- output
def _fmt_bytes(x: float) -> str:
    for scale, suffix in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
        if x >= scale:
            return f"{x / scale:.4g} {suffix}"
    return f"{x:.4g} B"


def print_table(rows: list[Row]) -> None:
    head = (
        f"{'method':<8}{'epochs':>8}{'bound':>7}{'tau':>13}{'finish':>13}"
        f"{'algbw GB/s':>12}{'solver':>11}{'optimal':>9}{'valid':>7}"
    )
    print(head)
    for r in rows:
        s = r.schedule
        taus = sorted({p.tau for p in s.phases})
        tau = common.fmt_time(taus[0], "s") + ("+" if len(taus) > 1 else "")
        print(
            f"{r.method:<8}{s.epochs:>8}{r.bound_epochs if r.bound_epochs is not None else '-':>7}{tau:>13}"
            f"{common.fmt_time(s.finish_time, 's'):>13}{s.algo_bandwidth / 1e9:>12.4g}"
            f"{common.fmt_time(s.solver_seconds, 's'):>11}"
            f"{'yes' if s.optimal else 'no':>9}{'ok' if r.valid else 'NO':>7}"
        )


def write_json(path: str, topo: CommTopology, kind: str, buffer_bytes: float, chunks: int, epoch: str,
               rows: list[Row], model: float | None) -> None:
    def phase(p: Schedule) -> dict:
        t = p.topology
        return {
            "topology": t.name, "demand": p.demand.name, "chunk_bytes": p.chunk_bytes, "tau": p.tau,
            "epochs": p.epochs, "n_sends": p.n_sends,
            "links": [[t.node_names[a], t.node_names[b]] for a, b in zip(t.src.tolist(), t.dst.tolist())],
            "commodities": [
                [t.node_names[s], int(c)] for s, c in zip(p.demand.source.tolist(), p.demand.chunk.tolist())
            ],
            "sends": p.sends.tolist(),
        }

    data = {
        "topology": topo.name, "n_gpus": topo.n_gpus, "collective": kind, "buffer_bytes": buffer_bytes,
        "chunks": chunks, "epoch": epoch, "nccl_ring_model_seconds": model,
        "rows": [
            {
                "method": r.method, "epochs": r.schedule.epochs, "lower_bound_epochs": r.bound_epochs,
                "finish_time": r.schedule.finish_time, "algo_bandwidth": r.schedule.algo_bandwidth,
                "solver_seconds": r.schedule.solver_seconds, "optimal": r.schedule.optimal, "valid": r.valid,
                "errors": r.errors[:20], "phases": [phase(p) for p in r.phases],
            }
            for r in rows
        ],
    }
    target = Path(path)
    if target.parent and not target.parent.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data, indent=1), encoding="utf-8")


def plot_bandwidth(path: str, topo: CommTopology, kind: str, sizes: list[float], methods: list[str], chunks: int,
                   root: str | None, epoch: str | float, time_limit: float | None) -> None:
    """Algorithmic bandwidth [GB/s] against output buffer size (log x) for each method, the ring
    baseline and the NCCL ring model."""
    require("matplotlib", "doppler collective --plot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    curves = list(methods) + ([] if "ring" in methods else ["ring"])
    fig = Figure(figsize=(7, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for m in curves:
        bw = []
        for s in sizes:
            try:
                bw.append(run_method(m, topo, kind, s, chunks, root, epoch, time_limit).schedule.algo_bandwidth / 1e9)
            except (RuntimeError, ValueError) as exc:  # e.g. no schedule within the time limit
                print(f"plot: {m} at {_fmt_bytes(s)} failed ({' '.join(str(exc).split())}); point left out")
                bw.append(math.nan)
        label = f"TE-CCL ({m})" if m in SOLVER_METHODS else f"{m} baseline"
        ax.plot(sizes, bw, marker="o", label=label)
    model = [_nccl(topo, kind, s) for s in sizes]
    if all(t is not None for t in model):
        ax.plot(sizes, [s / t / 1e9 for s, t in zip(sizes, model)], ls="--", color="grey", label="NCCL ring model")
    ax.set_xscale("log")
    ax.set_xlabel("output buffer per GPU [B]")
    ax.set_ylabel("algorithmic bandwidth [GB/s]")
    ax.set_title(f"{kind} on {topo.name}, epoch {epoch}, C = {chunks}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)


