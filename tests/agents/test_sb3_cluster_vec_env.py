"""ClusterVecEnv (the batched SB3 VecEnv of Doppler-Cluster-v0) against SB3's DummyVecEnv over single envs, and
MaskablePPO training on it, directly and through the recipe's ``vec_env: doppler``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("stable_baselines3", reason="the SB3 vector env needs the 'agents' extra (stable-baselines3)")
sb3_contrib = pytest.importorskip("sb3_contrib", reason="MaskablePPO needs the 'agents' extra (sb3-contrib)")

from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor  # noqa: E402
from stable_baselines3.common.vec_env.util import obs_space_info  # noqa: E402

from agents.sb3_cluster_vec_env import ClusterVecEnv  # noqa: E402
from doppler_gym.envs.cluster import ClusterEnv  # noqa: E402
from doppler_gym.envs.masked import InvalidActionWarning  # noqa: E402

RECIPE_LIKE = {"trace": "generated:8", "cluster": "2x8", "max_jobs": 6, "known_durations": True,
               "resample_trace": True, "reward": "relative", "gpu_choices": ["pack"], "sharing": False}


def same(got: object, want: object, where: str) -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for key in want:
            same(got[key], want[key], f"{where}[{key!r}]")
    elif isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype, f"{where}: {got!r:.80} vs {want!r:.80}"
        np.testing.assert_array_equal(got, want, err_msg=where)
    elif hasattr(want, "summary"):  # a ClusterResult: compared by its metrics
        assert got.summary() == want.summary(), where
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


@pytest.mark.parametrize(("kwargs", "p_invalid"), [
    (RECIPE_LIKE, 0.0),
    ({"trace": "generated:10", "max_jobs": 3, "max_invalid_streak": 3}, 0.25),
])
def test_equals_dummy_vec_env(kwargs: dict, p_invalid: float) -> None:
    n = 3
    venv = ClusterVecEnv(n, **kwargs)
    dummy = DummyVecEnv([lambda: ClusterEnv(**kwargs) for _ in range(n)])
    venv.seed(21)
    dummy.seed(21)
    obs, want_obs = venv.reset(), dummy.reset()
    same(obs, want_obs, "reset obs")
    same(venv.reset_infos, dummy.reset_infos, "reset_infos")
    rng = np.random.default_rng(0)
    dones_seen = truncations = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InvalidActionWarning)
        for t in range(300):
            masks = get_action_masks(dummy)
            np.testing.assert_array_equal(get_action_masks(venv), masks)
            actions = np.array([int(rng.integers(-1, masks.shape[1] + 1)) if rng.random() < p_invalid
                                else int(rng.choice(np.flatnonzero(m))) for m in masks])
            obs, rewards, dones, infos = venv.step(actions)
            w_obs, w_rewards, w_dones, w_infos = dummy.step(actions)
            same(obs, w_obs, f"step {t} obs")
            assert rewards.dtype == w_rewards.dtype == np.float32
            np.testing.assert_array_equal(rewards, w_rewards, err_msg=f"step {t}")
            np.testing.assert_array_equal(dones, w_dones, err_msg=f"step {t}")
            assert len(infos) == n
            for i in range(n):
                same(infos[i], w_infos[i], f"step {t} info {i}")
            same(venv.reset_infos, dummy.reset_infos, f"step {t} reset_infos")
            dones_seen += int(dones.sum())
            truncations += sum(info["TimeLimit.truncated"] for info in w_infos)
    assert dones_seen >= 1
    if p_invalid >= 0.2:
        assert truncations >= 1


def test_sb3_vec_env_expectations() -> None:
    venv = ClusterVecEnv(4, trace="generated:6")
    single = ClusterEnv(trace="generated:6")
    assert venv.observation_space == single.observation_space and venv.action_space == single.action_space
    obs = venv.reset()
    keys, shapes, dtypes = obs_space_info(venv.observation_space)
    assert set(obs) == set(keys)
    for key in keys:
        assert obs[key].shape == (4, *shapes[key]) and obs[key].dtype == dtypes[key], key
    assert is_masking_supported(venv)
    masks = get_action_masks(venv)
    assert masks.shape == (4, single.action_space.n) and masks.dtype == np.int8
    np.testing.assert_array_equal(masks, obs["action_mask"])
    np.testing.assert_array_equal(venv.action_masks(), masks)
    assert venv.get_attr("modes") == [single.modes] * 4
    assert venv.get_attr("render_mode", indices=[1, 2]) == [None, None]
    np.testing.assert_array_equal(venv.get_attr("action_masks", indices=2)[0](), masks[2])
    assert venv.env_is_wrapped(VecMonitor) == [False] * 4
    with pytest.raises(AttributeError, match="only action_masks"):
        venv.env_method("job_rows")
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
    venv = VecMonitor(ClusterVecEnv(4, **RECIPE_LIKE))
    model = sb3_contrib.MaskablePPO("MultiInputPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0,
                                    gamma=1.0, policy_kwargs={"net_arch": [32]}, device="cpu")
    model.learn(total_timesteps=512)
    assert model.num_timesteps >= 512
    obs = venv.reset()
    actions, _ = model.predict(obs, action_masks=get_action_masks(venv), deterministic=True)
    masks = get_action_masks(venv)
    assert all(masks[i, a] == 1 for i, a in enumerate(actions))  # masked predictions are valid actions


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
