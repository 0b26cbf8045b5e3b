"""``doppler demo``: the main job on the built-in default workload.

Until the agents land it is ``doppler eval`` on ``paper/chainmm`` (4 devices, the authors'
simulator) with a 10 s search budget: every heuristic baseline, the METIS partition and the
local search, compared with the lower bound; it writes the table as ``eval.json`` and the best
placement's Gantt chart to ``out/demo/``.
"""

from __future__ import annotations

import argparse

from doppler_gym.cli import common, eval_cmd

DEFAULT_GRAPH = "paper/chainmm"
DEFAULT_BUDGET = 10.0  # [s] local search budget


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo", help="the main job: baselines and search on the default paper graph",
        description=f"Run the placement baselines and a {DEFAULT_BUDGET:g} s local search on {DEFAULT_GRAPH} "
        "(4 devices, the authors' simulator) and compare them with the lower bound; writes "
        "DIR/eval.json and DIR/gantt_best.png.",
    )
    common.add_graph_argument(p, positional=False, default=DEFAULT_GRAPH)
    common.add_topology_arguments(p)
    p.add_argument("--budget-seconds", type=float, default=DEFAULT_BUDGET, metavar="S",
                   help=f"local search budget (default {DEFAULT_BUDGET:g})")
    p.add_argument("--out", default="out/demo", metavar="DIR", help="output folder (default out/demo)")
    common.add_sim_arguments(p)
    p.set_defaults(func=eval_cmd.run, baselines=None)
