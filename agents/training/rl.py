"""Stages 2 and 3: MaskablePPO or REINFORCE in the simulator or on the real system, each update
followed by the imitation anchor's steps where one is set (:mod:`agents.training.anchor`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback

from agents.training.anchor import make_anchor
from agents.training.context import Stage, TrainContext
from agents.training.instance import make_stage_env
from agents.training.metrics import StageBar
from agents.training.policies import action_logits, make_policy, masked_logits, obs_to_tensors, stack_obs
from agents.training.rollout import Episode, rollout


def stage_envs(ctx: TrainContext, stage: str) -> list:
    """The envs of an RL stage: ``rl.episodes_per_update`` simulator envs stepped in lockstep (one
    batched policy call per step, one whole episode each per update); one env on the real system
    (one device set), whose update's episodes run one after another."""
    n_envs = ctx.args.rl.episodes_per_update if stage == "sim" else 1
    return [make_stage_env(ctx.args, ctx.inst, stage) for _ in range(n_envs)]


class StagePPO(MaskablePPO):
    """MaskablePPO whose gradient-step counter (``n_updates``, logged as ``train/n_updates``) a
    resumed stage continues."""

    @property
    def n_updates(self) -> int:
        return int(self._n_updates)

    @n_updates.setter
    def n_updates(self, n: int) -> None:
        self._n_updates = int(n)


class PPOStage(Stage):
    """Stages 2 and 3 with MaskablePPO: one update per ``learn`` call, so budgets and checkpoints act
    between updates. The envs' reset seeds are those of :meth:`TrainContext.model_seed` (SB3 seeds
    its vector env with the model's seed)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def setup(self, ctx: TrainContext, resumed: dict[str, Any] | None) -> None:
        from stable_baselines3.common.logger import Logger, configure
        from stable_baselines3.common.vec_env import DummyVecEnv

        args, stage, prog = ctx.args, self.name, ctx.progress[self.name]
        envs = stage_envs(ctx, stage)
        self.venv = DummyVecEnv([(lambda e=e: e) for e in envs])
        episode_len = ctx.inst.episode_steps()  # every step is valid under masking
        self.n_steps = episode_len * (args.rl.episodes_per_update // len(envs))
        model = StagePPO(
            ctx.policy_class, self.venv, learning_rate=args.rl.lr, n_steps=self.n_steps,
            batch_size=max(1, round(args.ppo.minibatch_episodes * episode_len)), n_epochs=args.ppo.epochs,
            gamma=args.rl.gamma, gae_lambda=args.ppo.gae_lambda, clip_range=args.ppo.clip_range,
            ent_coef=args.rl.ent_coef, vf_coef=args.ppo.vf_coef, max_grad_norm=args.rl.max_grad_norm,
            target_kl=args.ppo.target_kl,
            policy_kwargs=dict(ctx.policy_kwargs), seed=ctx.model_seed(stage), device=args.device,
            verbose=args.logging.verbose,
        )
        ctx.carry_weights(model.policy)
        model.lr_schedule = lambda _: ctx.rl_lr(stage)
        if args.logging.tensorboard:
            model.set_logger(configure(str(ctx.out / "tb" / f"{stage}_ppo"), ["tensorboard"]))
        else:
            model.set_logger(Logger(folder=None, output_formats=[]))
        if resumed is not None:
            if resumed.get("optimizer_state") is not None:
                model.policy.optimizer.load_state_dict(resumed["optimizer_state"])
            model.num_timesteps = int(prog.extra.get("num_timesteps", 0))
            model.n_updates = int(prog.extra.get("n_updates", 0))
        ctx.policy = model.policy
        self.model = model
        self.anchor = make_anchor(ctx)

    def state(self) -> dict[str, Any]:
        return {"optimizer_state": self.model.policy.optimizer.state_dict()}

    def close(self) -> None:
        self.venv.close()

    def run(self, ctx: TrainContext) -> None:
        args, stage, prog, model = ctx.args, self.name, ctx.progress[self.name], self.model
        callback = EpisodeCallback(lambda info: ctx.episode_done(stage, info))
        bar = StageBar(stage, ctx.budget.target(stage), prog, args.logging.progress)
        while ctx.running(stage):
            t0 = time.perf_counter()
            before = prog.episodes
            model.learn(total_timesteps=self.n_steps, callback=callback, reset_num_timesteps=False,
                        progress_bar=False)
            stats = {k.split("/")[1]: float(v) for k, v in model.logger.name_to_value.items()
                     if k.startswith("train/")}
            if self.anchor is not None:
                stats.update(self.anchor.update(model.policy, model.policy.optimizer, ctx.rng))
            prog.updates += 1
            prog.extra.update(num_timesteps=int(model.num_timesteps), n_updates=model.n_updates)
            prog.seconds += time.perf_counter() - t0
            if "entropy_loss" in stats:
                stats["entropy"] = -stats.pop("entropy_loss")
            stats.pop("learning_rate", None)
            ctx.log.write("update", stage, prog.updates, lr=ctx.rl_lr(stage), **stats)
            bar.update(prog, prog.episodes - before, best=prog.best_makespan)
            ctx.maybe_checkpoint(stage)
        bar.close()


def reinforce_advantages(returns: list[np.ndarray], kind: str, ema: float) -> np.ndarray:
    """REINFORCE's advantages of a batch: each episode's returns-to-go minus its baseline.

    Args:
        returns: per episode, ``(T_i,)`` returns-to-go (``[0]`` = the episode's total return).
        kind: ``"ema"``: one baseline ``ema`` for all; ``"batch"``: episode ``i``'s baseline is the
            mean total return of the other episodes (leave-one-out, needs 2 or more).
        ema: the moving-average baseline (used by ``"ema"``).

    Returns:
        ``(sum_i T_i,)`` the advantages, episodes concatenated in order.
    """
    totals = np.array([r[0] for r in returns], np.float64)
    if kind == "batch":
        if len(totals) < 2:
            raise ValueError("a leave-one-out baseline needs 2 or more episodes per update")
        per_episode = (totals.sum() - totals) / (len(totals) - 1)
    else:
        per_episode = np.full(len(totals), float(ema))
    return np.concatenate([r - b for r, b in zip(returns, per_episode)])


class ReinforceStage(Stage):
    """Stages 2 and 3 with REINFORCE on ``rl.episodes_per_update`` sampled episodes per update, with a
    moving-average baseline (``reinforce.baseline="ema"``, the paper's) or the leave-one-out mean of
    the batch (``"batch"``). The logged ``baseline`` is the moving average in both cases."""

    def __init__(self, name: str) -> None:
        self.name = name

    def setup(self, ctx: TrainContext, resumed: dict[str, Any] | None) -> None:
        args = ctx.args
        self.envs = stage_envs(ctx, self.name)
        policy = make_policy(ctx.policy_class, self.envs[0].observation_space, self.envs[0].action_space,
                             args.rl.lr, ctx.policy_kwargs, args.device)
        ctx.carry_weights(policy)
        ctx.policy = policy
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=args.rl.lr)
        if resumed is not None and resumed.get("optimizer_state"):
            self.optimizer.load_state_dict(resumed["optimizer_state"])
        self.anchor = make_anchor(ctx)

    def state(self) -> dict[str, Any]:
        return {"optimizer_state": self.optimizer.state_dict()}

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def run(self, ctx: TrainContext) -> None:
        args, stage, prog = ctx.args, self.name, ctx.progress[self.name]
        policy, envs, optimizer = ctx.policy, self.envs, self.optimizer
        bar = StageBar(stage, ctx.budget.target(stage), prog, args.logging.progress)
        while ctx.running(stage):
            t0 = time.perf_counter()
            policy.set_training_mode(False)
            episodes: list[Episode] = []
            while len(episodes) < args.rl.episodes_per_update:
                seeds = ctx.episode_seeds(stage, len(envs), offset=len(episodes))
                episodes += rollout(policy, envs, seeds, mode="sample", rng=ctx.rng, keep_obs=True)
            policy.set_training_mode(True)
            for g in optimizer.param_groups:
                g["lr"] = ctx.rl_lr(stage)
            returns = [ep.returns(args.rl.gamma) for ep in episodes]
            totals = np.array([r[0] for r in returns])
            baseline = prog.extra.get("baseline")
            if baseline is None:
                baseline = float(totals.mean())
            adv = reinforce_advantages(returns, args.reinforce.baseline, baseline)
            obs = obs_to_tensors(stack_obs([o for ep in episodes for o in ep.obs]), policy.device)
            mask = torch.as_tensor(np.stack([m for ep in episodes for m in ep.masks]), device=policy.device)
            act = torch.as_tensor([a for ep in episodes for a in ep.actions], device=policy.device)
            adv = torch.as_tensor(adv, dtype=torch.float32, device=policy.device)
            logp_all = torch.log_softmax(masked_logits(action_logits(policy, obs), mask), -1)
            logp = logp_all.gather(1, act[:, None]).squeeze(1)
            entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
            loss = -(adv * logp).sum() / len(episodes) - args.rl.ent_coef * entropy
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), args.rl.max_grad_norm)
            optimizer.step()
            anchor_stats = self.anchor.update(policy, optimizer, ctx.rng) if self.anchor is not None else {}
            d = args.reinforce.baseline_decay
            prog.extra["baseline"] = d * baseline + (1 - d) * float(totals.mean())
            prog.updates += 1
            prog.seconds += time.perf_counter() - t0
            for ep in episodes:
                ctx.episode_done(stage, ep.info)
            ctx.log.write("update", stage, prog.updates, loss=float(loss.detach()),
                          entropy=float(entropy.detach()), baseline=baseline, lr=ctx.rl_lr(stage), **anchor_stats)
            bar.update(prog, len(episodes), best=prog.best_makespan)
            ctx.maybe_checkpoint(stage)
        bar.close()


class EpisodeCallback(BaseCallback):
    """Reports every finished episode (its final ``info``) of an SB3 rollout to ``on_episode``."""

    def __init__(self, on_episode: Callable[[dict], None]) -> None:
        super().__init__()
        self.on_episode = on_episode

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if "makespan" in info:
                self.on_episode(info)
        return True
