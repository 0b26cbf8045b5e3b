"""The native vector env of Doppler-Cluster-v0 against Gymnasium's SyncVectorEnv over ``gym.make`` envs.

For the same keywords, seeds and actions (random masked ones, mixed with invalid ones in some cases), over a
few hundred steps with autoresets, every observation array, termination, truncation and info entry (keys,
masks, dtypes, values) must be equal, and every reward equal exactly (the same Python float arithmetic per env).
The batched observation writer is also checked row by row against the single env's ``ClusterObservation.build``
through the env (the reference), and its segment ranks against a per-segment ``searchsorted``.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

from doppler_gym.cluster import Cluster, FailureModel
from doppler_gym.envs.cluster import ClusterEnv
from doppler_gym.envs.cluster_vector import ClusterBatch, ClusterVectorEnv
from doppler_gym.envs.cluster_vector.observation import segment_rank
from doppler_gym.envs.masked import InvalidActionWarning
from tests.doppler_gym.envs.vector_helpers import assert_same_infos, random_actions

ENTRY = "doppler_gym.envs.cluster_vector.env:ClusterVectorEnv"

CASES = {
    "one env, defaults but a short trace": (1, {"trace": "generated:6"}, 300, 0.0),
    "four envs, the recipe's options (relative reward, a new trace each episode)": (
        4, {"trace": "generated:8", "cluster": "2x8", "max_jobs": 6, "known_durations": True, "resample_trace": True,
            "trace_kwargs": {"mean_interarrival": 600.0}, "reward": "relative", "gpu_choices": ["pack"],
            "sharing": False}, 300, 0.0),
    "four envs, a window smaller than the active jobs, invalid actions truncate": (
        4, {"trace": "generated:10", "max_jobs": 3, "max_invalid_streak": 3}, 300, 0.25),
    "four envs, two GPU types (typed modes, head speed)": (
        4, {"trace": "generated:8", "cluster": "v100:8,k80:8/4", "known_durations": True}, 300, 0.05),
    "four envs, failures and stragglers (restart delays), max_steps truncates": (
        4, {"trace": "generated:16", "cluster": Cluster.uniform(2, 4),
            "failures": FailureModel(gpu_mtbf=5_000.0, restart_delay=120.0, straggler_mtbs=20_000.0), "max_steps": 30,
            "trace_kwargs": {"checkpoint_every": 300}}, 300, 0.05),
    "two envs, a shipped trace (loaded once) on three GPU types, max_steps truncates": (
        2, {"trace": "gavel-msr", "cluster": "v100:16,p100:16,k80:16/4", "max_jobs": 8, "max_steps": 60}, 150, 0.0),
}


def compare_with_sync(num_envs: int, kwargs: dict, steps: int, p_invalid: float, seed: int = 0) -> dict:
    """Step ClusterVectorEnv and SyncVectorEnv side by side; returns counts of what happened."""
    venv = ClusterVectorEnv(num_envs=num_envs, **kwargs)
    sync = gym.vector.SyncVectorEnv([lambda: gym.make("Doppler-Cluster-v0", **kwargs) for _ in range(num_envs)])
    obs, infos = venv.reset(seed=seed)
    s_obs, s_infos = sync.reset(seed=seed)
    rng = np.random.default_rng(seed + 1)
    seen = {"terminated": 0, "truncated": 0, "invalid": 0, "resets": 0, "hidden": 0}
    for t in range(steps + 1):
        where = f"step {t}"
        assert obs.keys() == s_obs.keys()
        for key, want in s_obs.items():
            assert obs[key].dtype == want.dtype, f"{where}: obs[{key!r}]"
            np.testing.assert_array_equal(obs[key], want, err_msg=f"{where}: obs[{key!r}]")
        assert obs in venv.observation_space, f"{where}: an observation outside observation_space"
        assert np.all(obs["action_mask"].any(axis=1)), f"{where}: an all-zero mask"
        np.testing.assert_array_equal(venv.action_masks(), np.stack(sync.call("action_masks")))
        assert_same_infos(infos, s_infos, where)
        seen["hidden"] += int((obs["cluster"][:, 3] > 0).sum())
        if t == steps:
            break
        actions = random_actions(rng, obs["action_mask"], p_invalid)
        seen["resets"] += int(sync._autoreset_envs.sum())  # noqa: SLF001 (what the reference is about to do)
        obs, rewards, term, trunc, infos = venv.step(actions)
        s_obs, s_rewards, s_term, s_trunc, s_infos = sync.step(actions)
        assert rewards.dtype == s_rewards.dtype and rewards.shape == (num_envs,)
        np.testing.assert_array_equal(rewards, s_rewards, err_msg=where)
        np.testing.assert_array_equal(term, s_term, err_msg=where)
        np.testing.assert_array_equal(trunc, s_trunc, err_msg=where)
        seen["terminated"] += int(s_term.sum())
        seen["truncated"] += int(s_trunc.sum())
        seen["invalid"] += int(s_infos.get("_invalid_action", np.zeros(1, bool)).sum())
    return seen


@pytest.mark.parametrize("case", list(CASES))
def test_equals_sync_vector_env(case: str) -> None:
    num_envs, kwargs, steps, p_invalid = CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InvalidActionWarning)
        seen = compare_with_sync(num_envs, kwargs, steps, p_invalid)
    assert seen["terminated"] + seen["truncated"] >= 1 and seen["resets"] >= 1, seen  # autoresets were compared
    if p_invalid >= 0.2 or "max_steps" in kwargs:
        assert seen["truncated"] >= 1, seen
    if p_invalid >= 0.2:
        assert seen["invalid"] >= 10, seen
    if kwargs.get("max_jobs", 99) <= 3:
        assert seen["hidden"] >= 1, seen  # the sliding window was exercised


def test_make_vec_vector_entry_point() -> None:
    envs = gym.make_vec("Doppler-ClusterVec-v0", num_envs=3, vectorization_mode="vector_entry_point",
                        trace="generated:5", max_jobs=4)
    assert isinstance(envs, ClusterVectorEnv) and gym.spec("Doppler-ClusterVec-v0").vector_entry_point == ENTRY
    obs, _ = envs.reset(seed=3)
    single = ClusterEnv(trace="generated:5", max_jobs=4)
    for i in range(3):
        s_obs, _ = single.reset(seed=3 + i)
        for key, want in s_obs.items():
            np.testing.assert_array_equal(obs[key][i], want, err_msg=f"env {i}: {key}")
    assert isinstance(gym.make("Doppler-ClusterVec-v0", trace="generated:5"), ClusterEnv)  # unwrapped single env
    masks = envs.action_masks()
    assert masks.dtype == np.int8 and masks.shape == (3, single.n_actions)
    np.testing.assert_array_equal(masks, obs["action_mask"])


def test_shared_read_only_state() -> None:
    """A shipped trace and a cluster spec are built once for all envs; a generated trace stays per env."""
    venv = ClusterVectorEnv(num_envs=3, trace="gavel-msr", cluster="v100:16,p100:16,k80:16/4")
    assert all(env.trace is venv.envs[0].trace and env.cluster is venv.envs[0].cluster for env in venv.envs)
    venv = ClusterVectorEnv(num_envs=2, trace="generated:5")
    assert venv.envs[1].trace is not venv.envs[0].trace and venv.envs[1].trace_seed == 0


def test_reset_mask_seeds_and_copies() -> None:
    venv = ClusterVectorEnv(num_envs=3, trace="generated:6")
    obs, _ = venv.reset(seed=[5, 6, 7])
    reference = [ClusterEnv(trace="generated:6") for _ in range(3)]
    for i, env in enumerate(reference):
        np.testing.assert_array_equal(obs["jobs"][i], env.reset(seed=5 + i)[0]["jobs"])
    actions = np.array([int(np.flatnonzero(m)[0]) for m in obs["action_mask"]])
    stepped, *_ = venv.step(actions)
    for i, env in enumerate(reference):
        np.testing.assert_array_equal(stepped["jobs"][i], env.step(int(actions[i]))[0]["jobs"])
    again, _ = venv.reset(seed=[None, 5, None], options={"reset_mask": np.array([False, True, False])})
    np.testing.assert_array_equal(again["jobs"][1], obs["jobs"][0])  # env 1 re-seeded with env 0's first seed
    np.testing.assert_array_equal(again["jobs"][0], stepped["jobs"][0])  # the others left as they were
    again["jobs"][:] = -1.0
    assert venv.core.obs["jobs"].min() >= 0.0  # copies by default
    with pytest.raises(ValueError, match="reset_mask"):
        venv.reset(options={"graph": "x"})


def test_clear_errors() -> None:
    with pytest.raises(ValueError, match=r"render_mode='human'.*vectorization_mode='sync'"):
        ClusterVectorEnv(num_envs=2, render_mode="human")
    with pytest.raises(TypeError, match=r"no keyword\(s\) \['graph'\]; valid: trace, cluster"):
        ClusterVectorEnv(num_envs=2, graph="paper/ffnn")
    with pytest.raises(ValueError, match="num_envs must be an integer >= 1"):
        ClusterBatch(0)
    venv = ClusterVectorEnv(num_envs=2, trace="generated:4", invalid_action="raise")
    obs, _ = venv.reset(seed=0)
    with pytest.raises(TypeError, match="actions must be integers"):
        venv.step(np.zeros(2))
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        venv.step(np.zeros(3, np.int64))
    good = int(np.flatnonzero(obs["action_mask"][0])[0])
    bad = int(np.flatnonzero(obs["action_mask"][1] == 0)[0])
    before = venv.envs[0].job_view.now, venv.core.obs["jobs"].copy()
    with pytest.raises(ValueError, match=rf"env 1: action {bad} is not valid.*nothing was stepped"):
        venv.step(np.array([good, bad]))
    assert venv.envs[0].job_view.now == before[0]
    np.testing.assert_array_equal(venv.core.obs["jobs"], before[1])


def _reference_rank(key: np.ndarray) -> np.ndarray:
    """cluster_obs's definition, written out: the fraction of the other entries strictly below each entry."""
    k = len(key)
    return np.searchsorted(np.sort(key), key, side="left") / (k - 1) if k >= 2 else np.zeros(k)


def test_segment_rank_equals_a_per_segment_searchsorted() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        sizes = rng.integers(0, 7, size=int(rng.integers(1, 6)))
        keys = [rng.integers(0, 4, size=k).astype(float) for k in sizes]  # many ties
        for key in keys:
            key[rng.random(key.size) < 0.1] = np.nan
        segment = np.repeat(np.arange(len(sizes)), sizes)
        got = segment_rank(np.concatenate(keys), segment, np.repeat(sizes, sizes))
        want = np.concatenate([_reference_rank(k) for k in keys])
        np.testing.assert_array_equal(got, want)
