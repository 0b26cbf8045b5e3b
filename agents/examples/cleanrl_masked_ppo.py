"""CleanRL-style masked PPO on ``Doppler-Sim-v0``: one file, one ``Agent`` module, Gymnasium's native vector env.

Run from the repository root (needs ``pip install -e '.[agents]'`` for torch)::

    python -m agents.examples.cleanrl_masked_ppo                        # paper/ffnn, 4 devices, 10 minutes
    python -m agents.examples.cleanrl_masked_ppo --seed 1 --minutes 3
    python -m agents.examples.cleanrl_masked_ppo --smoke                # a few updates on paper/chainmm

What it does, in CleanRL's order (``ppo.py``, with the masked categorical of its ``invalid action masking``
variant):

- ``gym.make_vec("Doppler-SimVec-v0", num_envs=N, graph=..., observation="flat")``: ``N`` placement envs
  stepped in one batched call; each observation is ``{"features": (F,) float32, "action_mask": (A,) int8}``
  and the default reward is the per-placement growth of the simulated makespan over the critical-path
  heuristic's makespan (an episode's rewards sum to ``-makespan / reference``);
- :class:`Agent`: CleanRL's actor and critic, without shared layers, reading ``features`` as the rows the flat
  form lays out (one per op, one per device, the globals): the :class:`Actor` scores each op row and each
  device row against a context of the whole state, so what it learns about one op or device holds for the
  others, at the cost of a small MLP; the actor's logits of masked actions are replaced by ``-1e8``
  (:func:`masked_logits`) before the categorical, so a masked action has probability 0;
- each update collects ``--num-steps`` steps of every env, computes GAE advantages and runs ``--update-epochs``
  epochs of clipped PPO over ``--num-minibatches`` minibatches. The vector env autoresets on the step after
  an episode ends (Gymnasium's next-step mode): that step's action is ignored and it is left out of the loss;
- at the start, every ``--eval-seconds`` and at the end, the greedy policy (argmax of the masked logits) places
  the graph in a fresh single env, and its makespan is printed next to the critical-path heuristic's. The
  greedy makespan of a policy still in training jumps between a few values (on ``paper/ffnn``: 77.3, 83.5,
  84.2, 84.4, 84.8, ...) as its weights move; ``--keep-best`` (the default, as SB3's ``EvalCallback`` keeps
  ``best_model``) ends the run with the weights of the best evaluation and says so, ``--no-keep-best`` with
  the last ones.

The run stops after ``--minutes`` of wall time (learning rate annealed over it) or after ``--updates`` updates,
whichever comes first. torch and Numba run single-threaded (``--threads``): besides reproducibility, a Numba
parallel launch inside the env's step would otherwise leave torch's OpenMP threads spinning beside the
trainer. Training bounded by ``--updates`` alone is reproducible (same seed, same weights); which updates are
evaluated follows the wall clock, unless ``--eval-seconds inf`` (the start and the end only, as ``--smoke``).
The last line printed is ``greedy makespan X (critical path Y)``, X the greedy makespan of the policy the run
ends with.
"""

from __future__ import annotations

import argparse
import copy
import math
import random
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numba
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

import doppler_gym  # noqa: F401  (registers the env ids)
from doppler_gym.envs.context import N_OP_FEATURES
from doppler_gym.envs.flat_observation import N_DEVICE_COLUMNS, N_GLOBALS, N_OP_FLAGS

MASKED_LOGIT = -1e8
OP_COLUMNS = N_OP_FLAGS + N_OP_FEATURES  # an op row's columns before its device one-hot


def parse_args(argv: list[str] | None = None, description: str | None = None) -> argparse.Namespace:
    """The flags (defaults: the tuned hyperparameters for ``paper/ffnn`` on 4 devices); the torchrl example
    takes the same."""
    p = argparse.ArgumentParser(description=description or __doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0, help="seed of torch, numpy, random and the envs")
    p.add_argument("--graph", default="paper/ffnn", help="graph: a paper graph name, a file or a workload spec")
    p.add_argument("--devices", type=int, default=4, help="devices of the topology")
    p.add_argument("--num-envs", type=int, default=8, help="envs of the vector env")
    p.add_argument("--minutes", type=float, default=10.0, help="wall-clock budget of the run")
    p.add_argument("--updates", type=int, default=None, help="stop after this many updates (default: no limit)")
    p.add_argument("--eval-seconds", type=float, default=20.0, help="greedy evaluation interval")
    p.add_argument("--keep-best", action=argparse.BooleanOptionalAction, default=True,
                   help="end with the weights of the best greedy evaluation (as SB3's EvalCallback keeps best_model)")
    p.add_argument("--smoke", action="store_true",
                   help="a tiny run: 3 updates of 4 envs x 32 steps on paper/chainmm, evaluated at start and end")
    p.add_argument("--threads", type=int, default=1, help="torch and Numba threads (1: reproducible)")
    # PPO
    p.add_argument("--num-steps", type=int, default=256, help="steps per env per update")
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--anneal-lr", action=argparse.BooleanOptionalAction, default=True,
                   help="anneal the learning rate linearly to 0 over the budget")
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.0)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--target-kl", type=float, default=None, help="stop an update's epochs past this KL")
    p.add_argument("--hidden", type=int, default=64, help="width of the context and the device embeddings")
    args = p.parse_args(argv)
    if args.smoke:
        args.graph, args.num_envs, args.num_steps, args.updates = "paper/chainmm", 4, 32, 3
        args.num_minibatches, args.update_epochs, args.eval_seconds = 2, 2, math.inf
    return args


def layer_init(layer: nn.Linear, std: float = math.sqrt(2), bias: float = 0.0) -> nn.Linear:
    """CleanRL's initialisation: orthogonal weights with gain ``std``, constant bias."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


def masked_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``logits`` with every action whose ``mask`` entry is 0 set to ``-1e8`` (probability 0 after softmax)."""
    return torch.where(mask.bool(), logits, torch.full_like(logits, MASKED_LOGIT))


def flat_layout(n_features: int, n_actions: int) -> tuple[int, int]:
    """``(max_ops, max_devices)`` of a flat observation of ``n_features`` values and ``n_actions`` actions:
    the ``N`` and ``D`` with ``N + D = A`` and ``F = N * (8 + D) + 11 * D + 4``
    (:mod:`doppler_gym.envs.flat_observation`)."""
    for d in range(1, n_actions):
        n = n_actions - d
        if n * (OP_COLUMNS + d) + d * N_DEVICE_COLUMNS + N_GLOBALS == n_features:
            return n, d
    raise ValueError(f"no flat observation layout has {n_features} features and {n_actions} actions")


def split_rows(x: torch.Tensor, n_ops: int, n_devices: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(op rows (B, N, C), device rows (B, D, 11), summary (B, C + 11 D + 4))`` of ``(B, F)`` features; the
    summary is the mean op row, every device row and the globals."""
    op_columns = OP_COLUMNS + n_devices
    ops = x[:, : n_ops * op_columns].reshape(-1, n_ops, op_columns)
    devices = x[:, n_ops * op_columns : -N_GLOBALS].reshape(-1, n_devices, N_DEVICE_COLUMNS)
    return ops, devices, torch.cat([ops.mean(1), devices.flatten(1), x[:, -N_GLOBALS:]], -1)


def summary_size(n_devices: int) -> int:
    """Length of :func:`split_rows`' summary."""
    return OP_COLUMNS + n_devices + n_devices * N_DEVICE_COLUMNS + N_GLOBALS


class Actor(nn.Module):
    """``(B, F)`` features -> ``(B, N + D)`` logits, one per op (the SEL actions) and one per device (the PLC
    actions), in the env's action order.

    A two-layer ``tanh`` MLP turns the state's summary (:func:`split_rows`) into a context vector. An op's
    logit is its row dotted with weights the context sets, plus a learnt bias of its own: what is learnt about
    one op's costs holds for every op, and the bias can still order ops whose rows are alike. A device's logit
    is a small MLP of its row and the context. The per-op work is one dot product, so 180 ops cost little
    more than a few devices.
    """

    def __init__(self, n_ops: int, n_devices: int, hidden: int) -> None:
        super().__init__()
        self.n_ops, self.n_devices = n_ops, n_devices
        self.context = nn.Sequential(
            layer_init(nn.Linear(summary_size(n_devices), hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)), nn.Tanh())
        self.op_weights = layer_init(nn.Linear(hidden, OP_COLUMNS + n_devices), std=0.01)
        self.op_bias = nn.Parameter(torch.zeros(n_ops))
        self.device_embed = layer_init(nn.Linear(N_DEVICE_COLUMNS, hidden))
        self.device_query = layer_init(nn.Linear(hidden, hidden))
        self.device_logit = layer_init(nn.Linear(hidden, 1), std=0.01)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ops, devices, summary = split_rows(x, self.n_ops, self.n_devices)
        context = self.context(summary)
        op = torch.einsum("bnc,bc->bn", ops, self.op_weights(context)) + self.op_bias
        hidden = torch.tanh(self.device_embed(devices) + self.device_query(context)[:, None])
        return torch.cat([op, self.device_logit(hidden).squeeze(-1)], -1)


class Critic(nn.Module):
    """``(B, F)`` features -> ``(B,)`` state values: a two-layer ``tanh`` MLP of the summary."""

    def __init__(self, n_ops: int, n_devices: int, hidden: int) -> None:
        super().__init__()
        self.n_ops, self.n_devices = n_ops, n_devices
        self.net = nn.Sequential(
            layer_init(nn.Linear(summary_size(n_devices), hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)), nn.Tanh(), layer_init(nn.Linear(hidden, 1), std=1.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(split_rows(x, self.n_ops, self.n_devices)[2]).squeeze(-1)


class Agent(nn.Module):
    """CleanRL's ``Agent``: an :class:`Actor` and a :class:`Critic` (no shared layers) on the flat ``features``,
    read as the rows :mod:`doppler_gym.envs.flat_observation` lays out (one per op, one per device, the
    globals).

    Args:
        n_features: length ``F`` of ``features``.
        n_actions: number of actions ``A`` (``max_ops + max_devices``).
        hidden: width of the hidden layers.
    """

    def __init__(self, n_features: int, n_actions: int, hidden: int = 64) -> None:
        super().__init__()
        n_ops, n_devices = flat_layout(n_features, n_actions)
        self.actor = Actor(n_ops, n_devices, hidden)
        self.critic = Critic(n_ops, n_devices, hidden)

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        """``(B,)`` state values."""
        return self.critic(x)

    def get_action_and_value(
        self, x: torch.Tensor, mask: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample (or score) an action of the masked categorical: ``(action, log_prob, entropy, value)``.

        The entropy counts only the valid actions (a masked action's ``p * log p`` is 0, not ``0 * -1e8``).
        """
        logits = masked_logits(self.actor(x), mask)
        dist = Categorical(logits=logits, validate_args=False)
        if action is None:
            action = dist.sample()
        p_log_p = torch.where(mask.bool(), dist.probs * dist.logits, torch.zeros_like(logits))
        return action, dist.log_prob(action), -p_log_p.sum(-1), self.critic(x)

    @torch.no_grad()
    def greedy(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``(B,)`` argmax of the masked logits."""
        return masked_logits(self.actor(x), mask).argmax(-1)


def greedy_makespan(agent: Agent, graph: str, devices: int, seed: int = 0) -> tuple[float, float]:
    """Place ``graph`` greedily in a fresh single ``Doppler-Sim-v0``: ``(makespan, critical-path makespan)``."""
    env = gym.make("Doppler-Sim-v0", graph=graph, topology=devices, observation="flat")
    obs, _ = env.reset(seed=seed)
    done, info = False, {}
    while not done:
        action = agent.greedy(torch.as_tensor(obs["features"])[None], torch.as_tensor(obs["action_mask"])[None])
        obs, _, terminated, truncated, info = env.step(int(action[0]))
        done = terminated or truncated
    env.close()
    return float(info["makespan"]), float(info["reference_makespan"])


class Evaluator:
    """The greedy evaluations of a run: each one logged, the weights of the best one kept.

    Args:
        greedy: ``() -> (makespan, critical-path makespan)`` of the policy now.
        module: the module whose ``state_dict`` the best evaluation keeps.
        start: ``time.perf_counter()`` at the run's start.
        log: where the lines go.
    """

    def __init__(self, greedy: Callable[[], tuple[float, float]], module: nn.Module, start: float,
                 log: Callable[[str], Any]) -> None:
        self.greedy, self.module, self.start, self.log = greedy, module, start, log
        self.evaluations: list[tuple[int, float, float]] = []  # (update, seconds, makespan)
        self.reference = math.nan
        self.best: tuple[int, float] | None = None  # (update, makespan)
        self._best_state: dict[str, torch.Tensor] = {}

    def __call__(self, update: int) -> None:
        """Evaluate the policy after ``update`` updates."""
        makespan, self.reference = self.greedy()
        seconds = time.perf_counter() - self.start
        self.evaluations.append((update, seconds, makespan))
        self.log(f"update {update:>4} ({seconds:6.1f} s): greedy makespan {makespan:.6g} "
                 f"(critical path {self.reference:.6g})")
        if self.best is None or makespan < self.best[1]:
            self.best = (update, makespan)
            self._best_state = copy.deepcopy(self.module.state_dict())

    def finish(self, update: int, keep_best: bool) -> dict[str, Any]:
        """Evaluate the last policy (unless just done); with ``keep_best``, load the best evaluation's weights.
        Returns ``{"evaluations", "last_greedy_makespan", "greedy_makespan" (the policy left in the module),
        "kept_update", "critical_path_makespan"}``."""
        if not self.evaluations or self.evaluations[-1][0] != update:
            self(update)
        last = self.evaluations[-1][2]
        kept_update, kept = update, last
        if keep_best and self.best is not None and self.best[1] < last:
            kept_update, kept = self.best
            self.module.load_state_dict(self._best_state)
            self.log(f"kept the policy of update {kept_update} (the lowest greedy makespan of "
                     f"{len(self.evaluations)} evaluations): {kept:.6g}")
        return {"evaluations": self.evaluations, "last_greedy_makespan": last, "greedy_makespan": kept,
                "kept_update": kept_update, "critical_path_makespan": self.reference}


def train(args: argparse.Namespace, log: Any = print) -> dict[str, Any]:
    """Run masked PPO as ``args`` say; returns :meth:`Evaluator.finish`'s dict and ``"updates"``,
    ``"env_steps"``, ``"seconds"``; ``"greedy_makespan"`` is the policy's the run ends with (the best
    evaluated one under ``--keep-best``)."""
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    # Numba's threads first, then torch's: Numba's OpenMP launches (in the env's step, and when its thread pool
    # starts) set the OpenMP thread count, torch's included; torch then ran on 2 spinning threads, a training
    # step ~10x slower on the shared 2-core machine
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    budget = args.minutes * 60.0

    envs = gym.make_vec("Doppler-SimVec-v0", num_envs=args.num_envs, graph=args.graph, topology=args.devices,
                        observation="flat")
    n_features = envs.single_observation_space["features"].shape[0]
    n_actions = int(envs.single_action_space.n)
    agent = Agent(n_features, n_actions, args.hidden)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    T, N = args.num_steps, args.num_envs
    batch_size = T * N
    obs_buf = torch.zeros((T, N, n_features))
    mask_buf = torch.zeros((T, N, n_actions), dtype=torch.bool)
    actions = torch.zeros((T, N), dtype=torch.long)
    logprobs = torch.zeros((T, N))
    rewards = torch.zeros((T, N))
    terminals = torch.zeros((T, N))  # 1 where the step ended the episode
    valid = torch.zeros((T, N), dtype=torch.bool)  # 0 on the autoreset step after an episode's end
    values = torch.zeros((T, N))

    evaluate = Evaluator(lambda: greedy_makespan(agent, args.graph, args.devices, seed=args.seed), agent, start, log)
    evaluate(0)
    last_eval = time.perf_counter()
    obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.as_tensor(obs["features"])
    next_mask = torch.as_tensor(obs["action_mask"]).bool()
    next_valid = torch.ones(N, dtype=torch.bool)
    update, env_steps, episodes, recent = 0, 0, 0, []
    rollout_seconds = learn_seconds = 0.0
    while args.updates is None or update < args.updates:
        elapsed = time.perf_counter() - start
        if elapsed >= budget:
            break
        progress = update / args.updates if args.updates is not None else elapsed / budget
        if args.anneal_lr:
            optimizer.param_groups[0]["lr"] = args.learning_rate * max(1.0 - progress, 0.0)

        tick = time.perf_counter()
        for t in range(T):
            obs_buf[t], mask_buf[t], valid[t] = next_obs, next_mask, next_valid
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs, next_mask)
            actions[t], logprobs[t], values[t] = action, logprob, value
            obs, reward, terminated, truncated, infos = envs.step(action.numpy())
            ended = np.logical_or(terminated, truncated)
            rewards[t] = torch.as_tensor(reward, dtype=torch.float32)
            terminals[t] = torch.as_tensor(ended, dtype=torch.float32)
            next_obs = torch.as_tensor(obs["features"])
            next_mask = torch.as_tensor(obs["action_mask"]).bool()
            next_valid = torch.as_tensor(~ended)  # the step after an end is the autoreset step
            if "makespan" in infos:
                done_envs = np.flatnonzero(infos["_makespan"])
                episodes += done_envs.size
                recent = (recent + infos["makespan"][done_envs].tolist())[-2 * N:]
        env_steps += T * N
        rollout_seconds += time.perf_counter() - tick
        tick = time.perf_counter()

        with torch.no_grad():  # GAE; an episode's end cuts the bootstrap and the trace
            next_value = agent.get_value(next_obs)
            advantages = torch.zeros_like(rewards)
            lastgaelam = torch.zeros(N)
            for t in reversed(range(T)):
                following = next_value if t == T - 1 else values[t + 1]
                nonterminal = 1.0 - terminals[t]
                delta = rewards[t] + args.gamma * following * nonterminal - values[t]
                lastgaelam = delta + args.gamma * args.gae_lambda * nonterminal * lastgaelam
                advantages[t] = lastgaelam
            returns = advantages + values

        b_obs, b_mask = obs_buf.reshape(batch_size, n_features), mask_buf.reshape(batch_size, n_actions)
        b_actions, b_logprobs = actions.reshape(-1), logprobs.reshape(-1)
        b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)
        b_index = torch.nonzero(valid.reshape(-1)).squeeze(1)  # the autoreset steps are left out
        minibatch = max(1, b_index.numel() // args.num_minibatches)
        for _epoch in range(args.update_epochs):
            perm = b_index[torch.randperm(b_index.numel())]
            approx_kl = torch.zeros(())
            for lo in range(0, perm.numel(), minibatch):
                mb = perm[lo:lo + minibatch]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_mask[mb], b_actions[mb])
                logratio = newlogprob - b_logprobs[mb]
                ratio = logratio.exp()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - logratio).mean()
                mb_adv = b_advantages[mb]
                if mb.numel() > 1:
                    mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(-mb_adv * ratio,
                                    -mb_adv * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)).mean()
                v_loss = 0.5 * ((newvalue - b_returns[mb]) ** 2).mean()
                loss = pg_loss - args.ent_coef * entropy.mean() + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
            if args.target_kl is not None and approx_kl > args.target_kl:
                break
        learn_seconds += time.perf_counter() - tick
        update += 1

        if time.perf_counter() - last_eval >= args.eval_seconds:
            if recent:
                log(f"update {update:>4}: {env_steps} env steps ({rollout_seconds:.0f} s), {episodes} episodes, "
                    f"mean sampled makespan {np.mean(recent):.6g}; learning {learn_seconds:.0f} s")
            evaluate(update)
            last_eval = time.perf_counter()

    envs.close()
    out = evaluate.finish(update, args.keep_best)
    return {**out, "updates": update, "env_steps": env_steps, "seconds": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = train(args)
    print(f"{out['updates']} updates, {out['env_steps']} env steps, {out['seconds']:.1f} s")
    print(f"greedy makespan {out['greedy_makespan']:.6g} (critical path {out['critical_path_makespan']:.6g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
