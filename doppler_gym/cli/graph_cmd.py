"""``doppler graph info GRAPH`` and ``doppler graph list``."""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from doppler_gym import workloads
from doppler_gym.cli import common
from doppler_gym.graph.analysis import critical_path
from doppler_gym.graph.io import paper_graph_names
from doppler_gym.sim.bounds import makespan_lower_bound
from doppler_gym.sim.costs import Costs
from doppler_gym.topology.presets import preset_names


def register(subparsers: argparse._SubParsersAction) -> None:
    graph = subparsers.add_parser("graph", help="inspect dataflow graphs", description="Inspect dataflow graphs.")
    sub = graph.add_subparsers(dest="graph_command", metavar="{info,list}", required=True)

    info = sub.add_parser(
        "info", help="ops, edges, total work, critical path, lower bound",
        description="Size, total work, critical path and makespan lower bound of a graph. Times are "
        "in the simulator's unit: paper units (raw cost / 1e10) for paper graphs, seconds otherwise.",
    )
    common.add_graph_argument(info)
    common.add_topology_arguments(info)
    common.add_sim_arguments(info, reference_only=True)
    info.set_defaults(func=run_info)

    lst = sub.add_parser("list", help="built-in graph names, workload parameters, topology presets")
    lst.set_defaults(func=run_list)


def run_info(args: argparse.Namespace) -> int:
    g = common.graph_from_args(args)
    topo = common.topology_from_args(args)
    config = common.config_from_args(args, g, topo)
    unit = config.time_unit
    comp = Costs.of(g, topo, config).comp[:, int(np.argmax(topo.speed))] / config.time_divisor  # fastest device
    cp_len, cp_ops = critical_path(g, comp)
    total_time = float(g.flops.sum()) / config.time_divisor
    rows: list[tuple[str, str]] = [
        ("graph", f"{g.name}  (units: {g.units})"),
        ("ops", f"{g.n_ops}  ({int((g.in_degree == 0).sum())} sources, {int((g.out_degree == 0).sum())} sinks)"),
        ("edges", str(g.n_edges)),
    ]
    if config.cost_model == "raw":
        raw = "raw cost" if g.units == "paper" else "FLOP read as time"
        rows += [
            ("total work", f"{common.fmt_time(total_time, unit)}  ({g.total_flops:.4g} {raw})"),
            ("total comm", f"{common.fmt_time(float(g.out_bytes.sum()) / config.time_divisor, unit)}"
                           "  (sum of the ops' transfer costs)"),
        ]
    else:
        if config.cost_model == "roofline":  # each op at its fastest device's roofline time, spread evenly
            spread = float(Costs.of(g, topo, config).comp.min(axis=1).sum()) / topo.n_devices
        else:
            spread = g.total_flops / float(topo.speed.sum())
        rows += [
            (
                "total work",
                f"{common.fmt_count(g.total_flops, 'FLOP')}  "
                f"({common.fmt_time(spread / config.time_divisor, unit)} spread over {topo.name})",
            ),
            ("output data", common.fmt_count(float(g.out_bytes.sum()), "B")),
        ]
    rows += [
        ("critical path", f"{common.fmt_time(cp_len, unit)} over {len(cp_ops)} ops (compute only"
                          + (", fastest device)" if config.cost_model != "raw" else ")")),
        ("lower bound", f"{common.fmt_time(makespan_lower_bound(g, topo, config), unit)} on {topo.name} "
                        f"({topo.n_devices} devices): max(critical path, total work / capacity)"),
        ("time unit", f"{common.unit_label(unit)}; simulator: {common.describe_config(config)}"),
    ]
    if g.kinds is not None:
        hist = Counter(g.kinds).most_common()
        rows.append(("op kinds", ", ".join(f"{k} {c}" for k, c in hist)))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    print("paper graphs (DOPPLER paper files; reference simulator, paper units):")
    for name in paper_graph_names():
        print(f"  {name}")
    print("workloads (physical FLOP/bytes; pass parameters with --param KEY=VALUE):")
    for name in workloads.names():
        params = ", ".join(f"{k}={v!r}" for k, v in workloads.params(name).items())
        print(f"  {name:<12} {params}")
    print("topology presets (--topology):")
    print(f"  {', '.join(preset_names())}, uniform<N>")
    return 0
