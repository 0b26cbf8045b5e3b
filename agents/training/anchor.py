"""The imitation anchor of the RL stages: behaviour cloning of the teacher beside RL.

With a teacher that is already near the best known placement (the ``best`` recipe's search teacher),
PPO rarely improves on the imitated policy but can drift from it: on paper/llama-layer the final
greedy decode ended 8.2% above the teacher's placement after 500 PPO episodes
(``docs/results/train_default.md``). The anchor keeps the teacher's actions likely: after each RL
update it takes ``rl.anchor_updates`` gradient steps of ``rl.anchor_coef`` times the imitation loss
(:func:`~agents.training.imitation.imitation_loss`) on states of the teacher's own episodes, with
the RL stage's optimizer and learning rate. This is the demonstration term of DAPG (Rajeswaran et
al., "Learning complex dexterous manipulation with deep reinforcement learning and
demonstrations", RSS 2018) taken as separate steps between updates, as Phasic Policy Gradient
(Cobbe et al., ICML 2021) takes its auxiliary phase, so SB3's PPO loss stays untouched.

The teacher episodes are collected once per stage set-up, with their own seeds and generator, so a
resumed stage rebuilds the same states without drawing from the run's generators.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agents.training.buffer import StateBuffer
from agents.training.context import TrainContext, episode_seeds
from agents.training.imitation import imitation_loss, teacher_envs
from agents.training.policies import action_logits, obs_to_tensors
from agents.training.rollout import rollout

ANCHOR_SEED_KEY = 0xA7C  # the anchor's own generator: default_rng([seed, ANCHOR_SEED_KEY])


class ImitationAnchor:
    """Teacher states and the behaviour-cloning steps between RL updates (module docstring).

    Attributes:
        buffer: the teacher episodes' states (observations, valid masks, teacher action sets).
        coef: weight of the imitation loss [dimensionless]; ``updates``: gradient steps per RL update;
        batch_size: states per step (``imitation.batch_size``).
    """

    def __init__(self, ctx: TrainContext) -> None:
        args = ctx.args
        self.coef = float(args.rl.anchor_coef)
        self.updates = int(args.rl.anchor_updates)
        self.batch_size = int(args.imitation.batch_size)
        self.label_smoothing = float(args.imitation.label_smoothing)
        self.max_grad_norm = float(args.rl.max_grad_norm)
        envs = teacher_envs(ctx, args.rl.anchor_episodes)
        try:
            self.buffer = StateBuffer(args.imitation.buffer_size, envs[0].observation_space)
            rng = np.random.default_rng([args.seed, ANCHOR_SEED_KEY])
            # beta = 1: every action is the teacher's (a uniform draw among its tied actions), so the
            # policy is never called and these are the teacher's episodes
            rollout(ctx.policy, envs, episode_seeds(args.seed, "il", 0, len(envs)), mode="dagger", beta=1.0,
                    rng=rng, buffer=self.buffer)
        finally:
            for env in envs:
                env.close()

    def update(self, policy: Any, optimizer: torch.optim.Optimizer, rng: np.random.Generator) -> dict[str, float]:
        """``updates`` steps of ``coef * imitation_loss`` on minibatches of teacher states drawn with
        ``rng``; returns the mean ``anchor_cross_entropy`` and ``anchor_accuracy`` (argmax in the
        teacher's set) over the steps."""
        policy.set_training_mode(True)
        ce, acc = [], []
        for _ in range(self.updates):
            obs, mask, teacher, _ = self.buffer.sample(self.batch_size, rng)
            mask_t = torch.as_tensor(mask, device=policy.device).bool()
            teacher_t = torch.as_tensor(teacher, device=policy.device).bool() & mask_t
            logits = action_logits(policy, obs_to_tensors(obs, policy.device))
            loss, parts = imitation_loss(logits, mask_t, teacher_t, 0.0, self.label_smoothing)
            optimizer.zero_grad()
            (self.coef * loss).backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), self.max_grad_norm)
            optimizer.step()
            ce.append(parts["cross_entropy"])
            acc.append(parts["accuracy"])
        policy.set_training_mode(False)
        return {"anchor_cross_entropy": float(np.mean(ce)), "anchor_accuracy": float(np.mean(acc))} if ce else {}


def make_anchor(ctx: TrainContext) -> ImitationAnchor | None:
    """The stage's anchor, or ``None`` when ``rl.anchor_coef`` or ``rl.anchor_updates`` is 0."""
    args = ctx.args
    return ImitationAnchor(ctx) if args.rl.anchor_coef > 0 and args.rl.anchor_updates > 0 else None
