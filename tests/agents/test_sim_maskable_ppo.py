"""The shipped MaskablePPO recipe learns Doppler-Sim-v0: on paper/ffnn with 4 devices its greedy policy goes from
about twice the critical-path heuristic's makespan (84.18) to within 1% of it in 10 minutes of CPU (per-seed
figures in docs/results/sim_rl.md, from benchmarks/bench_sim_rl.py; reaching critical path itself in 3 of 4
seeds is issue 33's goal, met by some seeds only so far)."""

from __future__ import annotations

import pytest

pytest.importorskip("sb3_contrib", reason="MaskablePPO needs the 'agents' extra (sb3-contrib)")

import doppler_gym as dg  # noqa: E402
from agents.recipes import load_hyperparams, train_recipe  # noqa: E402


def test_the_recipe_targets_paper_ffnn_on_four_devices():
    hp = load_hyperparams("maskable_ppo", "Doppler-Sim-v0")
    assert hp["env_kwargs"] == {"graph": "paper/ffnn", "topology": 4, "observation": "flat"}
    assert hp["gamma"] == 0.99 and hp["vec_env"] == "doppler" and hp["eval_metric"] == "makespan"


@pytest.mark.slow
def test_maskable_ppo_comes_within_one_percent_of_critical_path_on_paper_ffnn():
    import numba
    import torch

    threads = (numba.get_num_threads(), torch.get_num_threads())
    numba.set_num_threads(1)  # one thread each (never NUMBA_NUM_THREADS: Numba refuses a change once launched)
    torch.set_num_threads(1)
    try:
        _train_and_check()
    finally:
        numba.set_num_threads(threads[0])
        torch.set_num_threads(threads[1])


def _train_and_check():
    g = dg.load_graph("paper/ffnn")
    critical_path = dg.baselines.run("critical_path", g, 4).makespan
    assert critical_path == pytest.approx(84.18, abs=0.01)  # the reference the env divides by
    run = train_recipe("maskable_ppo", "Doppler-Sim-v0", seed=1, minutes=10.0, stop_at=critical_path)
    assert run.initial > 1.5 * critical_path  # the untrained policy: far worse (random masked is ~1.35x)
    assert run.best.score <= 1.01 * critical_path, [(e.steps, round(e.score, 2)) for e in run.curve]
    # the kept model is the best evaluated one: decoding it again gives that makespan
    import gymnasium as gym

    from agents.recipes.run import greedy_score

    env = gym.make("Doppler-Sim-v0", **load_hyperparams("maskable_ppo", "Doppler-Sim-v0")["env_kwargs"])
    assert greedy_score(run.model, env, "makespan", [0]) == pytest.approx(run.best.score, rel=1e-9)
