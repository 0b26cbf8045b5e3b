"""``doppler cluster --trace NAME|generated[:N]|FILE.trace --cluster SPEC --scheduler NAME``.

Clusters: ``[uniform:]NODESxGPUS[:TYPE]`` (identical nodes) or ``TYPE:GPUS[,TYPE:GPUS...][/PER_NODE]``
(GPUs per type, in servers of ``PER_NODE`` GPUs, default 8; the last server of a type holds the rest),
e.g. ``v100:8,p100:16,k80:24/4``, Gavel's physical cluster. Traces: a shipped name, ``generated:N`` or a
file in Gavel's 10-column trace format (:func:`doppler_gym.cluster.traces.load_gavel_trace`).

Schedulers: the event engine's (:func:`doppler_gym.cluster.schedulers.names`) or one of Gavel's policies
(:data:`doppler_gym.cluster.gavel_policies.POLICIES`, written ``gavel:NAME``, or ``NAME`` alone where no
engine scheduler has it, e.g. ``max_min_fairness_perf``), realised by Gavel's rounds on the event engine
(:func:`doppler_gym.cluster.gavel_engine.run_gavel_policy`: 360 s rounds, allocations recomputed at most every
1,920 s).

Runs the simulation once, prints the metrics table, and writes ``DIR/jobs.csv`` (the
per-job table, :data:`~doppler_gym.cluster.metrics.JOB_COLUMNS`) and ``DIR/utilisation.png`` (busy
GPUs over time). Times are in seconds unless a flag says otherwise. A run that cannot go on
(:class:`doppler_gym.cluster.ClusterRunError`) is reported like a bad flag: one ``doppler: error:`` line.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path

from doppler_gym import cluster as dc
from doppler_gym.cluster.gavel_engine import run_gavel_policy
from doppler_gym.cluster.gavel_policies import POLICIES as GAVEL_POLICIES
from doppler_gym.cluster.metrics import ClusterResult
from doppler_gym.extras import require
from doppler_gym.specs import parse_spec

DEFAULT_GENERATED_JOBS = 200
GPU_TYPES = ("v100", "p100", "k80")  # the types Gavel measured (gavel-msr profiles); generated traces run on any
DEFAULT_GPUS_PER_NODE = 8


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "cluster", help="simulate a job trace on a shared GPU cluster under a scheduler",
        description="Simulate training jobs arriving online on a GPU cluster (doppler_gym.cluster.run): print "
        "the metrics, write the per-job table (jobs.csv) and busy GPUs over time (utilisation.png). "
        "Times are in seconds [s].",
    )
    p.add_argument("--trace", required=True, metavar="NAME[:N]|generated[:N]|FILE.trace",
                   help=f"a shipped trace ({', '.join(dc.traces.names())}; :N keeps its first N jobs), "
                   f"generated:N, N Philly-like jobs (Poisson arrivals every 60 s on average, log-normal "
                   f"durations, median 30 min; default N {DEFAULT_GENERATED_JOBS}), seeded by --seed, or a "
                   "file in Gavel's trace format (a path ending in .trace: 10 tab-separated fields per job, "
                   "timed by Gavel's measured throughputs)")
    p.add_argument("--cluster", required=True, metavar="uniform:NODESxGPUS[:TYPE]|TYPE:GPUS,...[/PER_NODE]",
                   help=f"NODES identical nodes of GPUS GPUs of TYPE ({', '.join(GPU_TYPES)}; default v100), "
                   "e.g. uniform:8x8 = 64 V100 in DGX-1 nodes (Cluster.uniform; the uniform: prefix is optional); "
                   "or GPUs per type, e.g. v100:8,p100:16,k80:24 (a heterogeneous cluster, in nodes of "
                   f"{DEFAULT_GPUS_PER_NODE} GPUs) or v100:8,p100:16,k80:24/4 (nodes of 4 GPUs, as Gavel's "
                   "physical cluster); a type's last node holds the GPUs left over. Each job runs on GPUs of "
                   "one type, the fastest for it with room")
    p.add_argument("--scheduler", required=True, metavar="NAME",
                   help=f"{', '.join(dc.schedulers.names())}; or Gavel's policies (LPs realised in 360 s rounds): "
                        f"{', '.join(gavel_name(n) for n in GAVEL_POLICIES)}")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seeds the generated trace and the failure process (default 0)")
    p.add_argument("--mtbf-hours", type=float, metavar="H",
                   help="mean time between failures of one GPU [h] (Poisson; default: no failures; "
                   f"Llama 3's figure is {dc.LLAMA3_GPU_MTBF / 3600:.3g} h)")
    p.add_argument("--restart-delay", type=float, default=0.0, metavar="SECONDS",
                   help="time from a failure until the job can restart from its last checkpoint [s] (default 0)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--checkpoint-every", type=int, metavar="K",
                       help="every job checkpoints after every K iterations (default: never, as in the shipped "
                       "and Gavel traces, so with --mtbf-hours a failed job restarts from zero; give this or "
                       "--checkpoint young, or a run whose restarts cannot end is refused)")
    group.add_argument("--checkpoint", choices=("young",),
                       help="young: each job checkpoints at Young's interval sqrt(2 C MTBF) for its GPU set "
                       "(needs --mtbf-hours and --checkpoint-cost)")
    p.add_argument("--checkpoint-cost", type=float, default=0.0, metavar="SECONDS",
                   help="time one checkpoint takes [s] (default 0)")
    p.add_argument("--preemption-cost", type=float, default=0.0, metavar="SECONDS",
                   help="checkpoint-restore time a job pays after a preemption, migration or elastic resize [s] "
                   "(default 0)")
    p.add_argument("--node-uplink-gbps", type=float, metavar="G",
                   help="capacity of each node's uplink [GB/s], shared max-min fairly by jobs spanning nodes "
                   "(default: no contention)")
    p.add_argument("--rack-size", type=int, metavar="NODES",
                   help="nodes per rack (default: one rack); with --rack-uplink-gbps, jobs spanning racks share "
                   "each rack's uplink max-min fairly")
    p.add_argument("--rack-uplink-gbps", type=float, metavar="G",
                   help="capacity of each rack's uplink to the core [GB/s] (default: no contention)")
    p.add_argument("--out", default="cluster-out", metavar="DIR",
                   help="where to write jobs.csv and utilisation.png (default cluster-out)")
    p.set_defaults(func=run)


# ---------------------------------------------------------------------- parsing
def parse_trace(spec: str, *, seed: int, checkpoint_every: int | None = None,
                checkpoint_cost: float = 0.0) -> dc.JobTrace:
    """``generated[:N]`` (``traces.generate(N, seed=seed)``), a shipped ``NAME[:N]`` (its first N jobs; the
    grammar of :mod:`doppler_gym.specs`), or a path ending in ``.trace`` (Gavel's format:
    :func:`~doppler_gym.cluster.traces.load_gavel_trace`)."""
    if str(spec).endswith(".trace"):
        try:
            return dc.traces.load_gavel_trace(spec, checkpoint_every=checkpoint_every, checkpoint_cost=checkpoint_cost)
        except ValueError as e:
            raise ValueError(f"--trace {spec}: {e}") from None
    parsed = parse_spec(str(spec), "--trace", max_args=1, params=False,
                        usage="generated[:N] or a shipped NAME[:N], N a positive number of jobs")
    name, count = parsed.name, "".join(parsed.args)
    n: int | None = None
    if count:
        if not re.fullmatch(r"\d+", count) or int(count) < 1:
            raise ValueError(f"--trace {spec!r}: N must be a positive number of jobs")
        n = int(count)
    if name == "generated":
        return dc.traces.generate(n or DEFAULT_GENERATED_JOBS, seed=seed, checkpoint_every=checkpoint_every,
                                  checkpoint_cost=checkpoint_cost)
    if name not in dc.traces.names():
        raise ValueError(f"--trace {spec!r}: unknown trace; use generated[:N] or one of "
                         f"{', '.join(dc.traces.names())} (optionally :N)")
    return dc.traces.load(name, limit=n, checkpoint_every=checkpoint_every, checkpoint_cost=checkpoint_cost)


def parse_cluster(spec: str, **network: object) -> dc.Cluster:
    """``[uniform:]NODESxGPUS[:TYPE]`` (the grammar of :mod:`doppler_gym.specs`, any case) ->
    ``Cluster.uniform(NODES, GPUS, TYPE, **network)`` (8-GPU V100 nodes: DGX-1); or
    ``TYPE:GPUS[,TYPE:GPUS...][/PER_NODE]`` -> :func:`parse_typed_cluster`. ``network``: ``Cluster``
    fields such as ``rack_size`` or ``node_uplink_bandwidth``."""
    text = str(spec).strip().lower()
    if "," in text or "/" in text or re.fullmatch(r"[a-z][\w-]*:\d+", text) and not text.startswith("uniform:"):
        return parse_typed_cluster(text, **network)
    usage = ("uniform:NODESxGPUS[:TYPE], e.g. uniform:8x8 or uniform:4x8:p100, or GPUs per type, "
             "e.g. v100:8,p100:16,k80:24/4")
    parsed = parse_spec(str(spec).lower(), "--cluster", max_args=2, params=False, usage=usage)
    fields = [parsed.name, *parsed.args]
    if fields[0] == "uniform":
        fields = fields[1:]
    shape = re.fullmatch(r"(\d+)x(\d+)", fields[0]) if len(fields) in (1, 2) else None
    if shape is None or (len(fields) == 2 and not re.fullmatch(r"\w+", fields[1])):
        raise ValueError(f"--cluster {spec!r}: use {usage}")
    nodes, gpus, gpu_type = int(shape.group(1)), int(shape.group(2)), fields[1] if len(fields) == 2 else "v100"
    if nodes < 1 or gpus < 1:
        raise ValueError(f"--cluster {spec!r}: NODES and GPUS must be >= 1")
    if gpu_type not in GPU_TYPES:
        raise ValueError(f"--cluster {spec!r}: unknown GPU type {gpu_type!r}; use one of {', '.join(GPU_TYPES)}")
    preset = "v100x8-dgx1" if (gpus, gpu_type) == (8, "v100") else None
    return dc.Cluster.uniform(nodes, gpus, gpu_type, preset=preset, **network)


def parse_typed_cluster(spec: str, **network: object) -> dc.Cluster:
    """``TYPE:GPUS[,TYPE:GPUS...][/PER_NODE]`` -> a :class:`Cluster` of GPUS GPUs of each TYPE in nodes of
    PER_NODE GPUs (default :data:`DEFAULT_GPUS_PER_NODE`; a type's last node holds the rest), nodes in the
    order written (8-GPU V100 nodes: DGX-1). Each part is a spec of :mod:`doppler_gym.specs`."""
    usage = "TYPE:GPUS[,TYPE:GPUS...][/PER_NODE], e.g. v100:8,p100:16,k80:24 or v100:8,p100:16,k80:24/4"
    body, slash, per_text = str(spec).strip().lower().partition("/")
    per = DEFAULT_GPUS_PER_NODE
    if slash:
        if not per_text.isdecimal() or int(per_text) < 1:
            raise ValueError(f"--cluster {spec!r}: GPUs per node after '/' must be an integer >= 1, got "
                             f"{per_text!r}; use {usage}")
        per = int(per_text)
    nodes: list[dc.Node] = []
    seen: set[str] = set()
    for k, part in enumerate(body.split(","), start=1):
        parsed = parse_spec(part, "--cluster", max_args=1, params=False, usage=usage) if part.strip() else None
        count = "".join(parsed.args) if parsed else ""
        if parsed is None or not count.isdecimal() or int(count) < 1:
            raise ValueError(f"--cluster {spec!r}: part {k} {part!r} is not TYPE:GPUS with GPUS an integer >= 1; "
                             f"use {usage}")
        gpu_type, n = parsed.name, int(count)
        if gpu_type not in GPU_TYPES:
            raise ValueError(f"--cluster {spec!r}: part {k}: GPU type {gpu_type!r} has no throughput data (Gavel "
                             f"measured {', '.join(GPU_TYPES)}); use one of those")
        if gpu_type in seen:
            raise ValueError(f"--cluster {spec!r}: part {k}: GPU type {gpu_type!r} is given twice; give each type "
                             "once with its total GPUs")
        seen.add(gpu_type)
        preset = "v100x8-dgx1" if (per, gpu_type) == (8, "v100") else None
        full, rest = divmod(n, per)
        nodes += [dc.Node(per, gpu_type, preset)] * full
        if rest:
            nodes.append(dc.Node(rest, gpu_type, None))
    name = body + (f"/{per}" if slash else "")
    return dc.Cluster(tuple(nodes), name=name, **network)  # type: ignore[arg-type]


def network_from_args(args: argparse.Namespace) -> dict[str, object]:
    """``Cluster`` keyword arguments from --node-uplink-gbps, --rack-size and --rack-uplink-gbps."""
    out: dict[str, object] = {}
    for flag, key in (("node_uplink_gbps", "node_uplink_bandwidth"), ("rack_uplink_gbps", "rack_uplink_bandwidth")):
        value = getattr(args, flag)
        if value is not None:
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"--{flag.replace('_', '-')} {value}: use a positive number of GB/s")
            out[key] = value * 1e9
    if args.rack_size is not None:
        if args.rack_size < 1:
            raise ValueError(f"--rack-size {args.rack_size}: use a number of nodes >= 1")
        out["rack_size"] = args.rack_size
    return out


def failures_from_args(args: argparse.Namespace) -> dc.FailureModel:
    if args.restart_delay < 0 or not math.isfinite(args.restart_delay):
        raise ValueError(f"--restart-delay {args.restart_delay}: use a time >= 0 [s]")
    if args.mtbf_hours is None:
        return dc.FailureModel(restart_delay=args.restart_delay)
    if not args.mtbf_hours > 0:
        raise ValueError(f"--mtbf-hours {args.mtbf_hours}: use a positive number of hours")
    return dc.FailureModel(gpu_mtbf=args.mtbf_hours * 3600.0, restart_delay=args.restart_delay)


# ---------------------------------------------------------------------- running
def run(args: argparse.Namespace) -> int:
    if args.seed < 0:
        raise ValueError(f"--seed {args.seed}: use a seed >= 0")
    if args.checkpoint_every is not None and args.checkpoint_every < 1:
        raise ValueError(f"--checkpoint-every {args.checkpoint_every}: use a number of iterations >= 1")
    if not (args.checkpoint_cost >= 0 and math.isfinite(args.checkpoint_cost)):
        raise ValueError(f"--checkpoint-cost {args.checkpoint_cost}: use a time >= 0 [s]")
    if args.checkpoint == "young" and (args.mtbf_hours is None or not args.checkpoint_cost > 0):
        raise ValueError("--checkpoint young needs --mtbf-hours and a --checkpoint-cost > 0 [s]")
    gavel = gavel_policy(args.scheduler)
    scheduler = None if gavel else dc.schedulers.make(args.scheduler)  # an unknown name fails before the trace
    if not (args.preemption_cost >= 0 and math.isfinite(args.preemption_cost)):
        raise ValueError(f"--preemption-cost {args.preemption_cost}: use a time >= 0 [s]")
    cluster = parse_cluster(args.cluster, **network_from_args(args))
    failures = failures_from_args(args)
    trace = parse_trace(args.trace, seed=args.seed, checkpoint_every=args.checkpoint_every,
                        checkpoint_cost=args.checkpoint_cost)
    options = dict(seed=args.seed, failures=failures, checkpoints=args.checkpoint or "fixed",
                   preemption_cost=args.preemption_cost)
    try:
        if gavel:
            result = run_gavel_policy(trace, cluster, gavel, **options)
        else:
            result = dc.run(trace, cluster, scheduler, **options)
    except dc.ClusterRunError as exc:  # a run that cannot go on: report it as the bad setting it comes from
        raise ValueError(str(exc)) from exc

    print(f"trace         {trace.name}: {len(trace)} jobs")
    types = sorted({nd.gpu_type for nd in cluster.nodes})
    per_type = ", ".join(f"{sum(nd.gpus for nd in cluster.nodes if nd.gpu_type == t)} {t}" for t in types)
    print(f"cluster       {cluster.name}: {cluster.n_gpus} GPUs in {len(cluster.nodes)} nodes ({per_type})")
    print(f"scheduler     {result.scheduler}, seed {args.seed}")
    print(f"failures      {describe_failures(args)}")
    print_metrics(result)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result.to_csv(out / "jobs.csv")
    plot_utilisation(out / "utilisation.png", result, f"{trace.name} on {cluster.name}, {result.scheduler}")
    print(f"per-job table {out / 'jobs.csv'}")
    print(f"utilisation   {out / 'utilisation.png'}")
    return 0


def gavel_name(policy: str) -> str:
    """How ``--scheduler`` names Gavel's ``policy``: bare where no engine scheduler has the name, else ``gavel:``."""
    return f"gavel:{policy}" if policy in dc.schedulers.names() else policy


def gavel_policy(name: str) -> str | None:
    """The Gavel policy ``--scheduler name`` asks for (``gavel:NAME`` or a bare name no engine scheduler has),
    else ``None``. ``gavel:`` with an unknown policy is a ValueError listing them."""
    if name.startswith("gavel:"):
        policy = name.removeprefix("gavel:")
        if policy not in GAVEL_POLICIES:
            raise ValueError(f"--scheduler {name}: Gavel has no policy {policy!r}; use one of "
                             f"{', '.join(GAVEL_POLICIES)}")
        return policy
    return name if name in GAVEL_POLICIES and name not in dc.schedulers.names() else None


def describe_failures(args: argparse.Namespace) -> str:
    if args.mtbf_hours is None:
        text = "none"
    else:
        text = f"per-GPU MTBF {args.mtbf_hours:g} h, restart delay {args.restart_delay:g} s"
    if args.checkpoint == "young":
        return f"{text}; checkpoints at Young's interval, {args.checkpoint_cost:g} s each"
    if args.checkpoint_every:
        return f"{text}; checkpoint every {args.checkpoint_every} iterations, {args.checkpoint_cost:g} s each"
    return f"{text}; no checkpoints"


def print_metrics(r: ClusterResult) -> None:
    """The summary metrics as a rich table (metric, value, unit)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{r.scheduler}: {r.n_jobs} jobs on {r.n_gpus} GPUs")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("unit")
    for label, value, unit in (
        ("average JCT", f"{r.avg_jct:,.1f}", "s"),
        ("p99 JCT", f"{r.p99_jct:,.1f}", "s"),
        ("makespan", f"{r.makespan:,.1f}", "s"),
        ("utilisation", f"{r.utilisation:.3f}", "solo-equivalent work / capacity"),
        ("occupancy", f"{r.occupancy:.3f}", "busy GPU-s / capacity"),
        ("goodput", f"{r.goodput:,.1f}", "iterations / busy GPU-hour"),
        ("effective-time fraction", f"{r.effective_fraction:.3f}", "useful / elapsed, job mean"),
        ("interruptions", f"{r.interruptions}", "failures that stopped a job"),
    ):
        table.add_row(label, value, unit)
    Console(width=max(Console().width, 100), highlight=False).print(table)


def plot_utilisation(path: str | os.PathLike, r: ClusterResult, title: str) -> None:
    """Busy GPUs (a step function) against simulated time, with the cluster's capacity."""
    require("matplotlib", "doppler cluster (its utilisation plot)")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    end = float(max(r.util_t[-1], r.jobs["completion"].max()))
    scale, unit = (60.0, "min") if end < 7_200 else (3_600.0, "h") if end < 3 * 86_400 else (86_400.0, "days")
    t = [float(x) / scale for x in r.util_t] + [end / scale]
    v = [int(x) for x in r.util_v] + [int(r.util_v[-1])]
    fig = Figure(figsize=(8, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.step(t, v, where="post", lw=1.0, label="busy GPUs")
    ax.axhline(r.n_gpus, color="grey", ls="--", lw=1.0, label=f"capacity ({r.n_gpus} GPUs)")
    ax.set_xlim(0, end / scale)
    ax.set_ylim(0, r.n_gpus * 1.25)  # headroom for the legend
    ax.set_xlabel(f"simulated time [{unit}]")
    ax.set_ylabel("busy GPUs [GPUs]")
    ax.set_title(f"{title}\noccupancy {r.occupancy:.3f}, avg JCT {r.avg_jct:,.0f} s", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper center", ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(path)
