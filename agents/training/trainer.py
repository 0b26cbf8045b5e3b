"""The :class:`Trainer`: runs the stages of a :class:`TrainArgs` on one policy, with budgets and checkpoints."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch

from agents.training.args import TrainArgs
from agents.training.checkpoint import CHECKPOINT_NAME, load_checkpoint, seed_everything, set_rng_state
from agents.training.context import Stage, TrainContext
from agents.training.imitation import ImitationStage
from agents.training.instance import Instance
from agents.training.metrics import MetricLog, StageProgress
from agents.training.policies import import_object, make_policy, resolve_policy_class, transfer_weights
from agents.training.rl import PPOStage, ReinforceStage
from agents.training.summary import write_summary


def make_stage(name: str, args: TrainArgs) -> Stage:
    """The stage object of ``name``: imitation for ``il``, else MaskablePPO or REINFORCE (``args.algo``);
    with ``args.ray_address``, the sim stage's MaskablePPO collects its rollouts on Ray."""
    if name == "il":
        return ImitationStage()
    if args.ray_address is not None and name == "sim" and args.algo == "ppo":  # rollouts on Ray (--ray)
        from agents.distributed.ray_train import RayPPOStage

        return RayPPOStage(name)
    return PPOStage(name) if args.algo == "ppo" else ReinforceStage(name)


class Trainer:
    """Runs the stages of ``args`` on one policy; see :mod:`agents.training`.

    The run's shared state and services are :attr:`context` (a
    :class:`~agents.training.context.TrainContext`); :meth:`run` sets each stage up, runs it, and
    writes its checkpoints, then :meth:`finish` evaluates. ``args`` is never changed.

    Attributes:
        context: the training context.
        resumed: the checkpoint being resumed (``None`` for a fresh run).
        init_report: with ``args.init``: the checkpoint, its graph, and the tensors loaded and skipped.
    """

    def __init__(self, args: TrainArgs) -> None:
        args.validate()
        self.args = args
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        seed_everything(args.seed)
        inst = Instance.from_args(args)
        eval_env = inst.sim_env()
        ckpt_path = out / CHECKPOINT_NAME
        resume = load_checkpoint(ckpt_path) if args.resume and ckpt_path.is_file() else None
        init = load_checkpoint(args.init) if args.init and resume is None else None
        source = resume or init
        policy_kwargs = dict(args.policy_kwargs)
        if source is not None and args.policy == "auto":  # keep the architecture that was trained
            policy_class = import_object(source["policy_class"])
            policy_kwargs = dict(source.get("policy_kwargs") or {}) or policy_kwargs
        else:
            policy_class = resolve_policy_class(args.policy)
        policy = make_policy(policy_class, eval_env.observation_space, eval_env.action_space, args.imitation.lr,
                             policy_kwargs, args.device)
        self.context = ctx = TrainContext(args, inst, policy_class, policy_kwargs, policy, eval_env,
                                          MetricLog(out, args.logging.tensorboard))
        self.resumed: dict[str, Any] | None = None
        self.init_report: dict[str, Any] | None = None
        if resume is not None:
            self._check_same_instance(resume)
            policy.load_state_dict(resume["policy_state"])
            for s, d in resume["progress"].items():
                if s in ctx.progress:
                    ctx.progress[s] = StageProgress(**d)
            set_rng_state(resume["rng"])
            ctx.rng.bit_generator.state = resume["trainer_rng"]
            ctx.best_eval = dict(resume.get("best_eval") or {})
            ctx.best_found = dict(resume.get("best_found") or {})
            ctx.at_bound = dict(resume.get("at_bound") or {})
            ctx.teacher = dict(resume.get("teacher") or {})
            self.resumed = resume
        elif init is not None:
            loaded, skipped = transfer_weights(policy, init["policy_state"])
            self.init_report = {"checkpoint": str(args.init), "from_graph": init["args"].get("graph"),
                                "loaded": len(loaded), "skipped": skipped}
            if skipped:
                warnings.warn(f"init: {len(skipped)} tensors of the {args.init} policy do not fit this env's "
                              f"shapes and start untrained: {', '.join(skipped[:4])}", RuntimeWarning, stacklevel=2)

    # ------------------------------------------------------------------ what the run has made so far
    @property
    def policy(self) -> torch.nn.Module:
        """The current policy."""
        return self.context.policy

    @property
    def progress(self) -> dict[str, StageProgress]:
        """Per-stage counters."""
        return self.context.progress

    @property
    def out(self) -> Path:
        return self.context.out

    @property
    def ckpt_path(self) -> Path:
        return self.context.ckpt_path

    def _check_same_instance(self, payload: dict[str, Any]) -> None:
        saved = payload.get("instance", {})
        here = self.context.instance_dict()
        if any(saved.get(k) != here[k] for k in ("graph", "n_ops", "n_devices")):
            raise ValueError(
                f"resume: {self.ckpt_path} was trained on {saved.get('graph')} ({saved.get('n_ops')} ops, "
                f"{saved.get('n_devices')} devices), not on {here['graph']} ({here['n_ops']} ops, {here['n_devices']} "
                f"devices); use another --out, or --init {self.ckpt_path} to fine-tune on this instance"
            )

    # ------------------------------------------------------------------ driver
    def run(self) -> dict[str, Any]:
        """Run the remaining stages, then evaluate and write ``summary.json`` (unless interrupted)."""
        ctx = self.context
        threads = torch.get_num_threads()
        if self.args.torch_threads:
            torch.set_num_threads(self.args.torch_threads)
        try:
            ctx.start()
            for name in self.args.stages:
                if not ctx.budget.to_run(name) or ctx.stopped_at_bound(name):
                    continue
                if self.run_stage(name):
                    return {"interrupted": True, "stage": name, "progress": ctx.progress_dict()}
            return self.finish()
        except KeyboardInterrupt:  # Ctrl-C: keep the progress of the interrupted stage, then stop
            ctx.interrupted = True
            if ctx.current is not None:
                path = ctx.checkpoint(ctx.current.name)
                print(f"\ninterrupted: wrote {path}; resume=True (`--resume`) continues", flush=True)
            raise
        finally:
            ctx.log.close()
            torch.set_num_threads(threads)

    def run_stage(self, name: str) -> bool:
        """Set up and run one stage, then write its checkpoint and ``policy_<name>.pt``; returns whether
        ``checkpoints.interrupt_after_episodes`` stopped it (the checkpoint is written then too)."""
        ctx = self.context
        prog = ctx.progress[name]
        prog.done = False
        ctx.budget.allot(name)
        stage = make_stage(name, self.args)
        resumed = self.resumed if self.resumed is not None and self.resumed.get("stage") == name else None
        stage.setup(ctx, resumed)
        if resumed is not None:  # setup drew from the global RNGs (weight init): continue where the run stopped
            set_rng_state(resumed["rng"])
        ctx.current = stage
        try:
            stage.run(ctx)
        finally:
            stage.close()
        if ctx.stopped_at_bound(name):  # the weights that reached the bound: an update may have followed the
            # decode in the same rollout (PPO evaluates inside its collection)
            ctx.policy.load_state_dict(load_checkpoint(ctx.at_bound["checkpoint"])["policy_state"])
        if ctx.interrupt_due():
            ctx.interrupted = True
            ctx.checkpoint(name)
            return True
        prog.done = True
        ctx.checkpoint(name)
        ctx.snapshot(name)
        ctx.current = None
        return False

    def finish(self) -> dict[str, Any]:
        """Greedy and sampled decodes, baselines, ``summary.json`` (:func:`agents.training.summary.write_summary`)."""
        return write_summary(self.context, self.init_report)


def train(args: TrainArgs) -> dict[str, Any]:
    """Run the stages of ``args``; returns the summary (also in ``args.out/summary.json``), or
    ``{"interrupted": True, ...}`` when ``checkpoints.interrupt_after_episodes`` stopped it early."""
    return Trainer(args).run()
