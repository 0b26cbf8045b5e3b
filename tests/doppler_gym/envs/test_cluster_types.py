"""``Doppler-Cluster-v0`` on a cluster of several GPU types: type one-hot and head-job speed in the node
features, actions that pick a type, masks that keep jobs off types they cannot run on."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from doppler_gym import cluster as C
from doppler_gym.envs.cluster import ClusterEnv
from doppler_gym.envs.cluster_obs import NODE_FEATURES

# job 0: 1 GPU, 2 s per iteration on a v100, 8 s on a k80; job 1: 2 GPUs, v100 only (k80 left out of its profile)
JOBS = (C.Job(0, 0.0, 100, gpus=1, workload=None, profile={"v100": {1: 2.0}, "k80": {1: 8.0}}),
        C.Job(1, 0.0, 100, gpus=2, workload=None, profile={"v100": {2: 1.0}}))
SIMPLE = {"preemption": False, "sharing": False, "gpu_choices": ("pack",)}

GEN150 = Path(__file__).parents[3] / "benchmarks" / "data" / "gavel" / "t3_gen150.trace"  # Gavel's T3 (MIT)


def _env(**kw) -> ClusterEnv:
    return ClusterEnv(C.JobTrace(JOBS), "k80:4,v100:4/2", invalid_action="raise", **{**SIMPLE, **kw})


def test_node_features_carry_the_gpu_type_and_the_head_jobs_speed():
    env = _env()
    assert env.gpu_types == ("k80", "v100")
    assert env.node_features == (*NODE_FEATURES, "type:k80", "type:v100", "head_speed")
    assert env.observation_space["nodes"].shape == (4, 5)
    obs, _ = env.reset(seed=0)
    nodes = obs["nodes"]
    # nodes 0-1 are k80 servers, 2-3 v100 servers (the order written)
    np.testing.assert_array_equal(nodes[:, 2:4], [[1, 0], [1, 0], [0, 1], [0, 1]])
    # the head job (job 0, first waiting) runs at 2 s / 8 s = 0.25 of its best speed on a k80, 1 on a v100
    np.testing.assert_allclose(nodes[:, 4], [0.25, 0.25, 1.0, 1.0])
    assert obs["nodes"].dtype == np.float32 and env.observation_space.contains(obs)


def test_actions_pick_a_type_and_types_a_job_cannot_run_on_are_masked():
    env = _env()
    env.reset(seed=0)
    assert env.modes == ("pack", "pack:k80", "pack:v100")
    mask = env.action_masks()
    assert mask.dtype == np.int8 and mask.any()
    # job 0: "pack" takes a v100 (its fastest type) so "pack:v100" would repeat it and is masked; "pack:k80" is valid
    assert mask[env.action(0, "pack")] == 1 and mask[env.action(0, "pack:v100")] == 0
    assert mask[env.action(0, "pack:k80")] == 1
    # job 1 cannot run on k80s (its profile leaves them out)
    assert mask[env.action(1, "pack:k80")] == 0 and mask[env.action(1, "pack")] == 1
    env.step(env.action(0, "pack:k80"))  # job 0 on a k80: 100 x 8 s
    _, _, done, _, info = env.step(env.action(1, "pack"))  # job 1 on the two v100s of one server: 100 x 1 s
    while not done:  # (the env advances by itself while advancing is the only valid action)
        _, _, done, _, info = env.step(env.n_actions - 1)
    assert info["result"].jobs["iter_time"].tolist() == [8.0, 1.0]
    assert info["result"].jobs["completion"].tolist() == pytest.approx([800.0, 100.0])


def test_random_masked_rollouts_keep_the_contract_on_a_mixed_cluster():
    trace = C.traces.load_gavel_trace(GEN150, limit=20)
    env = ClusterEnv(trace, "v100:4,p100:4,k80:8/4", invalid_action="raise", max_jobs=8)
    rng = np.random.default_rng(0)
    for seed in range(2):
        obs, _ = env.reset(seed=seed)
        done = trunc = False
        while not (done or trunc):
            mask = obs["action_mask"]
            assert mask.dtype == np.int8 and mask.any() and env.observation_space.contains(obs)
            obs, _, done, trunc, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        assert done and info["result"].n_jobs == 20


def test_a_homogeneous_cluster_keeps_its_observation_and_modes():
    env = ClusterEnv("generated:4", "2x4")
    assert env.modes == ("pack", "spread", "share", "preempt")
    assert env.observation_space["nodes"].shape == (2, len(NODE_FEATURES))


def test_a_mixed_cluster_env_passes_gymnasiums_and_sb3s_checkers():
    from gymnasium.utils.env_checker import check_env

    from doppler_gym.envs.masked import InvalidActionWarning

    trace = C.traces.load_gavel_trace(GEN150, limit=10)
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker", reason="SB3 is in the agents extra")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(ClusterEnv(trace, "v100:4,k80:4/4", max_jobs=4), skip_render_check=True)
        sb3_checker.check_env(ClusterEnv(trace, "v100:4,k80:4/4", max_jobs=4), warn=True)
    # the checkers step unmasked random actions (warned once per env), and SB3 advises flattening 2-D boxes
    # (meant for a set encoder, as in the contract test); nothing else
    other = [str(w.message) for w in caught
             if not issubclass(w.category, InvalidActionWarning) and "unconventional shape" not in str(w.message)]
    assert other == []
