"""The :class:`Trainer`: runs the stages of a :class:`TrainArgs` on one policy, with budgets and checkpoints."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import torch

from agents.training.args import TrainArgs
from agents.training.checkpoint import (
    CHECKPOINT_NAME,
    POLICY_KEYS,
    RESUME_KEYS,
    load_checkpoint,
    policy_spec,
    remove_orphan_tmp,
    seed_everything,
    set_rng_state,
)
from agents.training.context import Stage, TrainContext, instance_dict
from agents.training.imitation import ImitationStage
from agents.training.instance import Instance
from agents.training.metrics import MetricLog, StageProgress, rows_within
from agents.training.policies import make_policy, resolve_policy_class, transfer_weights
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
        resume = self._read_resume(out / CHECKPOINT_NAME, inst)
        init = read_source("init", args.init, POLICY_KEYS) if args.init and resume is None else None
        source = ("resume", out / CHECKPOINT_NAME, resume) if resume is not None else ("init", args.init, init)
        policy_class, policy_kwargs = self._policy_spec(*source)
        policy = make_policy(policy_class, eval_env.observation_space, eval_env.action_space, args.imitation.lr,
                             policy_kwargs, args.device)
        self.context = ctx = TrainContext(args, inst, policy_class, policy_kwargs, policy, eval_env,
                                          self._open_log(out, resume))
        self.resumed: dict[str, Any] | None = None
        self.init_report: dict[str, Any] | None = None
        if resume is not None:
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
            saved_args = init.get("args") if isinstance(init.get("args"), dict) else {}
            self.init_report = {"checkpoint": str(args.init), "from_graph": saved_args.get("graph"),
                                "loaded": len(loaded), "skipped": skipped}
            if skipped:
                warnings.warn(f"init: {len(skipped)} tensors of the {args.init} policy do not fit this env's "
                              f"shapes and start untrained: {', '.join(skipped[:4])}", RuntimeWarning, stacklevel=2)

    def _read_resume(self, path: Path, inst: Instance) -> dict[str, Any] | None:
        """The checkpoint to resume (``args.resume``), checked to be of this instance; ``None`` for a fresh
        run, said in one printed line when ``args.resume`` finds no checkpoint."""
        if not self.args.resume:
            return None
        if not path.is_file():
            start = f"from --init {self.args.init}" if self.args.init else "from scratch"
            print(f"resume: no checkpoint at {path}; starting a fresh run {start}", flush=True)
            return None
        payload = read_source("resume", path, RESUME_KEYS)
        progress = payload["progress"]
        if not (isinstance(progress, dict) and all(isinstance(d, dict) for d in progress.values())):
            raise ValueError(f"resume: checkpoint {str(path)!r} has malformed stage counters; delete it (or give "
                             f"another --out) to start a fresh run")
        check_same_instance(payload, inst, path)
        return payload

    def _policy_spec(self, flag: str, path: object, source: dict[str, Any] | None) -> tuple[type, dict[str, Any]]:
        """The policy class and keyword arguments: under ``policy="auto"``, those of the checkpoint ``path`` a
        run resumes or starts from (``source``, read for ``flag``: the architecture that was trained, its class
        through the registry of :func:`~agents.training.policies.registered_policy`), else ``args.policy``'s."""
        args = self.args
        if source is None or args.policy != "auto":
            return resolve_policy_class(args.policy), dict(args.policy_kwargs)
        try:
            cls, kwargs = policy_spec(source)
        except ValueError as exc:
            raise ValueError(f"{flag}: checkpoint {str(path)!r}: {exc}") from None
        return cls, kwargs or dict(args.policy_kwargs)

    def _open_log(self, out: Path, resume: dict[str, Any] | None) -> MetricLog:
        """The metrics log, its rows past the checkpoint's counters dropped (every row for a fresh run), once
        the temporary files a killed run left are removed; each said in one printed line."""
        removed = remove_orphan_tmp(out)
        if removed:
            print(f"removed {len(removed)} temporary file(s) a killed run left in {out}: "
                  f"{', '.join(p.name for p in removed)}", flush=True)
        progress = resume["progress"] if resume is not None else {}
        log = MetricLog(out, self.args.logging.tensorboard, keep=rows_within(progress))
        if log.dropped:
            episode = sum(int(d.get("episodes", 0)) for d in progress.values())
            why = "written after its checkpoint" if resume is not None else "of an earlier run"
            print(f"{log.path}: dropped {log.dropped} rows {why} (this run starts at episode {episode})", flush=True)
        return log

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


def read_source(flag: str, path: str | os.PathLike, needs: tuple[str, ...]) -> dict[str, Any]:
    """The checkpoint a run resumes (``flag`` ``resume``) or starts from (``init``): :func:`load_checkpoint`,
    its error prefixed with ``flag`` and, for a resume, how to start afresh instead.

    Raises:
        ValueError: the checkpoint is missing, unreadable or lacks an entry of ``needs``."""
    try:
        return load_checkpoint(path, needs)
    except ValueError as exc:
        hint = "; or delete it (or give another --out) to start a fresh run" if flag == "resume" else ""
        raise ValueError(f"{flag}: {exc}{hint}") from None


def check_same_instance(payload: dict[str, Any], inst: Instance, path: Path) -> None:
    """Refuse to resume checkpoint ``path`` (``payload``) on another graph or device count than ``inst``'s.

    Raises:
        ValueError: the instance differs (the message suggests another ``--out`` or ``--init``)."""
    saved = payload.get("instance") if isinstance(payload.get("instance"), dict) else {}
    here = instance_dict(inst)
    if any(saved.get(k) != here[k] for k in ("graph", "n_ops", "n_devices")):
        raise ValueError(
            f"resume: {path} was trained on {saved.get('graph')} ({saved.get('n_ops')} ops, "
            f"{saved.get('n_devices')} devices), not on {here['graph']} ({here['n_ops']} ops, {here['n_devices']} "
            f"devices); use another --out, or --init {path} to fine-tune on this instance"
        )


def train(args: TrainArgs) -> dict[str, Any]:
    """Run the stages of ``args``; returns the summary (also in ``args.out/summary.json``), or
    ``{"interrupted": True, ...}`` when ``checkpoints.interrupt_after_episodes`` stopped it early."""
    return Trainer(args).run()
