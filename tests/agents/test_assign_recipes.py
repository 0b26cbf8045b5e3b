"""The shipped PPO and A2C recipes on Doppler-SimAssign-v0 (the whole assignment in one MultiDiscrete action,
every action valid, so no masks): each loads and builds its model, a short run beats random assignments, and the
benchmark's smoke mode runs. Per-seed figures: docs/results/assign_rl.md, from benchmarks/bench_sim_rl.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3", reason="PPO and A2C need the 'agents' extra (stable-baselines3)")

import doppler_gym  # noqa: E402, F401  (registers the env ids)
from agents.recipes import env_ids, load_hyperparams, make_model, train_recipe  # noqa: E402
from agents.recipes.run import greedy_score  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

ASSIGN = "Doppler-SimAssign-v0"
ROOT = Path(__file__).resolve().parents[2]


def _random_assignment_mean(env_kwargs: dict, episodes: int = 20) -> float:
    """Mean makespan of uniformly random assignments (each op's device drawn uniformly), a brute reference."""
    env = gym.make(ASSIGN, **env_kwargs)
    rng = np.random.default_rng(123)
    out = []
    for k in range(episodes):
        env.reset(seed=k)
        out.append(env.step(rng.integers(0, 4, env.action_space.shape))[4]["makespan"])
    return float(np.mean(out))


@pytest.mark.parametrize("algo, cls", [("ppo", "PPO"), ("a2c", "A2C")])
def test_each_recipe_builds_its_model_on_an_env_whose_every_action_is_valid(algo, cls):
    assert ASSIGN in env_ids(algo)
    hp = load_hyperparams(algo, ASSIGN)
    model, vec_env = make_model(algo, ASSIGN, seed=0)
    assert type(model).__name__ == cls and vec_env.num_envs == hp["n_envs"]
    env = gym.make(ASSIGN, **hp["env_kwargs"])
    _, info = env.reset(seed=0)
    assert env.action_space == gym.spaces.MultiDiscrete([4] * info["n_ops"])
    # no masks needed: every entry of the space is an allowed device of a real op (no padding, no remapping)
    assert env.get_wrapper_attr("action_masks")().all()
    action, _ = model.predict(env.reset(seed=0)[0], deterministic=True)
    info = env.step(action)[4]
    assert info["remapped"] == 0 and info["makespan"] >= info["lower_bound"]


@pytest.mark.parametrize("algo, steps", [("a2c", 4096), ("ppo", 8192)])
def test_a_short_run_keeps_a_greedy_policy_well_below_random_assignments(algo, steps):
    hp = load_hyperparams(algo, ASSIGN)
    run = train_recipe(algo, ASSIGN, seed=0, n_timesteps=steps, eval_every=1024)
    random_mean = _random_assignment_mean(hp["env_kwargs"])
    # the untrained argmax is one arbitrary assignment; a few thousand bandit samples must beat random ones by 10%
    assert run.best.score < min(run.initial, 0.9 * random_mean)
    # the returned model holds the best weights: re-evaluated on a fresh env it scores exactly the best
    env = gym.make(ASSIGN, **hp["env_kwargs"])
    assert greedy_score(run.model, env, "makespan", [0]) == pytest.approx(run.best.score, rel=1e-12)


def test_greedy_score_names_the_info_keys_when_the_metric_is_missing():
    model, _ = make_model("a2c", ASSIGN, seed=0)
    env = gym.make(ASSIGN, **load_hyperparams("a2c", ASSIGN)["env_kwargs"])
    with pytest.raises(KeyError, match="no 'avg_jct'.*makespan"):
        greedy_score(model, env, "avg_jct", [0])


def test_the_benchmark_refuses_a_maskable_algorithm_on_the_assignment_env(capsys):
    from benchmarks.bench_sim_rl import main

    with pytest.raises(SystemExit):
        main(["--env", ASSIGN, "--algo", "maskable_ppo"])
    assert "Doppler-SimAssign-v0 has recipes for ppo, a2c" in capsys.readouterr().err


def test_the_benchmark_smoke_mode_runs_both_recipes():
    cmd = [sys.executable, "-m", "benchmarks.bench_sim_rl", "--smoke", "--env", ASSIGN, "--algo", "ppo", "a2c"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [line.split(" | ") for line in proc.stdout.splitlines() if line.startswith("| paper/chainmm")]
    assert [r[1] for r in rows] == ["ppo", "a2c"]
    reference = gym.make(ASSIGN, graph="paper/chainmm", topology=4).reset(seed=0)[1]["reference_makespan"]
    assert all(float(r[8]) == pytest.approx(reference, rel=1e-4) for r in rows)  # the critical-path column
