"""Decoding a policy's own placements on a graph: greedy and the best of K sampled decodes.

Every makespan reported here is the simulated makespan of the placement the policy itself
decodes (no search on top): ``greedy`` takes the argmax of the masked scores at every step,
``best_of_k`` the best of ``k`` episodes sampled from the masked softmax (seeded).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from agents.training.instance import Instance
from agents.training.rollout import decode, rollout
from doppler_gym.graph.types import DataflowGraph


def decode_graph(policy: torch.nn.Module, inst: Instance, graph: DataflowGraph | None = None, k: int = 16,
                 seed: int = 0) -> dict[str, Any]:
    """Greedy and best-of-``k`` decodes of ``policy`` on ``graph`` (default the main graph).

    Returns:
        ``greedy`` (the greedy episode's final info: ``makespan``, ``assignment`` ``(n_ops,)``,
        ``order`` ``(n_ops,)``, ``reference_makespan`` = critical path, ``lower_bound``), ``best``
        (the best sampled episode's info, ``None`` for ``k = 0``) and ``seconds`` (wall clock of
        the decodes [s]).
    """
    t0 = time.perf_counter()
    policy.set_training_mode(False)
    greedy = decode(policy, inst.sim_env(graph), greedy=True, seed=seed)
    best = None
    if k:
        envs = [inst.sim_env(graph) for _ in range(k)]
        torch.manual_seed(seed)
        eps = rollout(policy, envs, [seed] * k, mode="sample")
        best = min(eps, key=lambda e: e.makespan).info
    return {"greedy": greedy, "best": best, "seconds": time.perf_counter() - t0}


def held_out_rows(policy: torch.nn.Module, inst: Instance, k: int, seed: int) -> list[dict[str, Any]]:
    """One row per held-out graph of ``inst``: ``graph``, ``n_ops``, ``greedy``, ``best_of_k``,
    ``critical_path`` (the env's reference: the CP heuristic's makespan), ``lower_bound`` and the
    ratios ``greedy / critical_path`` and ``best_of_k / critical_path`` (in the graph's sim unit)."""
    rows = []
    for graph in inst.held_out:
        d = decode_graph(policy, inst, graph, k, seed)
        g, b = d["greedy"], d["best"]
        cp = float(g["reference_makespan"])
        rows.append({
            "graph": graph.name, "n_ops": graph.n_ops, "greedy": float(g["makespan"]),
            "best_of_k": None if b is None else float(b["makespan"]), "critical_path": cp,
            "lower_bound": float(g["lower_bound"]), "greedy_ratio_to_critical_path": float(g["makespan"]) / cp,
            "best_of_k_ratio_to_critical_path": None if b is None else float(b["makespan"]) / cp,
            "time_unit": g.get("time_unit"), "decode_seconds": round(d["seconds"], 3),
        })
    return rows


def mean_ratio(rows: list[dict[str, Any]], key: str = "greedy_ratio_to_critical_path") -> float:
    """Geometric mean of a ratio column (NaN for no rows)."""
    vals = [r[key] for r in rows if r.get(key) is not None]
    return float(np.exp(np.mean(np.log(vals)))) if vals else float("nan")
