"""``doppler eval GRAPH``: run the placement baselines on one graph and compare them.

``--policy CHECKPOINT`` adds the greedy decode of a ``doppler train`` policy (torch and the training
code load only then).
"""

from __future__ import annotations

import argparse
import json
import time
from contextlib import nullcontext
from pathlib import Path

from doppler_gym import baselines
from doppler_gym.baselines.brute_force import MAX_ASSIGNMENTS, MAX_OPS, count_assignments
from doppler_gym.baselines.types import Placement, jsonable
from doppler_gym.cli import common
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.api import simulate
from doppler_gym.sim.bounds import makespan_lower_bound
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology

DEFAULT_BUDGET = 20.0  # [s] local search budget and CP-SAT time limit
CP_SAT_MAX_OPS = 40  # cp_sat runs by default up to this many ops (it rarely proves optimality above)
SEARCHES = ("local_search", "cp_sat")  # baselines that take the --budget-seconds


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "eval", help="compare the placement baselines on a graph",
        description="Run placement baselines on one graph with the simulator; print makespans, ratios to "
        "the lower bound and to the critical-path heuristic, and run times; write DIR/eval.json and the "
        "best placement's Gantt chart DIR/gantt_best.png.",
    )
    common.add_graph_argument(p)
    topo = p.add_mutually_exclusive_group()  # common.add_topology_arguments, with real device specs
    topo.add_argument("--devices", type=_devices_arg, metavar="N|SPEC",
                      help="N identical, fully linked devices (default 4); with --backend real also a device spec "
                      "(cpu:2, cuda:0,1, gloo:2, nccl) whose device count is N")
    topo.add_argument("--topology", metavar="PRESET", help="a topology preset or uniform<N>")
    p.add_argument("--backend", choices=("sim", "real"), default="sim",
                   help="real: also run every placement on real devices (envs_real) and compare with the simulator")
    p.add_argument("--real-repeats", type=int, default=3, metavar="R", help="measured runs per placement (median)")
    p.add_argument(
        "--baselines", metavar="A,B,...",
        help=f"comma-separated baselines among {', '.join(baselines.names())}; default: all, except "
        f"brute_force above {MAX_OPS} ops (or {MAX_ASSIGNMENTS:,} assignments) and cp_sat above {CP_SAT_MAX_OPS} ops",
    )
    p.add_argument(
        "--budget-seconds", type=float, default=DEFAULT_BUDGET, metavar="S",
        help=f"wall-clock budget of local_search and time limit of cp_sat (default {DEFAULT_BUDGET:g})",
    )
    p.add_argument("--out", default="out/eval", metavar="DIR", help="output folder (default out/eval)")
    p.add_argument(
        "--policy", metavar="CHECKPOINT",
        help="also decode this trained policy greedily (a `doppler train` checkpoint: DIR/checkpoint.pt, "
        "DIR/policy_<stage>.pt or DIR) and add its row",
    )
    p.add_argument("--graphs", nargs="+", metavar="G",
                   help="more graphs (names or files): evaluate the grid GRAPH and G... x --seeds, one task per "
                   "(graph, seed) cell, and write DIR/eval_grid.json (local_search then runs --search-evals)")
    p.add_argument("--seeds", metavar="S,S|LO..HI", help="seeds of the grid (default --seed)")
    p.add_argument("--search-evals", type=int, default=20_000, metavar="N",
                   help="local_search evaluations per grid cell (a count, so every machine finds the same; "
                   "default 20000)")
    p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                   help="run the grid's cells as Ray tasks: no ADDRESS = a Ray instance on this machine, auto = the "
                   "cluster `ray start` joined, HOST:6379 = that head node (pip install 'doppler-gym[ray]'); "
                   "DIR/eval_grid.json is rewritten as each cell finishes, a cell whose task fails for good is "
                   "listed there (exit status 2), and a rerun into the same DIR runs only the cells not finished")
    common.add_sim_arguments(p)
    p.set_defaults(func=run)


def default_baselines(graph: DataflowGraph, topology: Topology, config: SimConfig) -> list[str]:
    """Every baseline, less brute_force and cp_sat where the graph is too large for them."""
    small = graph.n_ops <= MAX_OPS and count_assignments(graph, topology, config) <= MAX_ASSIGNMENTS
    return [n for n in baselines.names()
            if not (n == "brute_force" and not small) and not (n == "cp_sat" and graph.n_ops > CP_SAT_MAX_OPS)]


def parse_baselines(text: str | None, graph: DataflowGraph, topology: Topology, config: SimConfig) -> list[str]:
    """The baselines to run, in registry order (cheap heuristics first, so searches can start from them)."""
    if text is None:
        return default_baselines(graph, topology, config)
    wanted = [t.strip().replace("-", "_") for t in text.split(",") if t.strip()]
    if not wanted:
        raise ValueError(f"--baselines is empty; give names among {', '.join(baselines.names())}")
    for name in wanted:
        baselines.get(name)  # a clear error for an unknown name
    return [n for n in baselines.names() if n in wanted]


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    if not args.budget_seconds > 0:
        raise ValueError(f"--budget-seconds must be > 0, got {args.budget_seconds}")
    if getattr(args, "graphs", None) or getattr(args, "seeds", None) or getattr(args, "ray", None):
        return _run_grid(args)
    started = time.perf_counter()
    real_devices = _real_devices(args)
    g = common.graph_from_args(args)
    topo = common.topology_from_args(args)
    config = common.config_from_args(args, g)
    chosen = parse_baselines(args.baselines, g, topo, config)
    bound = makespan_lower_bound(g, topo, config)
    console = Console(width=max(Console().width, 120), highlight=False)

    results: dict[str, Placement] = {}
    for name in chosen:
        opts: dict[str, object] = {}
        if "seed" in baselines.options(name):
            opts["seed"] = args.seed
        if name == "local_search":
            opts["seconds"] = args.budget_seconds
            if results:  # start from the best placement found so far
                opts["starts"] = list(results.values())
        if name == "cp_sat":
            opts["time_limit"] = args.budget_seconds
        with console.status(f"{name} ...") if console.is_terminal else nullcontext():
            try:
                results[name] = baselines.run(name, g, topo, config, **opts)
            except ImportError as exc:  # an optional solver is missing: say which
                raise ValueError(f"baseline {name}: {exc}") from None
    if getattr(args, "policy", None):
        results["policy"] = policy_placement(args.policy, g, topo, config)
    reference = results.get("critical_path") or baselines.critical_path(g, topo, config, seed=args.seed)

    rows = [_row(p, bound, reference.makespan) for p in results.values()]
    best = min(results.values(), key=lambda p: p.makespan)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    png = out / "gantt_best.png"
    from doppler_gym.sim.gantt import plot_gantt

    priorities = best.priorities() if config.queue_order == "priority" else None
    trace = simulate(g, best.assignment, topo, priorities=priorities, config=config)
    plot_gantt(trace, g, png, title=f"{g.name} on {topo.name}: {best.name}", lower_bound=bound)

    unit = config.time_unit
    table = Table(title=f"{g.name} ({g.n_ops} ops, {g.n_edges} edges) on {topo.name} ({topo.n_devices} devices), "
                  f"makespan in {common.unit_label(unit)}")
    for label, justify in (("baseline", "left"), ("makespan", "right"), ("/ lower bound", "right"),
                           ("/ critical path", "right"), ("seconds", "right"), ("note", "left")):
        table.add_column(label, justify=justify, style="dim" if label == "note" else None)
    for r in rows:
        table.add_row(r["name"], f"{r['makespan']:.6g}", f"{r['ratio_to_lower_bound']:.3f}",
                      f"{r['ratio_to_critical_path']:.3f}", f"{r['seconds']:.2f}", r["note"])
    table.add_section()
    table.add_row("lower bound", f"{bound:.6g}", "1.000", f"{bound / reference.makespan:.3f}", "",
                  "max(critical path, work / D)")
    console.print(table)
    real = None
    if real_devices is not None:
        from envs_real.compare import compare_placements, print_comparison

        prio = config.queue_order == "priority"
        cmp = compare_placements(g, topo, config, [(p.name, p.assignment, p.priorities() if prio else None,
                                                    p.makespan) for p in results.values()],
                                 real_devices, repeats=args.real_repeats, seed=args.seed)
        print_comparison(cmp, console)
        real = cmp.as_dict()

    summary = {
        "graph": g.name, "n_ops": g.n_ops, "n_edges": g.n_edges, "topology": topo.name, "n_devices": topo.n_devices,
        "config": {k: getattr(config, k) for k in config.__dataclass_fields__}, "time_unit": unit,
        "seed": args.seed, "budget_seconds": args.budget_seconds, "lower_bound": bound,
        "critical_path_makespan": reference.makespan, "rows": rows,
        "best": {"name": best.name, "makespan": best.makespan, "gantt": str(png)}, "real": real,
        "seconds": round(time.perf_counter() - started, 3),
    }
    (out / "eval.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    console.print(f"best: {best.name}, makespan {common.fmt_time(best.makespan, unit)} "
                  f"({best.makespan / bound:.3f} x lower bound)")
    console.print(f"wrote {out / 'eval.json'} and {png} in {summary['seconds']:.1f} s")
    return 0


def _devices_arg(text: str) -> int | str:
    """``--devices``: a device count, or a real device spec (kept as text for :func:`_real_devices`)."""
    return int(text) if text.strip().isdigit() else text.strip()


def _real_devices(args: argparse.Namespace) -> str | None:
    """The real device spec of ``--backend real`` (default ``auto``); sets ``args.devices`` to its count."""
    spec = args.devices if isinstance(args.devices, str) else None
    if args.backend != "real":
        if spec is not None:
            raise ValueError(f"--devices {spec}: a device spec needs --backend real; give a count N otherwise")
        return None
    from envs_real.devices import parse_devices

    devices = parse_devices(spec or "auto")
    if spec is not None:
        args.devices = devices.n_default
    return devices.spec


def _run_grid(args: argparse.Namespace) -> int:
    """The graphs x seeds grid (``--graphs``, ``--seeds``, ``--ray``): :mod:`agents.distributed.eval_grid`."""
    from agents.distributed.eval_grid import run_grid

    if args.policy:
        raise ValueError("--policy decodes one graph; run it without --graphs/--seeds/--ray")
    if args.search_evals < 1:
        raise ValueError(f"--search-evals must be >= 1, got {args.search_evals}")
    if args.ray is not None:
        from doppler_gym.parallel import import_ray

        try:
            import_ray("--ray")
        except ImportError as exc:  # one line and exit status 2, as every argument error
            raise ValueError(str(exc)) from None
    return run_grid(args)


def policy_placement(checkpoint: str, graph: DataflowGraph, topology: Topology, config: SimConfig) -> Placement:
    """The greedy decode of a trained policy (``doppler train`` checkpoint) on this instance;
    torch and the agents load only here."""
    import gymnasium as gym

    from agents.training import decode, load_policy

    started = time.perf_counter()
    env = gym.make("Doppler-Sim-v0", graph=graph, topology=topology, sim_config=config, disable_env_checker=True)
    info = decode(load_policy(checkpoint, env.unwrapped), env, greedy=True, seed=0)
    return Placement(info["assignment"], info["order"], "policy", info["makespan"], time.perf_counter() - started,
                     {"checkpoint": str(checkpoint)})


def _row(p: Placement, bound: float, reference: float) -> dict[str, object]:
    return {
        "name": p.name, "makespan": p.makespan,
        "ratio_to_lower_bound": p.makespan / bound if bound > 0 else float("nan"),
        "ratio_to_critical_path": p.makespan / reference if reference > 0 else float("nan"),
        "seconds": p.seconds, "note": _note(p), "info": jsonable(p.info),
        "assignment": p.assignment.tolist(), "order": p.order.tolist(),
    }


def _note(p: Placement) -> str:
    """A short summary of a placement's info for the table."""
    i = p.info
    if "checkpoint" in i:
        return f"greedy decode of {i['checkpoint']}"
    if "plan_makespan" in i:
        return f"plan makespan {i['plan_makespan']:.6g}"
    if "evals" in i:
        return f"{i['evals']:,} evaluations, from {i['start']} ({i['start_makespan']:.6g}), stopped: {i['stopped']}"
    if "status" in i:
        return f"{i['status']}: schedule {i['objective']:.6g}, solver bound {i['bound']:.6g}"
    if "assignments" in i:
        return f"optimum of {i['assignments']:,} assignments"
    if "edge_cut" in i:
        return f"edge cut {i['edge_cut']:,} (scaled)"
    if "estimated_makespan" in i:
        return f"seed {i['seed']}, estimate {i['estimated_makespan']:.6g}"
    return f"seed {i['seed']}" if "seed" in i else ""
