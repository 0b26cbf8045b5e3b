"""Stage 1 (imitation of the critical-path teacher): the loss, and that it learns the teacher."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from agents.training import Trainer, imitation_loss, read_metrics
from tests.agents.train_helpers import small_args, teacher_makespans


def test_imitation_loss_is_minus_log_of_teacher_probability_mass() -> None:
    logits = torch.zeros(2, 5, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    teacher = torch.tensor([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0]], dtype=torch.bool)
    loss, parts = imitation_loss(logits, mask, teacher)
    # uniform over the valid actions: -log(1/3) and -log(2/5)
    assert parts["cross_entropy"] == pytest.approx((math.log(3) + math.log(5 / 2)) / 2, rel=1e-6)
    assert parts["entropy"] == pytest.approx((math.log(3) + math.log(5)) / 2, rel=1e-6)
    loss.backward()
    grad = logits.grad
    assert grad[0, 0] < 0 and grad[1, 0] < 0 and grad[1, 1] < 0  # descent raises the teacher actions
    assert torch.all(grad[0, 3:] == 0)  # masked actions get no gradient
    assert torch.all(grad[1, 2:] > 0)


def test_imitation_loss_ignores_masked_scores_and_ties_share_the_mass() -> None:
    mask = torch.tensor([[1, 1, 0]], dtype=torch.bool)
    teacher = torch.tensor([[1, 1, 0]], dtype=torch.bool)
    huge_invalid = torch.tensor([[0.0, 3.0, 50.0]])
    _, parts = imitation_loss(huge_invalid, mask, teacher)
    assert parts["cross_entropy"] == pytest.approx(0.0, abs=1e-6)  # all valid mass is on the teacher's set
    assert parts["accuracy"] == 1.0


def test_label_smoothing_keeps_the_optimum_soft() -> None:
    """With eps the minimiser is (1 - eps) on the teacher plus eps spread uniformly over the valid
    actions (finite logits); without it the teacher's logit runs away from the others."""
    mask = torch.tensor([[1, 1, 1, 1, 0]], dtype=torch.bool)
    teacher = torch.tensor([[0, 1, 0, 0, 0]], dtype=torch.bool)
    probs = {}
    for eps in (0.0, 0.2):
        logits = torch.zeros(1, 5, requires_grad=True)
        opt = torch.optim.Adam([logits], lr=0.1)
        for _ in range(2000):
            loss, _ = imitation_loss(logits, mask, teacher, label_smoothing=eps)
            opt.zero_grad()
            loss.backward()
            opt.step()
        probs[eps] = torch.softmax(logits.detach().masked_fill(~mask, -1e9), -1)[0]
    assert probs[0.2][1] == pytest.approx(0.8 + 0.2 / 4, abs=2e-3)
    assert probs[0.2][[0, 2, 3]] == pytest.approx(torch.full((3,), 0.05), abs=2e-3)
    assert probs[0.0][[0, 2, 3]].max() < 1e-4
    logits = torch.tensor([[0.3, -1.0, 2.0, 0.5, 9.0]])
    eps = 0.3
    smooth, parts = imitation_loss(logits, mask, teacher, label_smoothing=eps)
    logp = torch.log_softmax(logits[:, :4], -1)[0]
    assert float(smooth) == pytest.approx((1 - eps) * -float(logp[1]) - eps * float(logp.mean()), rel=1e-6)
    assert parts["cross_entropy"] == pytest.approx(-float(logp[1]), rel=1e-6)


@pytest.mark.slow
def test_imitation_learns_the_teacher_on_a_small_graph(tmp_path) -> None:
    args = small_args(tmp_path, episodes={"il": 96}, imitation={"envs": 8})
    teacher = teacher_makespans(args)
    assert max(teacher) == pytest.approx(min(teacher), rel=1e-12), "one teacher makespan whatever the ties"
    trainer = Trainer(args)
    summary = trainer.run()
    updates = [r for r in read_metrics(tmp_path) if r["kind"] == "update"]
    first, last = updates[0]["cross_entropy"], np.mean([r["cross_entropy"] for r in updates[-3:]])
    assert last < 0.25 * first, (first, last)
    assert np.mean([r["accuracy"] for r in updates[-3:]]) > 0.95
    assert summary["makespan"] == pytest.approx(teacher[0], rel=1e-9)
    assert summary["stages"]["il"]["episodes"] == 96
    episodes = [r for r in read_metrics(tmp_path) if r["kind"] == "episode"]
    assert [r["step"] for r in episodes] == list(range(1, 97))
    betas = [r["beta"] for r in updates]
    assert betas[0] == 1.0 and betas[-1] == 0.0 and all(a >= b for a, b in itertools.pairwise(betas))
