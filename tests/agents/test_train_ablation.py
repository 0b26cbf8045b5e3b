"""The paper's ablations: ``learn="sel"`` / ``"plc"`` (the critical-path teacher plays the other decision)."""

from __future__ import annotations

import numpy as np
import pytest

from agents.training import Instance, TrainArgs, load_checkpoint, train
from agents.training.ablation import TeacherPhase, agent_steps, wrap_learn
from doppler_gym.envs.observation import PLC, SEL
from tests.agents.train_helpers import small_args


def _teacher_episode(env, rng=None):
    """Lowest-id teacher actions (or random tied ones with ``rng``) until the end; (info, return, steps, phases)."""
    obs, _ = env.reset(seed=0)
    total, steps, phases, done = 0.0, 0, [], False
    while not done:
        phases.append(int(obs["phase"][0]))
        mask = env.unwrapped.teacher_mask()
        action = int(np.argmax(mask)) if rng is None else int(rng.choice(np.flatnonzero(mask)))
        obs, reward, done, truncated, info = env.step(action)
        total += reward
        steps += 1
        done = done or truncated
    return info, total, steps, phases


@pytest.mark.parametrize("learn", ["sel", "plc"])
def test_teacher_phase_shows_only_the_learned_decisions(tmp_path, learn) -> None:
    inst = Instance.from_args(small_args(tmp_path, learn=learn))
    raw_info, raw_return, raw_steps, _ = _teacher_episode(inst.sim_env(learned=False))
    env = inst.sim_env()
    assert isinstance(env, TeacherPhase) and env.action_space.n == inst.sim_env(learned=False).action_space.n
    info, total, steps, phases = _teacher_episode(env)
    n = inst.graph.n_ops
    assert raw_steps == 2 * n and steps == n == agent_steps(n, learn)
    assert set(phases) == {SEL if learn == "sel" else PLC}
    assert total == pytest.approx(raw_return, abs=1e-12)  # the teacher steps' rewards are kept
    assert info["makespan"] == raw_info["makespan"]
    np.testing.assert_array_equal(info["assignment"], raw_info["assignment"])
    env.reset(seed=1)
    mask = env.get_wrapper_attr("action_masks")()
    max_ops = env.unwrapped.max_ops
    sel, plc = slice(0, max_ops), slice(max_ops, None)
    learned, other = (sel, plc) if learn == "sel" else (plc, sel)
    assert mask[learned].any() and not mask[other].any()


def test_wrap_learn_rejects_unknown_modes(tmp_path) -> None:
    env = Instance.from_args(small_args(tmp_path)).sim_env(learned=False)
    assert wrap_learn(env, "both") is env
    with pytest.raises(ValueError, match="learn must be one of"):
        wrap_learn(env, "neither")
    with pytest.raises(ValueError, match="learn must be one of"):
        TrainArgs(learn="neither").validate()


@pytest.mark.slow
def test_plc_ablation_learns_only_placements_and_keeps_the_teacher_order(tmp_path) -> None:
    args = small_args(tmp_path, learn="plc", stages=("il", "sim"), episodes={"il": 8, "sim": 4},
                      rl={"episodes_per_update": 2})
    summary = train(args)
    inst = Instance.from_args(args)
    teacher_info, *_ = _teacher_episode(inst.sim_env(learned=False))
    # SEL is the teacher's whatever the placements: the b-level order of ready ops does not depend on devices
    assert summary["order"] == np.asarray(teacher_info["order"]).tolist()
    assert summary["learn"] == "plc"
    ckpt = load_checkpoint(tmp_path / "policy_il.pt")
    assert ckpt["args"]["learn"] == "plc"
    n = inst.graph.n_ops
    full = load_checkpoint(tmp_path)
    assert full["progress"]["sim"]["extra"]["num_timesteps"] == 4 * n  # PPO saw n PLC steps per episode, not 2 n
    assert summary["stages"]["sim"]["env_steps"] == 4 * 2 * n


@pytest.mark.slow
def test_sel_ablation_buffer_holds_only_selection_states(tmp_path) -> None:
    args = small_args(tmp_path, learn="sel", episodes={"il": 8})
    summary = train(args)
    buf = load_checkpoint(tmp_path)["il_buffer"]
    inst = Instance.from_args(args)
    max_ops = inst.sim_env().unwrapped.max_ops
    mask = buf["mask"].numpy()
    assert buf["size"] == 8 * inst.graph.n_ops  # one state per SEL decision
    assert mask[:, :max_ops].any(1).all() and not mask[:, max_ops:].any()
    # the placements are the teacher's: replaying the learned order with teacher PLC gives the same assignment
    env = inst.sim_env(learned=False)
    env.reset(seed=0)
    for op in summary["order"]:
        env.step(op)
        _, _, done, _, info = env.step(int(np.argmax(env.unwrapped.teacher_mask())))
    assert done and info["assignment"].tolist() == summary["assignment"]
