"""RLlib's PPO with action masking on ``Doppler-Sim-v0``: the env with a second RL library and its
distributed env runners (needs ``pip install 'doppler-gym[rllib]'``).

Run from the repository root::

    python -m agents.examples.rllib_ppo_masked                            # random DAG, 10 iterations
    python -m agents.examples.rllib_ppo_masked --graph chainmm --devices 4 --iterations 50 --env-runners 4
    python -m agents.examples.rllib_ppo_masked --ray auto --env-runners 32 # on a cluster (`ray start --head`)

What it shows:

- :class:`MaskedObs` turns the env's ``Dict`` observation into the two keys RLlib's action-masking
  module reads: ``action_mask`` (1 = valid) and ``observations`` (every other array, flattened);
- RLlib's ``ActionMaskingTorchRLModule`` (from RLlib's examples) gives masked actions zero
  probability. The env is made with ``invalid_action="raise"``, so a single masked action that
  was sampled would stop training with an error: a run that finishes has obeyed every mask;
- ``--env-runners N`` samples on N Ray actors (0: in the driver), on this machine or a cluster.

It prints one line per iteration (mean episode return = -makespan / critical-path makespan with the
env's default reward) and, at the end, the greedy placement's makespan next to the critical-path
heuristic's.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium as gym
import numpy as np

ENV_NAME = "doppler_sim_masked"


class MaskedObs(gym.ObservationWrapper):
    """``{"action_mask": (n_actions,) float32 in {0, 1}, "observations": (n_features,) float32}``:
    the mask, and every other observation array flattened in key order (as float32)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        spaces = env.observation_space.spaces
        self.keys = [k for k in spaces if k != "action_mask"]
        n_features = sum(int(np.prod(spaces[k].shape)) for k in self.keys)
        n_actions = int(env.action_space.n)
        self.observation_space = gym.spaces.Dict({
            "action_mask": gym.spaces.Box(0.0, 1.0, (n_actions,), np.float32),
            "observations": gym.spaces.Box(-np.inf, np.inf, (n_features,), np.float32),
        })

    def observation(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        flat = np.concatenate([np.asarray(obs[k], np.float32).ravel() for k in self.keys])
        return {"action_mask": np.asarray(obs["action_mask"], np.float32), "observations": flat}


def make_env(config: dict[str, Any]) -> gym.Env:
    """The env RLlib builds in each env runner (``config``: ``Doppler-Sim-v0`` keyword arguments)."""
    import doppler_gym  # noqa: F401  (registers the env ids in this process)

    return MaskedObs(gym.make("Doppler-Sim-v0", invalid_action="raise", disable_env_checker=True, **config))


def build_config(env_config: dict[str, Any], env_runners: int = 0, batch: int = 256, minibatch: int = 64,
                 epochs: int = 4, lr: float = 3e-4, hidden: int = 64, seed: int = 0) -> Any:
    """RLlib's ``PPOConfig`` for the masked env (new API stack, torch)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule
    from ray.tune.registry import register_env

    register_env(ENV_NAME, make_env)
    return (
        PPOConfig()
        .environment(ENV_NAME, env_config=env_config)
        .framework("torch")
        .env_runners(num_env_runners=env_runners, num_envs_per_env_runner=1)
        .training(train_batch_size_per_learner=batch, minibatch_size=minibatch, num_epochs=epochs, lr=lr,
                  gamma=1.0, lambda_=1.0)
        .rl_module(rl_module_spec=RLModuleSpec(
            module_class=ActionMaskingTorchRLModule,
            model_config={"head_fcnet_hiddens": [hidden, hidden], "head_fcnet_activation": "relu"},
        ))
        .debugging(seed=seed)
    )


def greedy_makespan(algo: Any, env_config: dict[str, Any], seed: int = 0) -> tuple[float, dict]:
    """The trained module's greedy (argmax of masked logits) episode: its makespan and final info."""
    import torch
    from ray.rllib.core.columns import Columns

    module = algo.get_module()
    env = make_env(env_config)
    obs, _ = env.reset(seed=seed)
    done = False
    info: dict = {}
    while not done:
        batch = {Columns.OBS: {k: torch.as_tensor(v)[None] for k, v in obs.items()}}
        with torch.no_grad():
            logits = module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS][0]
        obs, _, terminated, truncated, info = env.step(int(torch.argmax(logits)))
        done = terminated or truncated
    return float(info["makespan"]), info


def train(env_config: dict[str, Any], iterations: int, ray_address: str | None = None, **config: Any) -> dict:
    """Train ``iterations`` PPO iterations; returns the per-iteration figures and the greedy makespan.

    Returns:
        ``{"iterations": [{"iteration", "episode_return_mean", "env_steps", "seconds"}, ...],
        "greedy_makespan", "critical_path_makespan", "lower_bound"}``.
    """
    import ray

    if not ray.is_initialized():
        ray.init(**({"address": ray_address} if ray_address not in (None, "local") else {}),
                 include_dashboard=False, logging_level="warning")
    algo = build_config(env_config, **config).build_algo()
    rows = []
    try:
        for i in range(iterations):
            t0 = time.perf_counter()
            result = algo.train()
            runners = result.get("env_runners", {})
            rows.append({"iteration": i + 1, "episode_return_mean": float(runners.get("episode_return_mean", np.nan)),
                         "env_steps": int(result.get("num_env_steps_sampled_lifetime",
                                                     runners.get("num_env_steps_sampled_lifetime", 0))),
                         "seconds": time.perf_counter() - t0})
        makespan, info = greedy_makespan(algo, env_config)
    finally:
        algo.stop()
    return {"iterations": rows, "greedy_makespan": makespan,
            "critical_path_makespan": float(info["reference_makespan"]), "lower_bound": float(info["lower_bound"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", default="random", help="graph name (default random)")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="workload parameters (default for random: n_ops=10, levels=4, seed=0)")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--env-runners", type=int, default=0, help="Ray env-runner actors (0: sample in the driver)")
    parser.add_argument("--batch", type=int, default=256, help="env steps per iteration")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ray", default=None, metavar="ADDRESS", help="Ray cluster (default: a local instance)")
    args = parser.parse_args(argv)
    from doppler_gym.cli.common import parse_params

    params = parse_params(args.param) or ({"n_ops": 10, "levels": 4, "seed": 0} if args.graph == "random" else {})
    import doppler_gym as dg

    graph = dg.workloads.make(args.graph, **params) if args.graph in dg.workloads.names() else args.graph
    env_config = {"graph": graph, "topology": args.devices}
    out = train(env_config, args.iterations, args.ray, env_runners=args.env_runners, batch=args.batch,
                minibatch=min(64, args.batch), seed=args.seed)
    for r in out["iterations"]:
        print(f"iteration {r['iteration']:>3}: episode return mean {r['episode_return_mean']:.4f}, "
              f"{r['env_steps']} env steps, {r['seconds']:.1f} s")
    print(f"greedy placement: makespan {out['greedy_makespan']:.6g} "
          f"(critical path {out['critical_path_makespan']:.6g}, lower bound {out['lower_bound']:.6g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
