"""The default sample rule of ``agents.place`` on validation graphs (not the held-out set of bench_place).

``place(search_seconds=S)`` draws sampled decodes as extra search starts (a fifth of the budget at
most) unless the greedy decode is over ``sample_gap`` times the best heuristic's makespan. This
script compares ``sample_gap`` values against plain ``local_search`` at the same wall clock on
random DAGs of 2,000-4,000 ops, whose decodes cost a large part of a short budget. None of these
graphs is in bench_place's held-out set or in the shipped policy's training mix (random DAGs of
30-400 ops), so a rule chosen here is not tuned on the instances it is judged on.

    python benchmarks/bench_sample_rule.py --gaps 1.1,1.0 --seeds 0,1,2 --budgets 5,20 --out out/sample_rule
    python benchmarks/bench_sample_rule.py --decode-shares inf,0.25 --budgets 2,5,20 --out out/decode_share

``--decode-shares`` compares ``decode_share`` values instead (the default sample gap): the share of
the budget past which the search goes without the greedy decode (``inf``: never).

Wall-clock budgets: run it alone on the machine. Prints one JSON row per (instance, seed, budget),
then the geometric mean of each rule / plain and of the second rule / the first per budget.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from scipy.stats import gmean

VALIDATION = (  # (random DAG spec, topology)
    ("random:n_ops=2000,levels=60,seed=21", 4), ("random:n_ops=3000,levels=80,seed=17", "p100x4"),
    ("random:n_ops=4000,levels=100,seed=8", 8), ("random:n_ops=4000,levels=120,seed=2", 4),
    ("random:n_ops=3000,levels=50,seed=4", 8), ("random:n_ops=2500,levels=100,seed=9", "h100x8-nvswitch"),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gaps", default="1.1,1.0", help="sample_gap values, comma-separated")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--budgets", default="5,20", help="search budgets [s]")
    ap.add_argument("--decode-shares", default=None,
                    help="compare these decode_share values (comma-separated, inf allowed) instead of --gaps")
    ap.add_argument("--out", default="out/sample_rule")
    args = ap.parse_args()

    import torch
    from bench_place import build  # this folder is on sys.path when the script runs

    import doppler_gym as dg
    from agents.placer import place, resolve_policy

    torch.set_num_threads(1)
    option = "decode_share" if args.decode_shares else "sample_gap"
    gaps = [float(x) for x in (args.decode_shares or args.gaps).split(",")]
    policy, _ = resolve_policy(None)
    rows = []
    for spec, topo_spec in VALIDATION:
        graph = build(spec)
        topo = dg.instances.resolve_topology(topo_spec)
        config = dg.instances.default_config(graph)
        for seed in (int(s) for s in args.seeds.split(",")):
            for budget in (float(b) for b in args.budgets.split(",")):
                row = {"graph": spec, "topology": topo.name, "seed": seed, "budget": budget,
                       "plain": dg.baselines.local_search(graph, topo, config, seed=seed, seconds=budget).makespan}
                for gap in gaps:
                    r = place(graph, topology=topo, policy=policy, search_seconds=budget, seed=seed, reference=False,
                              **{option: gap})
                    row[str(gap)] = {"makespan": r.makespan, "samples": r.info["samples"], "evals": r.info.get("evals"),
                                     "start": r.info.get("start"), "seconds": r.seconds,
                                     "decode_skipped": "decode_skipped" in r.info}
                rows.append(row)
                print(json.dumps(row), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    for budget in sorted({r["budget"] for r in rows}):
        sel = [r for r in rows if r["budget"] == budget]
        ratios = {str(g): gmean([r[str(g)]["makespan"] / r["plain"] for r in sel]) for g in gaps}
        line = ", ".join(f"{option} {g} / plain {v:.4f}" for g, v in ratios.items())
        if len(gaps) > 1:
            a, b = str(gaps[0]), str(gaps[1])
            line += f", {b} / {a} {gmean([r[b]['makespan'] / r[a]['makespan'] for r in sel]):.4f}"
        print(f"budget {budget:g} s ({len(sel)} runs): {line}")


if __name__ == "__main__":
    main()
