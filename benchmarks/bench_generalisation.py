"""Generalisation of a DOPPLER policy trained on a mix of generated graphs.

Run from the repository root (about ``--minutes`` + a few minutes)::

    nice -n 5 python -m benchmarks.bench_generalisation --minutes 8 > out/bench_generalisation.log 2>&1
    python -m benchmarks.bench_generalisation --report     # tables from out/bench_generalisation/results.json
    python -m benchmarks.bench_generalisation --smoke      # 6 s of training (doppler recipe), one fine-tuning

1. Train one policy (``agents.training``, stages ``il,sim``, ``graph="mix"``) on :data:`TRAIN_MIX`: a
   new graph per episode (random DAGs of 30 to 80 ops, small chainmm / ffnn / llama-block), 4 devices.
2. Zero-shot: its greedy and best-of-K decodes on :data:`HELD_OUT` graphs it never saw (larger
   sizes, and workloads absent from the mix: llama-layer, the paper's llama-block), against the
   critical-path heuristic (the env's reference makespan), each graph in its own simulator model.
3. Few-shot: ``--finetune-episodes`` simulator RL episodes from the mix policy (``init``) on each
   held-out graph, then the same decodes.
4. Devices: the 4-device policy decoded on 8 devices (zero-shot), against critical path on 8.

Every makespan is the policy's own placement (greedy, or best of ``--k`` sampled decodes).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from benchmarks import common

TRAIN_MIX = ("random:n_ops=30..80,levels=4..10", "chainmm:blocks=2", "ffnn:layers=2..5,blocks=2",
             "llama-block:blocks=2")
HELD_OUT = ("random:n_ops=120,levels=12,seed=7", "ffnn:layers=8,blocks=2", "chainmm:blocks=3,k=4",
            "llama-layer:blocks=2", "paper/llama-block")
DEFAULT_OUT = "out/bench_generalisation"
FAST = {"logging": {"progress": False, "tensorboard": False}, "checkpoints": {"minutes": 60.0}}  # TrainArgs groups


def _evaluation(k: int, held_out: tuple[str, ...] = ()) -> dict:
    """The TrainArgs evaluation group of these runs: K sampled decodes, critical path in 0.1 s."""
    return {"sample_decodes": k, "baselines": ("critical_path",), "baseline_seconds": 0.1, "held_out": held_out}


def train_mix(minutes: float, k: int, seed: int, out: Path, recipe: str = "best", pool: int | None = 8) -> dict:
    from agents.training import TrainArgs, train

    args = TrainArgs(graph="mix", mix={"graphs": TRAIN_MIX, "pool": pool}, devices=4, stages=("il", "sim"),
                     budget_minutes=minutes, seed=seed, out=str(out), recipe=recipe,
                     evaluation=_evaluation(k, HELD_OUT), **FAST)
    s = train(args)
    st = s["stages"]
    return {"held_out": s["held_out"], "mean_ratio": s["held_out_mean_ratio_to_critical_path"],
            "episodes": {n: d["episodes"] for n, d in st.items()},
            "seconds_per_episode": {n: d["seconds_per_episode"] for n, d in st.items()}}


def finetune(spec_text: str, init: Path, episodes: int, k: int, seed: int, out: Path, recipe: str = "best") -> dict:
    from agents.training import TrainArgs, train
    from agents.training.graphs import GraphSpec

    spec = GraphSpec.parse(spec_text, "held-out")
    args = TrainArgs(graph=spec.name, graph_params=dict(spec.params), devices=4, stages=("sim",),
                     episodes={"sim": episodes}, init=str(init), seed=seed, out=str(out), recipe=recipe,
                     evaluation=_evaluation(k), **FAST)
    t0 = time.perf_counter()
    s = train(args)
    return {"greedy": s["makespan"], "best_of_k": s["best_of_k"]["makespan"], "critical_path": s["critical_path"],
            "episodes": s["stages"]["sim"]["episodes"], "seconds": round(time.perf_counter() - t0, 1)}


def on_devices(init: Path, devices: int, k: int, seed: int) -> list[dict]:
    from agents.training import Instance, TrainArgs, load_policy
    from agents.training.evaluate import held_out_rows

    args = TrainArgs(graph="mix", mix={"graphs": TRAIN_MIX}, evaluation={"held_out": HELD_OUT}, devices=devices,
                     seed=seed)
    inst = Instance.from_args(args)
    policy = load_policy(init, inst.sim_env())
    return held_out_rows(policy, inst, k, seed)


def report(results: dict) -> None:
    mix = results.get("mix")
    if not mix:
        print("no results yet")
        return
    fine = results.get("finetune", {})
    print(f"\n## Zero-shot and few-shot on unseen graphs (4 devices; trained on {', '.join(TRAIN_MIX)}; "
          f"episodes {mix['episodes']})\n")
    print("| held-out graph | ops | CP | zero-shot greedy / best-of-K | ratio to CP (greedy / best) "
          "| fine-tuned greedy / best-of-K (episodes) | ratio to CP |")
    print("|---|---|---|---|---|---|---|")
    for spec, r in zip(HELD_OUT, mix["held_out"]):
        f = fine.get(spec)
        ft = f"{f['greedy']:.4g} / {f['best_of_k']:.4g} ({f['episodes']})" if f else "-"
        fr = f"{f['greedy'] / f['critical_path']:.3f} / {f['best_of_k'] / f['critical_path']:.3f}" if f else "-"
        print(f"| {spec} | {r['n_ops']} | {r['critical_path']:.4g} | {r['greedy']:.4g} / {r['best_of_k']:.4g} "
              f"| {r['greedy_ratio_to_critical_path']:.3f} / {r['best_of_k_ratio_to_critical_path']:.3f} "
              f"| {ft} | {fr} |")
    print(f"\ngeometric mean greedy / CP, zero-shot: {mix['mean_ratio']:.3f}")
    eight = results.get("devices8")
    if eight:
        print("\n## The 4-device policy on 8 devices (zero-shot)\n")
        print("| graph | ops | CP (8 devices) | greedy | best-of-K | greedy / CP | best / CP |")
        print("|---|---|---|---|---|---|---|")
        for spec, r in zip(HELD_OUT, eight):
            print(f"| {spec} | {r['n_ops']} | {r['critical_path']:.4g} | {r['greedy']:.4g} | {r['best_of_k']:.4g} "
                  f"| {r['greedy_ratio_to_critical_path']:.3f} | {r['best_of_k_ratio_to_critical_path']:.3f} |")


def main(argv: list[str] | None = None) -> None:
    p = common.parser(__doc__, out=DEFAULT_OUT)
    p.add_argument("--minutes", type=float, default=8.0, help="training budget on the mix (il + sim) [min]")
    p.add_argument("--finetune-episodes", type=int, default=16, help="sim episodes of fine-tuning per graph")
    p.add_argument("--k", type=int, default=32, help="sampled decodes of each policy")
    p.add_argument("--recipe", choices=("best", "doppler"), default="best",
                   help="training recipe (default best: search teacher per graph, structural inputs; doppler: the "
                   "published critical-path teacher, as measured before 2026-12-01)")
    p.add_argument("--pool", type=int, default=8, help="graphs per mix spec (the search targets are reused)")
    p.add_argument("--report", action="store_true", help="print the tables of the saved results and stop")
    args = p.parse_args(argv)
    fine_tuned = HELD_OUT
    if args.smoke:  # the cheap teacher: the search teacher's evaluations per mix graph take minutes
        args.minutes, args.finetune_episodes, args.k, args.pool, args.recipe = 0.1, 1, 2, 1, "doppler"
        fine_tuned = HELD_OUT[:1]
        if args.out == DEFAULT_OUT:  # keep a measured run's results apart from a smoke run's
            args.out = "out/smoke/bench_generalisation"
    common.start("bench_generalisation", args)
    import torch

    torch.set_num_threads(1)  # the decodes outside a Trainer too: more threads are much slower on a shared CPU
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    results = json.loads(path.read_text()) if path.is_file() and not args.smoke else {}

    def save() -> None:
        path.with_suffix(".tmp").write_text(json.dumps(results, indent=1) + "\n")
        os.replace(path.with_suffix(".tmp"), path)

    if args.report:
        report(results)
        return
    ckpt = out / "mix" / "checkpoint.pt"
    print(f"[{time.strftime('%H:%M:%S')}] training on the mix ...", flush=True)
    results["mix"] = train_mix(args.minutes, args.k, args.seed, out / "mix", args.recipe, args.pool)
    save()
    print(f"[{time.strftime('%H:%M:%S')}] 8 devices ...", flush=True)
    results["devices8"] = on_devices(ckpt, 8, args.k, args.seed)
    save()
    results.setdefault("finetune", {})
    for i, spec in enumerate(fine_tuned):
        print(f"[{time.strftime('%H:%M:%S')}] fine-tuning on {spec} ...", flush=True)
        results["finetune"][spec] = finetune(spec, ckpt, args.finetune_episodes, args.k, args.seed, out / f"ft{i}",
                                               args.recipe)
        save()
    report(results)
    if args.smoke:
        common.finite_positive(results["mix"]["mean_ratio"], "the zero-shot greedy / critical path mean")
        for part in (results["mix"]["held_out"], results["devices8"], list(results["finetune"].values())):
            for r in part:
                common.finite_positive(r["greedy"], f"a greedy decode's makespan in {r}")


if __name__ == "__main__":
    main()
