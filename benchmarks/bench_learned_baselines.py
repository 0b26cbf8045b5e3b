"""Placeto and GDP on the DOPPLER paper graphs, 4 devices, reference simulator (paper units).

Run from the repository root::

    python benchmarks/bench_learned_baselines.py                  # 120 s per run (16 minutes)
    python benchmarks/bench_learned_baselines.py --budget 60      # 60 s per run
    python benchmarks/bench_learned_baselines.py --graphs paper/ffnn --methods gdp

For each graph and method: ``train_placeto`` / ``train_gdp`` with ``--budget`` seconds of training
(the final evaluation comes on top), then the makespan of the best decoded placement next to the
final greedy decode, the mean of the final sampled decodes, the critical-path heuristic
(``reference_makespan``), the lower bound and the best known placement (the paper's ENUMOPT-level
figures quoted in issue 4; our local search reached 56.70 on ffnn), with the episodes run and the
seconds per training episode. Results depend on the machine's speed (a budget, not an episode count,
ends each run); ``--json PATH`` also writes them as JSON.

Results on the 2 shared vCPUs of the development machine, ``--budget 90``, seed 0 (paper units;
``makespan`` = best decoded placement, ``greedy`` = greedy decode of the final policy)::

    graph              method    makespan    greedy  smp mean crit.path    best x best  episodes   s/ep
    paper/chainmm      placeto     1600.0    1600.0    1900.1    1600.1  1200.1   1.33      1328  0.068
    paper/chainmm      gdp         1400.2    1500.1    1500.1    1600.1  1200.1   1.17     55744  0.002
    paper/ffnn         placeto       84.2      84.2     109.6      84.2    64.2   1.31       448  0.207
    paper/ffnn         gdp           78.2      84.4      84.4      84.2    64.2   1.22     36480  0.002
    paper/llama-block  placeto      326.3     388.7     379.9     247.1   167.1   1.95       320  0.291
    paper/llama-block  gdp          208.5     252.5     252.5     247.1   167.1   1.25     31776  0.003
    paper/llama-layer  placeto      318.7     375.2     384.3     237.8   156.6   2.04       176  0.537
    paper/llama-layer  gdp          217.3     230.9     230.9     237.8   156.6   1.39     30816  0.003

Like the paper's Table 2 (Placeto 411.5 and 295.1 ms against the critical path's 230.9 and 292.6 on
the llama graphs), Placeto is worse than the critical-path heuristic on the llama graphs: within
the budget it reaches a few hundred episodes there and settles near the one-device placement
(388.7 = the total work on llama-block), which beats random spreading when a transfer costs 4x
the op. GDP beats the heuristic on every graph but its per-op softmaxes collapse early (sampled
mean = greedy), 17-39 % above the best known placements.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch

from agents.gdp import train_gdp
from agents.placeto import train_placeto

GRAPHS = ("paper/chainmm", "paper/ffnn", "paper/llama-block", "paper/llama-layer")
BEST_KNOWN = {"paper/chainmm": 1200.1, "paper/ffnn": 64.2, "paper/llama-block": 167.1, "paper/llama-layer": 156.6}
METHODS = {"placeto": train_placeto, "gdp": train_gdp}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=float, default=120.0, help="training seconds per run [s] (default 120)")
    ap.add_argument("--devices", type=int, default=4, help="device count (default 4)")
    ap.add_argument("--graphs", nargs="+", default=list(GRAPHS), help="paper graph names")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args()

    print(f"# learned baselines: {args.devices} devices, reference sim, {args.budget:g} s training per run, "
          f"seed {args.seed}; {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"torch {torch.__version__}")
    header = (f"{'graph':<18} {'method':<8} {'makespan':>9} {'greedy':>9} {'smp mean':>9} {'crit.path':>9} "
              f"{'best':>7} {'x best':>6} {'bound':>8} {'episodes':>8} {'s/ep':>7} {'seconds':>7}")
    print(header)
    print("-" * len(header))
    rows = []
    for graph in args.graphs:
        for method in args.methods:
            started = time.perf_counter()
            res = METHODS[method](graph, args.devices, budget_seconds=args.budget, seed=args.seed)
            info = res.info
            best = BEST_KNOWN.get(graph)
            ratio = f"{res.makespan / best:6.2f}" if best else f"{'-':>6}"
            print(f"{graph:<18} {method:<8} {res.makespan:9.1f} {info['final_greedy']:9.1f} "
                  f"{info['sampled_mean']:9.1f} {info['reference_makespan']:9.1f} "
                  f"{best if best else float('nan'):7.1f} {ratio} {info['lower_bound']:8.1f} {res.episodes:8d} "
                  f"{info['seconds_per_episode']:7.3f} {time.perf_counter() - started:7.1f}", flush=True)
            rows.append({"graph": graph, "method": method, "best_known": best, **res.to_dict()})
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
