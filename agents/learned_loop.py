"""The training loop shared by the learned baselines (Placeto, GDP), around a :class:`TrainingRun`.

- :func:`seeded_session`: the run's torch threads and seeds, and the generator of its samples;
- :func:`batch_advantage`: the batch-normalised advantages of one update's episodes;
- :func:`train_loop`: greedy decode, updates until the budget ends (a greedy decode and a checkpoint
  every ``eval_every_updates``), final greedy and sampled decodes, final checkpoint, the result.

A baseline supplies what differs: how a batch is sampled and learned from (``update``), and how
its policy decodes a placement greedily (``greedy``) or by sampling (``sample``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import numpy as np
import torch

from agents.learned_common import TrainingRun, torch_threads
from agents.learned_result import LearnedResult
from agents.training import seed_everything


@contextlib.contextmanager
def seeded_session(seed: int, threads: int | None) -> Iterator[torch.Generator]:
    """Run the block on ``threads`` torch threads (:func:`~agents.learned_common.torch_threads`)
    after :func:`agents.training.seed_everything` (``seed``: the networks' initialisation); yields a
    ``torch.Generator`` seeded with ``seed`` for the sampled actions."""
    with torch_threads(threads):
        seed_everything(seed)
        yield torch.Generator().manual_seed(seed)


def batch_advantage(makespans: np.ndarray, scale: float) -> torch.Tensor:
    """``(B,) float32`` advantages of ``B`` episodes of one update.

    The reward of an episode is ``-makespan / scale`` (``makespans``: ``(B,)`` [reported unit];
    ``scale``: :attr:`TrainingRun.reward_scale`); the advantage is the reward minus the batch mean,
    over the batch's (population) standard deviation. A batch of one gets 0 (its own mean).
    """
    reward = torch.as_tensor(-makespans / scale, dtype=torch.float32)
    adv = reward - reward.mean()
    return adv / (adv.std(unbiased=False) + 1e-8) if adv.numel() > 1 else adv


def train_loop(
    run: TrainingRun,
    net: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    update: Callable[[], tuple[np.ndarray, dict[str, float]]],
    greedy: Callable[[], np.ndarray],
    sample: Callable[[int], np.ndarray],
    eval_every_updates: int,
    final_samples: int,
    check: Callable[[np.ndarray, float], None] | None = None,
) -> LearnedResult:
    """Train until ``run.done()`` and return the run's :class:`LearnedResult`.

    Args:
        run: the run's bookkeeping (budget, curve, best placement, logs, checkpoints).
        net: the policy network (``net.kwargs()``: its constructor arguments, for checkpoints).
        optimizer: its optimizer (checkpointed with it).
        update: one training update: samples a batch of episodes, simulates them
            (``run.evaluate``) and takes the gradient steps; returns the ``(B,)`` makespans and the
            scalars to log (e.g. ``loss``, ``entropy``).
        greedy: the greedy decode of the current policy, ``(1, n_ops) int64`` (called under
            ``torch.no_grad``).
        sample: ``k`` -> ``(k, n_ops) int64`` sampled decodes (called under ``torch.no_grad``).
        eval_every_updates: greedy decode (curve point, best tracking) and checkpoint every this
            many updates.
        final_samples: sampled decodes of the final policy.
        check: called as ``check(assignment (n_ops,), makespan)`` on the first and the final greedy
            decode (e.g. to compare with the env's own makespan); None = no check.
    """

    def greedy_eval(checked: bool) -> float:
        with torch.no_grad():
            assignment = greedy()
        ms = float(run.decoded(assignment, greedy=True)[0])
        if checked and check is not None:
            check(assignment[0], ms)
        return ms

    greedy_eval(checked=True)
    while not run.done():
        makespans, values = update()
        run.training_batch(makespans, **values)
        if run.updates % eval_every_updates == 0:
            greedy_eval(checked=False)
            run.checkpoint(net, optimizer, net.kwargs())
    final_greedy = greedy_eval(checked=True)
    with torch.no_grad():
        samples = sample(final_samples)
    sampled = run.decoded(samples, greedy=False)
    run.checkpoint(net, optimizer, net.kwargs())
    return run.result(final_greedy, sampled)
