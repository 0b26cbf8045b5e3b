"""``doppler train GRAPH``: the three training stages (imitation, simulator RL, real RL) on one graph or a mix.

A thin front end of :mod:`agents.training` (imported when the command runs, so ``doppler`` itself
stays free of torch): it builds a :class:`~agents.training.TrainArgs` from the flags, trains, and
prints the learned placement next to the baselines and the lower bound.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from typing import Any

import numpy as np

from doppler_gym.cli import common


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train", help="train a placement policy (imitation, simulator RL, real-system RL)",
        description="Train DOPPLER's dual SEL/PLC policy on one graph or a mix (GRAPH = mix): il = imitation "
        "(DAgger) of a teacher, sim = RL in the simulator (MaskablePPO), real = RL on Doppler-Real-v0. The default "
        "recipe (--recipe best) imitates a local-search placement of each graph with a policy that corrects a "
        "list-scheduling prior (op-identity and structural inputs), then runs a gentle PPO anchored to the "
        "teacher (--set rl.anchor_coef=0 frees it); --recipe doppler is "
        "the published recipe (critical-path teacher). Writes "
        "DIR/checkpoint.pt (resumable), DIR/policy_<stage>.pt, DIR/metrics.jsonl, DIR/tb/ (TensorBoard), "
        "DIR/summary.json and DIR/gantt.png, and prints the learned placement against the baselines.",
    )
    common.add_graph_argument(p)
    common.add_topology_arguments(p)
    p.add_argument("--recipe", choices=("best", "doppler"), default="best",
                   help="defaults of the teacher, policy inputs and RL settings: best (default: the best measured "
                   "recipe: a local-search teacher per graph, the heuristic prior, op-identity and structural GNN "
                   "inputs, PLC affinity, gentle PPO anchored to the teacher) or doppler (the published recipe: "
                   "critical-path teacher, rl.lr 1e-3, no anchor); explicit flags win")
    p.add_argument("--learn", choices=("both", "sel", "plc"), default="both",
                   help="decisions the policy learns: both (DOPPLER), sel (the critical-path teacher places) or "
                   "plc (the teacher selects): the paper's ablations")
    p.add_argument("--graph-mix", nargs="+", default=[], metavar="SPEC",
                   help="with GRAPH = mix: graph specs NAME[:KEY=VALUE,...] drawn per training episode; a VALUE "
                   "may be a range LO..HI and a workload's unset seed is drawn "
                   "(e.g. random:n_ops=40..80 chainmm paper/ffnn)")
    p.add_argument("--graph-eval", nargs="+", default=[], metavar="SPEC",
                   help="held-out graph specs (fixed values) decoded at the end, against critical path "
                   "(summary.json held_out); with GRAPH = mix the first is the main graph")
    p.add_argument("--topology-mix", nargs="+", default=[], metavar="TOPO",
                   help="with GRAPH = mix: topologies drawn per training episode, device counts or presets "
                   "(e.g. 2 4 8 p100x4)")
    p.add_argument("--mix-pool", type=int, metavar="N",
                   help="with GRAPH = mix: draw from a fixed pool of N graphs per spec (the search teacher's "
                   "targets are then reused; default a fresh graph per draw)")
    p.add_argument("--max-ops", type=int, metavar="N",
                   help="observation padding for GRAPH = mix (default 1.25 x the largest sampled graph)")
    p.add_argument("--stages", default="il,sim", metavar="S,S",
                   help="stages to run, in order, among il, sim, real (default il,sim)")
    p.add_argument("--budget-minutes", type=float, metavar="M",
                   help="wall-clock budget of the stages, split il 1 : sim 3 : real 2 over the stages run "
                   "(a stage that ends early by --episodes leaves its time to the next); the final "
                   "evaluation adds a few seconds plus --baseline-seconds")
    p.add_argument("--episodes", metavar="STAGE=N,...",
                   help="episodes per stage, e.g. il=300,sim=2000 (a stage stops at its count or its budget "
                   "share, whichever comes first; default: unbounded with a budget, else il=300,sim=1000,real=200)")
    p.add_argument("--out", default="out/train", metavar="DIR", help="output folder (default out/train)")
    p.add_argument("--init", metavar="CHECKPOINT",
                   help="start from this checkpoint's weights (e.g. trained on another graph or device count)")
    p.add_argument("--resume", action="store_true",
                   help="continue from DIR/checkpoint.pt (counters, optimizer, RNG, imitation buffer), dropping the "
                   "metrics rows a killed run wrote after it; without a checkpoint, says so and starts fresh")
    p.add_argument("--algo", choices=("ppo", "reinforce"), default="ppo",
                   help="RL algorithm of the sim and real stages (default ppo: MaskablePPO)")
    p.add_argument("--il-teacher", choices=("critical_path", "search"),
                   help="whom imitation copies: the critical-path heuristic (DOPPLER) or a local-search placement "
                   "of each graph (cached per graph on a mix; see agents.training.teacher); default: the recipe's "
                   "(best: search; doppler or --learn sel|plc: critical_path)")
    p.add_argument("--policy", default="auto", metavar="CLASS",
                   help="auto (agents.policy.DopplerPolicy when available, else MultiInputPolicy), "
                   "MultiInputPolicy, DopplerPolicy or module:Class")
    p.add_argument("--policy-kwargs", metavar="JSON",
                   help="keyword arguments of the policy class (default: the recipe's; best: "
                   '\'{"id_features": 16, "plc_affinity": true, "structure_features": 1, "heuristic_prior": true}\', '
                   'doppler: {})')
    p.add_argument("--real-env", default="Doppler-Real-v0", metavar="ID",
                   help="env id of the real stage (default Doppler-Real-v0)")
    p.add_argument("--real-env-kwargs", default="{}", metavar="JSON",
                   help='extra arguments of the real env, e.g. \'{"devices": "cuda:0,1,2,3"}\'')
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="any training setting: a run option or GROUP.FIELD with GROUP among episodes, mix, "
                   "imitation, rl, ppo, reinforce, real, evaluation, checkpoints, logging (e.g. --set rl.lr=3e-5 "
                   "--set imitation.envs=8; the keys of agents.training.args.setting_keys()); repeatable, later wins")
    p.add_argument("--sample-decodes", type=int, default=16, metavar="K",
                   help="sampled decodes of the final policy, the best is reported (default 16)")
    p.add_argument("--baseline-seconds", type=float, default=5.0, metavar="S",
                   help="local search budget of the final comparison (default 5)")
    p.add_argument("--checkpoint-minutes", type=float, default=5.0, metavar="M",
                   help="write DIR/checkpoint.pt at least this often (default 5)")
    p.add_argument("--device", default="auto", help="torch device (default auto)")
    p.add_argument("--no-tensorboard", action="store_true", help="skip the TensorBoard logs")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                   help="collect the sim stage's rollouts on Ray actors (up to one per env): no ADDRESS = a Ray "
                   "instance on this machine, auto = the cluster `ray start` joined, HOST:6379 = that head node (needs "
                   "pip install 'doppler-gym[ray]'; same seeds, same run)")
    common.add_sim_arguments(p)
    p.set_defaults(func=run)


def parse_episodes(text: str | None) -> dict[str, int]:
    """``"il=300,sim=2000"`` -> ``{"il": 300, "sim": 2000}``."""
    from agents.training.args import STAGES

    out: dict[str, int] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        stage, sep, value = item.partition("=")
        stage = stage.strip()
        if not sep or stage not in STAGES:
            raise ValueError(f"--episodes {item!r}: expected STAGE=N with STAGE among {', '.join(STAGES)}")
        try:
            out[stage] = int(value)
        except ValueError:
            raise ValueError(f"--episodes {item!r}: N must be an integer") from None
    return out


def _json_arg(flag: str, text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{flag}: not valid JSON ({exc.msg}): {text!r}") from None
    if not isinstance(value, dict):
        raise TypeError(f"{flag} must be a JSON object, got {text!r}")
    return value


def args_from_namespace(args: argparse.Namespace) -> Any:
    """The :class:`agents.training.TrainArgs` of the parsed flags."""
    from agents.training import TrainArgs

    mix = args.graph == "mix"
    if mix != bool(args.graph_mix):
        raise ValueError("GRAPH mix and --graph-mix go together (e.g. `doppler train mix --graph-mix "
                         "random:n_ops=40..80 chainmm`)")
    if mix:  # each graph keeps its default model unless a flag sets one
        from agents.training.graphs import parse_specs

        specs = parse_specs(args.graph_mix, "--graph-mix")  # validates the specs early
        flags = args.reference or any(getattr(args, f, None) is not None
                                      for f in (*common.SIM_FLAGS, "jitter"))
        config = common.config_from_args(args, specs[0].build(np.random.default_rng(args.seed))) if flags else None
    else:
        graph = common.graph_from_args(args)  # validates the name early, with the CLI's hints
        config = common.config_from_args(args, graph)
    if args.ray is not None:  # before any stage runs: a clear message when Ray is missing
        from doppler_gym.parallel import import_ray

        try:
            import_ray("--ray")
        except ImportError as exc:  # the CLI prints a ValueError as one line, exit status 2
            raise ValueError(str(exc)) from None
    episodes = parse_episodes(args.episodes)
    settings: dict[str, Any] = {  # keys of agents.training.args.setting_keys()
        "graph": args.graph, "graph_params": common.parse_params(args.param), "devices": args.devices,
        "topology": args.topology, "sim_config": None if config is None else dataclasses.asdict(config),
        "learn": args.learn, "recipe": args.recipe,
        "mix.graphs": tuple(args.graph_mix), "mix.topologies": tuple(args.topology_mix), "mix.pool": args.mix_pool,
        "mix.max_ops": args.max_ops, "evaluation.held_out": tuple(args.graph_eval),
        "stages": tuple(s.strip() for s in args.stages.split(",") if s.strip()), "out": args.out, "seed": args.seed,
        "budget_minutes": args.budget_minutes, "episodes.il": episodes.get("il"), "episodes.sim": episodes.get("sim"),
        "episodes.real": episodes.get("real"), "resume": args.resume, "init": args.init, "algo": args.algo,
        "policy": args.policy,
        "real.env_id": args.real_env, "real.env_kwargs": _json_arg("--real-env-kwargs", args.real_env_kwargs),
        "evaluation.sample_decodes": args.sample_decodes, "evaluation.baseline_seconds": args.baseline_seconds,
        "checkpoints.minutes": args.checkpoint_minutes, "device": args.device,
        "logging.tensorboard": not args.no_tensorboard, "logging.progress": not args.no_progress,
        "ray_address": args.ray,
    }
    if args.il_teacher is not None:  # else the recipe's
        settings["imitation.teacher"] = args.il_teacher
    if args.policy_kwargs is not None:
        settings["policy_kwargs"] = _json_arg("--policy-kwargs", args.policy_kwargs)
    settings.update(parse_set(args.set))
    if args.budget_minutes is None and not episodes:
        print("doppler train: no --budget-minutes or --episodes: default episode counts "
              "(il=300, sim=1000, real=200)")
    return TrainArgs.from_settings(settings)


def parse_set(pairs: list[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` pairs -> settings by key (``{"imitation.lr": 0.001}``), in order; each VALUE is
    read by :func:`doppler_gym.specs.parse_value` (``true``, ``3e-4``, ``None``, ``'a;b'``, else the text).

    Raises:
        ValueError: a pair without ``=``, or an unknown key (with the closest keys and the list of keys).
    """
    from agents.training.args import setting_field
    from doppler_gym.specs import parse_value

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            raise ValueError(f"--set {pair!r}: expected KEY=VALUE (e.g. --set imitation.lr=3e-4)")
        try:
            known = setting_field(key)
        except ValueError as exc:
            raise ValueError(f"--set {pair!r}: {exc}") from None
        value = parse_value(text, f"--set {pair!r}")
        out[key] = _bool_arg(pair, value) if isinstance(known.default, bool) else value
    return out


def _bool_arg(pair: str, value: object) -> bool:
    """A ``--set`` value for a yes/no field: ``True``/``False``, ``true``/``false``, ``1``/``0``."""
    if isinstance(value, bool):
        return value
    words = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}
    word = str(value).strip().lower()
    if word in words:
        return words[word]
    raise ValueError(f"--set {pair!r}: this field is yes or no; give true or false")


def run(args: argparse.Namespace) -> int:
    from agents.training import train

    started = time.perf_counter()
    targs = args_from_namespace(args)
    targs.validate()
    try:
        summary = train(targs)
    except KeyboardInterrupt:
        print(f"doppler train: stopped; `--resume` continues from {targs.out}/checkpoint.pt")
        return 130
    if summary.get("interrupted"):
        print(f"doppler train: interrupted in stage {summary['stage']}; `--resume` continues from "
              f"{targs.out}/checkpoint.pt")
        return 1
    print_summary(summary)
    print(f"wrote {targs.out}/summary.json, {summary['gantt']} and {summary['checkpoint']} "
          f"in {time.perf_counter() - started:.1f} s")
    return 0


def print_summary(summary: dict[str, Any]) -> None:
    """The learned placement next to the baselines and the lower bound (a rich table)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 100), highlight=False)
    unit = summary["time_unit"]
    cp, bound = summary["critical_path"], summary["lower_bound"]
    table = Table(title=f"{summary['graph']} ({summary['n_ops']} ops) on {summary['topology']} "
                  f"({summary['n_devices']} devices), makespan in {common.unit_label(unit)}")
    for label, justify in (("placement", "left"), ("makespan", "right"), ("/ lower bound", "right"),
                           ("/ critical path", "right")):
        table.add_column(label, justify=justify)
    rows = [("learned policy (greedy)", summary["makespan"])]
    if summary.get("best_of_k"):
        rows.append((f"learned policy (best of {summary['best_of_k']['k']} samples)", summary["best_of_k"]["makespan"]))
    if summary.get("best_checkpoint"):
        best = summary["best_checkpoint"]
        rows.append((f"best checkpoint ({best['stage']}, episode {best['episode']}), greedy", best["greedy"]))
        if best.get("best_of_k") is not None:
            rows.append(("best checkpoint, best of K samples", best["best_of_k"]))
    if summary.get("best_found"):
        found = summary["best_found"]
        rows.append((f"best placement found in training ({found['stage']}, episode {found['episode']})",
                     found["makespan"]))
    if summary.get("il_teacher_targets"):
        t = summary["il_teacher_targets"]
        console.print(f"search teacher: {t['targets']} graph targets kept, {t['misses']} searches "
                      f"({t['seconds']:.0f} s), {t['hits']} cache hits")
    if summary.get("il_teacher"):
        teacher = summary["il_teacher"]
        restarts = f" + {teacher['restarts']} restarts" if teacher.get("restarts") else ""
        label = f"imitation teacher (local search, {teacher['evals']} evaluations{restarts})"
        rows.append((label, teacher["makespan"]))
    rows += list(summary["baselines"].items())
    for name, ms in rows:
        table.add_row(name, f"{ms:.6g}", f"{ms / bound:.3f}" if bound else "-", f"{ms / cp:.3f}" if cp else "-")
    table.add_section()
    table.add_row("lower bound", f"{bound:.6g}", "1.000", f"{bound / cp:.3f}" if cp else "-")
    console.print(table)
    if summary.get("real"):  # the real stage: the final greedy placement measured on the real system
        real = summary["real"]
        if real["error"]:
            console.print(f"real system: the final greedy placement failed: {real['error']}")
        else:
            gap = abs(real["simulated"] - real["makespan"]) / real["makespan"] if real["makespan"] > 0 else float("nan")
            unit = real["time_unit"]
            console.print(f"real system: the final greedy placement measured {real['makespan']:.6g} {unit} "
                          f"(calibrated simulator {real['simulated']:.6g} {unit}, {gap:.1%} apart)")
    if summary.get("held_out"):
        held = Table(title="held-out graphs: the policy's own decodes against critical path")
        for label in ("graph", "ops", "greedy", "best of K", "critical path", "greedy / CP", "best / CP"):
            held.add_column(label, justify="left" if label == "graph" else "right")
        for r in summary["held_out"]:
            best = r["best_of_k"]
            held.add_row(r["graph"], str(r["n_ops"]), f"{r['greedy']:.6g}", "-" if best is None else f"{best:.6g}",
                         f"{r['critical_path']:.6g}", f"{r['greedy_ratio_to_critical_path']:.3f}",
                         "-" if best is None else f"{r['best_of_k_ratio_to_critical_path']:.3f}")
        console.print(held)
    stages = ", ".join(f"{s}: {d['episodes']} episodes in {d['seconds']:.0f} s" for s, d in summary["stages"].items())
    console.print(f"stages: {stages}")
    if summary.get("stopped_at_bound"):
        at = summary["stopped_at_bound"]
        console.print(f"stopped early: the greedy decode reached the lower bound ({at['makespan']:.6g}) in "
                      f"{at['stage']} at episode {at['episode']}, so the policy is optimal on this graph "
                      f"(--set evaluation.stop_at_bound=false trains on)")
    rep = summary.get("reported")
    if rep:
        labels = {"greedy": "the final policy's greedy decode", "best_of_k": "the final policy's best sampled decode",
                  "best_checkpoint": "the best checkpoint's greedy decode",
                  "best_found": "the best placement found in training"}
        ratio = f" ({rep['makespan'] / bound:.3f} x lower bound)" if bound else ""
        console.print(f"reported placement (summary.json \"reported\"): {labels[rep['source']]}, makespan "
                      f"{rep['makespan']:.6g}{ratio}")
