"""Placeto (Addanki et al. 2019) as a learned baseline: one op per step in topological order, REINFORCE.

The MDP: the ops are visited in a fixed topological order (``doppler_gym.topological_order``, the
op ids for the paper files); at step ``t`` the agent chooses the device of op ``order[t]`` seeing
the partly placed graph (:class:`~agents.placeto_policy.PlacetoNet`, GNN recomputed every step);
after the last op the simulator runs the assignment and ``-makespan / reference`` (the
critical-path heuristic's makespan) is the episode's only reward.

Training: **REINFORCE with a baseline**, ``B`` episodes rolled in lockstep per update (one batched
network call per step), advantage = the episode's reward minus the batch mean, divided by the
batch standard deviation; plus an entropy bonus. Why not MaskablePPO through
:class:`~doppler_gym.envs.wrappers.PlaceOnly`: that wrapper's SEL is the critical-path heuristic
(highest b-level), not Placeto's fixed topological order, and its per-step observation (padded
``Dict``, estimated schedule, device features) is work Placeto does not use; here a step is one
network call and the transitions are trivial (write one device), so the sequential GNN calls are
the whole cost. Log-probabilities are kept with their graph during the rollout, so an update costs
one forward and one backward pass over the ``B x n`` step graphs (the paper's Placeto also
re-embeds at every step, which is why it is the slowest learned method).

Evaluation: the greedy decode (argmax device at every step) is simulated every
``eval_every_updates`` updates (the learning curve); at the end ``final_samples`` sampled decodes
too. The result's placement is the best of those (see :class:`~agents.learned_result.LearnedResult`).
The loop, evaluations and checkpoints are :func:`agents.learned_loop.train_loop`'s (shared with GDP).

>>> from agents.placeto import train_placeto
>>> res = train_placeto("paper/chainmm", 4, budget_seconds=60)
>>> res.makespan, res.assignment.shape
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from agents.learned_common import TrainingRun, check_budget, load_net, resolve_instance
from agents.learned_loop import batch_advantage, seeded_session, train_loop
from agents.learned_result import LearnedResult
from agents.placeto_policy import PlacetoGraph, PlacetoNet
from doppler_gym.graph.analysis import topological_order
from doppler_gym.sim.config import SimConfig

NAME = "placeto"


@dataclass
class PlacetoArgs:
    """Hyperparameters of :func:`train_placeto` (defaults: what learns well within a minute or two)."""

    hidden_dim: int = 32
    """Node embedding width."""
    n_layers: int = 3
    """Message-passing layers (Placeto: k = 3)."""
    head_dim: int = 32
    """Hidden width of the device head (Placeto: 32)."""
    max_devices: int | None = None
    """Output width of the device head; None = the instance's device count."""
    lr: float = 1e-2
    """Adam learning rate (paper/chainmm, 60 s: 1e-2 reached the critical-path heuristic's 1600,
    3e-3 2100-2300)."""
    episodes_per_update: int = 8
    """Episodes rolled in lockstep per REINFORCE update (the batch of the baseline)."""
    ent_coef: float = 0.0
    """Entropy bonus weight (entropy per step, averaged over steps). 0: on paper/chainmm the policy
    stays near uniform for hundreds of episodes anyway (random spreading is a local optimum);
    1e-2 held it there."""
    max_grad_norm: float = 1.0
    """Gradient norm clip."""
    eval_every_updates: int = 5
    """Greedy decode (curve point, best tracking, checkpoint) every this many updates."""
    final_samples: int = 16
    """Sampled decodes of the final policy."""
    torch_threads: int | None = 1
    """torch intra-op threads while training (restored after); None = leave as is."""


def rollout(
    net: PlacetoNet, graph: PlacetoGraph, batch: int, greedy: bool = False,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Place ``batch`` episodes op by op in ``graph.order``.

    Gradients flow into the returned log-probabilities when grad mode is on.

    Returns:
        assignment: ``(batch, n) int64`` device of each op (all usable devices);
        log_prob: ``(batch,)`` sum over the steps of the chosen devices' log-probabilities;
        entropy: ``(batch,)`` mean over the steps of the policy's entropy.
    """
    n = graph.n_ops
    placement = torch.full((batch, n), -1, dtype=torch.int64)
    log_prob = torch.zeros(batch)
    entropy = torch.zeros(batch)
    for c in graph.order.tolist():
        logits = net(graph, placement, c)
        logp = torch.log_softmax(logits, dim=-1)
        if greedy:
            action = logp.argmax(-1)
        else:
            action = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)
        log_prob = log_prob + logp.gather(1, action.unsqueeze(1)).squeeze(1)
        entropy = entropy - (logp.exp() * logp).sum(-1)
        placement[:, c] = action  # in place: the network only read fresh tensors derived from it
    return placement, log_prob, entropy / max(n, 1)


def train_placeto(
    graph: object,
    topology: object,
    sim_config: SimConfig | dict | None = None,
    *,
    budget_seconds: float | None = 60.0,
    episodes: int | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    args: PlacetoArgs | None = None,
) -> LearnedResult:
    """Train Placeto on one instance in the simulator and return its best decoded placement.

    Args:
        graph: a DataflowGraph, a paper graph name (``"paper/chainmm"``), a workload name or a file.
        topology: a device count, a preset name (``"p100x4"``) or a Topology.
        sim_config: the simulator model (SimConfig or a dict of its fields); None = the graph's
            ``doppler_gym.instances.default_config`` on the topology.
        budget_seconds: wall-clock training limit [s], checked between updates (the final
            evaluation comes after it); None = episodes only.
        episodes: training episodes (rounded up to whole updates of ``episodes_per_update``);
            None = until the budget ends. Give ``episodes`` for a reproducible run: with only a
            budget, how far training gets depends on the machine's speed.
        seed: seeds the network's initialisation and the sampled actions; the same seed and the
            same ``episodes`` give the same result.
        out: folder for ``checkpoint.pt`` (atomic, at every evaluation and at the end; readable by
            ``agents.training.load_checkpoint``), ``metrics.jsonl`` and ``result.json``; None = no files.
        args: hyperparameters (:class:`PlacetoArgs`).
    """
    args = args or PlacetoArgs()
    check_budget(budget_seconds, episodes, "train_placeto")
    inst = resolve_instance(graph, topology, sim_config, "train_placeto")
    order = topological_order(inst.graph).astype(np.int64)
    with seeded_session(seed, args.torch_threads) as gen:
        run = TrainingRun(NAME, inst, order, budget_seconds, episodes, out, seed)
        pgraph = PlacetoGraph.from_context(run.ctx, order)
        net = PlacetoNet(args.max_devices or inst.topology.n_devices, args.hidden_dim, args.n_layers, args.head_dim)
        opt = torch.optim.Adam(net.parameters(), lr=args.lr)

        def update() -> tuple[np.ndarray, dict[str, float]]:
            """One REINFORCE step on ``episodes_per_update`` sampled episodes."""
            assignment, log_prob, entropy = rollout(net, pgraph, args.episodes_per_update, generator=gen)
            makespans = run.evaluate(assignment.numpy())
            adv = batch_advantage(makespans, run.reward_scale)  # (B,)
            loss = -(adv * log_prob).mean() - args.ent_coef * entropy.mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), args.max_grad_norm)
            opt.step()
            return makespans, {"loss": float(loss.detach()), "entropy": float(entropy.detach().mean())}

        return train_loop(
            run, net, opt, update=update,
            greedy=lambda: rollout(net, pgraph, 1, greedy=True)[0].numpy(),
            sample=lambda k: rollout(net, pgraph, k, generator=gen)[0].numpy(),
            eval_every_updates=args.eval_every_updates, final_samples=args.final_samples,
        )


def load_placeto(checkpoint: str | Path | dict) -> PlacetoNet:
    """The network of a :func:`train_placeto` checkpoint (``out/checkpoint.pt``, its folder or the
    loaded payload), in eval mode (:func:`agents.learned_common.load_net`)."""
    return load_net(checkpoint, NAME, PlacetoNet)
