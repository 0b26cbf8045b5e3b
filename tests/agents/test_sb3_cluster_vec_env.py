"""ClusterVecEnv (the batched SB3 VecEnv of Doppler-Cluster-v0) against SB3's DummyVecEnv over single envs, and
MaskablePPO training on it, directly and through the recipe's ``vec_env: doppler``."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("stable_baselines3", reason="the SB3 vector env needs the 'agents' extra (stable-baselines3)")
pytest.importorskip("sb3_contrib", reason="MaskablePPO needs the 'agents' extra (sb3-contrib)")

from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor  # noqa: E402

from agents.sb3_cluster_vec_env import ClusterVecEnv  # noqa: E402
from doppler_gym.envs.cluster import ClusterEnv  # noqa: E402
from tests.agents.sb3_vec_helpers import (  # noqa: E402
    check_maskable_ppo_runs,
    check_vec_env_interface,
    step_beside_dummy,
)

RECIPE_LIKE = {"trace": "generated:8", "cluster": "2x8", "max_jobs": 6, "known_durations": True,
               "resample_trace": True, "reward": "relative", "gpu_choices": ["pack"], "sharing": False}


@pytest.mark.parametrize(("kwargs", "p_invalid"), [
    (RECIPE_LIKE, 0.0),
    ({"trace": "generated:10", "max_jobs": 3, "max_invalid_streak": 3}, 0.25),
])
def test_equals_dummy_vec_env(kwargs: dict, p_invalid: float) -> None:
    n = 3
    seen = step_beside_dummy(ClusterVecEnv(n, **kwargs), DummyVecEnv([lambda: ClusterEnv(**kwargs)] * n), 300,
                             p_invalid)
    assert seen["dones"] >= 1
    if p_invalid >= 0.2:
        assert seen["truncations"] >= 1


def test_sb3_vec_env_expectations() -> None:
    venv = ClusterVecEnv(4, trace="generated:6")
    single = ClusterEnv(trace="generated:6")
    check_vec_env_interface(venv, single, other_method="job_rows")
    assert venv.get_attr("modes") == [single.modes] * 4  # each env's attribute
    with pytest.raises(AttributeError, match="no public attribute"):
        venv.get_attr("_plan")
    with pytest.raises(AttributeError, match="new ClusterVecEnv"):
        venv.set_attr("max_steps", 3)
    venv.set_options({"graph": "x"})
    with pytest.raises(ValueError, match="takes no options"):
        venv.reset()


def test_step_before_reset_is_an_error() -> None:
    venv = ClusterVecEnv(2, trace="generated:4")
    with pytest.raises(RuntimeError, match="reset"):
        venv.step(np.zeros(2, np.int64))


@pytest.mark.usefixtures("one_thread")
def test_maskable_ppo_runs_on_it() -> None:
    check_maskable_ppo_runs(ClusterVecEnv(4, **RECIPE_LIKE), gamma=1.0)


@pytest.mark.usefixtures("one_thread")
def test_recipe_vec_env_doppler_builds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """``vec_env: doppler`` in a Doppler-Cluster-v0 recipe trains MaskablePPO on a ClusterVecEnv (the shipped entry,
    shortened, with that key set)."""
    from agents.recipes import hyperparams

    shipped = hyperparams.load_hyperparams

    def with_batched_env(algo: str, env_id: str) -> dict:
        hp = shipped(algo, env_id)
        return {**hp, "vec_env": "doppler", "n_steps": 64, "batch_size": 64, "n_epochs": 1,
                "env_kwargs": {**hp["env_kwargs"], "trace": "generated:8"}}

    monkeypatch.setattr(hyperparams, "load_hyperparams", with_batched_env)
    model, vec_env = hyperparams.make_model("maskable_ppo", "Doppler-Cluster-v0", seed=0)
    assert isinstance(vec_env, VecMonitor) and isinstance(vec_env.venv, ClusterVecEnv)
    assert vec_env.num_envs == shipped("maskable_ppo", "Doppler-Cluster-v0")["n_envs"]
    model.learn(total_timesteps=300)
    assert model.num_timesteps >= 300
