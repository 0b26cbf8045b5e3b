"""``doppler demo``: the main job on the built-in default workload.

It trains DOPPLER's dual SEL/PLC policy on ``paper/chainmm`` (4 devices, the authors' simulator) for
:data:`DEFAULT_MINUTES` minutes on the CPU with ``doppler train``'s default recipe (imitation of a
local-search placement, then a gentle MaskablePPO in the simulator; it stops once the policy's greedy
decode reaches the makespan lower bound, a proof of optimality), then prints the learned
placement next to the baselines (critical path, HEFT, random, local search) and the lower bound, and
writes the Gantt chart of the learned placement. It is ``doppler train`` with defaults: every
``train`` output lands in ``--out`` (``summary.json``, ``gantt.png``, ``checkpoint.pt``, TensorBoard
logs), and ``--resume`` continues an interrupted demo. ``--baselines-only`` skips training and runs
``doppler eval`` instead (the heuristics, METIS and a local search; seconds rather than minutes).
"""

from __future__ import annotations

import argparse

from agents.cli import eval_cmd, train_cmd
from doppler_gym.cli import common

DEFAULT_GRAPH = "paper/chainmm"
DEFAULT_MINUTES = 8.0  # [min] training budget (the run stops earlier once it reaches the lower bound)
DEFAULT_SEARCH_SECONDS = 10.0  # [s] local search budget of --baselines-only
DEFAULT_OUT = "out/demo"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo", help="the main job: train a placement policy on the default paper graph",
        description=f"Train DOPPLER's SEL/PLC policy on {DEFAULT_GRAPH} (4 devices, the authors' simulator) for up "
        f"to {DEFAULT_MINUTES:g} minutes with doppler train's default recipe (imitation of a local-search placement, "
        "then PPO in the simulator; it stops early once the policy's greedy decode reaches the lower bound), "
        "print the learned placement against the baselines and the lower bound, and write DIR/summary.json "
        "and DIR/gantt.png. --baselines-only runs the baselines and a local search instead (DIR/eval.json, "
        "DIR/gantt_best.png).",
    )
    common.add_graph_argument(p, positional=False, default=DEFAULT_GRAPH)
    common.add_topology_arguments(p)
    p.add_argument("--budget-minutes", type=float, default=DEFAULT_MINUTES, metavar="M",
                   help=f"training budget (default {DEFAULT_MINUTES:g})")
    p.add_argument("--resume", action="store_true", help="continue an interrupted demo from DIR/checkpoint.pt")
    p.add_argument("--baselines-only", action="store_true",
                   help="no training: the baselines and a local search (like `doppler eval`)")
    p.add_argument("--budget-seconds", type=float, default=DEFAULT_SEARCH_SECONDS, metavar="S",
                   help=f"local search budget of --baselines-only (default {DEFAULT_SEARCH_SECONDS:g})")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"output folder (default {DEFAULT_OUT})")
    common.add_sim_arguments(p)
    p.set_defaults(func=run, baselines=None)


def run(args: argparse.Namespace) -> int:
    for flag, value in (("--budget-minutes", args.budget_minutes), ("--budget-seconds", args.budget_seconds)):
        if not value > 0:
            raise ValueError(f"{flag} must be > 0, got {value:g}")
    if args.baselines_only:
        return eval_cmd.run(eval_namespace(args))
    return train_cmd.run(train_namespace(args))


def _command_namespace(command, name: str, args: argparse.Namespace) -> argparse.Namespace:
    """``doppler NAME GRAPH`` parsed by ``command``'s own parser (so options it gains later have
    their defaults), then overridden by every option the demo shares with it."""
    parser = argparse.ArgumentParser(prog="doppler")
    command.register(parser.add_subparsers())
    out = parser.parse_args([name, args.graph])
    for key, value in vars(args).items():
        if key != "func" and hasattr(out, key):
            setattr(out, key, value)
    return out


def eval_namespace(args: argparse.Namespace) -> argparse.Namespace:
    """The ``doppler eval`` arguments of ``--baselines-only``: eval's own defaults, overridden by
    every option the demo shares with it."""
    return _command_namespace(eval_cmd, "eval", args)


def train_namespace(args: argparse.Namespace) -> argparse.Namespace:
    """The ``doppler train`` arguments of a demo: train's own defaults, overridden by every option
    the demo shares with it (graph, topology, simulator, output, budget, resume)."""
    targs = _command_namespace(train_cmd, "train", args)
    targs.stages = "il,sim"
    return targs
