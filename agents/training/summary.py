"""The final evaluation: greedy and best-of-K decodes, the baselines, ``summary.json``, the Gantt chart."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from agents.training.args import STAGE_WEIGHTS
from agents.training.checkpoint import load_policy
from agents.training.evaluate import decode_graph, held_out_rows, mean_ratio
from agents.training.metrics import write_json
from agents.training.policies import policy_class_path

if TYPE_CHECKING:
    from agents.training.context import TrainContext


def write_summary(ctx: TrainContext, init_report: dict[str, Any] | None = None) -> dict[str, Any]:
    """Greedy and sampled decodes (main graph and held-out graphs), baselines, ``summary.json``, Gantt chart.

    The summary's ``makespan`` / ``assignment`` / ``order`` are the greedy decode of the final policy
    on the main graph; ``best_of_k`` the best of ``evaluation.sample_decodes`` sampled decodes; ``held_out`` one
    row per ``evaluation.held_out`` graph (:func:`agents.training.evaluate.held_out_rows`); ``init`` is
    ``init_report`` (the ``init`` checkpoint's tensors loaded and skipped); ``stopped_at_bound`` where
    the simulator stages ended because a greedy decode reached the lower bound (``evaluation.stop_at_bound``)."""
    from doppler_gym import baselines
    from doppler_gym.sim.gantt import plot_gantt

    args, inst = ctx.args, ctx.inst
    t0 = time.perf_counter()
    policy = ctx.policy
    decoded = decode_graph(policy, inst, None, args.evaluation.sample_decodes, args.seed)
    greedy, best = decoded["greedy"], decoded["best"]
    held_out = held_out_rows(policy, inst, args.evaluation.sample_decodes, args.seed) if inst.held_out else []
    best_checkpoint = decode_best_checkpoint(ctx)
    results: dict[str, float] = {}
    found = []
    for name in args.evaluation.baselines:
        opts: dict[str, Any] = {}
        if "seed" in baselines.options(name):
            opts["seed"] = args.seed
        if name == "local_search":
            opts["seconds"] = args.evaluation.baseline_seconds
            if found:
                opts["starts"] = list(found)
        p = baselines.run(name, inst.graph, inst.topology, inst.config, **opts)
        found.append(p)
        results[name] = p.makespan
    cp = results.get("critical_path", ctx.reference)
    bound = ctx.lower_bound
    trace = simulate_placement(inst, greedy["assignment"], greedy["order"])
    gantt = ctx.out / "gantt.png"
    plot_gantt(trace, inst.graph, gantt, title=f"{inst.graph.name} on {inst.topology.name}: learned policy",
               lower_bound=bound)
    stages = {}
    for s in args.stages:
        p = ctx.progress[s]
        stages[s] = {"episodes": p.episodes, "updates": p.updates, "env_steps": p.env_steps,
                     "seconds": round(p.seconds, 3),
                     "seconds_per_episode": p.seconds / p.episodes if p.episodes else None,
                     "allotted_seconds": p.allotted_seconds,
                     "best_training_makespan": p.best_makespan if math.isfinite(p.best_makespan) else None}
    summary = {
        "graph": inst.graph.name, "n_ops": inst.graph.n_ops, "topology": inst.topology.name,
        "n_devices": inst.topology.n_devices, "time_unit": trace.time_unit,
        "policy_class": policy_class_path(ctx.policy_class), "algo": args.algo, "learn": args.learn,
        "seed": args.seed, "graph_mix": list(args.mix.graphs) or None,
        "makespan": float(greedy["makespan"]),
        "assignment": np.asarray(greedy["assignment"]).tolist(), "order": np.asarray(greedy["order"]).tolist(),
        "best_of_k": None if best is None else {
            "k": args.evaluation.sample_decodes, "makespan": float(best["makespan"]),
            "assignment": np.asarray(best["assignment"]).tolist(), "order": np.asarray(best["order"]).tolist()},
        "baselines": results, "critical_path": cp, "lower_bound": bound,
        "ratio_to_critical_path": float(greedy["makespan"]) / cp if cp else None,
        "ratio_to_lower_bound": float(greedy["makespan"]) / bound if bound else None,
        "best_eval": ctx.best_eval or None, "best_checkpoint": best_checkpoint,
        "best_found": best_found_row(ctx), "stopped_at_bound": dict(ctx.at_bound) or None,
        "il_teacher": dict(ctx.teacher) or None,
        "il_teacher_targets": ctx.targets.stats() if ctx.targets is not None else None,
        "held_out": held_out or None,
        "held_out_mean_ratio_to_critical_path": mean_ratio(held_out) if held_out else None,
        "stages": stages, "budget_minutes": args.budget_minutes,
        "budget_split": {s: STAGE_WEIGHTS[s] / sum(STAGE_WEIGHTS[t] for t in args.stages) for s in args.stages},
        "init": init_report, "checkpoint": str(ctx.ckpt_path), "gantt": str(gantt),
        "eval_seconds": round(time.perf_counter() - t0, 3), "args": args.to_dict(),
    }
    summary["reported"] = reported_placement(summary)
    if "real" in args.stages:  # the final policy's greedy placement, measured on the real system
        from agents.training.real_eval import measure_placement

        summary["real"] = measure_placement(args, inst, greedy["assignment"], greedy["order"])
    write_json(ctx.out / "summary.json", summary)
    return summary


REPORTED_SOURCES = ("greedy", "best_of_k", "best_checkpoint", "best_found")


def reported_placement(summary: dict[str, Any]) -> dict[str, Any]:
    """The best placement the run produced, and where it came from: ``{"source", "makespan",
    "assignment", "order"}`` with ``source`` among :data:`REPORTED_SOURCES` (the final policy's greedy
    decode, its best of K sampled decodes, the best checkpoint's greedy decode, or the best
    placement of any training episode); ties go to the earlier source, so the policy's own decode
    is reported whenever it is as good."""
    candidates = [("greedy", summary["makespan"], summary["assignment"], summary["order"])]
    if summary.get("best_of_k"):
        b = summary["best_of_k"]
        candidates.append(("best_of_k", b["makespan"], b["assignment"], b["order"]))
    if summary.get("best_checkpoint"):
        b = summary["best_checkpoint"]
        candidates.append(("best_checkpoint", b["greedy"], b["assignment"], b["order"]))
    if summary.get("best_found"):
        b = summary["best_found"]
        candidates.append(("best_found", b["makespan"], b["assignment"], b["order"]))
    source, makespan, assignment, order = min(candidates, key=lambda c: (c[1], REPORTED_SOURCES.index(c[0])))
    return {"source": source, "makespan": float(makespan), "assignment": list(assignment), "order": list(order)}


def simulate_placement(inst: Any, assignment: Any, order: Any) -> Any:
    """The :class:`~doppler_gym.sim.trace.Trace` of a placement (``assignment``: ``(n_ops,)`` devices;
    ``order``: ``(n_ops,)`` op ids in SEL order, the queue priorities under ``queue_order="priority"``)
    on the instance's graph, topology and sim config."""
    from doppler_gym.sim.api import simulate

    n = inst.graph.n_ops
    priorities = None
    if inst.config.queue_order == "priority":
        priorities = np.empty(n)
        priorities[np.asarray(order)] = np.arange(n, dtype=np.float64)
    return simulate(inst.graph, np.asarray(assignment), inst.topology, priorities=priorities, config=inst.config)


def best_found_row(ctx: TrainContext) -> dict[str, Any] | None:
    """The best placement any training episode produced on the main graph (sampled, or a DAgger
    roll-in in the imitation stage), or ``None``: the incumbent that device-placement RL reports
    (Mirhoseini et al., ICML 2017; Placeto and GDP here report theirs the same way).

    ``makespan`` is the placement simulated again (equal to the episode's ``training_makespan``
    unless the sim config draws jitter); ``assignment`` and ``order`` replay it."""
    found = ctx.best_found
    if not found:
        return None
    trace = simulate_placement(ctx.inst, found["assignment"], found["order"])
    return {"makespan": float(trace.makespan), "training_makespan": float(found["makespan"]),
            "stage": found["stage"], "episode": found["episode"],
            "assignment": list(found["assignment"]), "order": list(found["order"])}


def decode_best_checkpoint(ctx: TrainContext) -> dict[str, Any] | None:
    """Greedy and best-of-K decodes of ``policy_best.pt`` (the weights whose periodic greedy decode
    was the best seen in training), or ``None`` without one.

    This is checkpoint selection on the training graph (the policy's own placements, chosen among
    its checkpoints by their greedy makespan); the summary's ``makespan`` stays the final policy's."""
    path = ctx.out / "policy_best.pt"
    if not ctx.best_eval or not path.is_file():
        return None
    policy = load_policy(path, ctx.eval_env)
    d = decode_graph(policy, ctx.inst, None, ctx.args.evaluation.sample_decodes, ctx.args.seed)
    g, b = d["greedy"], d["best"]
    return {"stage": ctx.best_eval.get("stage"), "episode": ctx.best_eval.get("episode"),
            "greedy": float(g["makespan"]), "best_of_k": None if b is None else float(b["makespan"]),
            "assignment": np.asarray(g["assignment"]).tolist(), "order": np.asarray(g["order"]).tolist(),
            "checkpoint": str(path)}


def summary_keys() -> tuple[str, ...]:
    """Keys every ``summary.json`` has."""
    return ("makespan", "assignment", "order", "best_of_k", "baselines", "lower_bound", "critical_path",
            "ratio_to_critical_path", "stages", "gantt", "reported")

