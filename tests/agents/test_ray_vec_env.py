"""RayVecEnv against SB3's DummyVecEnv: same env functions and seeds, identical trajectories and training."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray", reason="Ray is not installed: pip install 'doppler-gym[ray]'")

from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402

from agents.distributed import EnvBatch, RayVecEnv, make_env_fn  # noqa: E402
from tests.doppler_gym.parallel.ray_fixture import RAY_ADDRESS, random_dag, ray_local  # noqa: E402, F401

pytestmark = pytest.mark.slow  # starts Ray actors

N_ENVS = 4


def _env_fns(n=N_ENVS):
    """Doppler-Sim-v0 on a new random DAG of 4..8 ops (3 levels) per reset: the reset seeds decide the graphs,
    and episodes of different lengths end at different steps in different envs."""
    return [make_env_fn("Doppler-Sim-v0", graph=random_dag, topology=2, max_ops=10, max_edges=40) for _ in range(n)]


def _assert_obs_equal(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def _rollout(venv, seed, steps):
    """Random valid actions (drawn from the masks with a seeded generator); everything seen, in order."""
    rng = np.random.default_rng(seed)
    venv.seed(seed)
    obs = venv.reset()
    seen = [("reset", obs, venv.reset_infos)]
    for _ in range(steps):
        masks = np.stack(venv.env_method("action_masks"))
        np.testing.assert_array_equal(masks, obs["action_mask"].astype(bool))
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        obs, rewards, dones, infos = venv.step(actions)
        seen.append(("step", obs, rewards, dones, infos, masks))
    return seen


def test_trajectories_equal_dummy_vec_env(ray_local):  # noqa: F811
    dummy = DummyVecEnv(_env_fns())
    ray_venv = RayVecEnv(_env_fns(), envs_per_actor=3, ray_address=RAY_ADDRESS)  # actors of 3 and 1 envs
    try:
        assert ray_venv.bounds == [(0, 3), (3, 4)]
        assert ray_venv.observation_space == dummy.observation_space
        assert ray_venv.action_space == dummy.action_space
        a, b = _rollout(dummy, 11, 40), _rollout(ray_venv, 11, 40)
        n_done = 0
        for x, y in zip(a, b):
            _assert_obs_equal(x[1], y[1])
            if x[0] == "reset":
                continue
            np.testing.assert_array_equal(x[2], y[2])
            assert x[2].dtype == y[2].dtype == np.float32
            np.testing.assert_array_equal(x[3], y[3])
            n_done += int(x[3].sum())
            for ia, ib in zip(x[4], y[4]):
                assert ia.keys() == ib.keys()
                if "terminal_observation" in ia:
                    _assert_obs_equal(ia["terminal_observation"], ib["terminal_observation"])
                    assert ia["makespan"] == ib["makespan"]
                    np.testing.assert_array_equal(ia["assignment"], ib["assignment"])
        assert n_done >= N_ENVS  # every env finished an episode and was reset inside the vector env
        # another seed, other graphs: the seeds were passed on
        c = _rollout(ray_venv, 12, 1)
        assert not all(np.array_equal(c[0][1][k], b[0][1][k]) for k in c[0][1])
        assert ray_venv.get_attr("max_ops") == dummy.get_attr("max_ops") == [10] * N_ENVS
        assert ray_venv.get_attr("max_ops", indices=[3, 1]) == [10, 10]
        assert ray_venv.env_is_wrapped(type(None).__class__) == [False] * N_ENVS
    finally:
        dummy.close()
        ray_venv.close()


def test_maskable_ppo_learns_the_same_on_ray(ray_local):  # noqa: F811
    """Same seed, same env functions: MaskablePPO's weights after one update are equal bit for bit."""
    from sb3_contrib import MaskablePPO

    def train(venv):
        model = MaskablePPO("MultiInputPolicy", venv, n_steps=16, batch_size=32, n_epochs=1, seed=3,
                            policy_kwargs={"net_arch": [16]}, device="cpu")
        model.learn(32)
        venv.close()
        return model.policy.state_dict()

    a = train(DummyVecEnv(_env_fns(2)))
    b = train(RayVecEnv(_env_fns(2), ray_address=RAY_ADDRESS))
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k].numpy(), b[k].numpy()), k


def test_env_batch_in_process_and_errors():
    batch = EnvBatch(_env_fns(2))
    obs, infos, masks = batch.reset([1, 2], [None, None])
    assert len(obs) == len(infos) == len(masks) == 2
    np.testing.assert_array_equal(masks[0], obs[0]["action_mask"].astype(bool))
    env = batch.envs[0]
    with pytest.raises(ValueError, match="returned the same env object twice"):
        EnvBatch([lambda: env, lambda: env])
    with pytest.raises(ValueError, match="envs_per_actor must be an integer >= 1"):
        RayVecEnv(_env_fns(1), envs_per_actor=0)
