"""Shared helpers of the ``tests/agents/test_train_*`` tests (small, fast training runs)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

import doppler_gym as dg
from agents.training import Instance, TrainArgs

# A 12-op random DAG on 2 devices: the critical-path teacher's makespan is the same for every way of
# breaking its ties (checked in test_train_imitation), so a policy that follows the teacher matches it.
SMALL_GRAPH = {"graph": "random", "graph_params": {"n_ops": 12, "levels": 4, "seed": 1}, "devices": 2}

# A 6-op random DAG on 2 devices whose 64 placements span 0.0057 to 0.081 (brute force); the critical-path
# heuristic places it at 0.066, so a stage that learns shows it by a factor, not a rounding error.
TINY_GRAPH = {"graph": "random", "graph_params": {"n_ops": 6, "levels": 3, "seed": 1}, "devices": 2}

# recipe "doppler": these helpers test the stages' mechanics on DOPPLER's critical-path teacher
# (the default "best" recipe has its own tests in test_train_recipe.py and test_train_mix_teacher.py);
# evaluation.stop_at_bound off: these tests count every episode they ask for (test_train_bound_stop.py tests
# the stop). Settings by key (TrainArgs.from_settings): a test overrides one field of a group with a later key.
FAST = {
    "recipe": "doppler", "logging.progress": False, "logging.tensorboard": False,
    "evaluation.baselines": ("critical_path", "random"), "evaluation.baseline_seconds": 0.2,
    "evaluation.sample_decodes": 2, "evaluation.every_episodes": 0, "imitation.envs": 4,
    "evaluation.stop_at_bound": False,
}


def small_args(out: Path, **overrides: object) -> TrainArgs:
    """TrainArgs for a quick run on :data:`SMALL_GRAPH` writing to ``out``; ``overrides`` are settings by
    key, a group as a dict of the fields it changes (``episodes={"il": 4}``, merged into the defaults here)."""
    return TrainArgs.from_settings({**SMALL_GRAPH, **FAST, "out": str(out), "stages": ("il",), "episodes.il": 8,
                                    **overrides})


def teacher_makespans(args: TrainArgs, rollouts: int = 10, seed: int = 0) -> list[float]:
    """Makespans of the critical-path teacher with random tie-breaking, one per rollout."""
    env = Instance.from_args(args).sim_env()
    rng = np.random.default_rng(seed)
    out = []
    for k in range(rollouts):
        env.reset(seed=k)
        done = False
        while not done:
            action = rng.choice(np.flatnonzero(env.unwrapped.teacher_mask()))
            _, _, done, truncated, info = env.step(int(action))
            done = done or truncated
        out.append(info["makespan"])
    return out


def sample_observations(args: TrainArgs, n: int = 6, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` batched observations (SEL and PLC phases) of the instance of ``args``, from random valid actions."""
    env = Instance.from_args(args).sim_env()
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    seen = [obs]
    while len(seen) < n:
        action = rng.choice(np.flatnonzero(env.unwrapped.action_masks()))
        obs, _, done, _, _ = env.step(int(action))
        seen.append(obs)
        if done:
            obs, _ = env.reset()
    return {k: np.stack([o[k] for o in seen]) for k in seen[0]}


def brute_force_makespans(args: TrainArgs) -> np.ndarray:
    """``(n_devices ** n_ops,)`` simulated makespans of every placement of the instance of ``args``."""
    inst = Instance.from_args(args)
    every = np.array(list(itertools.product(range(inst.topology.n_devices), repeat=inst.graph.n_ops)))
    return dg.simulate_batch(inst.graph, every, topology=inst.topology, config=inst.config)
