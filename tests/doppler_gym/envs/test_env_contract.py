"""The contract every registered env of this project keeps, run over Gymnasium's registry (as Gymnasium's own
``tests/envs`` do): the env checker, same seed -> same trajectory, int8 masks that agree with
``obs["action_mask"]`` and always leave a valid action, invalid actions penalised (state unchanged) or raised,
an error naming ``reset()`` after the end, ``TypeError`` for a non-integer action
(:mod:`doppler_gym.envs.masked`)."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

from doppler_gym.cluster import Cluster
from doppler_gym.comm import CommTopology
from doppler_gym.envs.masked import InvalidActionWarning
from tests.doppler_gym.envs.env_helpers import RAW, make_toy
from tests.envs_real.real_helpers import cost_only_graph

PACKAGES = ("doppler_gym.", "envs_real.")  # entry points of this project's ids


def _line3() -> CommTopology:
    """GPUs a - b - c, both directions, 1 GB/s links: one 1 GB chunk per link per 1 s epoch."""
    return CommTopology(
        name="line3", node_names=("a", "b", "c"), is_switch=np.zeros(3, bool), copy_capable=np.ones(3, bool),
        src=np.array([0, 1, 1, 2]), dst=np.array([1, 2, 0, 1]), capacity=np.full(4, 1e9), alpha=np.zeros(4),
    )


# small instances and short episodes, one row per registered id
KWARGS: dict[str, dict[str, Any]] = {
    "Doppler-Sim-v0": {"graph": make_toy(), "topology": 2, "sim_config": RAW},
    "Doppler-SimAssign-v0": {"graph": make_toy(), "topology": 2, "sim_config": RAW},
    "Doppler-SimVec-v0": {"graph": make_toy(), "topology": 2, "sim_config": RAW},
    "Doppler-Collective-v0": {"topology": _line3(), "collective": "allgather", "epoch": 1.0, "buffer_bytes": 3e9},
    "Doppler-Cluster-v0": {"trace": "generated:5", "cluster": Cluster.uniform(2, 4), "max_jobs": 4},
    "Doppler-ClusterVec-v0": {"trace": "generated:5", "cluster": Cluster.uniform(2, 4), "max_jobs": 4},
    "Doppler-Real-v0": {"graph": cost_only_graph(), "devices": "cpu:2", "topology": 2, "calibrate": False,
                        "repeats": 1, "warmup": 0, "progress": False},
}
MEASURED = {"Doppler-Real-v0"}  # the final reward and info come from a timed run: not reproducible
NEEDS = {"Doppler-Real-v0": "torch"}  # a module the id needs; skipped with the reason when it is missing
# make_real_env's note on units (calibrate=False in KWARGS) when the checker makes the env again from its spec
OWN_NOTES = ("so the reward mixes units",)
# SB3's checker's advice: 2-D arrays are meant for a graph network, not flattened
CHECKER_ADVICE = ("unconventional shape", *OWN_NOTES)


def _package_ids() -> list[str]:
    ids = []
    for env_id, spec in gym.registry.items():
        entry = spec.entry_point
        module = entry if isinstance(entry, str) else getattr(entry, "__module__", "")
        if module.startswith(PACKAGES):
            ids.append(env_id)
    return sorted(ids)


IDS = _package_ids()


def _make(env_id: str, **overrides: Any) -> gym.Env:
    if env_id in NEEDS:
        pytest.importorskip(NEEDS[env_id], reason=f"{env_id} needs {NEEDS[env_id]}, from the real extra: "
                            f"pip install -e '.[real]'")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # make_real_env(calibrate=False) warns about units
        return gym.make(env_id, **{**KWARGS[env_id], **overrides})


def _checker_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    """The texts of ``caught`` but the env's :class:`InvalidActionWarning` (the checkers step random actions,
    unmasked, and the env says once that it penalised one: doppler_gym.envs.masked) and :data:`OWN_NOTES`."""
    return [str(w.message) for w in caught if not issubclass(w.category, InvalidActionWarning)
            and not any(note in str(w.message) for note in OWN_NOTES)]


def _mask(env: gym.Env) -> np.ndarray:
    return env.get_wrapper_attr("action_masks")()


def _mask_rows(env: gym.Env) -> np.ndarray:
    """The mask as one row per choice: ``(1, n)`` for ``Discrete(n)``, ``(len(nvec), max(nvec))`` for MultiDiscrete."""
    space = env.action_space
    if isinstance(space, spaces.Discrete):
        return _mask(env)[None, :]
    return _mask(env).reshape(len(space.nvec), -1)


def _valid_action(env: gym.Env, rng: np.random.Generator) -> int | np.ndarray:
    rows = [rng.choice(np.flatnonzero(row)) for row in _mask_rows(env)]
    return int(rows[0]) if isinstance(env.action_space, spaces.Discrete) else np.array(rows, np.int64)


def _invalid_actions(env: gym.Env) -> list[int | np.ndarray]:
    """Actions the env must reject now: for Discrete(n), the first masked-out index, -1 and n; for
    MultiDiscrete, an entry past its range."""
    space = env.action_space
    if isinstance(space, spaces.Discrete):
        masked_out = np.flatnonzero(_mask(env) == 0)
        assert masked_out.size, "no masked-out action to try"
        return [int(masked_out[0]), -1, int(space.n)]
    action = np.zeros(len(space.nvec), np.int64)
    action[0] = space.nvec[0]
    return [action]


def _comparable(info: dict) -> dict:
    """The numbers, strings and numeric arrays of an info dict (objects such as a trace are left out)."""
    def plain(v: Any) -> bool:
        scalar = isinstance(v, (bool, int, float, str, np.integer, np.floating))
        return scalar or (isinstance(v, np.ndarray) and v.dtype.kind in "biuf")

    return {k: v for k, v in info.items() if plain(v)}


def _rollout(env: gym.Env, seed: int) -> list[tuple]:
    """One seeded episode of uniformly random valid actions, checking the mask contract at every state;
    returns ``(action, obs, reward, terminated, truncated, info)`` per step (reset first)."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    steps: list[tuple] = [(None, obs, 0.0, False, False, _comparable(info))]
    mask_space = env.observation_space.spaces.get("action_mask") if isinstance(env.observation_space, spaces.Dict) \
        else None
    assert mask_space is None or mask_space.dtype == np.int8
    for _ in range(10_000):
        mask = _mask(env)
        assert mask.dtype == np.int8, f"action_masks() is {mask.dtype}, not int8"
        assert env.observation_space.contains(obs)
        if mask_space is not None:
            assert obs["action_mask"].dtype == np.int8
            np.testing.assert_array_equal(obs["action_mask"], mask, err_msg="obs['action_mask'] != action_masks()")
        assert _mask_rows(env).any(axis=1).all(), "a state without a valid action"
        if isinstance(env.action_space, spaces.Discrete):  # Gymnasium's own masked sampling takes the mask as it is
            assert mask[env.action_space.sample(mask=mask)] == 1
        action = _valid_action(env, rng)
        obs, reward, terminated, truncated, info = env.step(action)
        steps.append((action, obs, reward, terminated, truncated, _comparable(info)))
        if mask_space is not None:  # the terminal observation too: a masked policy may be handed it
            assert obs["action_mask"].any(), "an observation whose mask is all zero"
        assert not info.get("invalid_action"), "a masked-valid action was rejected"
        if terminated or truncated:
            return steps
    raise AssertionError("the episode did not end in 10,000 steps")


def _assert_same(a: Any, b: Any, where: str) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        assert a == b, where


def _assert_unchanged(before: dict, after: dict) -> None:
    for k in before:
        np.testing.assert_array_equal(after[k], before[k], err_msg=f"obs[{k!r}] changed")


def test_the_table_covers_every_registered_id():
    assert set(IDS) == set(KWARGS), f"add small-instance kwargs for {sorted(set(IDS) ^ set(KWARGS))} to KWARGS"


@pytest.mark.parametrize("env_id", IDS)
def test_env_checker(env_id):
    env = _make(env_id)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=True)
    unexpected = [m for m in _checker_warnings(caught) if not any(a in m for a in CHECKER_ADVICE)]
    assert not unexpected, unexpected


@pytest.mark.parametrize("env_id", IDS)
def test_no_checker_warnings_at_all(env_id):
    """Finite, O(1) Box bounds and nothing else to advise: Gymnasium's ``check_env`` and, through ``gym.make``,
    its ``PassiveEnvChecker`` over a whole masked episode warn about nothing (``test_env_checker`` tolerates
    the advice this check will not)."""
    env = _make(env_id)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=True)
    assert not _checker_warnings(caught), _checker_warnings(caught)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _rollout(_make(env_id), seed=0)  # valid actions only: no InvalidActionWarning either
    assert not [str(w.message) for w in caught], [str(w.message) for w in caught]


@pytest.mark.parametrize("env_id", IDS)
def test_same_seed_same_trajectory_and_mask_contract(env_id):
    runs = [_rollout(_make(env_id), seed=3) for _ in range(2)]
    if env_id in MEASURED:  # the last step's reward and info hold wall-clock figures
        runs = [[s if i < len(run) - 1 else s[:2] + s[3:5] for i, s in enumerate(run)] for run in runs]
    _assert_same(runs[0], runs[1], env_id)


@pytest.mark.parametrize("env_id", IDS)
def test_invalid_actions_penalized_leave_the_state_unchanged_then_truncate(env_id):
    env = _make(env_id, invalid_action="penalize", invalid_penalty=-0.25, max_invalid_streak=4)
    obs, _ = env.reset(seed=0)
    mask = _mask(env)
    bad_actions = _invalid_actions(env)
    for streak in range(1, 5):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            after, reward, terminated, truncated, info = env.step(bad_actions[(streak - 1) % len(bad_actions)])
        said = [w for w in caught if issubclass(w.category, InvalidActionWarning)]
        assert len(said) == (streak == 1), "the first invalid action of the env warns, and only that one"
        assert info["invalid_action"] is True and info["invalid_streak"] == streak
        assert not terminated and truncated == (streak == 4)  # the fourth in a row truncates
        if truncated:  # the episode ends: the reward may add the env's truncation term (missing deliveries)
            assert reward <= -0.25
            break
        assert reward == -0.25
        _assert_unchanged(obs, after)
        np.testing.assert_array_equal(_mask(env), mask)
    with pytest.raises(RuntimeError, match=r"call reset\(\)"):
        env.step(env.action_space.sample())


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.filterwarnings("ignore::doppler_gym.envs.masked.InvalidActionWarning")
def test_a_valid_action_ends_the_invalid_streak(env_id):
    env = _make(env_id, invalid_action="penalize", max_invalid_streak=2)
    env.reset(seed=0)
    env.step(_invalid_actions(env)[0])
    *_, terminated, truncated, info = env.step(_valid_action(env, np.random.default_rng(0)))
    assert not info.get("invalid_action")
    if terminated or truncated:  # a one-step env: the next episode starts a new streak
        env.reset(seed=0)
    *_, truncated, info = env.step(_invalid_actions(env)[0])
    assert info["invalid_streak"] == 1 and not truncated


@pytest.mark.parametrize("env_id", IDS)
def test_invalid_actions_raise_in_raise_mode(env_id):
    env = _make(env_id, invalid_action="raise")
    env.reset(seed=0)
    mask = _mask(env)
    for bad in _invalid_actions(env):
        with pytest.raises(ValueError):
            env.step(bad)
        np.testing.assert_array_equal(_mask(env), mask)
    *_, info = env.step(_valid_action(env, np.random.default_rng(0)))  # the episode goes on
    assert not info.get("invalid_action")


@pytest.mark.parametrize("env_id", IDS)
def test_step_after_the_end_or_before_reset_names_reset(env_id):
    env = _make(env_id)
    with pytest.raises(RuntimeError, match=r"call reset\(\)"):
        env.unwrapped.step(env.action_space.sample())
    _rollout(env, seed=0)
    with pytest.raises(RuntimeError, match=r"call reset\(\)"):
        env.step(env.action_space.sample())


@pytest.mark.parametrize("env_id", IDS)
def test_a_non_integer_action_is_a_type_error(env_id):
    env = _make(env_id)
    env.reset(seed=0)
    space = env.action_space
    if isinstance(space, spaces.Discrete):
        bad_actions = [0.5, np.float32(1.0), "1", True, np.array([0, 1])]
    else:
        bad_actions = [np.zeros(space.shape, np.float64), np.zeros(space.shape, bool)]
    for bad in bad_actions:
        with pytest.raises(TypeError, match="integer"):
            env.step(bad)
