"""Shared helpers of the ``tests/agents/test_policy_*`` tests: small graphs, padded envs, observation
batches collected with random valid actions."""

from __future__ import annotations

from itertools import combinations

import gymnasium as gym
import numpy as np
import torch

import doppler_gym as dg
from doppler_gym.envs import PlacementEnv


def random_dag(n_ops: int = 10, edge_prob: float = 0.35, seed: int = 0) -> dg.DataflowGraph:
    """A random DAG (edges i -> j, i < j) with distinct random costs, so longest paths are unique."""
    rng = np.random.default_rng(seed)
    pairs = [(i, j) for i, j in combinations(range(n_ops), 2) if rng.random() < edge_prob]
    src = np.array([p[0] for p in pairs], np.int64)
    dst = np.array([p[1] for p in pairs], np.int64)
    return dg.DataflowGraph(
        src=src,
        dst=dst,
        flops=rng.uniform(1.0, 10.0, n_ops),
        out_bytes=rng.uniform(0.5, 5.0, n_ops),
        name=f"random{seed}",
        units="paper",
    )


def make_env(graph: object = "paper/chainmm", topology: object = 4, **kwargs) -> gym.Env:
    return gym.make("Doppler-Sim-v0", graph=graph, topology=topology, disable_env_checker=True, **kwargs)


def collect(
    env: gym.Env, steps: int, seed: int = 0, options: dict | None = None
) -> list[dict[str, np.ndarray]]:
    """``steps`` observations of ``env`` under uniformly random valid actions (resets as needed)."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed, options=options)
    out = []
    for _ in range(steps):
        out.append(obs)
        action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            obs, _ = env.reset(options=options)
    return out


def stack(observations: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
    """A batch of observations as float tensors, the way SB3's rollout buffer hands them back."""
    return {k: torch.as_tensor(np.stack([o[k] for o in observations])).float() for k in observations[0]}


def mixed_batch(n_each: int = 12) -> tuple[PlacementEnv, dict[str, torch.Tensor]]:
    """An env padded for chainmm (76 ops) and ffnn (180 ops) on 4 devices, and a batch mixing
    SEL/PLC observations of both graphs (chainmm padded)."""
    env = make_env(graph=["paper/chainmm", "paper/ffnn"])
    obs = []
    for k, name in enumerate(("paper/chainmm", "paper/ffnn")):
        obs += collect(env, 3 * n_each, seed=k, options={"graph": name})[::3]
    return env, stack(obs)
