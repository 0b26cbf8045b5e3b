"""Plumbing shared by the learned baselines (Placeto, GDP): instance, evaluation, run bookkeeping.

- :func:`resolve_instance`: the ``(graph, topology, sim_config)`` arguments as an
  :class:`agents.training.Instance` (same rules as the envs: paper names, workloads, files, device
  counts, presets; ``sim_config=None`` is the reference model for paper graphs).
- :class:`Evaluator`: simulated makespans of a batch of assignments under one op order.
- :class:`TrainingRun`: the budget (episodes and/or seconds), the learning curve, the best
  decoded placement, ``metrics.jsonl`` and atomic checkpoints in ``out`` (``agents.training``'s
  :func:`~agents.training.save_checkpoint`, :class:`~agents.training.MetricLog`), and the final
  :class:`~agents.learned_result.LearnedResult`.
- :func:`load_net`: the network of a :meth:`TrainingRun.checkpoint`.

The training loop that drives a :class:`TrainingRun` is :func:`agents.learned_loop.train_loop`.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from agents.learned_result import LearnedResult
from agents.training import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    Instance,
    MetricLog,
    load_checkpoint,
    save_checkpoint,
)
from agents.training.metrics import write_json
from doppler_gym.baselines.common import queue_priorities
from doppler_gym.envs.context import GraphContext, build_context
from doppler_gym.instances import default_config, resolve_graph, resolve_topology
from doppler_gym.sim.api import simulate_batch
from doppler_gym.sim.config import SimConfig

NetT = TypeVar("NetT", bound=torch.nn.Module)


def resolve_instance(graph: object, topology: object, sim_config: object, where: str) -> Instance:
    """``(graph, topology, config)`` of a learned baseline's run.

    Args:
        graph: a :class:`~doppler_gym.graph.types.DataflowGraph`, a paper graph name
            (``"paper/chainmm"``), a workload name (``"ffnn"``) or a ``.txt``/``.json`` path.
        topology: a :class:`~doppler_gym.topology.types.Topology`, a preset name or a device count.
        sim_config: a :class:`SimConfig`, a dict of its fields, or ``None`` (the graph's default on the
            topology, ``doppler_gym.instances.default_config``: the reference model for paper graphs, the
            roofline on a topology with GPU models, ``SimConfig()`` otherwise).
        where: the caller's name, for error messages.
    """
    g = resolve_graph(graph, where=f"{where}: graph")
    topo = resolve_topology(topology, f"{where}: topology")
    if sim_config is None:
        config = default_config(g, topo)
    elif isinstance(sim_config, SimConfig):
        config = sim_config
    elif isinstance(sim_config, dict):
        config = SimConfig(**sim_config)
    else:
        raise TypeError(f"{where}: sim_config must be a SimConfig, a dict of its fields or None, "
                        f"got {type(sim_config).__name__}")
    return Instance(g, topo, config)


def instance_context(inst: Instance) -> GraphContext:
    """The env's static data of the instance (op features, edge features, reference makespan, lower
    bound): :func:`doppler_gym.envs.context.build_context`."""
    return build_context(inst.graph, inst.topology, inst.config)


def check_budget(budget_seconds: float | None, episodes: int | None, where: str) -> None:
    """ValueError unless at least one of the two limits is set and both are sensible."""
    if budget_seconds is None and episodes is None:
        raise ValueError(f"{where}: give budget_seconds or episodes (or both); with neither the run never ends")
    if budget_seconds is not None and not (isinstance(budget_seconds, (int, float)) and budget_seconds > 0):
        raise ValueError(f"{where}: budget_seconds must be a number > 0 or None, got {budget_seconds!r}")
    if episodes is not None and (isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer))
                                 or episodes < 1):
        raise ValueError(f"{where}: episodes must be an integer >= 1 or None, got {episodes!r}")


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads (restored after); ``None`` leaves them.

    One thread is the default of the learned baselines: the networks are small and on a shared CPU
    more threads are much slower (see ``agents.training.TrainArgs.torch_threads``)."""
    if n is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


class Evaluator:
    """Simulated makespans of assignments of one instance under a fixed op order.

    Args:
        inst: the instance.
        order: ``(n_ops,)`` a topological order; the simulator's priorities (position in it) under
            ``queue_order="priority"``, ignored by FIFO configs (the reference model).
    """

    def __init__(self, inst: Instance, order: np.ndarray) -> None:
        self.inst = inst
        self.order = np.asarray(order, dtype=np.int64)
        self.priorities = queue_priorities(self.order, inst.config)

    def __call__(self, assignments: np.ndarray) -> np.ndarray:
        """``(B, n_ops) int`` assignments -> ``(B,) float64`` makespans [reported unit]."""
        a = np.ascontiguousarray(assignments, dtype=np.int64)
        # simulate_batch keeps torch's thread count (Numba's OpenMP layer would reset it)
        return simulate_batch(self.inst.graph, a, self.inst.topology, priorities=self.priorities,
                              config=self.inst.config)


class TrainingRun:
    """Budget, curve, best placement, logs and checkpoints of one learned-baseline run.

    Args:
        name: ``"placeto"`` or ``"gdp"``.
        inst: the instance.
        order: the op order that goes with every assignment (see :class:`Evaluator`).
        budget_seconds: wall-clock limit of training [s] (checked between updates), or None.
        episodes: training episodes to run (the last update may overshoot to a whole batch), or None.
        out: output folder (``checkpoint.pt``, ``metrics.jsonl``, ``result.json``) or None.
        seed: the run's seed (stored in the checkpoint).
    """

    def __init__(self, name: str, inst: Instance, order: np.ndarray, budget_seconds: float | None,
                 episodes: int | None, out: str | Path | None, seed: int) -> None:
        self.name, self.inst, self.seed = name, inst, seed
        self.ctx = instance_context(inst)
        self.evaluate = Evaluator(inst, order)
        self.budget_seconds, self.target_episodes = budget_seconds, episodes
        self.started = time.perf_counter()
        self.episodes = 0
        self.updates = 0
        self.curve: list[tuple[int, float]] = []
        self.best_makespan = math.inf
        self.best_assignment: np.ndarray | None = None
        self.training_best = math.inf
        self.out = Path(out) if out is not None else None
        self.log: MetricLog | None = None
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            # Placeto and GDP runs do not resume: a run in a folder that holds an earlier run's
            # metrics.jsonl starts the file again (no rows of two runs under one step count)
            self.log = MetricLog(self.out, tensorboard=False, keep=lambda row: False)

    # ------------------------------------------------------------------ budget
    @property
    def reward_scale(self) -> float:
        """What a makespan is divided by in the reward ``-makespan / reward_scale``: the critical-path
        heuristic's makespan [reported unit] (1.0 where the context has none)."""
        return self.ctx.reference_makespan or 1.0

    @property
    def elapsed(self) -> float:
        """Seconds since the run started [s]."""
        return time.perf_counter() - self.started

    def done(self) -> bool:
        """Whether training should stop (episodes reached or time used up); never before one update."""
        if self.updates == 0:
            return False
        if self.target_episodes is not None and self.episodes >= self.target_episodes:
            return True
        return self.budget_seconds is not None and self.elapsed >= self.budget_seconds

    # ------------------------------------------------------------------ bookkeeping
    def training_batch(self, makespans: np.ndarray, **values: float) -> None:
        """Count one update's episodes (``(B,)`` makespans) and log it."""
        self.episodes += int(makespans.shape[0])
        self.updates += 1
        self.training_best = min(self.training_best, float(makespans.min()))
        if self.log is not None:
            self.log.write("update", self.name, self.episodes, makespan_mean=float(makespans.mean()),
                           makespan_min=float(makespans.min()), **values)

    def decoded(self, assignments: np.ndarray, greedy: bool) -> np.ndarray:
        """Simulate decoded placements ``(B, n_ops)``; keep the best; a greedy one (``B == 1``)
        adds a curve point. Returns the ``(B,)`` makespans."""
        ms = self.evaluate(assignments)
        i = int(np.argmin(ms))
        if ms[i] < self.best_makespan:
            self.best_makespan = float(ms[i])
            self.best_assignment = np.array(assignments[i], dtype=np.int64)
        if greedy:
            again = bool(self.curve) and self.curve[-1][0] == self.episodes
            if again:
                self.curve.pop()  # the same policy decoded again (deterministic): one point per episode count
            self.curve.append((self.episodes, float(ms[0])))
            if self.log is not None and not again:  # one eval row per episode count, as the curve
                self.log.write("eval", self.name, self.episodes, greedy_makespan=float(ms[0]),
                               best_makespan=self.best_makespan)
        return ms

    def checkpoint(self, net: torch.nn.Module, optimizer: torch.optim.Optimizer, net_kwargs: dict) -> Path | None:
        """Write ``out/checkpoint.pt`` atomically (nothing without ``out``).

        The payload carries ``agents.training``'s format tag, so ``agents.training.load_checkpoint``
        reads it; ``agent`` tells it apart from a DOPPLER checkpoint."""
        if self.out is None:
            return None
        payload: dict[str, Any] = {
            "format": CHECKPOINT_FORMAT, "agent": self.name, "version": CHECKPOINT_VERSION,
            "net_kwargs": dict(net_kwargs), "policy_state": net.state_dict(),
            "optimizer": optimizer.state_dict(), "episodes": self.episodes, "updates": self.updates,
            "seed": self.seed, "curve": [list(p) for p in self.curve], "best_makespan": self.best_makespan,
            "best_assignment": None if self.best_assignment is None else torch.as_tensor(self.best_assignment),
            "instance": {"graph": self.inst.graph.name, "n_ops": self.inst.graph.n_ops,
                         "n_devices": self.inst.topology.n_devices},
        }
        path = self.out / "checkpoint.pt"
        save_checkpoint(path, payload)
        return path

    def result(self, final_greedy: float, sampled: np.ndarray) -> LearnedResult:
        """The :class:`LearnedResult` (``sampled``: ``(K,)`` makespans of the final sampled decodes);
        writes ``out/result.json`` and closes the log."""
        assert self.best_assignment is not None, "TrainingRun.result: decode at least one placement first"
        seconds = self.elapsed
        ctx = self.ctx
        ctx_info = {"reference_makespan": ctx.reference_makespan, "lower_bound": ctx.lower_bound}
        res = LearnedResult(
            name=self.name, makespan=self.best_makespan, assignment=self.best_assignment,
            episodes=self.episodes, seconds=seconds, curve=self.curve, order=self.evaluate.order,
            info={"final_greedy": final_greedy, "best_sampled": float(np.min(sampled)),
                  "sampled_mean": float(np.mean(sampled)), "training_best": self.training_best,
                  "updates": self.updates, "seconds_per_episode": seconds / max(self.episodes, 1),
                  "time_unit": self.inst.config.time_unit, **ctx_info},
        )
        if self.out is not None:
            write_json(self.out / "result.json", res.to_dict())
        if self.log is not None:
            self.log.close()
            self.log = None
        return res


def load_net(checkpoint: str | os.PathLike | dict, name: str, net_class: type[NetT]) -> NetT:
    """The network of a :meth:`TrainingRun.checkpoint`, in eval mode.

    Args:
        checkpoint: ``out/checkpoint.pt``, its folder ``out`` or the loaded payload.
        name: the method the checkpoint must come from (``"placeto"``, ``"gdp"``; its ``agent``).
        net_class: the network class, rebuilt from the stored ``net_kwargs``.

    Raises:
        ValueError: the checkpoint is another method's (or a DOPPLER training checkpoint).
    """
    payload = checkpoint if isinstance(checkpoint, dict) else load_checkpoint(checkpoint)
    if payload.get("agent") != name:
        raise ValueError(f"load_{name}: the checkpoint is from {payload.get('agent', 'DOPPLER training')!r}, "
                         f"not from train_{name}")
    net = net_class(**payload["net_kwargs"])
    net.load_state_dict(payload["policy_state"])
    net.eval()
    return net
