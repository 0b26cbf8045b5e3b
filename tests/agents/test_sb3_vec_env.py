"""PlacementVecEnv (the batched SB3 VecEnv) against SB3's DummyVecEnv over single Doppler-Sim-v0 envs."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("stable_baselines3", reason="the SB3 vector env needs the 'agents' extra (stable-baselines3)")
pytest.importorskip("sb3_contrib", reason="MaskablePPO needs the 'agents' extra (sb3-contrib)")

from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402

from agents.sb3_vec_env import PlacementVecEnv  # noqa: E402
from doppler_gym.envs import PlacementEnv  # noqa: E402
from tests.agents.sb3_vec_helpers import (  # noqa: E402
    check_maskable_ppo_runs,
    check_vec_env_interface,
    step_beside_dummy,
)


@pytest.mark.parametrize(("kwargs", "p_invalid"), [
    ({"graph": "paper/chainmm"}, 0.0),
    ({"graph": "paper/chainmm", "observation": "flat", "max_invalid_streak": 4}, 0.2),
    ({"graph": ["paper/chainmm", "random"], "topology": [2, 4], "reward": "shaped", "max_ops": 100,
      "max_edges": 161}, 0.05),
])
def test_equals_dummy_vec_env(kwargs: dict, p_invalid: float) -> None:
    n = 3
    seen = step_beside_dummy(PlacementVecEnv(n, **kwargs), DummyVecEnv([lambda: PlacementEnv(**kwargs)] * n), 420,
                             p_invalid)
    assert seen["dones"] >= 1
    if p_invalid >= 0.2:
        assert seen["truncations"] >= 1


def test_sb3_vec_env_expectations() -> None:
    venv = PlacementVecEnv(4, graph="paper/chainmm")
    single = PlacementEnv(graph="paper/chainmm")
    check_vec_env_interface(venv, single, other_method="teacher_mask")
    assert venv.get_attr("max_ops") == [single.max_ops] * 4  # the batch's attribute, the same for every env
    with pytest.raises(AttributeError, match="no public attribute"):
        venv.get_attr("_rngs")
    with pytest.raises(AttributeError, match="share one batch"):
        venv.set_attr("reward", "sparse")


def test_step_before_reset_is_an_error() -> None:
    venv = PlacementVecEnv(2, graph="paper/chainmm")
    with pytest.raises(RuntimeError, match="reset"):
        venv.step(np.zeros(2, np.int64))


@pytest.mark.usefixtures("one_thread")
def test_maskable_ppo_learns_on_it() -> None:
    check_maskable_ppo_runs(PlacementVecEnv(4, graph="paper/chainmm", observation="flat"))
