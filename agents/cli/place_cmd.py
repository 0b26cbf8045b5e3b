"""``doppler place GRAPH``: place a graph with the shipped pre-trained policy (or a checkpoint).

``--search-seconds 0`` (default) is the policy's greedy decode; ``S > 0`` is a policy-guided local
search within ``S`` seconds of wall clock in total (:func:`agents.placer.place`). By default the
cheap heuristics run too and the best placement is kept (``--no-heuristics``: the policy's alone).
Prints the makespan, the candidate it came from and every candidate's makespan, beside the
critical-path and HEFT heuristics; ``--json OUT`` writes the placement (``makespan``, ``chosen``,
``candidates``, ``assignment``, ``order``, ``seconds``, the policy, the budget, the reference
makespans). Torch and the policy load only when the command runs.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from doppler_gym.cli import common

if TYPE_CHECKING:
    from agents.placer import PlaceResult


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "place", help="place a graph with the pre-trained policy (optionally guiding a search)",
        description="Place GRAPH on devices with a learned DopplerPolicy (default: the one shipped with the "
        "package): its greedy decode, or with --search-seconds S a local search guided by it within S seconds "
        "in total: its best decode (greedy or sampled) races the best heuristic start (a short search from "
        "each, then the rest of the budget from the better one); when the greedy decode alone would take over a "
        "quarter of S, the search goes without it. The cheap heuristics (critical path, HEFT, CPOP, PEFT, round "
        "robin, single device, METIS) run too and the best placement is kept (--no-heuristics: the policy's "
        "alone). Every makespan is simulated with the graph's default config (the reference model for paper "
        "graphs).",
    )
    common.add_graph_argument(p)
    common.add_topology_arguments(p)
    p.add_argument("--policy", metavar="CKPT",
                   help="a policy checkpoint (`doppler train` DIR/checkpoint.pt, DIR/policy_<stage>.pt or DIR); "
                   "default: the shipped pre-trained policy")
    p.add_argument("--search-seconds", type=float, default=0.0, metavar="S",
                   help="0 (default): the policy's greedy decode; S > 0: policy-guided search within S seconds "
                   "of wall clock in total")
    p.add_argument("--samples", type=int, metavar="K",
                   help="sampled decodes used as search starts (default: min(16, 40000 / ops) within a fifth of "
                   "the budget, none when the greedy decode is worse than the best heuristic)")
    p.add_argument("--no-heuristics", dest="heuristics", action="store_false",
                   help="return the policy's placement alone (default: also run the cheap heuristics and keep "
                   "the best placement)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampled decodes and the search (default 0)")
    p.add_argument("--json", metavar="OUT", help="write the placement and its figures to this JSON file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not (math.isfinite(args.search_seconds) and args.search_seconds >= 0):
        raise ValueError(f"--search-seconds must be a number >= 0, got {args.search_seconds:g}")
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0, got {args.seed}")
    if args.samples is not None and args.samples < 1:
        raise ValueError(f"--samples must be >= 1, got {args.samples}")
    if args.policy is not None and not Path(args.policy).exists():
        raise ValueError(f"--policy {args.policy!r} does not exist; give a `doppler train` checkpoint "
                         f"(DIR/checkpoint.pt, DIR/policy_<stage>.pt or DIR) or leave it out for the shipped policy")
    g = common.graph_from_args(args)
    topology = args.topology if args.topology else (args.devices if args.devices is not None else None)
    from agents.placer import place  # torch loads here

    result = place(g, topology=topology, policy=args.policy, search_seconds=args.search_seconds, seed=args.seed,
                   samples=args.samples, heuristics=args.heuristics)
    unit = common.unit_label(result.time_unit)
    cp, heft = result.baselines["critical_path"], result.baselines["heft"]
    what = ("greedy decode" if result.method == "greedy"
            else f"policy-guided search ({args.search_seconds:g} s budget)")
    if args.heuristics:
        what += f" and {len(result.candidates) - 1} heuristics, the best kept"
    print(f"{result.graph} ({result.n_ops} ops) on {result.topology} ({result.n_devices} devices), "
          f"policy {result.policy}: {what}")
    print(f"  makespan      {result.makespan:.6g} {unit}  ({result.seconds:.2f} s)"
          + (f"  from {result.chosen}" if args.heuristics else ""))
    if args.heuristics:
        print_candidates(result)
    if result.method == "search":
        raced = " vs ".join(p["start"] for p in result.info.get("probes", []))
        print(f"  search from   {result.info['start']}" + (f" (raced {raced})" if raced else "")
              + f", {result.info['evals']:,} evaluations")
        skipped = result.info.get("decode_skipped")
        if skipped:
            share = skipped["limit_seconds"] / result.search_seconds
            print(f"  no decode     it would take about {skipped['projected_seconds']:.1f} s, over "
                  f"{share:.0%} of the budget: plain local search (give more --search-seconds)")
    print(f"  critical path {cp:.6g} {unit}  (x{result.makespan / cp:.3f})" if cp > 0 else "")
    print(f"  HEFT          {heft:.6g} {unit}  (x{result.makespan / heft:.3f})" if heft > 0 else "")
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result.to_json(), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {out}")
    return 0


def print_candidates(result: PlaceResult) -> None:
    """Every candidate's makespan, then each heuristic skipped and why."""
    print("  candidates    " + ", ".join(f"{name} {m:.6g}" for name, m in result.candidates.items()))
    for name, why in result.info["heuristics_skipped"].items():
        print(f"  skipped       {name}: {why}")
