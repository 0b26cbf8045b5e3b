"""Registration, the SB3 env checker on the placement ids and wrappers, the Gymnasium checker on the wrappers,
render modes and generated graphs, and same-seed determinism through the wrappers (test_env_contract.py runs
the Gymnasium checker and the same-seed rollout over every registered id)."""

from __future__ import annotations

import inspect
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import doppler_gym as dg
from doppler_gym.envs import ENV_IDS, PlacementEnv, PlaceOnly, SelectOnly
from doppler_gym.envs.masked import InvalidActionWarning
from tests.doppler_gym.envs.env_helpers import masked_rollout

# Expected checker warnings: SB3 recommends flat vectors (the 2-D arrays are meant for a graph network
# extractor). The checkers step random unmasked actions, which the env penalises and says so once
# (InvalidActionWarning): that is the env's own notice, not the checker's.
_EXPECTED = ("unconventional shape",)


def _check(fn, env, expected=_EXPECTED, **kwargs) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn(env, **kwargs)
    unexpected = [str(w.message) for w in caught if not issubclass(w.category, InvalidActionWarning)
                  and not any(e in str(w.message) for e in expected)]
    assert not unexpected, unexpected


def _make(env_id: str, wrapper=None, **kwargs) -> gym.Env:
    env = gym.make(env_id, graph="paper/chainmm", **kwargs)
    return wrapper(env) if wrapper is not None else env


CASES = [
    ("Doppler-Sim-v0", None),
    ("Doppler-SimAssign-v0", None),
    ("Doppler-Sim-v0", PlaceOnly),
    ("Doppler-Sim-v0", SelectOnly),
]
CASE_IDS = ["sim", "assign", "place-only", "select-only"]


def test_registered_ids():
    assert ENV_IDS == ("Doppler-Sim-v0", "Doppler-SimAssign-v0")
    for env_id in ENV_IDS:
        spec = gym.spec(env_id)
        assert isinstance(spec.entry_point, str) and spec.entry_point.startswith("doppler_gym.envs.")
    assert gym.spec("Doppler-Real-v0").entry_point == "envs_real.env:make_real_env"  # loaded lazily


def test_import_registers_without_loading_env_modules_or_torch():
    code = (
        "import sys, gymnasium as gym, doppler_gym\n"
        "assert 'Doppler-Sim-v0' in gym.registry and 'Doppler-SimAssign-v0' in gym.registry\n"
        "heavy = ('torch', 'matplotlib', 'doppler_gym.envs.placement')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", out.stdout


def test_default_config_is_what_the_constructor_uses():
    config = PlacementEnv.default_config()
    assert set(config) == set(inspect.signature(PlacementEnv.__init__).parameters) - {"self"}
    implicit, explicit = gym.make("Doppler-Sim-v0"), gym.make("Doppler-Sim-v0", **config)
    obs, info = implicit.reset(seed=0)
    obs2, info2 = explicit.reset(seed=0)
    assert info["graph_name"] == info2["graph_name"] == "paper/ffnn" and obs["n_devices"][0] == 4
    for key in obs:
        np.testing.assert_array_equal(obs[key], obs2[key], err_msg=key)


@pytest.mark.parametrize("wrapper", [PlaceOnly, SelectOnly], ids=["place-only", "select-only"])
def test_gymnasium_check_env_wrappers(wrapper):
    # a wrapper is checked as a wrapper: Gymnasium notes that it differs from env.unwrapped
    _check(
        gym_check_env,
        _make("Doppler-Sim-v0", wrapper),
        expected=(*_EXPECTED, "different from the unwrapped"),
        skip_render_check=True,
    )


@pytest.mark.parametrize(("env_id", "wrapper"), CASES, ids=CASE_IDS)
def test_sb3_check_env(env_id, wrapper):
    _check(sb3_check_env, _make(env_id, wrapper))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_check_env_render_modes(env_id):
    # the render check re-creates the env for every declared mode (ansi and a Gantt image)
    _check(gym_check_env, gym.make(env_id, graph="paper/chainmm").unwrapped)


def test_gymnasium_vector_env():
    envs = gym.make_vec("Doppler-Sim-v0", num_envs=2, vectorization_mode="sync", graph="paper/chainmm")
    obs, _ = envs.reset(seed=0)
    assert obs["action_mask"].shape == (2, 80)
    rng = np.random.default_rng(0)
    for _ in range(10):
        masks = obs["action_mask"]
        obs, _rewards, *_ = envs.step(np.array([rng.choice(np.flatnonzero(m)) for m in masks]))
    envs.close()


def test_gymnasium_check_env_multi_graph_generator():
    env = PlacementEnv(graph=_random_graph, topology=3, max_ops=40, max_edges=400)
    _check(gym_check_env, env, skip_render_check=True)


def _random_graph(rng: np.random.Generator) -> dg.DataflowGraph:
    n = int(rng.integers(12, 41))
    return dg.workloads.make(
        "random", n_ops=n, levels=int(rng.integers(3, 7)), edge_prob=0.2, seed=int(rng.integers(2**31))
    )


def _assert_same(a, b) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


@pytest.mark.parametrize("wrapper", [PlaceOnly, SelectOnly], ids=["place-only", "select-only"])
def test_same_seed_same_rollout_through_the_wrappers(wrapper):
    runs = [masked_rollout(_make("Doppler-Sim-v0", wrapper), np.random.default_rng(7), seed=3) for _ in range(2)]
    _assert_same(runs[0], runs[1])


def test_same_seed_same_graphs_from_generator():
    def graphs(seed):
        env = PlacementEnv(graph=_random_graph, topology=3, max_ops=40, max_edges=400)
        out = [env.reset(seed=seed)[1]["graph_id"]]
        out += [env.reset()[1]["graph_id"] for _ in range(4)]
        return out

    assert graphs(1) == graphs(1)
    assert len(set(graphs(1))) > 1
