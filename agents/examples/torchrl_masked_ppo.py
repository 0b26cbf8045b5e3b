"""torchrl's PPO with action masking on ``Doppler-Sim-v0``: ``ClipPPOLoss``, ``GAE``, a ``Collector`` and a
``MaskedCategorical`` policy, on Gymnasium's native vector env (needs ``pip install -e '.[agents,torchrl]'``).

Run from the repository root::

    python -m agents.examples.torchrl_masked_ppo                        # paper/ffnn, 4 devices, 10 minutes
    python -m agents.examples.torchrl_masked_ppo --seed 1 --minutes 3
    python -m agents.examples.torchrl_masked_ppo --smoke                # a few updates on paper/chainmm

How the env meets torchrl (0.14):

- ``gym.make_vec("Doppler-SimVec-v0", num_envs=N, observation="flat")`` autoresets an env on the step after
  its episode ends (Gymnasium's next-step mode), which torchrl's ``GymWrapper`` refuses: it wants the
  same-step or the disabled mode, where torchrl resets the finished envs itself through
  ``reset(options={"reset_mask": ...})``. The vector env resets just the envs such a call marks (and then
  does not autoreset them), so :class:`ResetOnRequest` only declares the disabled mode;
- the env's masks are ``int8`` (Gymnasium's convention); torchrl's ``MaskedCategorical`` wants ``bool``, which
  one transform gives: ``DTypeCastTransform(torch.int8, torch.bool, in_keys=["action_mask"])``;
- the policy is a ``ProbabilisticActor`` whose module writes ``logits`` and whose distribution,
  ``MaskedCategorical``, reads ``logits`` and ``action_mask``: a masked action has probability 0, and the
  deterministic action (``ExplorationType.DETERMINISTIC``) is the argmax over the valid ones;
- the network is :class:`agents.examples.cleanrl_masked_ppo.Agent` (the CleanRL-style example's), its actor
  and critic wrapped as ``TensorDictModule`` s, and the PPO settings are that example's, so the two runs can
  be compared; ``RewardSum`` adds up each episode's rewards (``-makespan / reference``) for the log.

At the start, every ``--eval-seconds`` and at the end, the deterministic policy places the graph in a fresh
single env (``GymEnv("Doppler-Sim-v0")`` with the same transforms) and the makespan is printed next to the
critical-path heuristic's; the last line printed is ``greedy makespan X (critical path Y)``. A run bounded by
``--updates`` alone is reproducible (same seed, same output).
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

import gymnasium as gym
import numba
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorWrapper
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.data import Unbounded
from torchrl.envs import Compose, DTypeCastTransform, GymWrapper, RewardSum, TransformedEnv
from torchrl.envs.gym_like import BaseInfoDictReader
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import MaskedCategorical, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from agents.examples import cleanrl_masked_ppo as cleanrl


class ResetOnRequest(VectorWrapper):
    """The placement vector env, declared in Gymnasium's ``AutoresetMode.DISABLED``: the caller resets an
    ended env with ``reset(options={"reset_mask": ...})`` before stepping it again, as torchrl does (the env
    then skips its own autoreset of those envs, so nothing else changes)."""

    autoreset_mode = AutoresetMode.DISABLED

    def __init__(self, env: gym.vector.VectorEnv) -> None:
        super().__init__(env)
        self.metadata = {**env.metadata, "autoreset_mode": AutoresetMode.DISABLED}


def mask_to_bool() -> DTypeCastTransform:
    """The ``int8`` ``action_mask`` as ``bool``, the dtype ``MaskedCategorical`` reads."""
    return DTypeCastTransform(torch.int8, torch.bool, in_keys=["action_mask"])


def make_vec_env(graph: str, devices: int, num_envs: int) -> TransformedEnv:
    """``num_envs`` placement envs as one torchrl env of batch size ``(num_envs,)``."""
    vec = gym.make_vec("Doppler-SimVec-v0", num_envs=num_envs, graph=graph, topology=devices, observation="flat")
    env = GymWrapper(ResetOnRequest(vec), categorical_action_encoding=True)
    return TransformedEnv(env, Compose(mask_to_bool(), RewardSum()))


class MakespanReader(BaseInfoDictReader):
    """An info reader of a single placement env: ``makespan`` and ``reference_makespan`` (``float64``, 0 where
    the info has none). torchrl's ``default_info_dict_reader`` wants arrays, and the reset info's
    ``reference_makespan`` is a float."""

    keys = ("makespan", "reference_makespan")

    def __call__(self, info_dict: dict[str, Any], tensordict: Any) -> Any:
        for key in self.keys:
            tensordict.set(key, torch.tensor(float(info_dict.get(key, 0.0)), dtype=torch.float64))
        return tensordict

    @property
    def info_spec(self) -> dict[str, Unbounded]:
        return {key: Unbounded(shape=(), dtype=torch.float64) for key in self.keys}


def make_single_env(graph: str, devices: int) -> TransformedEnv:
    """One placement env whose last step carries ``makespan`` and ``reference_makespan`` (read from its info)."""
    env = GymWrapper(gym.make("Doppler-Sim-v0", graph=graph, topology=devices, observation="flat"),
                     categorical_action_encoding=True)
    env.set_info_dict_reader(MakespanReader())
    return TransformedEnv(env, mask_to_bool())


class Flat(nn.Module):
    """``net`` (a module of ``(B, F)`` features) on features of any leading shape (torchrl's ``(N, T)``
    batches); ``column``: add a last dimension of 1 (a value module's ``state_value``)."""

    def __init__(self, net: nn.Module, column: bool = False) -> None:
        super().__init__()
        self.net, self.column = net, column

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        lead = features.shape[:-1]
        out = self.net(features.reshape(-1, features.shape[-1]))
        return out.reshape(*lead, *out.shape[1:], *((1,) if self.column else ()))


def build_modules(agent: cleanrl.Agent, action_spec: Any) -> tuple[ProbabilisticActor, ValueOperator]:
    """The torchrl policy (``MaskedCategorical`` over ``logits`` and ``action_mask``) and value module."""
    logits = TensorDictModule(Flat(agent.actor), in_keys=["features"], out_keys=["logits"])
    actor = ProbabilisticActor(logits, in_keys={"logits": "logits", "mask": "action_mask"}, out_keys=["action"],
                               distribution_class=MaskedCategorical, return_log_prob=True, spec=action_spec)
    critic = ValueOperator(Flat(agent.critic, column=True), in_keys=["features"])
    return actor, critic


def greedy_makespan(actor: ProbabilisticActor, graph: str, devices: int, seed: int = 0) -> tuple[float, float]:
    """The deterministic policy's placement in a fresh single env: ``(makespan, critical-path makespan)``."""
    env = make_single_env(graph, devices)
    env.set_seed(seed)
    with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
        rollout = env.rollout(max_steps=10**7, policy=actor)
    env.close()
    last = rollout[-1]["next"]
    return float(last["makespan"]), float(last["reference_makespan"])


def train(args: argparse.Namespace, log: Any = print) -> dict[str, Any]:
    """Run torchrl's PPO as ``args`` say (the CleanRL-style example's flags); returns what that example's
    :func:`~agents.examples.cleanrl_masked_ppo.train` returns."""
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))  # first: see the CleanRL-style example
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    budget = args.minutes * 60.0

    env = make_vec_env(args.graph, args.devices, args.num_envs)
    env.set_seed(args.seed)
    n_features = env.observation_spec["features"].shape[-1]
    n_actions = int(env.action_spec.space.n)
    agent = cleanrl.Agent(n_features, n_actions, args.hidden)
    actor, critic = build_modules(agent, env.action_spec)
    advantage = GAE(gamma=args.gamma, lmbda=args.gae_lambda, value_network=critic, average_gae=False)
    # l2 is the squared error; half of it times vf_coef is CleanRL's value loss
    loss_module = ClipPPOLoss(actor, critic, clip_epsilon=args.clip_coef, entropy_bonus=args.ent_coef > 0,
                              entropy_coeff=args.ent_coef or None, critic_coeff=0.5 * args.vf_coef,
                              loss_critic_type="l2", normalize_advantage=True)
    optimizer = torch.optim.Adam(loss_module.parameters(), lr=args.learning_rate, eps=1e-5)
    batch_size = args.num_steps * args.num_envs
    collector = Collector(env, actor, frames_per_batch=batch_size, total_frames=-1,
                          auto_register_policy_transforms=True)

    evaluate = cleanrl.Evaluator(lambda: greedy_makespan(actor, args.graph, args.devices, seed=args.seed), agent,
                                 start, log)
    evaluate(0)
    last_eval = time.perf_counter()
    update, env_steps, returns = 0, 0, []
    rollout_seconds = learn_seconds = 0.0
    tick = time.perf_counter()
    for data in collector:  # (num_envs, num_steps) tensordicts
        env_steps += data.numel()
        done = data["next", "done"].squeeze(-1)
        returns = (returns + data["next", "episode_reward"].squeeze(-1)[done].tolist())[-2 * args.num_envs:]
        rollout_seconds += time.perf_counter() - tick
        tick = time.perf_counter()
        elapsed = time.perf_counter() - start
        progress = update / args.updates if args.updates is not None else elapsed / budget
        if args.anneal_lr:
            optimizer.param_groups[0]["lr"] = args.learning_rate * max(1.0 - progress, 0.0)

        with torch.no_grad():
            advantage(data)
        flat = data.reshape(-1)
        minibatch = batch_size // args.num_minibatches
        for _epoch in range(args.update_epochs):
            perm = torch.randperm(batch_size)
            for lo in range(0, batch_size, minibatch):
                losses = loss_module(flat[perm[lo:lo + minibatch]])
                loss = losses["loss_objective"] + losses["loss_critic"]
                if "loss_entropy" in losses:
                    loss = loss + losses["loss_entropy"]
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(loss_module.parameters(), args.max_grad_norm)
                optimizer.step()
        learn_seconds += time.perf_counter() - tick
        update += 1

        if time.perf_counter() - last_eval >= args.eval_seconds:
            if returns:
                sampled = -np.mean(returns) * evaluate.reference  # an episode's rewards: -makespan / reference
                log(f"update {update:>4}: {env_steps} env steps ({rollout_seconds:.0f} s), "
                    f"mean sampled makespan {sampled:.6g}; learning {learn_seconds:.0f} s")
            evaluate(update)
            last_eval = time.perf_counter()
        if (args.updates is not None and update >= args.updates) or time.perf_counter() - start >= budget:
            break
        tick = time.perf_counter()

    collector.shutdown()
    env.close()
    out = evaluate.finish(update, args.keep_best)
    return {**out, "updates": update, "env_steps": env_steps, "seconds": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> int:
    args = cleanrl.parse_args(argv, description=__doc__.split("\n\n")[0])
    out = train(args)
    print(f"{out['updates']} updates, {out['env_steps']} env steps, {out['seconds']:.1f} s")
    print(f"greedy makespan {out['greedy_makespan']:.6g} (critical path {out['critical_path_makespan']:.6g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
