"""The native vector env of Doppler-Sim-v0 against its reference, N single envs stepped one by one.

The reference is N :class:`PlacementEnv` objects with Gymnasium's next-step autoreset written out here
(and, in one test, Gymnasium's own ``SyncVectorEnv``): for the same seeds and the same actions (random
masked ones mixed with invalid ones) every observation array, termination, truncation and info must be
equal (exact), and every reward equal to 1e-12 relative.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings

import gymnasium as gym
import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.envs import PlacementEnv
from doppler_gym.envs.masked import InvalidActionWarning
from doppler_gym.envs.rewards import Reward
from doppler_gym.envs.vector import PlacementVectorEnv
from doppler_gym.sim.stragglers import Straggler
from tests.doppler_gym.envs.vector_helpers import assert_same_infos, assert_same_value, random_actions

VECTOR_ENTRY_POINT = "doppler_gym.envs.vector.env:PlacementVectorEnv"


class ClippedGain(Reward):
    """A reward that is not arithmetic on arrays (an ``if``): the vector env must call it per env."""

    name = "clipped-gain"
    measure = "simulated"

    def step(self, before: float, after: float, reference: float) -> float:
        return -(after - before) / reference if after > before else 0.001

    def final(self, before: float, makespan: float, reference: float) -> float:
        return -makespan / reference


def generated_graph(rng: np.random.Generator) -> dg.DataflowGraph:
    """A random layered DAG of 20-40 ops per reset, drawn with the env's generator (a graph per episode)."""
    return dg.workloads.make("random", n_ops=int(rng.integers(20, 41)), levels=5, seed=int(rng.integers(2**31)))


def env_infos(infos: dict, i: int, num_envs: int) -> dict:
    """Env ``i``'s entries of Gymnasium vector infos (the keys whose ``_key`` mask marks it)."""
    out = {}
    for key, values in infos.items():
        if key.startswith("_"):
            continue
        mask = infos[f"_{key}"]
        assert mask.shape == (num_envs,) and mask.dtype == np.bool_
        if mask[i]:
            out[key] = values[i]
    return out


class Reference:
    """N single envs with next-step autoreset, as Gymnasium's SyncVectorEnv steps them."""

    def __init__(self, num_envs: int, kwargs: dict) -> None:
        self.envs = [PlacementEnv(**kwargs) for _ in range(num_envs)]
        self.autoreset = [False] * num_envs

    def reset(self, seed: int) -> tuple[list[dict], list[dict]]:
        out = [env.reset(seed=seed + i) for i, env in enumerate(self.envs)]
        self.autoreset = [False] * len(self.envs)
        return [o for o, _ in out], [info for _, info in out]

    def step(self, actions: np.ndarray) -> list[tuple]:
        results = []
        for i, env in enumerate(self.envs):
            if self.autoreset[i]:
                obs, info = env.reset()
                results.append((obs, 0.0, False, False, info))
            else:
                results.append(env.step(int(actions[i])))
            self.autoreset[i] = results[-1][2] or results[-1][3]
        return results


def compare_rollout(num_envs: int, kwargs: dict, steps: int, p_invalid: float = 0.0, seed: int = 0) -> dict:
    """Step the vector env and the reference side by side; returns counts of what happened."""
    venv = PlacementVectorEnv(num_envs=num_envs, **kwargs)
    ref = Reference(num_envs, kwargs)
    obs, infos = venv.reset(seed=seed)
    ref_obs, ref_infos = ref.reset(seed)
    assert obs in venv.observation_space
    for i in range(num_envs):
        for key, want in ref_obs[i].items():
            assert_same_value(obs[key][i], want, f"reset obs[{key!r}][{i}]")
        assert env_infos(infos, i, num_envs).keys() == ref_infos[i].keys()
        for key, want in ref_infos[i].items():
            assert_same_value(env_infos(infos, i, num_envs)[key], want, f"reset info[{key!r}][{i}]")
    rng = np.random.default_rng(seed + 1)
    seen = {"terminated": 0, "truncated": 0, "invalid": 0, "resets": 0}
    for t in range(steps):
        actions = random_actions(rng, [env.action_masks() for env in ref.envs], p_invalid)
        resetting = list(ref.autoreset)
        obs, rewards, terminated, truncated, infos = venv.step(actions)
        want = ref.step(actions)
        np.testing.assert_array_equal(venv.action_masks(), obs["action_mask"])
        assert rewards.shape == (num_envs,) and rewards.dtype == np.float64
        for i, (w_obs, w_reward, w_term, w_trunc, w_info) in enumerate(want):
            where = f"step {t}, env {i}"
            for key, value in w_obs.items():
                assert_same_value(obs[key][i], value, f"{where}: obs[{key!r}]")
            assert rewards[i] == pytest.approx(w_reward, rel=1e-12, abs=0.0), where
            assert (terminated[i], truncated[i]) == (w_term, w_trunc), where
            got_info = env_infos(infos, i, num_envs)
            assert got_info.keys() == w_info.keys(), f"{where}: info keys {sorted(got_info)} != {sorted(w_info)}"
            for key, value in w_info.items():
                assert_same_value(got_info[key], value, f"{where}: info[{key!r}]")
            seen["terminated"] += bool(w_term)
            seen["truncated"] += bool(w_trunc)
            seen["invalid"] += bool(w_info.get("invalid_action"))
            seen["resets"] += resetting[i]
        assert obs in venv.observation_space, f"step {t}: an observation outside observation_space"
        assert np.all(obs["action_mask"].any(axis=1)), f"step {t}: an all-zero mask"
    return seen


FIFO_PRIORITY = dg.SimConfig(queue_order="priority")
JITTER = dg.SimConfig(compute_jitter=0.2, transfer_jitter=0.1, seed=3)

CASES = {
    "one env, graph form, incremental (default)": (1, {"graph": "paper/chainmm"}, 420, 0.0),
    "flat form, incremental, invalid actions truncate": (
        3, {"graph": "paper/chainmm", "observation": "flat", "max_invalid_streak": 4}, 700, 0.2),
    "two graph families and two topologies, shaped": (
        8, {"graph": ["paper/chainmm", "random"], "topology": [2, 4], "reward": "shaped",
            "max_ops": 110, "max_edges": 170}, 260, 0.1),
    "flat form, ffnn, sparse": (3, {"graph": "paper/ffnn", "observation": "flat", "reward": "sparse"}, 420, 0.05),
    "priority queues, makespan reward": (3, {"graph": "pipeline:microbatches=10", "sim_config": FIFO_PRIORITY,
                                             "reward": "makespan"}, 330, 0.1),
    "fixed queues, flat, improvement": (3, {"graph": "paper/chainmm", "observation": "flat", "reward": "improvement",
                                            "sim_config": dg.SimConfig(queue_order="fixed")}, 330, 0.1),
    "link contention and two streams (the event loop), flat": (
        3, {"graph": "paper/chainmm", "observation": "flat", "sim_config": dg.SimConfig(link_model="fifo", streams=2)},
        330, 0.05),
    "jitter in the final run": (3, {"graph": "paper/chainmm", "sim_config": JITTER}, 330, 0.0),
    "a reward called per env": (3, {"graph": "paper/chainmm", "reward": ClippedGain()}, 330, 0.1),
    "a new generated graph every episode, flat": (
        4, {"graph": generated_graph, "max_ops": 40, "max_edges": 120, "observation": "flat"}, 300, 0.05),
}


@pytest.mark.parametrize("case", list(CASES))
def test_equals_single_envs(case: str) -> None:
    num_envs, kwargs, steps, p_invalid = CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InvalidActionWarning)
        seen = compare_rollout(num_envs, kwargs, steps, p_invalid)
    assert seen["terminated"] >= 1 and seen["resets"] >= 1, seen  # the episode ends and autoresets were compared
    if p_invalid >= 0.2:
        assert seen["truncated"] >= 1 and seen["invalid"] >= 10, seen


def test_equals_sync_vector_env_infos() -> None:
    """Gymnasium's own SyncVectorEnv over single envs returns the same infos dicts (keys, masks, dtypes)."""
    kwargs = {"graph": "paper/chainmm", "max_invalid_streak": 3}
    venv = PlacementVectorEnv(num_envs=3, **kwargs)
    sync = gym.vector.SyncVectorEnv([lambda: PlacementEnv(**kwargs) for _ in range(3)])
    obs, infos = venv.reset(seed=7)
    s_obs, s_infos = sync.reset(seed=7)
    rng = np.random.default_rng(0)
    finals = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InvalidActionWarning)
        for _ in range(400):
            for key in s_obs:
                np.testing.assert_array_equal(obs[key], s_obs[key])
            assert_same_infos(infos, s_infos, "infos")
            actions = random_actions(rng, list(sync.call("action_masks")), 0.2)
            obs, rewards, term, trunc, infos = venv.step(actions)
            s_obs, s_rewards, s_term, s_trunc, s_infos = sync.step(actions)
            np.testing.assert_allclose(rewards, s_rewards, rtol=1e-12, atol=0)
            np.testing.assert_array_equal(term | trunc, s_term | s_trunc)
            finals += int(term.sum())
    assert finals >= 1


def test_equals_sync_vector_env_infos_when_every_env_ends_at_once() -> None:
    """Eight envs with valid actions end (and autoreset) in the same steps: their final and reset infos are merged
    key by key (``BatchVectorEnv._add_same_keys``), and equal what Gymnasium's env-by-env merge gives."""
    kwargs = {"graph": "paper/chainmm"}
    venv = PlacementVectorEnv(num_envs=8, **kwargs)
    sync = gym.vector.SyncVectorEnv([lambda: PlacementEnv(**kwargs) for _ in range(8)])
    obs, infos = venv.reset(seed=3)
    _, s_infos = sync.reset(seed=3)
    assert_same_infos(infos, s_infos, "reset")
    rng = np.random.default_rng(1)
    ends = 0
    for step in range(2 * 2 * 76 + 2):  # two episodes of 76 ops, and the autoreset after each
        actions = random_actions(rng, list(sync.call("action_masks")), 0.0)
        obs, _, term, _, infos = venv.step(actions)
        _, _, s_term, _, s_infos = sync.step(actions)
        assert_same_infos(infos, s_infos, f"step {step}")
        ends += int(term.all())
    assert ends == 2


def test_spaces() -> None:
    for form in ("graph", "flat"):
        single = PlacementEnv(graph="paper/chainmm", observation=form)
        venv = PlacementVectorEnv(num_envs=5, graph="paper/chainmm", observation=form)
        assert venv.single_observation_space == single.observation_space
        assert venv.single_action_space == single.action_space
        assert venv.observation_space == gym.vector.utils.batch_space(single.observation_space, 5)
        assert venv.action_space == gym.spaces.MultiDiscrete([single.action_space.n] * 5)
        obs, _ = venv.reset(seed=0)
        assert obs in venv.observation_space
        for key, space in venv.observation_space.spaces.items():
            assert obs[key].shape == space.shape and obs[key].dtype == space.dtype, key
        assert venv.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
        assert venv.action_masks().dtype == np.int8 and venv.action_masks().shape == (5, single.action_space.n)


def test_seeds_per_env_and_reset_mask() -> None:
    kwargs = {"graph": ["paper/chainmm", "random", "pipeline:microbatches=10"], "max_ops": 130, "max_edges": 170}
    venv = PlacementVectorEnv(num_envs=4, **kwargs)
    _, infos = venv.reset(seed=[11, None, 13, 14])
    single = PlacementEnv(**kwargs)
    for i, seed in ((0, 11), (2, 13), (3, 14)):
        assert infos["graph_name"][i] == single.reset(seed=seed)[1]["graph_name"]
    # a list seed equals the int seed spelled out, and a masked reset touches only the marked envs
    a = PlacementVectorEnv(num_envs=3, **kwargs)
    b = PlacementVectorEnv(num_envs=3, **kwargs)
    obs_a, _ = a.reset(seed=5)
    obs_b, _ = b.reset(seed=[5, 6, 7])
    for key in obs_a:
        np.testing.assert_array_equal(obs_a[key], obs_b[key])
    first = [int(np.flatnonzero(m)[0]) for m in a.action_masks()]
    a.step(np.array(first))
    before = a.core.observation(copy=True)
    mask = np.array([False, True, False])
    obs, infos = a.reset(seed=[None, 40, None], options={"reset_mask": mask})
    assert list(infos["_graph_name"]) == [False, True, False]
    want = PlacementEnv(**kwargs).reset(seed=40)[0]
    for key in obs:
        np.testing.assert_array_equal(obs[key][1], want[key])
        np.testing.assert_array_equal(obs[key][[0, 2]], before[key][[0, 2]])


def test_make_vec_through_a_spec_with_the_vector_entry_point() -> None:
    spec = dataclasses.replace(copy.deepcopy(gym.spec("Doppler-Sim-v0")), vector_entry_point=VECTOR_ENTRY_POINT,
                               additional_wrappers=())
    envs = gym.make_vec(spec, num_envs=3, vectorization_mode="vector_entry_point", graph="paper/chainmm",
                        observation="flat")
    assert isinstance(envs, PlacementVectorEnv) and envs.num_envs == 3
    obs, _ = envs.reset(seed=0)
    assert obs["features"].shape == (3, envs.single_observation_space["features"].shape[0])
    assert envs.spec.kwargs["graph"] == "paper/chainmm"


def test_make_vec_by_id() -> None:
    """Doppler-SimVec-v0: make_vec gives the native vector env by default; make gives the single env, unwrapped
    (its action_masks() reachable), equal to Doppler-Sim-v0's."""
    envs = gym.make_vec("Doppler-SimVec-v0", num_envs=2, graph="paper/chainmm")
    assert isinstance(envs, PlacementVectorEnv) and envs.num_envs == 2
    single = gym.make("Doppler-SimVec-v0", graph="paper/chainmm")
    assert isinstance(single, PlacementEnv)
    obs, _ = envs.reset(seed=3)
    ref, _ = gym.make("Doppler-Sim-v0", graph="paper/chainmm").reset(seed=3)
    for key in ref:
        np.testing.assert_array_equal(obs[key][0], ref[key], err_msg=key)
    single.reset(seed=3)
    np.testing.assert_array_equal(single.action_masks(), ref["action_mask"])


@pytest.mark.parametrize(("kwargs", "error", "words"), [
    ({"stragglers": [Straggler(kind="device", index=0, start=0.0, end=1.0, factor=0.5)]}, ValueError, "stragglers"),
    ({"sim_config": dg.SimConfig(memory="track")}, ValueError, "memory tracking"),
    ({"backend": type("Other", (), {"name": "x", "execute": lambda *a: None})()}, ValueError, "custom backend"),
    ({"render_mode": "ansi"}, ValueError, "render_mode"),
    ({"graphs": "paper/ffnn"}, TypeError, "takes no keyword"),
    ({"observation": "pixels"}, ValueError, "observation must be one of"),
    ({"copy_obs": "yes"}, TypeError, "copy_obs"),
    ({"sim_threads": 0}, ValueError, "sim_threads"),
])
def test_refuses_what_it_does_not_support(kwargs: dict, error: type, words: str) -> None:
    with pytest.raises(error, match=words) as caught:
        PlacementVectorEnv(num_envs=2, graph="paper/chainmm", **kwargs)
    if error is ValueError and words not in ("observation must be one of", "sim_threads"):
        assert "vectorization_mode='sync'" in str(caught.value)  # names the single-env path


def test_num_envs_and_actions_are_checked() -> None:
    with pytest.raises(ValueError, match="num_envs"):
        PlacementVectorEnv(num_envs=0)
    venv = PlacementVectorEnv(num_envs=2, graph="paper/chainmm")
    with pytest.raises(RuntimeError, match="reset"):
        venv.step(np.zeros(2, np.int64))
    venv.reset(seed=0)
    with pytest.raises(TypeError, match="integers"):
        venv.step(np.zeros(2))
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        venv.step(np.zeros(3, np.int64))


def test_raise_mode_names_the_env_and_steps_nothing() -> None:
    venv = PlacementVectorEnv(num_envs=3, graph="paper/chainmm", invalid_action="raise")
    obs, _ = venv.reset(seed=0)
    actions = np.array([int(np.flatnonzero(m)[0]) for m in venv.action_masks()])
    actions[1] = venv.core.max_ops  # a device action in the SEL phase
    with pytest.raises(ValueError, match="env 1: action 76 is invalid; valid actions are SEL phase"):
        venv.step(actions)
    now = venv.core.observation(copy=True)
    for key in obs:
        np.testing.assert_array_equal(now[key], obs[key])


def test_invalid_actions_warn_once() -> None:
    venv = PlacementVectorEnv(num_envs=2, graph="paper/chainmm")
    venv.reset(seed=0)
    with pytest.warns(InvalidActionWarning, match="invalid_penalty"):
        venv.step(np.array([-1, -1]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", InvalidActionWarning)
        _, rewards, *_ = venv.step(np.array([-1, -1]))
    np.testing.assert_array_equal(rewards, [-0.01, -0.01])


def test_copy_obs_false_returns_the_live_buffers() -> None:
    venv = PlacementVectorEnv(num_envs=2, graph="paper/chainmm", copy_obs=False)
    obs, _ = venv.reset(seed=0)
    phase = obs["phase"].copy()
    venv.step(np.array([int(np.flatnonzero(m)[0]) for m in venv.action_masks()]))
    assert not np.array_equal(obs["phase"], phase)  # the same arrays, stepped in place
    fresh = PlacementVectorEnv(num_envs=2, graph="paper/chainmm")
    kept, _ = fresh.reset(seed=0)
    fresh.step(np.array([int(np.flatnonzero(m)[0]) for m in fresh.action_masks()]))
    np.testing.assert_array_equal(kept["phase"], phase)  # copies stay as they were

