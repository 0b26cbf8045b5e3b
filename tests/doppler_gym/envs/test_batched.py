"""The shared pieces of the native vector envs (doppler_gym/envs/batched.py): seeds, reset masks, action checks and
the vector info merge, the merge against Gymnasium's own ``VectorEnv._add_info`` (the reference)."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import VectorEnv

from doppler_gym.envs.batched import BatchVectorEnv, StepResult, batch_actions, env_seeds, masked_rows, shown_actions


class ScriptedCore:
    """A stand-in batched core whose step returns the infos it is given (no observations, every reward 0)."""

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs
        self.single_observation_space = spaces.Box(0, 1, (2,))
        self.single_action_space = spaces.Discrete(3)
        self.next_infos: dict[int, dict] = {}

    def step(self, actions: object, active: np.ndarray | None = None) -> StepResult:
        n = self.num_envs
        return StepResult(np.zeros(n), np.zeros(n, bool), np.zeros(n, bool), self.next_infos)

    def observation(self, copy: bool | None = None) -> dict[str, np.ndarray]:
        return {}


class ScriptedVectorEnv(BatchVectorEnv):
    """A :class:`BatchVectorEnv` over a :class:`ScriptedCore` (no env is ever reset here)."""

    def _reset_envs(self, rows, seeds, options, autoreset):
        return [{} for _ in rows]


def merged(num_envs: int, env_infos: list[tuple[int, dict]]) -> dict:
    """The infos :meth:`BatchVectorEnv.step` returns when its core's step gives ``env_infos``."""
    core = ScriptedCore(num_envs)
    core.next_infos = dict(env_infos)
    return ScriptedVectorEnv(core).step(np.zeros(num_envs, np.int64))[4]


class GymMerge(VectorEnv):
    """Gymnasium's own merge (``VectorEnv._add_info``), the reference."""

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs

    def merge(self, env_infos: list[tuple[int, dict]]) -> dict:
        out: dict = {}
        for i, info in env_infos:
            out = self._add_info(out, info, i)
        return out


def assert_same_merge(got: dict, want: dict, where: str = "infos") -> None:
    assert got.keys() == want.keys(), f"{where}: {sorted(got)} != {sorted(want)}"
    for key, w in want.items():
        if isinstance(w, dict):
            assert_same_merge(got[key], w, f"{where}[{key!r}]")
            continue
        assert got[key].dtype == w.dtype and got[key].shape == w.shape, f"{where}[{key!r}]"
        for a, b in zip(got[key], w):
            assert np.array_equal(a, b) if isinstance(b, np.ndarray) else a == b, f"{where}[{key!r}]"


def test_seeds_as_sync_vector_env_reads_them() -> None:
    assert env_seeds(None, 3, "X.reset") == [None, None, None]
    assert env_seeds(7, 3, "X.reset") == [7, 8, 9]
    assert env_seeds(np.int64(7), 2, "X.reset") == [7, 8]
    assert env_seeds([4, None, 1], 3, "X.reset") == [4, None, 1]
    with pytest.raises(ValueError, match=r"X.reset: seed must be None, an int or 3 seeds \(one per env\), got 2"):
        env_seeds([1, 2], 3, "X.reset")


def test_masked_rows() -> None:
    np.testing.assert_array_equal(masked_rows(None, 3, "X.reset"), [0, 1, 2])
    np.testing.assert_array_equal(masked_rows(np.array([False, True, True]), 3, "X.reset"), [1, 2])
    for bad in (np.array([0, 1, 1]), np.array([True, False]), np.zeros(3, bool)):
        with pytest.raises(ValueError, match=r"X.reset: options\['reset_mask'\] must be a \(3,\) bool array"):
            masked_rows(bad, 3, "X.reset")


def test_batch_actions_and_shown_actions() -> None:
    got = batch_actions([3, 0], 2, "X.step", "an op id")
    assert got.dtype == np.int64 and got.tolist() == [3, 0]
    with pytest.raises(TypeError, match=r"X.step: actions must be integers \(an op id\), one per env; got dtype float"):
        batch_actions(np.zeros(2), 2, "X.step", "an op id")
    with pytest.raises(ValueError, match=r"X.step: actions must have shape \(2,\) \(one per env\), got shape \(3,\)"):
        batch_actions(np.zeros(3, np.int64), 2, "X.step", "an op id")
    row = np.zeros(30, np.int8)
    row[[2, 5]] = 1
    assert shown_actions(row) == "2, 5"
    assert shown_actions(np.ones(30, np.int8)) == ", ".join(str(i) for i in range(20)) + ", ..."


def test_info_merge_equals_gymnasiums() -> None:
    """Same-shape infos in any order, nested dicts and final_obs: the merge (its fast path included) returns what
    Gymnasium's does, key for key, mask for mask."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 6))
        env_infos = []
        for i in sorted(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False).tolist()):
            info = {"now": float(rng.random()), "done": bool(rng.random() < 0.5), "name": f"g{i}",
                    "vec": rng.random(3), "nested": {"k": int(rng.integers(9))}}
            if rng.random() < 0.3:
                info["final_obs"] = rng.random(2)
            if rng.random() < 0.5:
                info["sometimes"] = int(rng.integers(9))
            env_infos.append((i, info))
        assert_same_merge(merged(n, env_infos), GymMerge(n).merge(env_infos))


def test_info_arrays_of_other_shapes_become_object_arrays() -> None:
    """Per-op entries of graphs of different sizes: an object array holding each env's own array (Gymnasium's merge
    would fail); the mask marks the envs that have one."""
    a, b = np.arange(3), np.arange(5)
    infos = merged(3, [(0, {"order": a}), (2, {"order": b})])
    assert infos["order"].dtype == object and infos["order"][1] is None
    np.testing.assert_array_equal(infos["order"][0], a)
    np.testing.assert_array_equal(infos["order"][2], b)
    assert infos["_order"].tolist() == [True, False, True]
