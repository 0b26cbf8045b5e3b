"""Arguments shared by the subcommands: graph, topology and simulator settings, and formatting."""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np

from doppler_gym import workloads
from doppler_gym.graph.analysis import b_level
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.instances import default_config, resolve_graph, resolve_topology
from doppler_gym.sim.config import COST_MODELS, LINK_MODELS, MULTICASTS, QUEUE_ORDERS, SimConfig
from doppler_gym.sim.costs import Costs
from doppler_gym.specs import parse_param
from doppler_gym.topology.presets import preset_names
from doppler_gym.topology.types import Topology

DEFAULT_DEVICES = 4  # the DOPPLER paper's machine has 4 GPUs


# ---------------------------------------------------------------------- argument groups
def add_graph_argument(parser: argparse.ArgumentParser, positional: bool = True, default: str | None = None) -> None:
    """``GRAPH`` (positional, or ``--graph`` when ``positional`` is False) and ``--param key=value``."""
    help_text = (
        "a graph file (.txt paper format or .json), a paper graph name (e.g. paper/ffnn) or a "
        "workload name (e.g. ffnn, chainmm); `doppler graph list` shows the names"
    )
    if positional:
        parser.add_argument("graph", metavar="GRAPH", help=help_text)
    else:
        parser.add_argument("--graph", default=default, metavar="GRAPH", help=f"{help_text} (default: {default})")
    parser.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE",
        help="a workload generator parameter, repeatable (e.g. --param layers=4); see `doppler graph list`",
    )


def add_topology_arguments(parser: argparse.ArgumentParser) -> None:
    """``--devices N`` or ``--topology PRESET`` (mutually exclusive)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--devices", type=int, metavar="N",
        help=f"N identical, fully linked devices (Topology.uniform(N)); default {DEFAULT_DEVICES}",
    )
    group.add_argument(
        "--topology", metavar="PRESET",
        help=f"a topology preset: {', '.join(preset_names())}, or uniform<N>",
    )


def add_sim_arguments(parser: argparse.ArgumentParser, reference_only: bool = False) -> None:
    """Simulator settings; the defaults follow the graph (see :func:`config_from_args`).

    ``reference_only`` adds just ``--reference`` (for commands that only need the time unit)."""
    group = parser.add_argument_group(
        "simulator",
        "paper graphs default to the reference model (the authors' simulator, paper time units); other "
        "graphs to the roofline on a topology with GPU models (the GPU presets), else to the FLOP-rate "
        "topology model (seconds)",
    )
    group.add_argument(
        "--reference", action="store_true",
        help="use SimConfig.reference(): costs are times, paper units (raw / 1e10)",
    )
    if reference_only:
        return
    group.add_argument(
        "--cost-model", choices=COST_MODELS,
        help="op and transfer times: topology (FLOPs / device speed), roofline (each device's GPU model: "
        "tensor-core or vector peak, HBM bandwidth, launch overhead) or raw (the graph's costs are times); "
        "default: as above",
    )
    group.add_argument(
        "--link-model", choices=LINK_MODELS, help="ideal (no contention) or fifo (one transfer per link at a time)",
    )
    group.add_argument("--streams", type=int, metavar="K", help="ops that may run at once on one device (>= 1)")
    group.add_argument(
        "--queue-order", choices=QUEUE_ORDERS,
        help="fifo (by ready time), priority (lowest priority first: a workload's own priorities, else the highest "
        "b-level) or fixed (each device runs its ops in the priorities' order and waits for the next one: a "
        "pipeline schedule, the default of a pipeline workload; op id order for a graph without priorities)",
    )
    group.add_argument(
        "--jitter", type=float, metavar="SIGMA",
        help="lognormal sigma of random compute and transfer times (mean one); 0 = deterministic",
    )
    group.add_argument(
        "--multicast", choices=MULTICASTS,
        help="p2p (one copy per consuming device) or teccl (one TE-CCL multicast per op output; "
        "topology costs and ideal links only; needs the solvers extra)",
    )
    group.add_argument("--seed", type=int, default=0, help="seed of the jitter and of random placements (default 0)")


# ---------------------------------------------------------------------- resolution
def parse_params(pairs: list[str]) -> dict[str, object]:
    """``["layers=4", "dtype=float16"]`` -> ``{"layers": 4, "dtype": "float16"}`` (each ``--param``
    value typed by :func:`doppler_gym.specs.parse_value`; a KEY given twice keeps the last)."""
    return dict(parse_param(pair, "--param", example="--param layers=4") for pair in pairs)


def graph_from_args(args: argparse.Namespace) -> DataflowGraph:
    """The graph named by ``args.graph`` and ``args.param`` (:func:`doppler_gym.instances.resolve_graph`)."""
    params = parse_params(args.param)
    if params and args.graph not in workloads.names():
        raise ValueError(
            f"--param only applies to workload generators ({', '.join(workloads.names())}), not to {args.graph!r}"
        )
    return resolve_graph(args.graph, params)


def topology_from_args(args: argparse.Namespace) -> Topology:
    """``--topology PRESET``, else ``Topology.uniform(--devices)`` (default 4)
    (:func:`doppler_gym.instances.resolve_topology`)."""
    if getattr(args, "topology", None):
        return resolve_topology(args.topology, "--topology")
    n = args.devices if getattr(args, "devices", None) is not None else DEFAULT_DEVICES
    return resolve_topology(n, "--devices")


SIM_FLAGS = ("cost_model", "link_model", "streams", "queue_order", "multicast")  # SimConfig fields set by flags


def config_from_args(args: argparse.Namespace, graph: DataflowGraph, topology: Topology | None = None) -> SimConfig:
    """The reference model with ``--reference``, else the default of ``graph`` on ``topology``
    (:func:`doppler_gym.instances.default_config`; ``None``: the topology of ``args``,
    :func:`topology_from_args`); flags override."""
    if args.reference:
        base = SimConfig.reference()
    else:
        base = default_config(graph, topology if topology is not None else topology_from_args(args))
    changes: dict[str, object] = {}
    for flag in SIM_FLAGS:
        if getattr(args, flag, None) is not None:
            changes[flag] = getattr(args, flag)
    jitter = getattr(args, "jitter", None)
    if jitter is not None:
        changes["compute_jitter"] = jitter
        changes["transfer_jitter"] = jitter
    if jitter:  # the seed only matters for random times
        changes["seed"] = args.seed
    return dataclasses.replace(base, **changes)


def describe_config(config: SimConfig) -> str:
    """A one-line summary, e.g. ``reference (paper units)``."""
    if config == SimConfig.reference():
        return "reference (the authors' simulator; paper units = raw cost / 1e10)"
    fields = [f"{f.name}={getattr(config, f.name)!r}" for f in dataclasses.fields(config)
              if getattr(config, f.name) != f.default]
    return "SimConfig(" + ", ".join(fields) + f") [{unit_label(config.time_unit)}]"


# ---------------------------------------------------------------------- priorities
def priorities_for(graph: DataflowGraph, topology: Topology, config: SimConfig) -> np.ndarray | None:
    """Minus the b-level (highest b-level runs first) under ``queue_order="priority"``, else ``None``."""
    if config.queue_order != "priority":
        return None
    costs = Costs.of(graph, topology, config)
    return -b_level(graph, costs.mean_comp, costs.mean_comm)


# ---------------------------------------------------------------------- formatting
def unit_label(unit: str) -> str:
    """``"paper"`` -> ``"paper units"``, ``"cost"`` -> ``"cost units"``, others unchanged."""
    return {"paper": "paper units", "cost": "cost units"}.get(unit, unit)


def fmt_time(x: float, unit: str) -> str:
    """A time with its unit: seconds scaled to s/ms/us, paper and cost units with two decimals."""
    if unit == "s":
        for scale, suffix in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
            if abs(x) >= scale or scale == 1e-6:
                return f"{x / scale:.4g} {suffix}"
    return f"{x:.2f} {unit_label(unit)}" if x == 0 or abs(x) >= 0.01 else f"{x:.3g} {unit_label(unit)}"


def fmt_count(x: float, unit: str) -> str:
    """A large count (FLOP, bytes) in engineering notation, e.g. ``1.374e+11 FLOP``."""
    return f"{x:.4g} {unit}"
