"""``doppler simulate GRAPH --assignment FILE|round-robin|random|single``.

A workload that comes with its own placement and schedule (``pipeline``: its stages' assignment, the
schedule's priorities and ``SimConfig(queue_order="fixed")``, :func:`doppler_gym.instances.workload_of`)
runs as built unless told otherwise: ``--assignment`` replaces its assignment, ``--queue-order`` and the
other simulator flags its config (``--reference`` all of it), and its priorities order the queues
whenever the queue order uses priorities (``fixed`` or ``priority``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from pathlib import Path

import numpy as np

from doppler_gym.cli import common
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.instances import workload_of
from doppler_gym.sim.api import simulate
from doppler_gym.sim.bounds import makespan_lower_bound
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.critical import critical_chain
from doppler_gym.sim.trace import Trace
from doppler_gym.topology.types import Topology

KINDS = ("round-robin", "random", "single")
OWN = "the workload's own (its schedule)"
"""The label of a run with a workload's own assignment."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate", help="simulate one placement of a graph",
        description="Run one placement on the work-conserving simulator and report its makespan, "
        "the lower bound and per-device utilisation.",
    )
    common.add_graph_argument(p)
    common.add_topology_arguments(p)
    p.add_argument(
        "--assignment", default=None, metavar="FILE|round-robin|random|single",
        help="default: the workload's own placement where it has one (a pipeline's stages, run in its schedule's "
        "order), else round-robin; op i on device i %% D (round-robin), uniformly random devices (random, uses "
        "--seed), "
        "every op on device 0 (single), or a FILE: device ids separated by commas or whitespace "
        "(# starts a comment), or JSON: a list, or an object with an \"assignment\" list (as --json writes)",
    )
    p.add_argument("--gantt", metavar="PNG", help="write a Gantt chart of the run (with a memory panel under "
                   "--memory track|enforce)")
    p.add_argument(
        "--memory", choices=("off", "track", "enforce"), default=None,
        help="per-device memory: track prints the peak of each device against its memory; enforce also "
        "reports the placement infeasible when a device runs out (which device, when, by how much)",
    )
    p.add_argument("--json", metavar="OUT", help="write the result (makespan, assignment, start, end, ...) as JSON")
    common.add_sim_arguments(p)
    p.set_defaults(func=run)


def make_assignment(spec: str, graph: DataflowGraph, n_devices: int, seed: int) -> np.ndarray:
    """``(n_ops,) int64`` devices from a kind (:data:`KINDS`) or a file."""
    n = graph.n_ops
    if spec == "round-robin":
        return np.arange(n, dtype=np.int64) % n_devices
    if spec == "random":
        return np.random.default_rng(seed).integers(0, n_devices, size=n)
    if spec == "single":
        return np.zeros(n, dtype=np.int64)
    path = Path(spec)
    if not path.is_file():
        raise ValueError(f"--assignment {spec!r} is neither {', '.join(KINDS)} nor an existing file")
    values = read_assignment(path)
    if values.shape[0] != n:
        raise ValueError(
            f"assignment file {spec}: {values.shape[0]} device ids but graph {graph.name!r} has {n} ops; "
            f"give one device id per op"
        )
    return values


def own_or_made_assignment(spec: str | None, graph: DataflowGraph, n_devices: int, seed: int
                           ) -> tuple[np.ndarray, str]:
    """``(assignment, label)``: ``spec`` (:func:`make_assignment`), or with ``spec=None`` the workload's own
    assignment where ``graph`` was built with one (:func:`~doppler_gym.instances.workload_of`), else
    round-robin."""
    if spec is None:
        workload = workload_of(graph)
        if workload is not None and workload.assignment is not None:
            own = np.asarray(workload.assignment, dtype=np.int64)
            if own.size and int(own.max()) >= n_devices:
                raise ValueError(f"graph {graph.name!r} places its ops on {int(own.max()) + 1} devices but the "
                                 f"topology has {n_devices}; give --devices {int(own.max()) + 1} (or a topology "
                                 f"that large), or another --assignment")
            return own, OWN
        spec = "round-robin"
    return make_assignment(spec, graph, n_devices, seed), spec


def run_priorities(graph: DataflowGraph, topology: Topology, config: SimConfig) -> np.ndarray | None:
    """The queue priorities of a run: the workload's own (a pipeline schedule's) where ``graph`` has them
    and ``config`` orders its queues by priority (``queue_order`` ``"fixed"`` or ``"priority"``), else
    :func:`doppler_gym.cli.common.priorities_for` (the b-level under ``"priority"``)."""
    workload = workload_of(graph)
    if config.queue_order != "fifo" and workload is not None and workload.priorities is not None:
        return workload.priorities
    return common.priorities_for(graph, topology, config)


def read_assignment(path: Path) -> np.ndarray:
    """Device ids from a text file (comma/whitespace separated, ``#`` comments) or JSON."""
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json" or text.lstrip()[:1] in ("[", "{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"assignment file {path}: invalid JSON ({exc})") from None
        if isinstance(data, dict):
            if "assignment" not in data:
                raise ValueError(f"assignment file {path}: a JSON object needs an \"assignment\" list")
            data = data["assignment"]
        if not isinstance(data, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in data):
            raise ValueError(f"assignment file {path}: expected a JSON list of integer device ids")
        return np.array(data, dtype=np.int64)
    tokens = [t for t in re.split(r"[,\s]+", re.sub(r"#[^\n]*", "", text)) if t]
    out = []
    for i, tok in enumerate(tokens):
        try:
            out.append(int(tok))
        except ValueError:
            raise ValueError(
                f"assignment file {path}: entry {i} is {tok!r}, not an integer device id"
            ) from None
    return np.array(out, dtype=np.int64)


def run(args: argparse.Namespace) -> int:
    g = common.graph_from_args(args)
    topo = common.topology_from_args(args)
    config = common.config_from_args(args, g, topo)
    if getattr(args, "memory", None) is not None:
        config = dataclasses.replace(config, memory=args.memory)
    assignment, label = own_or_made_assignment(args.assignment, g, topo.n_devices, args.seed)
    trace = simulate(g, assignment, topology=topo, priorities=run_priorities(g, topo, config), config=config)
    bound = makespan_lower_bound(g, topo, config)
    chain = critical_chain(g, trace)
    report(g, topo, config, trace, bound, label=label, chain=chain)
    if args.gantt:
        from doppler_gym.sim.gantt import plot_gantt

        plot_gantt(trace, g, args.gantt, title=f"{g.name} on {topo.name}: {label}", lower_bound=bound,
                   memory=trace.memory is not None)
        print(f"gantt chart   {args.gantt}")
    if args.json:
        write_json(args.json, g, topo, config, trace, bound, chain)
        print(f"result        {args.json}")
    return 0


def report(g: DataflowGraph, topo: Topology, config: SimConfig, trace: Trace, bound: float, label: str,
           chain: np.ndarray) -> None:
    """Print the run; ``chain``: its :func:`~doppler_gym.sim.critical.critical_chain`."""
    unit = trace.time_unit
    n_x = int(trace.transfers.size)
    print(f"graph         {g.name}: {g.n_ops} ops, {g.n_edges} edges")
    print(f"topology      {topo.name}: {topo.n_devices} devices")
    print(f"simulator     {common.describe_config(config)}")
    print(f"assignment    {label}")
    print(f"makespan      {common.fmt_time(trace.makespan, unit)}")
    ratio = trace.makespan / bound if bound > 0 else float("nan")
    print(f"lower bound   {common.fmt_time(bound, unit)}  (makespan / bound = {ratio:.3f})")
    print(f"transfers     {n_x} of {g.n_edges} edges cross devices")
    computing = float(np.sum(trace.end[chain] - trace.start[chain]))
    share = computing / trace.makespan if trace.makespan > 0 else float("nan")
    print(f"critical chain {chain.size} ops computing {common.fmt_time(computing, unit)} ({share:.1%} of the "
          f"makespan; the rest is transfers and queueing)")
    counts = np.bincount(trace.assignment, minlength=trace.n_devices)
    busy, util = trace.device_busy, trace.utilisation
    print(f"{'device':<14}{'ops':>5}  {'busy':>20}  {'utilisation':>11}")
    for d in range(trace.n_devices):
        print(
            f"{topo.device_label(d):<14}{counts[d]:>5}  {common.fmt_time(float(busy[d]), unit):>20}  {util[d]:>10.1%}"
        )
    if trace.memory is not None:
        report_memory(topo, trace)


def report_memory(topo: Topology, trace: Trace) -> None:
    """Peak memory of each device against its capacity, and the first violation (if any)."""
    mem = trace.memory
    print(f"{'device':<14}{'peak memory':>14}  {'persistent':>12}  {'capacity':>12}  {'use':>7}")
    for d in range(mem.n_devices):
        use = mem.peak[d] / mem.capacity[d] if mem.capacity[d] > 0 else float("inf")
        flag = "  OVER" if mem.peak[d] > mem.capacity[d] else ""
        print(f"{topo.device_label(d):<14}{_bytes(mem.peak[d]):>14}  {_bytes(mem.persistent[d]):>12}  "
              f"{_bytes(mem.capacity[d]):>12}  {use:>7.1%}{flag}")
    v = mem.violation
    if v is None:
        print("memory        fits on every device")
    else:
        verdict = "INFEASIBLE (memory=enforce)" if mem.enforced else "over capacity (memory=track: reported only)"
        print(f"memory        {verdict}: device {topo.device_label(v.device)} runs out at "
              f"{common.fmt_time(v.time, trace.time_unit)}, peak {_bytes(v.peak)} over {_bytes(v.capacity)} "
              f"by {_bytes(v.excess)}")


def _bytes(n: float) -> str:
    """A byte count in decimal units (B, kB, MB, GB, TB)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.4g} B"


def write_json(path: str, g: DataflowGraph, topo: Topology, config: SimConfig, trace: Trace, bound: float,
               chain: np.ndarray) -> None:
    data = {
        "graph": g.name,
        "n_ops": g.n_ops,
        "n_edges": g.n_edges,
        "topology": topo.name,
        "n_devices": topo.n_devices,
        "config": {k: getattr(config, k) for k in config.__dataclass_fields__},
        "time_unit": trace.time_unit,
        "makespan": trace.makespan,
        "lower_bound": bound,
        "assignment": trace.assignment.tolist(),
        "start": trace.start.tolist(),
        "end": trace.end.tolist(),
        "device_busy": trace.device_busy.tolist(),
        "critical_chain": chain.tolist(),
    }
    if trace.memory is not None:
        mem = trace.memory
        data["memory"] = {
            "peak_bytes": mem.peak.tolist(), "peak_time": mem.peak_time.tolist(),
            "persistent_bytes": mem.persistent.tolist(), "capacity_bytes": mem.capacity.tolist(),
            "feasible": trace.feasible, "violation": None if mem.violation is None else mem.violation.as_dict(),
        }
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
