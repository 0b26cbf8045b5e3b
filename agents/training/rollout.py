"""Lockstep episodes of a policy in several envs: greedy, sampled, or DAgger roll-ins."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from agents.training.buffer import StateBuffer
from agents.training.policies import action_logits, masked_logits, obs_to_tensors, stack_obs


# ============================================================================ rollouts
@dataclass
class Episode:
    """One finished episode of :func:`rollout`: the final info, rewards and (optionally) what was seen."""

    info: dict[str, Any]
    rewards: list[float] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)  # StateBuffer slots of its states
    obs: list[dict[str, np.ndarray]] = field(default_factory=list)  # when keep_obs
    masks: list[np.ndarray] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)
    teacher_steps: int = 0
    agree: int = 0  # learner's greedy action in the teacher's set (teacher mode)

    @property
    def makespan(self) -> float:
        return float(self.info.get("makespan", math.nan))

    def returns(self, gamma: float) -> np.ndarray:
        r = np.asarray(self.rewards, np.float64)
        if gamma == 1.0:
            return np.cumsum(r[::-1])[::-1].copy()
        out = np.zeros_like(r)
        acc = 0.0
        for t in range(len(r) - 1, -1, -1):
            acc = r[t] + gamma * acc
            out[t] = acc
        return out


def rollout(
    policy: torch.nn.Module,
    envs: Sequence[gym.Env],
    seeds: Sequence[int | None],
    mode: str = "greedy",
    beta: float = 0.0,
    rng: np.random.Generator | None = None,
    buffer: StateBuffer | None = None,
    keep_obs: bool = False,
) -> list[Episode]:
    """Run one episode in each env in lockstep (one batched policy call per step).

    Args:
        mode: ``"greedy"`` (argmax of the masked scores), ``"sample"`` (from the masked softmax)
            or ``"dagger"`` (per env and step: a uniformly drawn teacher action with probability
            ``beta``, else a sample of the policy; every state goes to ``buffer`` with its teacher
            mask).
        seeds: reset seed of each env.
        keep_obs: keep observations, masks and actions (REINFORCE).
    """
    rng = rng if rng is not None else np.random.default_rng()
    device = policy.device
    obs = [env.reset(seed=s)[0] for env, s in zip(envs, seeds)]
    eps = [Episode(info={}) for _ in envs]
    active = list(range(len(envs)))
    while active:
        masks = np.stack([envs[i].get_wrapper_attr("action_masks")() for i in active])
        teacher = None
        use_teacher = np.zeros(len(active), bool)
        if mode == "dagger":
            teacher = np.stack([envs[i].get_wrapper_attr("teacher_mask")() for i in active])
            use_teacher = rng.random(len(active)) < beta
        actions = np.zeros(len(active), np.int64)
        need = np.flatnonzero(~use_teacher)
        if need.size:
            batch = obs_to_tensors(stack_obs([obs[active[j]] for j in need]), device)
            with torch.no_grad():
                scores = masked_logits(action_logits(policy, batch), torch.as_tensor(masks[need], device=device))
                if mode == "greedy":
                    chosen = scores.argmax(-1)
                else:
                    chosen = torch.distributions.Categorical(logits=scores).sample()
            actions[need] = chosen.cpu().numpy()
        for j, i in enumerate(active):
            ep = eps[i]
            if teacher is not None:
                if use_teacher[j]:
                    actions[j] = rng.choice(np.flatnonzero(teacher[j]))
                    ep.teacher_steps += 1
                else:
                    ep.agree += int(teacher[j][actions[j]])
                if buffer is not None:
                    ep.slots.append(buffer.add(obs[i], masks[j], teacher[j]))
            if keep_obs:
                ep.obs.append(obs[i])
                ep.masks.append(masks[j])
                ep.actions.append(int(actions[j]))
            obs[i], reward, terminated, truncated, info = envs[i].step(int(actions[j]))
            ep.rewards.append(float(reward))
            if terminated or truncated:
                ep.info = info
        active = [i for i in active if not eps[i].info]
    return eps


def decode(policy: torch.nn.Module, env: gym.Env, greedy: bool = True, seed: int | None = None) -> dict[str, Any]:
    """The final ``info`` of one episode of ``policy`` in ``env`` (greedy or sampled)."""
    return rollout(policy, [env], [seed], mode="greedy" if greedy else "sample")[0].info
