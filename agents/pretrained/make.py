"""Train and export the shipped policy: ``python -m agents.pretrained.make --minutes 30``.

Runs ``doppler train mix`` with :data:`TRAIN_MIX` (built-in workload families at several sizes and
random DAGs), :data:`TOPOLOGIES` (device counts and presets drawn per episode) and the default
recipe, then writes the final policy to :data:`agents.pretrained.WEIGHTS_PATH` (float16) and the
training record to ``pretrained.json`` and ``pretrained.md`` beside it. Held out of training, for
benchmarks of unseen graphs (:data:`HELD_OUT`): the whole ``llama-layer`` family, every paper graph
(``paper/...``), random DAGs above 400 ops, and the ``h100x8-nvswitch`` / ``h100x16-2node`` presets.

The default stage is ``sim`` (PPO in the simulator from the heuristic prior: on held-out graphs it
generalised where imitation of per-graph search placements did not, docs/results/bench_place.md), and
the exported weights are those whose periodic greedy decode of the held-out :data:`EVAL` graph was
best (``policy_best.pt``: checkpoint selection on a validation graph), else the stage's final ones.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from agents.pretrained import INFO_PATH, WEIGHTS_PATH, export_checkpoint

TRAIN_MIX = (
    "random:n_ops=30..80,levels=4..10",
    "random:n_ops=80..160,levels=6..16",
    "random:n_ops=160..400,levels=8..30",
    "chainmm:blocks=2..3,k=2..3",
    "ffnn:layers=3..8,blocks=1..2",
    "llama-block:blocks=2,seq=256..2048",
    "llama-block:blocks=4,seq=256..2048",
)
TOPOLOGIES = ("2", "3", "4", "6", "8", "p100x4", "v100x8-dgx1")
POLICY_KWARGS = {"heuristic_prior": True, "residual_clip": 1.0, "plc_affinity": True, "structure_features": 1}
"""The shipped policy's architecture: the best recipe's without op-identity inputs (random features of
op ids, which carry nothing over to a graph never trained on), with the learned corrections of the
heuristic prior bounded (``residual_clip``) so that they cannot stray far from it on unseen graphs."""
EVAL = ("llama-layer:blocks=2",)  # held-out graph decoded during and after training (the run's main graph)
HELD_OUT = {
    "families": ["llama-layer (every size)"],
    "graphs": ["every paper graph (paper/chainmm, paper/ffnn, paper/llama-block, paper/llama-layer, "
               "the -8gpu and gdp variants)", "random DAGs above 400 ops"],
    "topologies": ["h100x8-nvswitch", "h100x16-2node", "device counts 5, 7 and above 8"],
}


def train_command(minutes: float, out: str, seed: int, pool: int, evals: int, stages: str = "sim") -> list[str]:
    """The ``doppler train`` command line of the shipped policy (PPO from the heuristic prior, without the
    imitation anchor the ``best`` recipe has had since commit 67df7ed: the shipped policy was trained before it,
    at the commit ``pretrained.json`` records, and this command keeps training the same way)."""
    return ["doppler", "train", "mix", "--stages", stages, "--graph-mix", *TRAIN_MIX, "--graph-eval", *EVAL,
            "--topology-mix", *TOPOLOGIES, "--devices", "4", "--mix-pool", str(pool),
            "--set", f"imitation.teacher_evals={evals}", "--set", "rl.anchor_coef=0",
            "--budget-minutes", f"{minutes:g}", "--seed", str(seed),
            "--out", out, "--no-progress", "--baseline-seconds", "2", "--sample-decodes", "8",
            "--policy-kwargs", json.dumps(POLICY_KWARGS, separators=(",", ":"))]


def commit() -> str:
    """The repository's HEAD commit (``unknown`` outside a git checkout)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_record(record: dict[str, Any]) -> None:
    """``pretrained.json`` and its readable twin ``pretrained.md``."""
    INFO_PATH.write_text(json.dumps(record, indent=2) + "\n")
    lines = ["# The shipped policy (`agents/pretrained/doppler_policy.pt`)", "",
             "Written by `python -m agents.pretrained.make`; the same record as `pretrained.json`.", "",
             f"- trained at commit `{record['commit']}`, seed {record['seed']}, {record['minutes']} minutes "
             f"({record['machine']})", f"- stages: {record['stages']}",
             f"- exported: `{record.get('exported', 'the final weights')}`"
             + (" (the checkpoint whose periodic greedy decode of the held-out evaluation graph was best)"
                if record.get("exported") == "policy_best.pt" else ""), "",
             "Command:", "", "```bash", record["command"], "```", "",
             "Training mix (graph specs drawn per episode; ranges drawn per graph):", ""]
    lines += [f"- `{s}`" for s in record["train_mix"]]
    lines += ["", f"Topologies drawn per episode: {', '.join(record['topologies'])}", "", "Held out of training:", ""]
    for kind, items in record["held_out"].items():
        lines.append(f"- {kind}: {'; '.join(items)}")
    lines += ["", f"Policy: `{record['policy_kwargs']}`, {record['size_bytes']} bytes.", ""]
    if record.get("note"):
        lines += [record["note"], ""]
    if record.get("held_out_eval"):
        lines += ["Held-out evaluation of the run's final policy at the end of training (its own decodes; the "
                  "exported checkpoint may be an earlier one):", "",
                  "| graph | ops | greedy / critical path | best of K / critical path |", "|---|---:|---:|---:|"]
        for r in record["held_out_eval"]:
            lines.append(f"| {r['graph']} | {r['n_ops']} | {r['greedy_ratio_to_critical_path']:.3f} | "
                         f"{r['best_of_k_ratio_to_critical_path']:.3f} |")
    INFO_PATH.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="training budget (default 30)")
    p.add_argument("--out", default="out/pretrained", help="training folder (default out/pretrained)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pool", type=int, default=6, help="graphs per spec (default 6)")
    p.add_argument("--evals", type=int, default=5000, help="search-teacher evaluations per graph (default 5000)")
    p.add_argument("--stages", default="sim", help="training stages (default sim: PPO from the heuristic prior, "
                   "which generalised to held-out graphs; il,sim adds imitation of the search teacher first)")
    p.add_argument("--machine", default="a shared 2-core CPU, no GPU", help="where it ran (for the record)")
    p.add_argument("--export-only", action="store_true", help="export OUT's selected policy without training")
    p.add_argument("--commit", help="the commit the policy was trained at (default: HEAD when training starts)")
    p.add_argument("--note", default="", help="a remark for the record (e.g. how well it does)")
    a = p.parse_args(argv)
    cmd = train_command(a.minutes, a.out, a.seed, a.pool, a.evals, a.stages)
    trained_at = a.commit or commit()
    if not a.export_only:
        rc = subprocess.run([sys.executable, "-m", "doppler_gym.cli.main", *cmd[1:]]).returncode
        if rc:
            return rc
    summary = json.loads((Path(a.out) / "summary.json").read_text())
    stage = summary["args"]["stages"][-1]
    record = {
        "command": shlex.join(cmd), "seed": a.seed, "commit": trained_at, "minutes": a.minutes, "machine": a.machine,
        "train_mix": list(TRAIN_MIX), "topologies": list(TOPOLOGIES), "graph_eval": list(EVAL),
        "held_out": HELD_OUT, "stages": {s: d["episodes"] for s, d in summary["stages"].items()},
        "policy_kwargs": summary["args"]["policy_kwargs"], "recipe": summary["args"]["recipe"],
        "held_out_eval": [{k: r[k] for k in ("graph", "n_ops", "greedy_ratio_to_critical_path",
                                              "best_of_k_ratio_to_critical_path")} for r in summary["held_out"] or []],
        "teacher_targets": summary.get("il_teacher_targets"), "note": a.note,
    }
    selected = Path(a.out) / "policy_best.pt"
    if not selected.exists():
        selected = Path(a.out) / f"policy_{stage}.pt"
    record["exported"] = selected.name
    path = export_checkpoint(selected, WEIGHTS_PATH,
                             {k: record[k] for k in ("command", "seed", "commit")})
    record["size_bytes"] = path.stat().st_size
    write_record(record)
    print(f"wrote {path} ({record['size_bytes']} bytes), {INFO_PATH} and {INFO_PATH.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
