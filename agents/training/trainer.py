"""The :class:`Trainer`: runs the stages of a :class:`TrainArgs` on one policy, with budgets and checkpoints."""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.training.args import DEFAULT_EPISODES, STAGE_WEIGHTS, TrainArgs
from agents.training.checkpoint import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_NAME,
    CHECKPOINT_VERSION,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    seed_everything,
    set_rng_state,
)
from agents.training.imitation import run_imitation
from agents.training.instance import Instance
from agents.training.metrics import MetricLog, StageProgress
from agents.training.policies import (
    import_object,
    make_policy,
    policy_class_path,
    resolve_policy_class,
    transfer_weights,
)
from agents.training.rl import run_ppo, run_reinforce
from agents.training.rollout import decode
from agents.training.summary import write_summary
from agents.training.teacher import devices_interchangeable


class Trainer:
    """Runs the stages of ``args`` on one policy; see the module docstring."""

    def __init__(self, args: TrainArgs) -> None:
        args.validate()
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.ckpt_path = self.out / CHECKPOINT_NAME
        seed_everything(args.seed)
        self.inst = Instance.from_args(args)
        self.eval_env = self.inst.sim_env()
        resume = load_checkpoint(self.ckpt_path) if args.resume and self.ckpt_path.is_file() else None
        init = load_checkpoint(args.init) if args.init and resume is None else None
        source = resume or init
        if source is not None and args.policy == "auto":  # keep the architecture that was trained
            self.policy_class = import_object(source["policy_class"])
            args.policy_kwargs = dict(source.get("policy_kwargs") or {}) or args.policy_kwargs
        else:
            self.policy_class = resolve_policy_class(args.policy)
        self.policy = make_policy(self.policy_class, self.eval_env.observation_space, self.eval_env.action_space,
                                  args.il_lr, args.policy_kwargs, args.device)
        self.progress = {s: StageProgress() for s in args.stages}
        self.rng = np.random.default_rng(args.seed)
        self.resumed: dict[str, Any] | None = None  # the checkpoint being resumed (its stage-specific state)
        self.init_report: dict[str, Any] | None = None
        self.interrupted = False
        self._episodes_this_run = 0
        self._last_ckpt_time = time.monotonic()
        self._reference = math.nan
        self._lower_bound = math.nan

        self._stage: str | None = None  # the stage running now
        self.best_eval: dict[str, Any] = {}  # the best periodic greedy evaluation (policy_best.pt)
        self.best_found: dict[str, Any] = {}  # the best placement of any training episode on the main graph
        self._main_graph_id = -1  # set from the eval env at the start of run()
        self.teacher: dict[str, Any] = {}  # the search teacher's placement (il_teacher="search")

        if resume is not None:
            payload = resume
            self._check_same_instance(payload)
            self.policy.load_state_dict(payload["policy_state"])
            for s, d in payload["progress"].items():
                if s in self.progress:
                    self.progress[s] = StageProgress(**d)
            set_rng_state(payload["rng"])
            self.rng.bit_generator.state = payload["trainer_rng"]
            self.best_eval = dict(payload.get("best_eval") or {})
            self.best_found = dict(payload.get("best_found") or {})
            self.teacher = dict(payload.get("teacher") or {})
            self.resumed = payload
        elif init is not None:
            payload = init
            loaded, skipped = transfer_weights(self.policy, payload["policy_state"])
            self.init_report = {"checkpoint": str(args.init), "from_graph": payload["args"].get("graph"),
                                "loaded": len(loaded), "skipped": skipped}
            if skipped:
                warnings.warn(f"init: {len(skipped)} tensors of the {args.init} policy do not fit this env's "
                              f"shapes and start untrained: {', '.join(skipped[:4])}", RuntimeWarning, stacklevel=2)
        self.log = MetricLog(self.out, args.tensorboard)

    def _check_same_instance(self, payload: dict[str, Any]) -> None:
        saved = payload.get("instance", {})
        here = self._instance_dict()
        if any(saved.get(k) != here[k] for k in ("graph", "n_ops", "n_devices")):
            raise ValueError(
                f"resume: {self.ckpt_path} was trained on {saved.get('graph')} ({saved.get('n_ops')} ops, "
                f"{saved.get('n_devices')} devices), not on {here['graph']} ({here['n_ops']} ops, {here['n_devices']} "
                f"devices); use another --out, or --init {self.ckpt_path} to fine-tune on this instance"
            )

    def _instance_dict(self) -> dict[str, Any]:
        return {"graph": self.inst.graph.name, "n_ops": self.inst.graph.n_ops,
                "n_devices": self.inst.topology.n_devices, "topology": self.inst.topology.name}

    # ------------------------------------------------------------------ driver
    def run(self) -> dict[str, Any]:
        """Run the remaining stages, then evaluate and write ``summary.json`` (unless interrupted)."""
        threads = torch.get_num_threads()
        if self.args.torch_threads:
            torch.set_num_threads(self.args.torch_threads)
        try:
            _, info = self.eval_env.reset(seed=self.args.seed)
            self._reference, self._lower_bound = info["reference_makespan"], info["lower_bound"]
            self._main_graph_id = int(info["graph_id"])
            for stage in self.args.stages:
                prog = self.progress[stage]
                if prog.done and not self._extendable(stage):
                    continue
                prog.done = False
                self._allot(stage)
                self._stage = stage
                if stage == "il":
                    self.imitation()
                elif self.args.algo == "ppo":
                    self.ppo(stage)
                else:
                    self.reinforce(stage)
                if self.interrupted:
                    return {"interrupted": True, "stage": stage, "progress": self._progress_dict()}
                prog.done = True
                self.checkpoint(stage)
                self._snapshot(stage)
                self._stage = None
            return self.finish()
        except KeyboardInterrupt:  # Ctrl-C: keep the progress of the interrupted stage, then stop
            self.interrupted = True
            if self._stage is not None:
                path = self.checkpoint(self._stage)
                print(f"\ninterrupted: wrote {path}; resume=True (`--resume`) continues", flush=True)
            raise
        finally:
            self.log.close()
            torch.set_num_threads(threads)

    def _extendable(self, stage: str) -> bool:
        """A finished stage runs again on resume only if it is the last one started and its
        targets grew (more episodes or a larger budget than it ran with)."""
        started = [s for s in self.args.stages if self.progress[s].started]
        if not started or started[-1] != stage:
            return False
        later = [s for s in self.args.stages[self.args.stages.index(stage) + 1:]]
        if later:
            return False
        prog = self.progress[stage]
        target = self._episode_target(stage)
        more_episodes = target is not None and prog.episodes < target
        more_time = (self.args.budget_minutes is not None and prog.allotted_for_budget is not None
                     and self.args.budget_minutes > prog.allotted_for_budget)
        if more_time:
            prog.allotted_seconds = None
        return more_episodes or more_time

    def _episode_target(self, stage: str) -> int | None:
        n = self.args.episodes(stage)
        if n is None and self.args.budget_minutes is None:
            n = DEFAULT_EPISODES[stage]
        return n

    def _allot(self, stage: str) -> None:
        """Fix the stage's share of the budget at its start (kept on resume unless the budget changed)."""
        prog = self.progress[stage]
        prog.started = True
        budget = self.args.budget_minutes
        if budget is None:
            prog.allotted_seconds = prog.allotted_for_budget = None
            return
        if prog.allotted_seconds is not None and prog.allotted_for_budget == budget:
            return
        rest = self.args.stages[self.args.stages.index(stage):]
        used_before = sum(self.progress[s].seconds for s in self.args.stages if s not in rest)
        left = max(budget * 60.0 - used_before, 0.0)
        prog.allotted_seconds = left * STAGE_WEIGHTS[stage] / sum(STAGE_WEIGHTS[s] for s in rest)
        prog.allotted_for_budget = budget

    def _fraction(self, stage: str) -> float:
        """How far the stage is, in [0, 1]: the larger of its episode and time fractions."""
        prog = self.progress[stage]
        f = 0.0
        target = self._episode_target(stage)
        if target is not None:
            f = max(f, prog.episodes / target if target > 0 else 1.0)
        if prog.allotted_seconds is not None:
            f = max(f, prog.seconds / prog.allotted_seconds if prog.allotted_seconds > 0 else 1.0)
        return min(f, 1.0)

    def _out_of_time(self, stage: str, running: float = 0.0) -> bool:
        """Whether the stage's budget share is spent, counting ``running`` seconds not yet booked."""
        prog = self.progress[stage]
        return prog.allotted_seconds is not None and prog.seconds + running >= prog.allotted_seconds

    def _stage_over(self, stage: str) -> bool:
        return self._fraction(stage) >= 1.0

    def _should_interrupt(self) -> bool:
        n = self.args.interrupt_after_episodes
        return n is not None and self._episodes_this_run >= n

    # ------------------------------------------------------------------ the stages (one module each)
    def imitation(self) -> None:
        """Stage 1: DAgger on the critical-path teacher (:func:`agents.training.imitation.run_imitation`)."""
        run_imitation(self)

    def ppo(self, stage: str) -> None:
        """Stages 2 and 3 with MaskablePPO (:func:`agents.training.rl.run_ppo`)."""
        run_ppo(self, stage)

    def reinforce(self, stage: str) -> None:
        """Stages 2 and 3 with REINFORCE (:func:`agents.training.rl.run_reinforce`)."""
        run_reinforce(self, stage)

    def finish(self) -> dict[str, Any]:
        """Greedy and sampled decodes, baselines, ``summary.json`` (:func:`agents.training.summary.write_summary`)."""
        return write_summary(self)


    def _rl_lr(self, stage: str) -> float:
        f = self._fraction(stage)
        return self.args.rl_lr + f * (self.args.rl_lr_final - self.args.rl_lr)

    def _carry_weights(self, target: torch.nn.Module) -> None:
        """Load the current policy's weights into a stage's new policy (shapes match on one instance)."""
        _, skipped = transfer_weights(target, self.policy.state_dict())
        if skipped:
            warnings.warn(f"{len(skipped)} policy tensors changed shape between stages and restart: "
                          f"{', '.join(skipped[:4])}", RuntimeWarning, stacklevel=3)

    # ------------------------------------------------------------------ per-episode bookkeeping
    def _episode_done(self, stage: str, info: dict[str, Any], **extra: float) -> None:
        prog = self.progress[stage]
        prog.episodes += 1
        self._episodes_this_run += 1
        makespan = float(info.get("makespan", math.nan))
        ref = float(info.get("reference_makespan", self._reference) or math.nan)
        prog.env_steps += 2 * len(info.get("assignment", ()))  # env steps of both phases = 2 n_ops
        prog.best_makespan = min(prog.best_makespan, makespan)
        step = self._global_episodes()
        self._keep_if_best(stage, step, info, makespan)
        self.log.write("episode", stage, step, stage_episode=prog.episodes, makespan=makespan,
                       ratio_to_critical_path=makespan / ref if ref else math.nan,
                       n_ops=len(info.get("assignment", ())), graph_id=int(info.get("graph_id", -1)), **extra)
        every = self.args.eval_every_episodes
        if every and step % every == 0:
            greedy = decode(self.policy, self.eval_env, greedy=True, seed=self.args.seed)
            self.log.write("eval", stage, step, greedy_makespan=greedy["makespan"],
                           greedy_ratio_to_critical_path=greedy["makespan"] / self._reference)
            if greedy["makespan"] < self.best_eval.get("makespan", math.inf):  # keep the best policy seen
                self.best_eval = {"makespan": float(greedy["makespan"]), "stage": stage, "episode": step,
                                  "checkpoint": str(self.out / "policy_best.pt")}
                save_checkpoint(self.out / "policy_best.pt", self._payload(stage, full=False))

    def search_teacher(self) -> dict[str, Any]:
        """The search teacher's placement (computed once, then kept, also across a resume):
        ``assignment``, ``makespan``, ``evals``, ``seconds`` and ``interchangeable`` (devices)."""
        if not self.teacher:
            from doppler_gym import baselines

            inst, args = self.inst, self.args
            cp = baselines.run("critical_path", inst.graph, inst.topology, inst.config, seed=args.seed)
            heft = baselines.run("heft", inst.graph, inst.topology, inst.config)
            found = baselines.run("local_search", inst.graph, inst.topology, inst.config, seed=args.seed,
                                  seconds=None, max_evals=args.il_teacher_evals, starts=[cp, heft])
            self.teacher = {"name": "search", "assignment": np.asarray(found.assignment).tolist(),
                            "makespan": float(found.makespan), "evals": args.il_teacher_evals,
                            "seconds": round(found.seconds, 3),
                            "interchangeable": devices_interchangeable(inst.topology, inst.config)}
        return self.teacher

    def _keep_if_best(self, stage: str, step: int, info: dict[str, Any], makespan: float) -> None:
        """Remember the episode's placement (assignment and SEL order) if it is the best so far on the
        main graph (the incumbent that device-placement RL reports: Mirhoseini et al., ICML 2017)."""
        if not makespan < self.best_found.get("makespan", math.inf) or "order" not in info:
            return
        if int(info.get("graph_id", -1)) != self._main_graph_id:
            return
        self.best_found = {"makespan": makespan, "stage": stage, "episode": step,
                           "assignment": np.asarray(info["assignment"]).tolist(),
                           "order": np.asarray(info["order"]).tolist()}

    def _global_episodes(self) -> int:
        return sum(p.episodes for p in self.progress.values())

    def _progress_dict(self) -> dict[str, dict[str, Any]]:
        return {s: dataclasses.asdict(p) for s, p in self.progress.items()}

    # ------------------------------------------------------------------ checkpoints
    def _maybe_checkpoint(self, stage: str) -> None:
        every = self.args.checkpoint_every_updates
        due_time = time.monotonic() - self._last_ckpt_time >= self.args.checkpoint_minutes * 60.0
        due_updates = every is not None and self.progress[stage].updates % every == 0
        if due_time or due_updates:
            self.checkpoint(stage)

    def _payload(self, stage: str, full: bool = True) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "stage": stage,
            "args": self.args.to_dict(), "policy_class": policy_class_path(self.policy_class),
            "policy_kwargs": dict(self.args.policy_kwargs), "policy_state": self.policy.state_dict(),
            "progress": self._progress_dict(), "instance": self._instance_dict(),
        }
        if full:
            objs = getattr(self, "_stage_objects", {})
            opt = objs.get("optimizer")
            payload["optimizer_state"] = opt.state_dict() if opt is not None else None
            payload["il_buffer"] = objs["il_buffer"].state_dict() if stage == "il" and "il_buffer" in objs else None
            payload["rng"] = rng_state()
            payload["trainer_rng"] = self.rng.bit_generator.state
            payload["best_eval"] = dict(self.best_eval)
            payload["best_found"] = dict(self.best_found)
            payload["teacher"] = dict(self.teacher)
        return payload

    def checkpoint(self, stage: str) -> Path:
        """Write ``checkpoint.pt`` (everything a resume needs), atomically."""
        save_checkpoint(self.ckpt_path, self._payload(stage))
        self._last_ckpt_time = time.monotonic()
        return self.ckpt_path

    def _snapshot(self, stage: str) -> None:
        save_checkpoint(self.out / f"policy_{stage}.pt", self._payload(stage, full=False))

    # ------------------------------------------------------------------ final evaluation


def train(args: TrainArgs) -> dict[str, Any]:
    """Run the stages of ``args``; returns the summary (also in ``args.out/summary.json``), or
    ``{"interrupted": True, ...}`` when ``interrupt_after_episodes`` stopped it early."""
    return Trainer(args).run()

