"""Train a shipped recipe with periodic greedy evaluation, keeping the best policy (rl-baselines3-zoo's
``EvalCallback`` convention: the model a run hands back is the one that evaluated best).

:func:`train_recipe` builds the model with :func:`~agents.recipes.hyperparams.make_model`, evaluates its
greedy (deterministic; masked for MaskablePPO) policy on a separate env before training, every ``eval_every``
env steps and at the end, and restores the best evaluated weights when it stops: at the recipe's
``n_timesteps``, or earlier at a wall-clock budget. The score of an evaluation is a number the env reports in
the final ``info`` of an episode (the recipe's ``eval_metric``: ``makespan`` for ``Doppler-Sim-v0`` and
``Doppler-SimAssign-v0``, ``avg_jct`` for ``Doppler-Cluster-v0``; lower is better), averaged over
``eval_episodes`` episodes reset with seeds ``eval_seed + k``.
"""

from __future__ import annotations

import copy
import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from agents.recipes.hyperparams import load_hyperparams, make_model


@dataclass
class Evaluation:
    """One greedy evaluation: after ``steps`` env steps and ``seconds`` [s] of wall time, ``score`` (the
    mean of the eval metric over the evaluation episodes; lower is better)."""

    steps: int
    seconds: float
    score: float


@dataclass
class RecipeRun:
    """The outcome of :func:`train_recipe`.

    Attributes:
        model: the trained model, holding the best evaluated weights.
        curve: every evaluation, in order (the first one is the untrained policy's, at step 0).
        metric: the ``info`` key the scores are read from.
        stopped_by: ``"n_timesteps"``, ``"budget"`` or ``"stop_at"``.
    """

    model: Any
    curve: list[Evaluation] = field(default_factory=list)
    metric: str = "makespan"
    stopped_by: str = "n_timesteps"

    @property
    def initial(self) -> float:
        """The untrained policy's score."""
        return self.curve[0].score

    @property
    def best(self) -> Evaluation:
        """The best evaluation (the earliest among equals): the weights :attr:`model` holds."""
        return min(self.curve, key=lambda e: e.score)

    @property
    def last(self) -> Evaluation:
        """The evaluation at the end of training (the weights training ended with, before the best was restored)."""
        return self.curve[-1]


def greedy_score(model: Any, env: Any, metric: str, seeds: list[int]) -> float:
    """Mean of ``info[metric]`` over one greedy episode per seed: ``model.predict(obs, deterministic=True)``
    on ``env`` (a Gymnasium env), given ``action_masks=env.action_masks()`` (reached through the wrappers)
    when the model's ``predict`` takes masks (MaskablePPO; not PPO or A2C). A ``Discrete`` action is passed
    to ``env.step`` as an int, any other (``MultiDiscrete``: one entry per op) as the array predicted."""
    masked = "action_masks" in inspect.signature(model.predict).parameters
    discrete = isinstance(env.action_space, gym.spaces.Discrete)
    scores = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        while True:
            masks = {"action_masks": env.get_wrapper_attr("action_masks")()} if masked else {}
            action, _ = model.predict(obs, deterministic=True, **masks)
            obs, _, terminated, truncated, info = env.step(int(action) if discrete else action)
            if terminated or truncated:
                if metric not in info:
                    raise KeyError(f"the final info of the evaluation episode has no {metric!r} "
                                   f"(keys: {sorted(info)}); set the recipe's eval_metric to one of them")
                scores.append(float(info[metric]))
                break
    return float(np.mean(scores))


def train_recipe(algo: str, env_id: str, seed: int, *, minutes: float | None = None, eval_every: int | None = None,
                 eval_episodes: int | None = None, eval_seed: int = 0,
                 env_kwargs_overrides: Mapping[str, Any] | None = None, n_timesteps: int | None = None,
                 stop_at: float | None = None, on_eval: Callable[[Evaluation], None] | None = None) -> RecipeRun:
    """Train ``algo`` on ``env_id`` from the shipped hyperparameters, evaluating and keeping the best.

    Args:
        algo, env_id, seed, env_kwargs_overrides: as :func:`~agents.recipes.hyperparams.make_model`.
        minutes: wall-clock budget [min] (``None``: none); training stops at the first rollout boundary past it.
        eval_every: env steps between evaluations (default: the recipe's ``eval_every``, else
            ``n_timesteps // 20``).
        eval_episodes: episodes per evaluation (default: the recipe's ``eval_episodes``, else 1).
        eval_seed: the evaluation episodes reset with seeds ``eval_seed + k`` (keep them apart from training
            seeds to evaluate on held-out instances where the env draws instances per episode).
        n_timesteps: env steps to train (default: the recipe's).
        stop_at: stop once an evaluation scores at or below it (``None``: train on).
        on_eval: called with each :class:`Evaluation` as it is made (progress printing).

    Returns:
        A :class:`RecipeRun`: its ``model`` holds the best evaluated weights.
    """
    from stable_baselines3.common.callbacks import BaseCallback

    hp = load_hyperparams(algo, env_id)
    total = int(n_timesteps or hp["n_timesteps"])
    every = int(eval_every or hp.get("eval_every") or max(total // 20, 1))
    episodes = int(eval_episodes or hp.get("eval_episodes") or 1)
    metric = str(hp.get("eval_metric", "makespan"))
    model, _ = make_model(algo, env_id, seed, env_kwargs_overrides=env_kwargs_overrides)
    env = gym.make(env_id, **{**hp["env_kwargs"], **dict(env_kwargs_overrides or {})})
    seeds = [eval_seed + k for k in range(episodes)]
    run = RecipeRun(model=model, metric=metric)
    best: dict[str, Any] = {"score": np.inf, "weights": None}
    t0 = time.perf_counter()

    def evaluate(steps: int) -> None:
        entry = Evaluation(steps, time.perf_counter() - t0, greedy_score(model, env, metric, seeds))
        run.curve.append(entry)
        if entry.score < best["score"]:
            best["score"], best["weights"] = entry.score, copy.deepcopy(model.policy.state_dict())
        if on_eval is not None:
            on_eval(entry)

    class _Evaluate(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.next_eval = every

        def _on_step(self) -> bool:  # False ends learn() (SB3 stops collecting and returns)
            if stop_at is not None and best["score"] <= stop_at:
                run.stopped_by = "stop_at"
                return False
            if minutes is not None and time.perf_counter() - t0 > 60.0 * minutes:
                run.stopped_by = "budget"
                return False
            return True

        def _on_rollout_end(self) -> None:
            if self.num_timesteps >= self.next_eval:
                evaluate(self.num_timesteps)
                self.next_eval = self.num_timesteps + every

    evaluate(0)
    model.learn(total, callback=_Evaluate())
    if not run.curve or run.curve[-1].steps != model.num_timesteps:
        evaluate(model.num_timesteps)
    model.policy.load_state_dict(best["weights"])
    return run
