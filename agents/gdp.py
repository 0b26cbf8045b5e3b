"""GDP (Zhou et al. 2019) as a learned baseline: the whole assignment at once, on ``Doppler-SimAssign-v0``.

The env: :class:`~doppler_gym.envs.assign.AssignEnv` (``Doppler-SimAssign-v0``), a one-step
contextual bandit: the observation is the static graph, the action a device per op
(``MultiDiscrete``), the reward ``-makespan / reference``. GDP's network
(:class:`~agents.gdp_policy.GDPNet`: GraphSAGE, attention over all ops, a softmax over devices per
op) gives the distribution of every op's device in one forward pass; an assignment is one sample
of the ``n_ops`` independent categoricals.

Training: a **PPO loop of our own** rather than sb3's ``PPO``. Each update samples
``samples_per_update`` assignments from one forward pass, simulates them as one batch
(``simulate_batch``, the env's own priorities: the same makespans ``env.step`` gives, checked at
the first and last decode), and takes ``ppo_epochs`` clipped steps with advantage = reward minus
the batch mean, over the batch standard deviation. Why not sb3: every episode is one step on one
fixed graph, so sb3 would run the network once per sampled assignment (``n_steps`` calls instead
of one), simulate them one by one through the env, and learn a value network for what is a
constant per update (the batch mean is a better baseline); its ``MultiDiscrete`` head would also
need overriding to emit per-op logits from per-op embeddings. The ratio is clipped **per op**
(each op's device is its own factor of the policy, all sharing the episode's advantage) rather than
on the joint ratio of ``n_ops`` factors, which leaves the clip region after the first epoch on
graphs of a few hundred ops.

Evaluation: the greedy decode (argmax per op) every ``eval_every_updates`` updates (the learning
curve) and ``final_samples`` sampled decodes at the end; the result's placement is the best of
those (see :class:`~agents.learned_result.LearnedResult`). The loop, evaluations and checkpoints
are :func:`agents.learned_loop.train_loop`'s (shared with Placeto).

>>> from agents.gdp import train_gdp
>>> res = train_gdp("paper/ffnn", 4, budget_seconds=60)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

import doppler_gym  # noqa: F401  (registers the env ids)
from agents.gdp_policy import GDPGraph, GDPNet
from agents.learned_common import TrainingRun, check_budget, load_net, resolve_instance
from agents.learned_loop import batch_advantage, seeded_session, train_loop
from agents.learned_result import LearnedResult
from agents.training import Instance
from doppler_gym.graph.analysis import topological_order
from doppler_gym.sim.config import SimConfig

NAME = "gdp"
ENV_ID = "Doppler-SimAssign-v0"


@dataclass
class GDPArgs:
    """Hyperparameters of :func:`train_gdp`."""

    hidden_dim: int = 64
    """Embedding width (GDP: 64)."""
    n_sage: int = 2
    """GraphSAGE layers."""
    n_heads: int = 4
    """Attention heads (GDP: 4)."""
    ff_dim: int = 256
    """Feed-forward width of the attention layer (GDP: 256)."""
    max_devices: int | None = None
    """Output width; None = the instance's device count."""
    lr: float = 3e-3
    """Adam learning rate."""
    samples_per_update: int = 32
    """Assignments (episodes) sampled per update."""
    ppo_epochs: int = 4
    """Gradient steps per update on the same samples."""
    clip_range: float = 0.2
    """PPO clip range of the per-op probability ratio."""
    ent_coef: float = 1e-3
    """Entropy bonus weight (mean per-op entropy)."""
    max_grad_norm: float = 1.0
    """Gradient norm clip."""
    eval_every_updates: int = 10
    """Greedy decode (curve point, best tracking, checkpoint) every this many updates."""
    final_samples: int = 64
    """Sampled decodes of the final policy."""
    torch_threads: int | None = 1
    """torch intra-op threads while training (restored after); None = leave as is."""


class _AssignEnvEvaluator:
    """Runs one assignment through ``Doppler-SimAssign-v0`` (the env's own makespan)."""

    def __init__(self, inst: Instance, seed: int) -> None:
        self.env = gym.make(ENV_ID, graph=inst.graph, topology=inst.topology, sim_config=inst.config,
                            disable_env_checker=True)
        self.seed = seed
        self.obs, _ = self.env.reset(seed=seed)
        self.max_ops = int(self.env.action_space.shape[0])

    def step(self, assignment: np.ndarray) -> dict:
        """``info`` of ``env.step`` for ``assignment`` (``(n_ops,)``; padded to ``max_ops``)."""
        self.env.reset(seed=self.seed)
        action = np.zeros(self.max_ops, np.int64)
        action[: assignment.shape[0]] = assignment
        _, _, _, _, info = self.env.step(action)
        return info


def sample_assignments(logits: torch.Tensor, count: int, generator: torch.Generator) -> torch.Tensor:
    """Draw whole assignments from GDP's per-op device distributions (ops independent).

    Args:
        logits: ``(n, D) float`` per-op device logits (unusable devices at ``NEG_LOGIT``, so they
            get probability 0 after the softmax).
        count: number of assignments.
        generator: the torch generator of the draws.

    Returns:
        ``(count, n) int64``: row ``k`` is one assignment, op ``v`` on device ``[k, v]``.
    """
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, count, replacement=True, generator=generator).T.contiguous()


def train_gdp(
    graph: object,
    topology: object,
    sim_config: SimConfig | dict | None = None,
    *,
    budget_seconds: float | None = 60.0,
    episodes: int | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    args: GDPArgs | None = None,
) -> LearnedResult:
    """Train GDP on one instance of ``Doppler-SimAssign-v0`` and return its best decoded placement.

    Args:
        graph: a DataflowGraph, a paper graph name (``"paper/ffnn"``), a workload name or a file.
        topology: a device count, a preset name (``"p100x4"``) or a Topology.
        sim_config: the simulator model (SimConfig or a dict of its fields); None = the graph's
            ``doppler_gym.instances.default_config`` on the topology.
        budget_seconds: wall-clock training limit [s], checked between updates (the final
            evaluation comes after it); None = episodes only.
        episodes: training episodes = sampled assignments (rounded up to whole updates of
            ``samples_per_update``); None = until the budget ends. Give ``episodes`` for a
            reproducible run.
        seed: seeds the initialisation, the samples and the env; same seed and ``episodes``, same result.
        out: folder for ``checkpoint.pt`` (atomic; readable by ``agents.training.load_checkpoint``),
            ``metrics.jsonl`` and ``result.json``; None = no files.
        args: hyperparameters (:class:`GDPArgs`).
    """
    args = args or GDPArgs()
    check_budget(budget_seconds, episodes, "train_gdp")
    inst = resolve_instance(graph, topology, sim_config, "train_gdp")
    with seeded_session(seed, args.torch_threads) as gen:
        env = _AssignEnvEvaluator(inst, seed)
        n = inst.graph.n_ops
        env_order = env.step(np.zeros(n, np.int64))["order"]  # the env's priorities for every assignment
        run = TrainingRun(NAME, inst, env_order, budget_seconds, episodes, out, seed)
        ggraph = GDPGraph.from_observation(env.obs, topological_order(inst.graph))
        net = GDPNet(args.max_devices or inst.topology.n_devices, args.hidden_dim, args.n_sage, args.n_heads,
                     args.ff_dim)
        opt = torch.optim.Adam(net.parameters(), lr=args.lr)
        rows = torch.arange(n)

        def check_env(assignment: np.ndarray, ms: float) -> None:
            """RuntimeError unless the env gives the batched simulation's makespan ``ms`` for ``(n,)``
            ``assignment``."""
            env_ms = float(env.step(assignment)["makespan"])
            if not np.isclose(env_ms, ms, rtol=1e-9, atol=0.0):
                raise RuntimeError(f"train_gdp: {ENV_ID} gives makespan {env_ms} but the batched simulation "
                                   f"{ms} for the same assignment; the env's op order or sim config changed")

        def update() -> tuple[np.ndarray, dict[str, float]]:
            """``ppo_epochs`` clipped steps on ``samples_per_update`` assignments of one forward pass."""
            logp_all = torch.log_softmax(net(ggraph), dim=-1)  # the sampling policy's, and the first epoch's
            with torch.no_grad():
                logp_old_all = logp_all.detach()
                actions = sample_assignments(logp_old_all, args.samples_per_update, gen)  # (B, n)
                logp_old = logp_old_all[rows, actions]  # (B, n)
            makespans = run.evaluate(actions.numpy())
            adv = batch_advantage(makespans, run.reward_scale).unsqueeze(1)  # (B, 1)
            for epoch in range(args.ppo_epochs):
                if epoch:
                    logp_all = torch.log_softmax(net(ggraph), dim=-1)
                ratio = torch.exp(logp_all[rows, actions] - logp_old)
                clipped = ratio.clamp(1.0 - args.clip_range, 1.0 + args.clip_range)
                pg_loss = -torch.min(ratio * adv, clipped * adv).mean()
                entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
                loss = pg_loss - args.ent_coef * entropy
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), args.max_grad_norm)
                opt.step()
            return makespans, {"loss": float(loss.detach()), "entropy": float(entropy.detach())}

        return train_loop(
            run, net, opt, update=update,
            greedy=lambda: net(ggraph).argmax(-1).unsqueeze(0).numpy(),
            sample=lambda k: sample_assignments(net(ggraph), k, gen).numpy(),
            eval_every_updates=args.eval_every_updates, final_samples=args.final_samples, check=check_env,
        )


def load_gdp(checkpoint: str | Path | dict) -> GDPNet:
    """The network of a :func:`train_gdp` checkpoint (``out/checkpoint.pt``, its folder or the loaded
    payload), in eval mode (:func:`agents.learned_common.load_net`)."""
    return load_net(checkpoint, NAME, GDPNet)
