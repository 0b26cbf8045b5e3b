"""Stage 1: DAgger imitation of the critical-path teacher, or of a search placement (the loss and the
stage loop; the teachers are in :mod:`agents.training.teacher`)."""

from __future__ import annotations

import math
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from agents.training.buffer import StateBuffer
from agents.training.context import Stage, TrainContext
from agents.training.instance import make_stage_env
from agents.training.metrics import StageBar
from agents.training.policies import NEG, action_logits, masked_logits, obs_to_tensors
from agents.training.rollout import rollout
from agents.training.teacher import AssignmentTeacher, SearchTeacher


def imitation_loss(
    logits: torch.Tensor, mask: torch.Tensor, teacher: torch.Tensor, ent_coef: float = 0.0,
    label_smoothing: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """``(1 - eps) * CE_teacher + eps * CE_uniform - ent_coef * mean(entropy)`` under the masked softmax.

    ``CE_teacher = mean(-log sum_{a in teacher} pi(a|s))`` (the teacher's tied actions share the
    mass); ``CE_uniform = mean over states of -mean_{a valid} log pi(a|s)``, the cross-entropy to the
    uniform distribution over the valid actions: label smoothing (Szegedy et al., CVPR 2016) with
    ``eps = label_smoothing``. With ``eps > 0`` the optimum keeps every valid action's probability
    above zero (``eps / |valid|`` or so), so a policy leaves imitation able to explore.

    Args:
        logits: ``(B, A)`` raw action scores.
        mask: ``(B, A) bool`` valid actions.
        teacher: ``(B, A) bool`` the teacher's (tied) actions, a non-empty subset of ``mask``.

    Returns:
        The loss and its parts as floats: ``cross_entropy`` (``CE_teacher``), ``entropy`` and
        ``accuracy`` (the argmax is a teacher action).
    """
    scores = masked_logits(logits, mask)
    log_z = torch.logsumexp(scores, -1)
    log_t = torch.logsumexp(scores.masked_fill(~teacher, NEG), -1)
    ce = (log_z - log_t).mean()
    logp = scores - log_z[:, None]
    entropy = -(logp.exp() * logp).sum(-1).mean()
    loss = ce - ent_coef * entropy
    if label_smoothing > 0:
        valid = mask.to(logp.dtype)
        ce_uniform = -((logp * valid).sum(-1) / valid.sum(-1).clamp_min(1.0)).mean()
        loss = loss + label_smoothing * (ce_uniform - ce)
    with torch.no_grad():
        acc = teacher.gather(1, scores.argmax(-1, keepdim=True)).float().mean()
    return loss, {"cross_entropy": float(ce.detach()), "entropy": float(entropy.detach()), "accuracy": float(acc)}


def teacher_envs(ctx: TrainContext, n: int) -> list[gym.Env]:
    """``n`` simulator envs whose ``teacher_mask`` is ``args.imitation.teacher``'s: the critical-path
    teacher of the env itself, or the search placement of the graph (one target per drawn graph
    of a mix, cached; :mod:`agents.training.teacher`)."""
    args = ctx.args
    envs = [make_stage_env(args, ctx.inst, "il") for _ in range(n)]
    if args.imitation.teacher == "search" and ctx.inst.mix is not None:  # a target per drawn graph, cached
        targets = ctx.search_targets()
        return [SearchTeacher(e, targets) for e in envs]
    if args.imitation.teacher == "search":
        teacher = ctx.search_teacher()
        return [AssignmentTeacher(e, teacher["assignment"], teacher["interchangeable"]) for e in envs]
    return envs


class ImitationStage(Stage):
    """Stage 1: DAgger on the teacher's action sets (``args.imitation.teacher``; see :mod:`agents.training`)."""

    name = "il"

    def setup(self, ctx: TrainContext, resumed: dict[str, Any] | None) -> None:
        args = ctx.args
        self.envs = envs = teacher_envs(ctx, args.imitation.envs)
        self.buffer = StateBuffer(args.imitation.buffer_size, envs[0].observation_space)
        self.optimizer = torch.optim.Adam(ctx.policy.parameters(), lr=args.imitation.lr)
        if resumed is not None:
            if resumed.get("optimizer_state") is not None:
                self.optimizer.load_state_dict(resumed["optimizer_state"])
            if resumed.get("il_buffer") is not None:
                self.buffer.load_state_dict(resumed["il_buffer"])

    def state(self) -> dict[str, Any]:
        return {"optimizer_state": self.optimizer.state_dict(), "il_buffer": self.buffer.state_dict()}

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def run(self, ctx: TrainContext) -> None:
        args, prog, policy = ctx.args, ctx.progress["il"], ctx.policy
        envs, buffer, optimizer = self.envs, self.buffer, self.optimizer
        bar = StageBar("il", ctx.budget.target("il"), prog, args.logging.progress)
        has_values = hasattr(policy, "predict_values") and args.imitation.vf_coef > 0
        while ctx.running("il"):
            t0 = time.perf_counter()
            beta = max(0.0, 1.0 - ctx.budget.fraction("il") / args.imitation.beta_decay)
            left = ctx.budget.episodes_left("il")
            batch = envs if left is None else envs[: max(1, min(len(envs), left))]  # stop at the episode count
            seeds = ctx.episode_seeds("il", len(batch))
            policy.set_training_mode(False)
            episodes = rollout(policy, batch, seeds, mode="dagger", beta=beta, rng=ctx.rng, buffer=buffer)
            new_states = 0
            for ep in episodes:
                buffer.set_return(ep.slots, ep.returns(args.rl.gamma))
                new_states += len(ep.slots)
            # --- updates on the aggregated data
            policy.set_training_mode(True)
            n_updates = max(1, math.ceil(args.imitation.epochs * new_states / args.imitation.batch_size))
            stats: dict[str, list[float]] = {"cross_entropy": [], "accuracy": [], "entropy": [], "value_loss": []}
            for _ in range(n_updates):
                if ctx.budget.out_of_time("il", time.perf_counter() - t0):  # a budget binds between updates too
                    break
                obs, mask, teacher, returns = buffer.sample(args.imitation.batch_size, ctx.rng)
                obs_t = obs_to_tensors(obs, policy.device)
                mask_t = torch.as_tensor(mask, device=policy.device).bool()
                teach_t = torch.as_tensor(teacher, device=policy.device).bool() & mask_t
                if has_values and hasattr(policy, "logits_and_values"):  # one GNN pass for both (DopplerPolicy)
                    logits, values = policy.logits_and_values(obs_t)
                else:
                    logits = action_logits(policy, obs_t)
                    values = policy.predict_values(obs_t) if has_values else None
                loss, parts = imitation_loss(logits, mask_t, teach_t, args.imitation.ent_coef,
                                             args.imitation.label_smoothing)
                if values is not None:
                    values = values.flatten()
                    v_loss = F.mse_loss(values, torch.as_tensor(returns, device=policy.device))
                    loss = loss + args.imitation.vf_coef * v_loss
                    parts["value_loss"] = float(v_loss.detach())
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
                optimizer.step()
                for k, v in parts.items():
                    stats[k].append(v)
                prog.updates += 1
            # --- bookkeeping
            prog.seconds += time.perf_counter() - t0
            for ep in episodes:
                ctx.episode_done("il", ep.info, beta=beta,
                                 learner_agreement=ep.agree / max(len(ep.rewards) - ep.teacher_steps, 1))
            ctx.log.write("update", "il", prog.updates, beta=beta, buffer=buffer.size,
                          **{k: float(np.mean(v)) for k, v in stats.items() if v})
            bar.update(prog, len(episodes), ce=np.mean(stats["cross_entropy"]) if stats["cross_entropy"] else math.nan)
            ctx.maybe_checkpoint("il")
        bar.close()
