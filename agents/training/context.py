"""The training context: what the stages of one run share (the policy, counters, logs, generator)
and the services they use (budget, seeds, learning-rate schedule, episode reports, checkpoints).

A stage (:class:`Stage`) builds its envs and optimizer in :meth:`Stage.setup`, trains in
:meth:`Stage.run` until :meth:`TrainContext.running` says stop, and hands its optimizer and buffers to
the checkpoints through :meth:`Stage.state`; the :class:`~agents.training.trainer.Trainer` drives the
stages one after another, the way SB3's ``learn()`` drives ``collect_rollouts()`` and ``train()``.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from agents.training.args import STAGES, TrainArgs
from agents.training.budget import StageBudget
from agents.training.checkpoint import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_NAME,
    CHECKPOINT_VERSION,
    rng_state,
    save_checkpoint,
)
from agents.training.instance import Instance
from agents.training.metrics import MetricLog, StageProgress
from agents.training.policies import policy_class_path, transfer_weights
from agents.training.rollout import decode
from agents.training.teacher import SearchTargets, search_placement
from doppler_gym.sim.bounds import reaches_bound

SIM_STAGES = ("il", "sim")  # the stages that train on the simulator (evaluation.stop_at_bound ends them)
SEED_STRIDE_STAGE = 7919  # apart per stage: the reset seeds of different stages never meet
SEED_STRIDE_IL_ENV = 1_000_003  # apart per lockstep imitation env (each env walks its own seeds)


def episode_seeds(seed: int, stage: str, first: int, n: int) -> list[int]:
    """Reset seeds of ``n`` envs that start episodes ``first, first + 1, ...`` of ``stage``
    (``first``: the stage's episode counter, so a resumed stage continues the sequence).

    RL stages: ``seed + 7919 (i + 1) + first + k`` for env ``k`` and stage index ``i``; imitation
    steps ``n`` envs in lockstep that each walk their own sequence: ``seed + 1_000_003 (k + 1) + first``."""
    if stage == "il":
        return [seed + SEED_STRIDE_IL_ENV * (k + 1) + first for k in range(n)]
    base = seed + SEED_STRIDE_STAGE * (STAGES.index(stage) + 1) + first
    return [base + k for k in range(n)]


def instance_dict(inst: Instance) -> dict[str, Any]:
    """What a resume checks it continues on: graph name, op and device counts, topology name."""
    return {"graph": inst.graph.name, "n_ops": inst.graph.n_ops, "n_devices": inst.topology.n_devices,
            "topology": inst.topology.name}


def model_seed(seed: int, stage: str) -> int:
    """Seed of a stage's SB3 model (``seed + stage index``: its weight init and, for the vector env,
    the reset seeds of the stage's first episodes)."""
    return seed + STAGES.index(stage)


class Stage(ABC):
    """One training stage on the context's policy.

    Subclasses set :attr:`name` and implement :meth:`setup` and :meth:`run`; :meth:`state` returns
    what a checkpoint keeps besides the policy and the counters (``optimizer_state``, ``il_buffer``).
    """

    name: str = ""

    @abstractmethod
    def setup(self, ctx: TrainContext, resumed: dict[str, Any] | None) -> None:
        """Build the stage's envs and optimizer; set ``ctx.policy`` if the stage builds its own.

        Args:
            resumed: the checkpoint written while this stage ran (its :meth:`state` entries), when
                resuming it; else ``None``.
        """

    @abstractmethod
    def run(self, ctx: TrainContext) -> None:
        """Train while :meth:`TrainContext.running`; report each finished episode to
        :meth:`TrainContext.episode_done` and call :meth:`TrainContext.maybe_checkpoint` after each update."""

    def state(self) -> dict[str, Any]:
        """Checkpoint entries of the stage (``optimizer_state``: the optimizer's ``state_dict``)."""
        return {}

    def close(self) -> None:  # noqa: B027  optional hook: a stage without envs has nothing to release
        """Release the stage's envs (nothing by default)."""


class TrainContext:
    """The state of one run that its stages share, and the services they use.

    Attributes:
        args: the run's arguments (never changed).
        inst: the instance (graph or mix, topology, sim config).
        out: the output folder; ``ckpt_path`` its ``checkpoint.pt``.
        policy_class: the policy's class; ``policy_kwargs`` its keyword arguments (those of the
            checkpoint a run resumes or starts from, under ``policy="auto"``).
        policy: the current policy (a stage that builds its own, e.g. MaskablePPO's, sets it in setup).
        progress: per-stage counters; ``budget`` the episode targets and time shares over them.
        rng: the run's generator (DAgger coin flips, sampled actions' tie-breaks, imitation minibatches).
        log: ``metrics.jsonl`` and TensorBoard.
        eval_env: the simulator env of the main graph (periodic greedy evaluations).
        reference, lower_bound: the main graph's critical-path makespan and lower bound; ``main_graph_id``
            its env graph id (set by :meth:`start`).
        best_eval: the best periodic greedy evaluation (``policy_best.pt``); ``best_found`` the best
            placement of any training episode on the main graph; ``teacher`` the search teacher's
            placement (``imitation.teacher="search"``).
        current: the stage running now (its :meth:`Stage.state` goes into the checkpoints).
        interrupted: set when ``checkpoints.interrupt_after_episodes`` stopped the run.
        at_bound: ``{"stage", "episode", "makespan", "checkpoint"}`` once a periodic greedy decode reached
            the lower bound under ``evaluation.stop_at_bound`` (the simulator stages then end and the policy goes
            back to those weights, kept in ``checkpoint``), else empty.
    """

    def __init__(self, args: TrainArgs, inst: Instance, policy_class: type, policy_kwargs: dict[str, Any],
                 policy: torch.nn.Module, eval_env: gym.Env, log: MetricLog) -> None:
        self.args = args
        self.inst = inst
        self.out = Path(args.out)
        self.ckpt_path = self.out / CHECKPOINT_NAME
        self.policy_class = policy_class
        self.policy_kwargs = dict(policy_kwargs)
        self.policy = policy
        self.progress = {s: StageProgress() for s in args.stages}
        self.budget = StageBudget(args, self.progress)
        self.rng = np.random.default_rng(args.seed)
        self.log = log
        self.eval_env = eval_env
        self.reference = math.nan
        self.lower_bound = math.nan
        self.main_graph_id = -1
        self.best_eval: dict[str, Any] = {}
        self.best_found: dict[str, Any] = {}
        self.teacher: dict[str, Any] = {}
        self.targets: SearchTargets | None = None
        self.current: Stage | None = None
        self.interrupted = False
        self.at_bound: dict[str, Any] = {}
        self.episodes_this_run = 0
        self.last_checkpoint = time.monotonic()

    def start(self) -> None:
        """Reset the evaluation env once: the main graph's reference figures and graph id."""
        _, info = self.eval_env.reset(seed=self.args.seed)
        self.reference, self.lower_bound = info["reference_makespan"], info["lower_bound"]
        self.main_graph_id = int(info["graph_id"])

    # ------------------------------------------------------------------ budget, seeds, schedules
    def running(self, stage: str) -> bool:
        """Whether the stage goes on: its budget is not spent, no interruption is due, and (for the
        simulator stages) the policy has not reached the lower bound (``evaluation.stop_at_bound``)."""
        return not self.budget.over(stage) and not self.interrupt_due() and not self.stopped_at_bound(stage)

    def stopped_at_bound(self, stage: str) -> bool:
        """Whether ``stage`` is a simulator stage (``il``, ``sim``) and a greedy decode reached the bound."""
        return bool(self.at_bound) and stage in SIM_STAGES

    def interrupt_due(self) -> bool:
        """Whether ``checkpoints.interrupt_after_episodes`` episodes ran in this process."""
        n = self.args.checkpoints.interrupt_after_episodes
        return n is not None and self.episodes_this_run >= n

    def episode_seeds(self, stage: str, n: int, offset: int = 0) -> list[int]:
        """Reset seeds of ``n`` envs starting the stage's next episodes (``offset`` episodes ahead
        of its counter): :func:`episode_seeds`."""
        return episode_seeds(self.args.seed, stage, self.progress[stage].episodes + offset, n)

    def model_seed(self, stage: str) -> int:
        """:func:`model_seed` of the run's seed."""
        return model_seed(self.args.seed, stage)

    def rl_lr(self, stage: str) -> float:
        """The RL learning rate now: linear from ``rl.lr`` to ``rl.lr_final`` over the stage's fraction."""
        f = self.budget.fraction(stage)
        return self.args.rl.lr + f * (self.args.rl.lr_final - self.args.rl.lr)

    # ------------------------------------------------------------------ weights
    def carry_weights(self, target: torch.nn.Module) -> None:
        """Load the current policy's weights into a stage's new policy (shapes match on one instance)."""
        _, skipped = transfer_weights(target, self.policy.state_dict())
        if skipped:
            warnings.warn(f"{len(skipped)} policy tensors changed shape between stages and restart: "
                          f"{', '.join(skipped[:4])}", RuntimeWarning, stacklevel=3)

    def search_teacher(self) -> dict[str, Any]:
        """The search teacher's placement (computed once, then kept, also across a resume):
        ``assignment``, ``makespan``, ``evals``, ``seconds`` and ``interchangeable`` (devices)."""
        if not self.teacher:
            inst, args = self.inst, self.args
            im = args.imitation
            self.teacher = search_placement(inst.graph, inst.topology, inst.config, im.teacher_evals, args.seed,
                                            im.teacher_restarts, batch_size=im.teacher_batch)
        return self.teacher

    def search_targets(self) -> SearchTargets:
        """The search teacher's per-graph targets on a mix (one cache per run; not checkpointed:
        a resumed run searches again, the same targets since the search is seeded)."""
        if self.targets is None:
            im = self.args.imitation
            self.targets = SearchTargets(im.teacher_evals, self.args.seed, im.teacher_cache, im.teacher_restarts,
                                         im.teacher_batch)
        return self.targets

    # ------------------------------------------------------------------ episodes
    def episode_done(self, stage: str, info: dict[str, Any], **extra: float) -> None:
        """Count a finished training episode (its final ``info``), log it with ``extra`` fields, keep its
        placement if it is the best on the main graph, and run the periodic greedy evaluation when due."""
        prog = self.progress[stage]
        prog.episodes += 1
        self.episodes_this_run += 1
        makespan = float(info.get("makespan", math.nan))
        ref = float(info.get("reference_makespan", self.reference) or math.nan)
        prog.env_steps += 2 * len(info.get("assignment", ()))  # env steps of both phases = 2 n_ops
        prog.best_makespan = min(prog.best_makespan, makespan)
        step = self.global_episodes()
        self._keep_if_best(stage, step, info, makespan)
        self.log.write("episode", stage, step, stage_episode=prog.episodes, makespan=makespan,
                       ratio_to_critical_path=makespan / ref if ref else math.nan,
                       n_ops=len(info.get("assignment", ())), graph_id=int(info.get("graph_id", -1)), **extra)
        every = self.args.evaluation.every_episodes
        if every and step % every == 0:
            greedy = decode(self.policy, self.eval_env, greedy=True, seed=self.args.seed)
            self.log.write("eval", stage, step, greedy_makespan=greedy["makespan"],
                           greedy_ratio_to_critical_path=greedy["makespan"] / self.reference)
            if greedy["makespan"] < self.best_eval.get("makespan", math.inf):  # keep the best policy seen
                self.best_eval = {"makespan": float(greedy["makespan"]), "stage": stage, "episode": step,
                                  "checkpoint": str(self.out / "policy_best.pt")}
                save_checkpoint(self.out / "policy_best.pt", self.payload(stage, full=False))
            if self._bound_stops_training() and reaches_bound(greedy["makespan"], self.lower_bound, self.inst.config):
                # the first decode at the bound is strictly the best so far: policy_best.pt holds these weights
                self.at_bound = {"stage": stage, "episode": step, "makespan": float(greedy["makespan"]),
                                 "checkpoint": self.best_eval["checkpoint"]}

    def _bound_stops_training(self) -> bool:
        """Whether reaching the lower bound ends the simulator stages: ``evaluation.stop_at_bound`` on one graph
        and one topology (on a mix, one graph's optimum is not the goal)."""
        a = self.args
        return a.evaluation.stop_at_bound and not a.mix.graphs and not a.mix.topologies and not self.at_bound

    def _keep_if_best(self, stage: str, step: int, info: dict[str, Any], makespan: float) -> None:
        """Remember the episode's placement (assignment and SEL order) if it is the best so far on the
        main graph (the incumbent that device-placement RL reports: Mirhoseini et al., ICML 2017)."""
        if not makespan < self.best_found.get("makespan", math.inf) or "order" not in info:
            return
        if int(info.get("graph_id", -1)) != self.main_graph_id:
            return
        self.best_found = {"makespan": makespan, "stage": stage, "episode": step,
                           "assignment": np.asarray(info["assignment"]).tolist(),
                           "order": np.asarray(info["order"]).tolist()}

    def global_episodes(self) -> int:
        """Training episodes of all stages so far (the ``step`` of the metrics)."""
        return sum(p.episodes for p in self.progress.values())

    def progress_dict(self) -> dict[str, dict[str, Any]]:
        """The counters as plain dicts (checkpoints, the interrupted run's answer)."""
        return {s: dataclasses.asdict(p) for s, p in self.progress.items()}

    # ------------------------------------------------------------------ checkpoints
    def instance_dict(self) -> dict[str, Any]:
        """What a resume checks it continues on: :func:`instance_dict` of the run's instance."""
        return instance_dict(self.inst)

    def maybe_checkpoint(self, stage: str) -> None:
        """Write ``checkpoint.pt`` if ``checkpoints.minutes`` passed since the last one, or every
        ``checkpoints.every_updates`` updates of the stage."""
        every = self.args.checkpoints.every_updates
        due_time = time.monotonic() - self.last_checkpoint >= self.args.checkpoints.minutes * 60.0
        due_updates = every is not None and self.progress[stage].updates % every == 0
        if due_time or due_updates:
            self.checkpoint(stage)

    def payload(self, stage: str, full: bool = True) -> dict[str, Any]:
        """A checkpoint's contents: the policy and counters; ``full`` adds what a resume needs (the
        running stage's :meth:`Stage.state`, RNG states, the best evaluation and placement, the teacher)."""
        payload: dict[str, Any] = {
            "format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "stage": stage,
            "args": self.args.to_dict(), "policy_class": policy_class_path(self.policy_class),
            "policy_kwargs": dict(self.policy_kwargs), "policy_state": self.policy.state_dict(),
            "progress": self.progress_dict(), "instance": self.instance_dict(),
        }
        if full:
            payload["optimizer_state"] = None
            payload["il_buffer"] = None
            if self.current is not None:
                payload.update(self.current.state())
            payload["rng"] = rng_state()
            payload["trainer_rng"] = self.rng.bit_generator.state
            payload["best_eval"] = dict(self.best_eval)
            payload["best_found"] = dict(self.best_found)
            payload["at_bound"] = dict(self.at_bound)
            payload["teacher"] = dict(self.teacher)
        return payload

    def checkpoint(self, stage: str) -> Path:
        """Write ``checkpoint.pt`` (everything a resume needs), atomically."""
        save_checkpoint(self.ckpt_path, self.payload(stage))
        self.last_checkpoint = time.monotonic()
        return self.ckpt_path

    def snapshot(self, stage: str) -> Path:
        """Write the policy at the stage's end to ``policy_<stage>.pt``."""
        path = self.out / f"policy_{stage}.pt"
        save_checkpoint(path, self.payload(stage, full=False))
        return path
