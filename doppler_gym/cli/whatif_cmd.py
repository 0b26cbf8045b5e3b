"""``doppler whatif GRAPH --assignment ... --straggler ...``: what stragglers cost one placement.

The makespan with and without the stragglers, and the cost of each (ByteDance's what-if analysis:
simulate the run without them and compare; :func:`doppler_gym.sim.whatif_analysis.whatif`).

Straggler forms (``--straggler``, repeatable):

- ``device:D@START-ENDxFACTOR``: device ``D`` keeps ``FACTOR`` of its speed from ``START`` to ``END``;
- ``link:A>B@START-ENDxFACTOR``: the direct link ``A -> B`` keeps ``FACTOR`` of its bandwidth;
- ``random:KEY=VALUE,...``: a :class:`~doppler_gym.sim.stragglers.StragglerModel` draw, keys
  ``device_rate``, ``link_rate`` (expected slowdowns per device/link over the horizon), ``duration``
  and ``factor`` (``LOW-HIGH``, ``LOW..HIGH`` or one number), ``horizon`` and ``seed`` (default 0);
  the grammar of :mod:`doppler_gym.specs`.

Times are in the run's reported unit (seconds, or paper units under ``--reference``); a time ending in
``%`` is a percentage of the nominal makespan (``device:1@20%-50%x0.5``); ``END`` may be ``inf``. A
random model without ``horizon`` draws over the nominal makespan.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
from pathlib import Path

import numpy as np

from doppler_gym import baselines
from doppler_gym.cli import common
from doppler_gym.cli.simulate_cmd import KINDS, OWN, make_assignment, run_priorities
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.instances import workload_of
from doppler_gym.sim.api import simulate
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.stragglers import Straggler, StragglerModel
from doppler_gym.sim.whatif_analysis import WHATIF_METHODS, WhatIf, whatif
from doppler_gym.specs import Range, parse_spec, spec_name
from doppler_gym.topology.types import Topology

_TIME = r"(?:inf|[0-9.]+(?:e[-+]?[0-9]+)?%?)"
_EXPLICIT = re.compile(rf"(device|link):([^@]+)@({_TIME})-({_TIME})x(.+)")
_MODEL_KEYS = ("device_rate", "link_rate", "duration", "factor", "horizon", "seed")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "whatif", help="what stragglers cost a placement (makespan with and without them)",
        description="Simulate a placement with stragglers (slow devices or links over intervals) and without "
        "them, and report the slowdown and what each straggler cost (leave-one-out: the makespan with all "
        "minus the makespan with all but it).",
    )
    common.add_graph_argument(p)
    common.add_topology_arguments(p)
    p.add_argument(
        "--assignment", default=None, metavar="BASELINE|KIND|FILE",
        help=f"default: the workload's own placement where it has one (a pipeline's stages and schedule), else "
        f"critical_path; a baseline name ({', '.join(baselines.names())}), a kind "
        f"({', '.join(KINDS)}), or a FILE of device ids (text or JSON, as for `doppler simulate`)",
    )
    p.add_argument(
        "--straggler", action="append", default=[], metavar="SPEC",
        help="device:D@START-ENDxFACTOR, link:A>B@START-ENDxFACTOR (times in the run's unit, or N%% of the "
        "nominal makespan; END may be inf), or random:device_rate=R,link_rate=R,duration=LO-HI,factor=LO-HI,"
        "horizon=T,seed=S; repeatable",
    )
    p.add_argument("--method", choices=WHATIF_METHODS, default="leave_one_out",
                   help="a straggler's cost: makespan with all minus with all but it (leave_one_out, default), "
                   "or with it alone minus nominal (alone)")
    p.add_argument("--json", metavar="OUT", help="write the result as JSON")
    common.add_sim_arguments(p)
    p.set_defaults(func=run)


# ---------------------------------------------------------------------- parsing
def _time(text: str, nominal: float, spec: str) -> float:
    text = text.strip()
    try:
        if text.endswith("%"):
            return float(text[:-1]) / 100.0 * nominal
        return math.inf if text == "inf" else float(text)
    except ValueError:
        raise ValueError(f"--straggler {spec!r}: {text!r} is not a time (a number, N%, or inf)") from None


def _range(value: object, key: str, spec: str) -> tuple[float, float]:
    """``duration``/``factor`` of a random model: ``LOW-HIGH``, ``LOW..HIGH`` or one number."""
    if isinstance(value, Range):
        return (float(value.lo), float(value.hi))
    if _is_number(value):
        return (float(value), float(value))
    parts = str(value).split("-")
    try:
        values = tuple(float(x) for x in parts)
    except ValueError:
        values = ()
    if len(values) not in (1, 2):
        raise ValueError(f"--straggler {spec!r}: {key}={value!r} must be LOW-HIGH or one number")
    return (values[0], values[-1])


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _model(spec: str) -> tuple[dict[str, object], int]:
    """The :class:`StragglerModel` fields and the seed of a ``random:KEY=VALUE,...`` spec (:mod:`doppler_gym.specs`)."""
    usage = f"random:KEY=VALUE,... with KEY one of {_MODEL_KEYS}, e.g. random:device_rate=1,factor=0.3-0.6,seed=4"
    fields: dict[str, object] = {}
    seed = 0
    for key, value in parse_spec(spec, "--straggler", usage=usage).params.items():
        if key not in _MODEL_KEYS:
            raise ValueError(f"--straggler {spec!r}: {key!r} is not a key of the random model; "
                             f"use KEY=VALUE with KEY one of {_MODEL_KEYS}")
        if key == "seed":
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"--straggler {spec!r}: seed: {value!r} is not an integer")
            seed = value
        elif key in ("duration", "factor"):
            fields[key] = _range(value, key, spec)
        elif _is_number(value):
            fields[key] = float(value)
        else:
            raise ValueError(f"--straggler {spec!r}: {key}: {value!r} is not a number")
    return fields, seed


def parse_straggler(spec: str, nominal: float, topology: Topology) -> tuple[Straggler, ...]:
    """The stragglers of one ``--straggler`` SPEC (module docstring); ``nominal`` is the makespan without
    stragglers (for ``N%`` times and a random model's default horizon) [reported unit]."""
    spec = spec.strip()
    if spec_name(spec) == "random":
        fields, seed = _model(spec)
        model = StragglerModel(**fields)  # type: ignore[arg-type]
        return model.draw(topology, seed, horizon=nominal if nominal > 0 else 1.0)
    m = _EXPLICIT.fullmatch(spec)
    if m is None:
        raise ValueError(f"--straggler {spec!r}: expected device:D@START-ENDxFACTOR, link:A>B@START-ENDxFACTOR "
                         f"or random:KEY=VALUE,... (e.g. device:1@0.2-0.5x0.5 or link:0>1@20%-infx0.25)")
    kind, where, start, end, factor = m.groups()
    try:
        index: object = int(where) if kind == "device" else tuple(int(x) for x in where.split(">"))
        factor_value = float(factor)
    except ValueError:
        raise ValueError(f"--straggler {spec!r}: {where!r} must be a device id (device:D) or A>B (link:A>B), "
                         f"and {factor!r} a number") from None
    return (Straggler(kind, index, _time(start, nominal, spec), _time(end, nominal, spec), factor_value),)


def resolve_assignment(spec: str | None, graph: DataflowGraph, topology: Topology, config: SimConfig,
                       seed: int) -> np.ndarray:
    """``(n_ops,) int64`` devices: a baseline's placement (on the nominal config), a kind, or a file; with
    ``spec=None`` the workload's own where ``graph`` has one, else the critical-path baseline's."""
    if spec is None:
        workload = workload_of(graph)
        if workload is not None and workload.assignment is not None:
            return np.asarray(workload.assignment, dtype=np.int64)
        spec = "critical_path"
    key = spec.strip().replace("-", "_")
    if key in baselines.names():
        opts = {"seed": seed} if "seed" in baselines.options(key) else {}
        return np.asarray(baselines.run(key, graph, topology, config, **opts).assignment, dtype=np.int64)
    if spec in KINDS or Path(spec).is_file():
        return make_assignment(spec, graph, topology.n_devices, seed)
    raise ValueError(f"--assignment {spec!r} is neither a baseline ({', '.join(baselines.names())}), a kind "
                     f"({', '.join(KINDS)}), nor an existing file")


# ---------------------------------------------------------------------- command
def run(args: argparse.Namespace) -> int:
    g = common.graph_from_args(args)
    topo = common.topology_from_args(args)
    config = dataclasses.replace(common.config_from_args(args, g, topo), stragglers=())
    if not args.straggler:
        raise ValueError("give at least one --straggler, e.g. --straggler device:0@10%-60%x0.5 or "
                         "--straggler random:device_rate=1,seed=0")
    assignment = resolve_assignment(args.assignment, g, topo, config, args.seed)
    label = args.assignment or (OWN if workload_of(g) is not None and workload_of(g).assignment is not None
                                else "critical_path")
    priorities = run_priorities(g, topo, config)
    nominal = simulate(g, assignment, topology=topo, priorities=priorities, config=config).makespan
    stragglers: tuple[Straggler, ...] = ()
    for spec in args.straggler:
        stragglers += parse_straggler(spec, nominal, topo)
    result = whatif(g, assignment, topology=topo, priorities=priorities, config=config, stragglers=stragglers,
                    method=args.method)
    report(g, topo, config, label, result)
    if args.json:
        write_json(args.json, g, topo, label, result)
        print(f"result        {args.json}")
    return 0


def report(g: DataflowGraph, topo: Topology, config: SimConfig, label: str, result: WhatIf) -> None:
    unit = result.trace.time_unit
    print(f"graph         {g.name}: {g.n_ops} ops, {g.n_edges} edges")
    print(f"topology      {topo.name}: {topo.n_devices} devices")
    print(f"simulator     {common.describe_config(config)}")
    print(f"assignment    {label}")
    print(f"without       {common.fmt_time(result.nominal_makespan, unit)}")
    print(f"with          {common.fmt_time(result.makespan, unit)}  (slowdown {result.slowdown:.4f}x, "
          f"{len(result.stragglers)} straggler(s))")
    if not result.stragglers:
        print("(the random model drew no straggler)")
        return
    print(f"cost of each ({result.method}):")
    print(f"  {'straggler':<40}{'cost':>18}  {'of nominal':>10}")
    for s, cost in zip(result.stragglers, result.cost):
        share = cost / result.nominal_makespan if result.nominal_makespan > 0 else 0.0
        print(f"  {s.label():<40}{common.fmt_time(float(cost), unit):>18}  {share:>+10.2%}")


def write_json(path: str, g: DataflowGraph, topo: Topology, label: str, result: WhatIf) -> None:
    data = {
        "graph": g.name, "topology": topo.name, "assignment_source": label,
        "assignment": result.trace.assignment.tolist(), "time_unit": result.trace.time_unit,
        "makespan": result.makespan, "nominal_makespan": result.nominal_makespan, "slowdown": result.slowdown,
        "method": result.method,
        "stragglers": [{**dataclasses.asdict(s), "index": s.index if s.kind == "device" else list(s.index),
                        "end": None if math.isinf(s.end) else s.end, "cost": float(c), "label": s.label()}
                       for s, c in zip(result.stragglers, result.cost)],
    }
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
