"""Shipped hyperparameters for third-party RL algorithms on the doppler-gym envs, rl-baselines3-zoo style.

One YAML file per algorithm under ``agents/recipes/hyperparams/`` (``maskable_ppo.yml``, ``ppo.yml``,
``a2c.yml``), each a mapping from env id to that env's settings; :func:`~agents.recipes.hyperparams.load_hyperparams`
reads an entry and :func:`~agents.recipes.hyperparams.make_model` builds the sb3 / sb3-contrib model and its
vector env from it::

    from agents.recipes import make_model, load_hyperparams
    model, vec_env = make_model("maskable_ppo", "Doppler-Cluster-v0", seed=0)
    model.learn(load_hyperparams("maskable_ppo", "Doppler-Cluster-v0")["n_timesteps"])

The results each recipe reaches are in ``docs/results/`` (``sim_rl.md`` for ``Doppler-Sim-v0``,
``cluster_rl.md`` for ``Doppler-Cluster-v0``, ``assign_rl.md`` for PPO and A2C on ``Doppler-SimAssign-v0``).
"""

from __future__ import annotations

from agents.recipes.hyperparams import ALGOS, algorithms, env_ids, load_hyperparams, make_model
from agents.recipes.run import Evaluation, RecipeRun, train_recipe

__all__ = ["ALGOS", "Evaluation", "RecipeRun", "algorithms", "env_ids", "load_hyperparams", "make_model",
           "train_recipe"]
