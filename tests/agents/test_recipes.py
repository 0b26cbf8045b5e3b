"""agents.recipes: the shipped hyperparameter files and their loader (errors, lin_ schedules, activations, models)."""

from __future__ import annotations

import textwrap

import pytest
import torch
import yaml

import agents.recipes.hyperparams as H
from agents.recipes import algorithms, env_ids, load_hyperparams, make_model

pytestmark = pytest.mark.usefixtures("one_thread")

CLUSTER = "Doppler-Cluster-v0"


@pytest.fixture
def recipes(tmp_path, monkeypatch):
    """Point the loader at ``tmp_path``; returns a writer ``write(algo, yaml_text)``."""
    monkeypatch.setattr(H, "HYPERPARAMS_DIR", tmp_path)

    def write(algo: str, text: str) -> None:
        (tmp_path / f"{algo}.yml").write_text(textwrap.dedent(text))
    return write


SMALL = """
    Doppler-Cluster-v0:
      policy: MultiInputPolicy
      n_timesteps: 1.0e+4
      n_envs: 2
      env_kwargs:
        trace: generated:8
        max_jobs: 8
      policy_kwargs:
        net_arch: [16]
        activation_fn: {act}
      n_steps: 32
      batch_size: 16
      learning_rate: {lr}
      clip_range: lin_0.2
"""


def test_the_shipped_files_are_plain_mappings_by_registered_env_id():
    import gymnasium as gym

    import doppler_gym  # noqa: F401  (registers the ids)

    assert "maskable_ppo" in algorithms()
    for algo in algorithms():
        data = yaml.safe_load((H.HYPERPARAMS_DIR / f"{algo}.yml").read_text())
        assert isinstance(data, dict) and data
        for env_id, entry in data.items():
            assert gym.spec(env_id) is not None and isinstance(entry, dict)
            hp = load_hyperparams(algo, env_id)
            assert isinstance(hp["policy"], str) and hp["n_timesteps"] >= 1 and hp["n_envs"] >= 1
    assert CLUSTER in env_ids("maskable_ppo")


def test_the_cluster_recipe_trains_undiscounted_on_the_relative_reward():
    hp = load_hyperparams("maskable_ppo", CLUSTER)
    assert hp["gamma"] == 1.0  # per-decision discounting would favour zero-time steps (docs of the reward)
    assert hp["env_kwargs"]["reward"] == "relative" and hp["env_kwargs"]["resample_trace"] is True


def test_unknown_algorithm_names_the_shipped_ones():
    with pytest.raises(ValueError, match=r"unknown algorithm 'sac'.*maskable_ppo"):
        load_hyperparams("sac", CLUSTER)
    with pytest.raises(ValueError, match="unknown algorithm"):
        make_model("sac", CLUSTER, seed=0)


def test_unknown_env_id_names_the_entries_there_are():
    with pytest.raises(ValueError, match=r"no maskable_ppo hyperparameters for env id 'Doppler-Nope-v0'.*"
                                         r"Doppler-Cluster-v0"):
        load_hyperparams("maskable_ppo", "Doppler-Nope-v0")


def test_lin_schedules_decay_linearly_to_zero(recipes):
    recipes("ppo", SMALL.format(act="Tanh", lr="lin_1.0e-3"))
    model, _ = make_model("ppo", CLUSTER, seed=0)
    assert model.lr_schedule(1.0) == pytest.approx(1e-3) and model.lr_schedule(0.25) == pytest.approx(2.5e-4)
    assert model.clip_range(1.0) == pytest.approx(0.2) and model.clip_range(0.5) == pytest.approx(0.1)
    assert model.lr_schedule(0.0) == 0.0


@pytest.mark.parametrize("lr", ["lin_abc", "lin_-1", "exp_0.1", "lin_0"])
def test_bad_schedules_are_named(recipes, lr):
    recipes("ppo", SMALL.format(act="Tanh", lr=lr))
    with pytest.raises(ValueError, match=rf"learning_rate={lr!r}: write a number or lin_<x>"):
        make_model("ppo", CLUSTER, seed=0)


@pytest.mark.parametrize("act", ["tanh", "Linear2", "Module2", "functional"])
def test_bad_activation_names_are_named(recipes, act):
    recipes("ppo", SMALL.format(act=act, lr="3.0e-4"))
    with pytest.raises(ValueError, match=f"activation_fn '{act}' is not a torch.nn module class"):
        make_model("ppo", CLUSTER, seed=0)


def test_activation_names_resolve_to_torch_nn_classes(recipes):
    recipes("ppo", SMALL.format(act="ReLU", lr="3.0e-4"))
    model, _ = make_model("ppo", CLUSTER, seed=0)
    assert model.policy.activation_fn is torch.nn.ReLU


@pytest.mark.parametrize(("text", "match"), [
    ("Doppler-Cluster-v0: 3\n", "must be a mapping of hyperparameters"),
    ("Doppler-Cluster-v0: {n_timesteps: 10}\n", "'policy' must name a policy"),
    ("Doppler-Cluster-v0: {policy: MultiInputPolicy, n_timesteps: 0}\n", "'n_timesteps' must be an integer >= 1"),
    ("Doppler-Cluster-v0: {policy: MultiInputPolicy, n_timesteps: 10, env_kwargs: [1]}\n",
     "'env_kwargs' must be a YAML mapping"),
    ("- Doppler-Cluster-v0\n", "the top level must be a mapping"),
])
def test_malformed_entries_are_named(recipes, text, match):
    recipes("ppo", text)
    with pytest.raises(ValueError, match=match):
        load_hyperparams("ppo", CLUSTER)


def test_keys_that_are_not_constructor_arguments_are_named(recipes):
    recipes("ppo", SMALL.format(act="Tanh", lr="3.0e-4") + "      n_stepz: 64\n")
    with pytest.raises(ValueError, match=r"\['n_stepz'\] are not keyword arguments of PPO"):
        make_model("ppo", CLUSTER, seed=0)
    with pytest.raises(TypeError, match="seed must be an int"):
        make_model("maskable_ppo", CLUSTER, seed=1.0)


def test_make_model_builds_the_files_hyperparameters():
    from sb3_contrib import MaskablePPO

    hp = load_hyperparams("maskable_ppo", CLUSTER)
    model, vec_env = make_model("maskable_ppo", CLUSTER, seed=3)
    assert isinstance(model, MaskablePPO) and model.seed == 3 and str(model.device) == "cpu"
    assert model.n_envs == hp["n_envs"] == vec_env.num_envs
    algo_keys = {k: v for k, v in hp.items() if k not in H._RESERVED}
    assert {"n_steps", "batch_size", "gamma", "learning_rate"} <= set(algo_keys)
    for key, value in algo_keys.items():
        got = getattr(model, key)
        if isinstance(value, str):  # lin_<x>: x at the start, half of it halfway
            x = float(value.removeprefix("lin_"))
            assert (got(1.0), got(0.5)) == pytest.approx((x, x / 2)), key
            continue
        got = got(1.0) if callable(got) else got
        assert got == pytest.approx(value), key
    assert model.policy.net_arch == hp["policy_kwargs"].get("net_arch", model.policy.net_arch)
    def env0(name: str):  # env 0's attribute, through SB3's VecEnv API (any vec_env kind)
        return vec_env.get_attr(name, indices=[0])[0]

    kw = hp["env_kwargs"]
    assert env0("max_jobs") == kw["max_jobs"] and env0("known_durations") == kw["known_durations"]
    assert env0("reward_name") == kw["reward"] and env0("reward_baseline") == kw["reward_baseline"]
    assert env0("modes") == (*kw["gpu_choices"], *(("share",) if kw["sharing"] else ()),
                             *(("preempt",) if kw["preemption"] else ()))
    assert env0("n_jobs") == int(kw["trace"].split(":")[1]) and env0("resample_trace") == kw["resample_trace"]
    # env_kwargs_overrides and n_envs replace the recipe's
    model, vec_env = make_model("maskable_ppo", CLUSTER, seed=0, env_kwargs_overrides={"trace": "generated:6"},
                                n_envs=1)
    assert vec_env.num_envs == 1 and vec_env.get_attr("n_jobs") == [6]


def test_make_model_seeds_the_envs_and_the_model():
    a, va = make_model("maskable_ppo", CLUSTER, seed=5, n_envs=2)
    b, vb = make_model("maskable_ppo", CLUSTER, seed=5, n_envs=2)
    oa, ob = va.reset(), vb.reset()
    assert all((oa[k] == ob[k]).all() for k in oa)
    seeds = va.get_attr("trace_seed")
    assert seeds == vb.get_attr("trace_seed")
    assert seeds[0] != seeds[1]  # env i resets with seed + i
    for pa, pb in zip(a.policy.parameters(), b.policy.parameters()):
        assert torch.equal(pa, pb)
