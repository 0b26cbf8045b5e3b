"""Moves drawn from the critical chain: ``local_search(critical_share=s)`` against plain ``local_search``.

With ``critical_share=s`` a share ``s`` of the moved ops are drawn from the critical chain of the
current placement's run (:func:`doppler_gym.sim.critical.critical_chain`) instead of uniformly. This
script compares the two at the same wall clock (or the same number of evaluations with
``--evals``), same seeds, on the validation DAGs of ``bench_sample_rule.py`` and small random DAGs
of 500-1,000 ops (``--set validation``, where a default is chosen) or on bench_place's held-out
instances (``--set heldout``, where it is judged)::

    python benchmarks/bench_critical_moves.py --set validation --shares 0.3 --seeds 0,1 --out out/crit_val
    python benchmarks/bench_critical_moves.py --set heldout --shares 0.3 --seeds 0,1 --out out/crit_heldout
    python benchmarks/bench_critical_moves.py --set heldout --shares 0.3 --evals 50000 --max-ops 1000 \
        --out out/crit_evals
    python benchmarks/bench_critical_moves.py --set heldout --shares 0.5 --budgets 2 --max-ops 1000 \
        --oracle 100000 --out out/crit_oracle
    python benchmarks/bench_critical_moves.py --set validation --shares '' --batches 64 --out out/batch64

``--batches B`` compares plain moves with ``B`` neighbours per step against the default batch size.

``--oracle EVALS`` adds the most a per-op move proposal can carry: per instance, the best of three
plain searches of ``EVALS`` evaluations is the oracle, and local search with every op's proposal row
pointing at its device there (``proposal_share=0.5``), without and with ``critical_share=0.5``, runs
beside plain; the report adds the oracle's makespan / plain.

Wall-clock budgets: run it alone on the machine. Writes ``OUT/results.json`` (one row per instance,
seed, share and budget) and prints, per share and budget, the geometric mean over instances of the
share's makespan / plain (each instance: the geometric mean over seeds) with a 95% bootstrap interval,
and the instances where the share is better or worse beyond noise (Welch's t-test, p < 0.05).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench_place import QUALITY, build, report_seeds, seed_summary  # this folder is on sys.path
from bench_sample_rule import VALIDATION

SMALL_VALIDATION = (  # random DAGs of 500-1,000 ops: in neither the held-out set nor the policy's training mix
    ("random:n_ops=500,levels=25,seed=31", 4), ("random:n_ops=800,levels=40,seed=32", 8),
    ("random:n_ops=1000,levels=20,seed=33", "p100x4"), ("random:n_ops=700,levels=35,seed=34", "h100x8-nvswitch"),
)


def oracle_proposal(graph, topo, config, evals: int):
    """The oracle: the best of three plain local searches of ``evals`` evaluations (seeds 100-102), and
    its ``(n_ops, D)`` one-hot proposal (every op pointed at its device there)."""
    import numpy as np

    import doppler_gym as dg

    best = min((dg.baselines.local_search(graph, topo, config, seed=100 + k, max_evals=evals, seconds=None)
                for k in range(3)), key=lambda p: p.makespan)
    proposal = np.zeros((graph.n_ops, topo.n_devices))
    proposal[np.arange(graph.n_ops), best.assignment] = 1.0
    return best, proposal


def run(instances, shares: list[float], seeds: list[int], budgets: list[float], evals: int | None,
        max_ops: int | None, oracle_evals: int | None = None, batches: list[int] = ()) -> list[dict]:
    """One row per (instance, seed): ``search[budget]`` holds plain's makespan (``local_search``), each
    share's (``critical=<share>``), each batch size's (``batch=<rows>``, plain moves) and, with
    ``oracle_evals``, the oracle proposal's without and with critical-chain moves (``oracle``,
    ``oracle+critical=0.5``), and the evaluations each ran."""
    import doppler_gym as dg

    rows = []
    for spec, topo_spec in instances:
        graph = build(spec)
        if max_ops is not None and graph.n_ops > max_ops:
            continue
        topo = dg.instances.resolve_topology(topo_spec)
        config = dg.instances.default_config(graph)
        variants = {"local_search": {}, **{f"critical={s}": {"critical_share": s} for s in shares},
                    **{f"batch={b}": {"batch_size": b} for b in batches}}
        oracle = None
        if oracle_evals:
            oracle, proposal = oracle_proposal(graph, topo, config, oracle_evals)
            variants.update({"oracle": {"proposal": proposal},
                             "oracle+critical=0.5": {"proposal": proposal, "critical_share": 0.5}})
        for seed in seeds:
            row = {"graph": spec, "n_ops": graph.n_ops, "topology": topo.name, "seed": seed, "search": {},
                   "oracle_makespan": None if oracle is None else oracle.makespan}
            for budget in ([evals] if evals else budgets):
                bound = {"max_evals": budget, "seconds": None} if evals else {"seconds": budget}
                cell = {}
                for key, options in variants.items():
                    p = dg.baselines.local_search(graph, topo, config, seed=seed, **options, **bound)
                    cell[key], cell[key + "_evals"], cell[key + "_wall"] = p.makespan, p.info["evals"], p.seconds
                row["search"][str(budget)] = cell
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def report(rows: list[dict], unit: str) -> None:
    seeds = sorted({r["seed"] for r in rows})
    runs = [[r for r in rows if r["seed"] == s] for s in seeds]
    first = next(iter(rows[0]["search"].values()))
    for key in (k for k in first if k != "local_search" and not k.endswith(("_evals", "_wall"))):
        print(f"\n### {key} / plain local search ({len(seeds)} seeds)")
        summary = seed_summary(runs, against="local_search", candidate=key)
        report_seeds(summary, [f"seed {s}" for s in seeds], candidate=key, unit=unit)
    if rows[0]["oracle_makespan"] is not None:
        from scipy.stats import gmean

        for budget in rows[0]["search"]:
            plain = {}
            for r in rows:
                plain.setdefault((r["graph"], r["topology"]), []).append(r["search"][budget]["local_search"])
            oracle = {(r["graph"], r["topology"]): r["oracle_makespan"] for r in rows}
            room = gmean([oracle[k] / (sum(v) / len(v)) for k, v in plain.items()])
            print(f"budget {budget} {unit}: the oracle placement / mean plain local search, geometric mean {room:.4f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", choices=("validation", "heldout"), default="validation")
    ap.add_argument("--shares", default="0.3", help="critical_share values to compare with 0, comma-separated "
                    "('' for none)")
    ap.add_argument("--batches", default="", help="batch sizes (rows per step) to compare with local_search's "
                    "default, comma-separated")
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--budgets", default="2,5", help="wall-clock budgets [s], comma-separated")
    ap.add_argument("--evals", type=int, default=None, help="a budget in evaluations instead of wall clock")
    ap.add_argument("--max-ops", type=int, default=None, help="skip larger graphs")
    ap.add_argument("--oracle", type=int, default=None, metavar="EVALS",
                    help="also search with the oracle proposal: the best of 3 plain searches of EVALS evaluations")
    ap.add_argument("--out", default="out/bench_critical_moves")
    ap.add_argument("--report", action="store_true", help="reprint the tables of OUT/results.json")
    args = ap.parse_args()
    shares = [float(s) for s in args.shares.split(",") if s]
    batches = [int(b) for b in args.batches.split(",") if b]
    out = Path(args.out) / "results.json"
    if args.report:
        saved = json.loads(out.read_text())
        report(saved["rows"], "evals" if saved["args"]["evals"] else "s")
        return
    instances = QUALITY if args.set == "heldout" else (*SMALL_VALIDATION, *VALIDATION)
    rows = run(instances, shares, [int(s) for s in args.seeds.split(",")],
               [float(b) for b in args.budgets.split(",")], args.evals, args.max_ops, args.oracle, batches)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    tmp.replace(out)
    report(rows, "evals" if args.evals else "s")


if __name__ == "__main__":
    main()
