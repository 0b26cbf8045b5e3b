"""The imitation anchor of the RL stages: it holds the teacher's episodes, its steps pull the policy to
the teacher, it draws from no generator of the run, and it keeps an imitated placement through RL."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.training import TrainArgs, Trainer, action_logits, obs_to_tensors, read_metrics, train
from agents.training.anchor import ImitationAnchor, make_anchor
from agents.training.imitation import imitation_loss
from tests.agents.train_helpers import TINY_GRAPH, small_args, teacher_makespans

pytestmark = pytest.mark.slow  # training runs (PPO and REINFORCE with the anchor)


def _buffer_loss(anchor: ImitationAnchor, policy) -> tuple[float, float]:
    """Cross-entropy to the teacher's sets and argmax accuracy over every anchor state."""
    buf = anchor.buffer
    obs, mask, teacher, _ = buf.sample(buf.size, np.random.default_rng(0))
    policy.set_training_mode(False)
    with torch.no_grad():
        logits = action_logits(policy, obs_to_tensors(obs, policy.device))
        mask_t = torch.as_tensor(mask).bool()
        _, parts = imitation_loss(logits, mask_t, torch.as_tensor(teacher).bool() & mask_t)
    return parts["cross_entropy"], parts["accuracy"]


def test_the_anchor_holds_the_teachers_episodes_and_draws_from_no_run_generator(tmp_path) -> None:
    args = small_args(tmp_path, rl={"anchor_coef": 1.0, "anchor_episodes": 3})
    ctx = Trainer(args).context
    run_rng, torch_rng = ctx.rng.bit_generator.state, torch.get_rng_state()
    anchor = make_anchor(ctx)
    assert ctx.rng.bit_generator.state == run_rng and torch.equal(torch.get_rng_state(), torch_rng)
    n_ops = ctx.inst.graph.n_ops
    assert anchor.buffer.size == 3 * 2 * n_ops  # every SEL and PLC step of three whole episodes
    mask = anchor.buffer.mask[: anchor.buffer.size].astype(bool)
    teacher = anchor.buffer.teacher[: anchor.buffer.size].astype(bool)
    assert teacher.any(1).all() and not (teacher & ~mask).any()  # a non-empty set of valid actions each
    again = make_anchor(Trainer(small_args(tmp_path / "again", rl={"anchor_coef": 1.0, "anchor_episodes": 3})).context)
    for key, rows in anchor.buffer.dyn.items():  # same seed, same states (what a resumed stage rebuilds)
        assert np.array_equal(rows[: anchor.buffer.size], again.buffer.dyn[key][: again.buffer.size]), key
    assert np.array_equal(teacher, again.buffer.teacher[: again.buffer.size].astype(bool))


def test_anchor_steps_pull_an_untrained_policy_to_the_teacher(tmp_path) -> None:
    ctx = Trainer(small_args(tmp_path, rl={"anchor_coef": 1.0, "anchor_updates": 40})).context
    anchor = make_anchor(ctx)
    before = _buffer_loss(anchor, ctx.policy)
    optimizer = torch.optim.Adam(ctx.policy.parameters(), lr=1e-2)
    stats = anchor.update(ctx.policy, optimizer, np.random.default_rng(1))
    after = _buffer_loss(anchor, ctx.policy)
    assert set(stats) == {"anchor_cross_entropy", "anchor_accuracy"}
    assert after[0] < 0.5 * before[0] and after[1] > before[1]


def test_no_anchor_at_zero_and_bad_values_are_refused(tmp_path) -> None:
    for off in ({"rl.anchor_coef": 0.0}, {"rl.anchor_updates": 0}):
        assert make_anchor(Trainer(small_args(tmp_path, **off)).context) is None
    assert TrainArgs().rl.anchor_coef == 1.0 and TrainArgs(recipe="doppler").rl.anchor_coef == 0.0
    for bad, match in (({"anchor_coef": -1.0}, "rl.anchor_coef"), ({"anchor_coef": "yes"}, "rl.anchor_coef"),
                       ({"anchor_updates": -2}, "rl.anchor_updates"),
                       ({"anchor_episodes": 0}, "rl.anchor_episodes")):
        with pytest.raises(ValueError, match=match):
            TrainArgs(rl=bad).validate()


@pytest.mark.parametrize("algo", ["ppo", "reinforce"])
def test_rl_updates_log_the_anchor_only_when_it_is_on(tmp_path, algo) -> None:
    kw = {"stages": ("il", "sim"), "episodes": {"il": 4, "sim": 4}, "rl.episodes_per_update": 2, "algo": algo}
    for coef in (0.0, 1.0):
        train(small_args(tmp_path / str(coef), **{"rl.anchor_coef": coef}, **kw))
        updates = [r for r in read_metrics(tmp_path / str(coef)) if r["kind"] == "update" and r["stage"] == "sim"]
        assert len(updates) == 2
        assert all(("anchor_cross_entropy" in r) == (coef > 0) for r in updates)


def test_the_anchor_keeps_the_imitated_placement_through_aggressive_rl(tmp_path) -> None:
    """TINY_GRAPH: imitation copies the critical-path teacher, then PPO at a learning rate 100 times the
    recipe's moves the greedy decode away from it; with the anchor the decode stays the teacher's."""
    kw = {**TINY_GRAPH, "stages": ("il", "sim"), "episodes": {"il": 48, "sim": 64}, "rl.episodes_per_update": 4,
          "rl.lr": 1e-2, "rl.lr_final": 1e-2, "ppo.target_kl": None, "rl.ent_coef": 0.05}
    teacher = min(teacher_makespans(small_args(tmp_path / "t", **kw)))
    free = train(small_args(tmp_path / "free", **{"rl.anchor_coef": 0.0}, **kw))
    # 32 anchor steps per PPO update hold the teacher with a margin. On train seeds 0-3 (2026-12-02; torch
    # 2.13, torch-geometric 2.8.1, SB3 2.9.2) 32 steps, or 16 at coefficient 2, kept the teacher's placement
    # on all four; 16 at coefficient 1 on three (seed 0 drifted off in the last updates); no anchor on one.
    anchored = train(small_args(tmp_path / "anchored", **{"rl.anchor_coef": 1.0, "rl.anchor_updates": 32}, **kw))
    assert anchored["makespan"] == pytest.approx(teacher, rel=1e-9)
    assert free["makespan"] != pytest.approx(teacher, rel=1e-9)  # without it the same RL leaves the teacher
