"""Doppler-Cluster-v0: API checks, determinism, FIFO and LAS through the env == dg.cluster.run, hand-computed
preemption, sharing and spreading, the sliding job window, failures and round ticks, the bounded observation,
the rewards per unit of simulated time ("time", "relative"), the mask rules, cluster specs, MaskablePPO."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import doppler_gym as dg
from doppler_gym import cluster as C
from doppler_gym.envs.cluster import CLUSTER_FEATURES, DEFAULT_PREEMPTION_COST, JOB_FEATURES, ClusterEnv
from doppler_gym.envs.cluster_obs import squash
from doppler_gym.envs.cluster_reward import BaselineTimeInSystem, time_in_system
from doppler_gym.envs.registration import CLUSTER_ENV_ID

SIMPLE = {"preemption": False, "sharing": False, "gpu_choices": ("pack",)}


def _rollout(env: gym.Env, policy, seed: int = 0):
    obs, _ = env.reset(seed=seed)
    rewards, actions = [], []
    while True:
        assert (obs["action_mask"] == env.unwrapped.action_masks()).all()
        assert env.observation_space.contains(obs) and obs["action_mask"].any()
        a = policy(obs)
        obs, r, term, trunc, info = env.step(a)
        assert not trunc
        rewards.append(r)
        actions.append(a)
        if term:
            assert env.observation_space.contains(obs) and obs["action_mask"].any()
            return np.array(rewards), actions, info


def _random_policy(seed: int, p_advance: float = 0.0):
    """Uniform over the valid actions; first advances with probability ``p_advance`` (fewer preemptions)."""
    r = np.random.default_rng(seed)

    def policy(obs) -> int:
        if obs["action_mask"][-1] and r.random() < p_advance:
            return len(obs["action_mask"]) - 1
        return int(r.choice(np.flatnonzero(obs["action_mask"])))
    return policy


def _first_valid(obs) -> int:
    """FIFO with backfilling in the simple mode: the earliest-arriving waiting job that fits, else advance."""
    return int(np.flatnonzero(obs["action_mask"])[0])


def _las_policy(env: ClusterEnv, n_gpus: int):
    """dg.cluster's preemptive LAS, acted out through the env: keep the greedy prefix of the order by
    attained service that fits, preempt the running jobs outside it, start the kept waiting ones (packed)."""
    def policy(obs) -> int:
        v = env.job_view
        order = sorted(v.active, key=lambda j: (v.attained[j], v.arrival[j], j))
        keep, budget = [], n_gpus
        for j in order:
            if v.gpus[j] <= budget:
                keep.append(j)
                budget -= v.gpus[j]
        rows = env.job_rows.tolist()
        running = {j for r, j in enumerate(rows) if obs["jobs"][r, 2] == 1}
        for j in rows:
            if j in running and j not in keep and obs["action_mask"][env.action(j, "preempt")]:
                return env.action(j, "preempt")
        for j in keep:
            if j not in running:
                return env.action(j, "pack")
        return env.n_actions - 1
    return policy


def test_registered_with_a_string_entry_point():
    assert CLUSTER_ENV_ID == "Doppler-Cluster-v0"
    assert gym.spec(CLUSTER_ENV_ID).entry_point == "doppler_gym.envs.cluster:ClusterEnv"
    assert isinstance(gym.make(CLUSTER_ENV_ID).unwrapped, ClusterEnv)


@pytest.mark.parametrize("kwargs", [{}, SIMPLE, {"max_jobs": 4, "round_s": 600.0,
                                                  "failures": C.FailureModel(gpu_mtbf=2e5, restart_delay=60.0)}])
def test_gymnasium_and_sb3_check_env(kwargs):
    gym_check_env(ClusterEnv("generated:12", **kwargs), skip_render_check=True)
    sb3_check_env(ClusterEnv("generated:12", **kwargs), warn=True)


def test_spaces_are_fixed_shape_bounded_and_masked():
    env = ClusterEnv("generated:30", max_jobs=6)
    assert env.modes == ("pack", "spread", "share", "preempt")
    assert env.action_space.n == 6 * 4 + 1
    assert len(JOB_FEATURES) == 12 and JOB_FEATURES[-2:] == ("attained_rank", "remaining_rank")
    space = env.observation_space
    assert space["jobs"].shape == (6, 12) and space["nodes"].shape == (2, 2) and space["cluster"].shape == (4,)
    assert len(CLUSTER_FEATURES) == 4
    for key in ("jobs", "nodes", "cluster"):  # finite boxes in [0, 1]: no raw times or counts
        assert space[key].dtype == np.float32
        assert (space[key].low == 0.0).all() and (space[key].high == 1.0).all(), key
    assert space["action_mask"].shape == (25,) and space["action_mask"].dtype == np.int8
    assert env.reset(seed=0)[0]["action_mask"].dtype == np.int8 and env.action_masks().dtype == np.int8
    assert ClusterEnv("generated:30", **SIMPLE).action_space.n == 30 + 1


def test_time_features_are_squashed_by_time_scale():
    assert squash(np.array([0.0, 3600.0, 3 * 3600.0, -5.0]), 3600.0).tolist() == [0.0, 0.5, 0.75, 0.0]
    # one 1-GPU job of 7,200 solo seconds on one GPU, known durations: at t=0 it has 0 age, 0 attained,
    # remaining 7,200 s -> 2/3 with time_scale 3,600 s
    job = C.Job(0, 0.0, 7200, gpus=1, workload=None, profile={"*": {1: 1.0}})
    env = ClusterEnv(C.JobTrace((job,)), C.Cluster((C.Node(1, "v100", None),)), known_durations=True, **SIMPLE)
    obs, _ = env.reset(seed=0)
    row = dict(zip(JOB_FEATURES, obs["jobs"][0].tolist()))
    assert row["present"] == 1 and row["waiting"] == 1 and row["gpus"] == 1.0
    assert row["age"] == 0 and row["attained"] == 0 and row["remaining"] == pytest.approx(2 / 3)
    assert obs["cluster"].tolist() == pytest.approx([1.0, 0.0, 1 / (1 + 1), 0.0])  # 1 job in system, max_jobs 1


def test_same_seed_same_rollout_with_failures():
    kw = {"failures": C.FailureModel(gpu_mtbf=1e4, restart_delay=60.0), "round_s": 1800.0,
          "trace_kwargs": {"checkpoint_every": 100, "checkpoint_cost": 2.0}}
    a = _rollout(ClusterEnv("generated:12", seed=3, **kw), _random_policy(1, 0.7), seed=5)
    b = _rollout(ClusterEnv("generated:12", seed=3, **kw), _random_policy(1, 0.7), seed=5)
    assert a[1] == b[1]
    np.testing.assert_array_equal(a[0], b[0])
    assert a[2]["avg_jct"] == b[2]["avg_jct"] and a[2]["interruptions"] == b[2]["interruptions"]
    assert a[2]["interruptions"] > 0  # failures did happen


@pytest.mark.parametrize("n_jobs", [16, 40])
def test_fifo_through_the_simple_env_reproduces_run_fifo(n_jobs):
    env = gym.make(CLUSTER_ENV_ID, trace=f"generated:{n_jobs}", seed=0, max_jobs=48, **SIMPLE)
    rewards, _, info = _rollout(env, _first_valid)
    ref = dg.cluster.run(env.unwrapped.trace, env.unwrapped.cluster, "fifo", seed=0)
    assert (ref.jobs["first_start"] > ref.jobs["arrival"]).sum() >= 2  # jobs did queue (2 of 16, 34 of 40)
    assert info["avg_jct"] == pytest.approx(ref.avg_jct, rel=1e-12)
    np.testing.assert_array_equal(info["result"].jobs["completion"], ref.jobs["completion"])
    # the return is minus the total JCT in hours (time_scale 3600 s)
    assert rewards.sum() == pytest.approx(-ref.jobs["jct"].sum() / 3600.0, rel=1e-9)
    assert (rewards <= 1e-12).all()


def test_las_acted_out_through_preemptions_reproduces_run_las_with_a_preemption_cost():
    trace = C.traces.generate(20, seed=5, mean_interarrival=120.0)
    cluster = C.Cluster.uniform(1, 8)
    env = ClusterEnv(trace, cluster, max_jobs=20, round_s=60.0, preemption_cost=45.0)
    _, actions, info = _rollout(env, _las_policy(env, 8))
    ref = C.run(trace, cluster, "las", seed=0, preemption_cost=45.0)
    np.testing.assert_allclose(info["result"].jobs["completion"], ref.jobs["completion"], rtol=1e-12)
    n_preempt = sum(1 for a in actions if a < env.n_actions - 1 and a % 4 == 3)
    assert n_preempt >= 5  # the policy did preempt, and each restart paid the restore
    free = C.run(trace, cluster, "las", seed=0)
    assert ref.avg_jct > free.avg_jct


def test_preemption_with_restore_cost_by_hand():
    # One GPU. A: 100 iterations of 1 s from t=0; B: 10 iterations from t=10. Preempt A for B: B ends at 20;
    # A restarts at 20, restores for 5 s, then does its last 90 s: it ends at 115.
    a = C.Job(0, 0.0, 100, gpus=1, workload=None, profile={"*": {1: 1.0}})
    b = C.Job(1, 10.0, 10, gpus=1, workload=None, profile={"*": {1: 1.0}})
    one = C.Cluster((C.Node(1, "v100", None),))
    env = ClusterEnv(C.JobTrace((a, b)), one, preemption_cost=5.0, sharing=False, gpu_choices=("pack",))
    env.reset(seed=0)
    assert env.job_rows.tolist() == [0]
    # A starts; advancing is then the only valid action (A was not running at this event, so it cannot be
    # preempted in it): the env advances by itself to B's arrival at t=10
    obs, *_ = env.step(env.action(0, "pack"))
    assert env.job_view.now == 10.0 and env.job_rows.tolist() == [0, 1]
    assert obs["jobs"][0, 8] == 1.0 and obs["action_mask"][env.action(1, "pack")] == 0  # no free GPU for B
    env.step(env.action(0, "preempt"))
    env.step(env.action(1, "pack"))
    obs, _, term, _, info = env.step(env.n_actions - 1)  # B runs to t=20; A waits on a free GPU
    assert env.job_view.now == 20.0 and obs["action_mask"].tolist() == [1, 0, 0, 0, 0]  # start A: no idling
    obs, _, term, _, info = env.step(env.action(0, "pack"))
    assert term
    np.testing.assert_allclose(info["result"].jobs["completion"], [115.0, 20.0])
    # the same by SRTF in dg.cluster.run (it preempts A at B's arrival)
    ref = C.run(C.JobTrace((a, b)), one, "srtf", seed=0, preemption_cost=5.0)
    np.testing.assert_allclose(ref.jobs["completion"], [115.0, 20.0])
    assert ref.jobs["held"][0] == pytest.approx(105.0)  # the restore holds the GPU


def test_sharing_and_spreading_through_the_env_by_hand():
    # Two 1-GPU jobs of 100 s on one GPU sharing at 0.68 of their speed each: both end at 100 / 0.68.
    jobs = tuple(C.Job(i, 0.0, 100, gpus=1, workload=None, profile={"*": {1: 1.0}}) for i in range(2))
    one = C.Cluster((C.Node(1, "v100", None),))
    env = ClusterEnv(C.JobTrace(jobs), one, interference=C.ParametricInterference(0.68))
    env.reset(seed=0)
    obs, *_ = env.step(env.action(0, "pack"))
    assert obs["nodes"][0].tolist() == [0.0, 1.0] and obs["action_mask"][env.action(1, "share")] == 1
    assert obs["action_mask"][env.action(1, "pack")] == 0
    # then only advancing is valid (neither job ran at this event): the env runs the episode to its end
    _, _, term, _, info = env.step(env.action(1, "share"))
    assert term and info["result"].jobs["completion"] == pytest.approx([100 / 0.68] * 2)
    assert info["utilisation"] == pytest.approx(1.36)
    # A 4-GPU job on two 4-GPU nodes whose uplinks carry 1 GB/s: packed it runs 100 s; spread 2 + 2 it sends
    # 2 x 2e9 B x 2/4 = 2e9 B per 1 s iteration through each node's uplink: half speed, 200 s.
    job = C.Job(0, 0.0, 100, gpus=4, workload=None, profile={"*": {4: 1.0}}, cross_node_bytes=2e9)
    two = C.Cluster.uniform(2, 4, preset=None, node_uplink_bandwidth=1e9)
    for mode, end in (("pack", 100.0), ("spread", 200.0)):
        env = ClusterEnv(C.JobTrace((job,)), two)
        env.reset(seed=0)
        obs, _, term, _, info = env.step(env.action(0, mode))
        assert term and info["result"].jobs["completion"][0] == pytest.approx(end)


def test_sliding_window_over_a_longer_trace():
    env = ClusterEnv("generated:60", max_jobs=4, seed=2, trace_kwargs={"mean_interarrival": 10.0})
    obs, _ = env.reset(seed=0)
    pick = _random_policy(3)
    hidden, total = 0.0, 0.0
    while True:
        assert len(env.job_rows) <= 4 and obs["jobs"][len(env.job_rows):].sum() == 0
        hidden = max(hidden, float(obs["cluster"][3]))
        obs, r, term, trunc, info = env.step(pick(obs))
        total += r
        if term:
            break
    assert hidden > 0  # more active jobs than rows at some event
    res = info["result"]
    assert np.isfinite(res.jobs["completion"]).all() and res.n_jobs == 60
    assert total == pytest.approx(-res.jobs["jct"].sum() / 3600.0, rel=1e-9)


def test_resampled_traces_differ_per_reset_and_repeat_per_seed():
    env = ClusterEnv("generated:10", resample_trace=True)
    env.reset(seed=1)
    t1 = env.trace
    env.reset(seed=2)
    t2 = env.trace
    env.reset(seed=1)
    assert env.trace.jobs == t1.jobs and t1.jobs != t2.jobs


def test_maskable_ppo_learns_a_few_steps():
    model = MaskablePPO("MultiInputPolicy", ClusterEnv("generated:12", max_jobs=6), n_steps=64, batch_size=64,
                        n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=256)
    assert model.num_timesteps >= 256


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"trace": "nope"}, ValueError, "unknown trace 'nope'"),
    ({"trace": "generated:x"}, ValueError, "generated:N"),
    ({"trace": 3}, TypeError, "trace must be"),
    ({"trace": "generated:8", "max_jobs": 0}, ValueError, "max_jobs must be an int >= 1"),
    ({"cluster": 3}, TypeError, "cluster must be"),
    ({"cluster": "2y8"}, ValueError, "not a cluster spec"),
    ({"reward": "sparse"}, ValueError, "reward must be one of"),
    ({"reward": "relative", "reward_baseline": "oracle"}, ValueError, "reward_baseline must be"),
    ({"time_scale": True}, ValueError, "time_scale must be"),
    ({"seed": 1.5}, TypeError, "seed must be an int"),
    ({"time_scale": 0}, ValueError, "time_scale must be"),
    ({"trace": "generated:30", "cluster": dg.cluster.Cluster.uniform(1, 4)}, ValueError, "exceeds the cluster"),
    ({"render_mode": "human"}, ValueError, "no render modes"),
    ({"gpu_choices": ("random",)}, ValueError, "gpu_choices must be"),
    ({"preemption_cost": -1.0}, ValueError, "preemption_cost must be"),
    ({"round_s": 0}, ValueError, "round_s must be"),
    ({"failures": 3}, TypeError, "failures must be"),
    ({"trace": "gavel-msr", "resample_trace": True}, ValueError, "resample_trace"),
])
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ClusterEnv(**kwargs)


# -- rewards per unit of simulated time ---------------------------------------------------------------------------

def test_time_in_system_by_hand():
    arrival = np.array([0.0, 10.0, 50.0])
    completion = np.array([30.0, np.nan, np.nan])  # job 0 done at 30; job 1 running; job 2 not arrived before 50
    # at t=40: job 0 30 s, job 1 30 s, job 2 nothing yet
    assert time_in_system(arrival, completion, 40.0) == 60.0
    # at t=20: job 0 has been in 20 s so far (its completion is later), job 1 10 s
    assert time_in_system(arrival, completion, 20.0) == 30.0
    assert time_in_system(arrival, completion, 0.0) == 0.0
    done = np.array([30.0, 45.0, 80.0])
    base = BaselineTimeInSystem(arrival, done)
    assert base.total == 30.0 + 35.0 + 30.0 and base.at(np.inf) == base.total
    assert base.at(60.0) == 30.0 + 35.0 + 10.0
    with pytest.raises(ValueError, match="unfinished"):
        BaselineTimeInSystem(arrival, completion)


def _scripted(env: ClusterEnv, p_advance: float, seed: int):
    """A random valid policy that also reads the env: returns (rewards, clocks after each step, info)."""
    pick = _random_policy(seed, p_advance)
    obs, info = env.reset(seed=seed)
    rewards, clocks, within = [], [info["now"]], []
    while True:
        before = env.job_view.now
        obs, r, term, trunc, info = env.step(pick(obs))
        assert not trunc
        rewards.append(r)
        clocks.append(info["now"])
        within.append(not term and info["now"] == before)
        if term:
            return np.array(rewards), np.array(within), info


@pytest.mark.parametrize("reward", ["time", "relative"])
def test_steps_that_take_no_simulated_time_earn_exactly_zero(reward):
    env = ClusterEnv("generated:20", max_jobs=20, seed=1, reward=reward, trace_kwargs={"mean_interarrival": 300.0})
    rewards, within, _ = _scripted(env, 0.3, seed=2)
    assert within.sum() >= 20  # many edits within an event (starts, preemptions)
    assert (rewards[within] == 0.0).all()
    assert (rewards[~within] != 0.0).any()


@pytest.mark.parametrize("seed", [0, 3])
def test_time_return_is_minus_the_total_jct(seed):
    # preempting, sharing and spreading at random, with the default 30 s restore: the undiscounted return is
    # -sum(JCT) / time_scale whatever the policy does, and every reward is <= 0
    env = ClusterEnv("generated:24", max_jobs=24, seed=seed, time_scale=1800.0,
                     trace_kwargs={"mean_interarrival": 200.0})
    rewards, _, info = _scripted(env, 0.2, seed=seed)
    assert info["interruptions"] >= 0 and (rewards <= 0).all()
    assert rewards.sum() == pytest.approx(-info["result"].jobs["jct"].sum() / 1800.0, rel=1e-9)


@pytest.mark.parametrize("seed", [0, 4])
def test_relative_return_is_fifo_total_jct_minus_the_agents(seed):
    trace = C.traces.generate(24, seed=seed, mean_interarrival=200.0)
    cluster = C.Cluster.uniform(2, 8)
    env = ClusterEnv(trace, "2x8", max_jobs=24, reward="relative")
    rewards, _, info = _scripted(env, 0.2, seed=seed)
    fifo = dg.cluster.run(trace, cluster, "fifo", seed=0, preemption_cost=DEFAULT_PREEMPTION_COST)
    jct = info["result"].jobs["jct"]
    assert rewards.sum() == pytest.approx((fifo.jobs["jct"].sum() - jct.sum()) / 3600.0, rel=1e-9, abs=1e-9)
    assert abs(rewards.sum()) > 1e-3  # the random policy does differ from FIFO
    assert info["baseline_avg_jct"] == pytest.approx(fifo.avg_jct, rel=1e-12)


def test_relative_reward_is_zero_at_every_step_for_fifo_itself():
    env = ClusterEnv("generated:40", seed=0, max_jobs=48, reward="relative", **SIMPLE)
    rewards, _, info = _rollout(env, _first_valid)
    assert len(rewards) >= 40 and np.abs(rewards).max() < 1e-9
    assert info["avg_jct"] == pytest.approx(info["baseline_avg_jct"], rel=1e-12)


def test_default_preemption_cost_is_30_s_by_hand():
    assert DEFAULT_PREEMPTION_COST == 30.0 and ClusterEnv().preemption_cost == 30.0
    # One GPU. A: 100 iterations of 1 s from t=0; B: 10 from t=10. Preempt A for B: B ends at 20; A restarts at
    # 20, restores for the default 30 s, then does its last 90 s: it ends at 140.
    a = C.Job(0, 0.0, 100, gpus=1, workload=None, profile={"*": {1: 1.0}})
    b = C.Job(1, 10.0, 10, gpus=1, workload=None, profile={"*": {1: 1.0}})
    env = ClusterEnv(C.JobTrace((a, b)), "1x1", sharing=False, gpu_choices=("pack",))
    env.reset(seed=0)
    env.step(env.action(0, "pack"))
    env.step(env.action(0, "preempt"))
    env.step(env.action(1, "pack"))
    env.step(env.n_actions - 1)
    *_, term, _, info = env.step(env.action(0, "pack"))
    assert term
    np.testing.assert_allclose(info["result"].jobs["completion"], [140.0, 20.0])


# -- cluster specs, masks ------------------------------------------------------------------------------------------

def test_cluster_accepts_the_cli_spec():
    assert ClusterEnv(cluster="2x8").cluster == C.Cluster.uniform(2, 8)
    env = gym.make(CLUSTER_ENV_ID, cluster="uniform:4x8:p100", trace="generated:8")
    c = env.unwrapped.cluster
    assert c.n_gpus == 32 and len(c.nodes) == 4 and {n.gpu_type for n in c.nodes} == {"p100"}
    assert env.observation_space["nodes"].shape == (4, 2)


def _two_gpu_env(**kwargs) -> ClusterEnv:
    # A and X: 1 GPU, 1,000 s, from t=0; B: 2 GPUs, 10 s, from t=10; one node of 2 GPUs
    jobs = (C.Job(0, 0.0, 1000, gpus=1, workload=None, profile={"*": {1: 1.0}}),
            C.Job(1, 0.0, 1000, gpus=1, workload=None, profile={"*": {1: 1.0}}),
            C.Job(2, 10.0, 10, gpus=2, workload=None, profile={"*": {2: 1.0}}))
    return ClusterEnv(C.JobTrace(jobs), "1x2", sharing=False, gpu_choices=("pack",), **kwargs)


def test_work_conserving_mask_rule():
    env = _two_gpu_env()
    obs, _ = env.reset(seed=0)
    assert obs["action_mask"][-1] == 0  # nothing runs yet
    obs, *_ = env.step(env.action(0, "pack"))
    assert obs["action_mask"][-1] == 0 and obs["action_mask"][env.action(1, "pack")] == 1  # X fits: no advance
    # without the rule, advancing with a free GPU and X waiting is allowed
    lazy = _two_gpu_env(work_conserving=False)
    lazy.reset(seed=0)
    assert lazy.step(lazy.action(0, "pack"))[0]["action_mask"][-1] == 1
    # starting X leaves advancing alone valid: the env advances by itself to B's arrival at t=10
    obs, *_ = env.step(env.action(1, "pack"))
    assert env.job_view.now == 10.0 and env.job_rows.tolist() == [0, 1, 2]
    m = obs["action_mask"]
    assert m[-1] == 1 and m[env.action(2, "pack")] == 0 and m[env.action(0, "preempt")] == 1  # B does not fit
    # preempt A: its GPU alone is free, B still does not fit, so restarting A there (an undo) is the only start
    # and advancing (with A waiting on a free GPU) is blocked
    m = env.step(env.action(0, "preempt"))[0]["action_mask"]
    assert m[-1] == 0 and m[env.action(0, "pack")] == 1 and m[env.action(2, "pack")] == 0
    # preempt X too: B fits. Restarting A on GPU 0 (pack's pick) undoes its preemption: masked; X's pack also
    # picks GPU 0, a migration, which stays valid; advancing is blocked
    m = env.step(env.action(1, "preempt"))[0]["action_mask"]
    assert np.flatnonzero(m).tolist() == [env.action(1, "pack"), env.action(2, "pack")]


def test_undoing_a_preemption_is_masked_where_another_job_can_start():
    # one GPU: A runs, B arrives at 10; after preempting A, restarting A on its own GPU is masked (B can start)
    a = C.Job(0, 0.0, 100, gpus=1, workload=None, profile={"*": {1: 1.0}})
    b = C.Job(1, 10.0, 10, gpus=1, workload=None, profile={"*": {1: 1.0}})
    env = ClusterEnv(C.JobTrace((a, b)), "1x1", sharing=False, gpu_choices=("pack",))
    env.reset(seed=0)
    env.step(env.action(0, "pack"))
    m = env.step(env.action(0, "preempt"))[0]["action_mask"]
    assert np.flatnonzero(m).tolist() == [env.action(1, "pack")]


@pytest.mark.parametrize("kwargs", [
    {},
    SIMPLE,
    {"reward": "relative", "known_durations": True, "gpu_choices": ("pack",), "sharing": False},
    {"max_jobs": 4, "round_s": 600.0, "failures": C.FailureModel(gpu_mtbf=2e5, restart_delay=60.0),
     "trace_kwargs": {"checkpoint_every": 300, "checkpoint_cost": 2.0}},
    {"cluster": "1x8", "max_jobs": 8, "work_conserving": False, "known_durations": True,
     "trace_kwargs": {"gpu_counts": (1, 2, 4, 8), "gpu_probs": (0.7, 0.1, 0.1, 0.1)}},
    {"cluster": "uniform:4x4:k80", "max_jobs": 10},
])
def test_random_rollouts_stay_in_the_space_with_a_nonzero_int8_mask(kwargs):
    kwargs = dict(kwargs)
    trace_kwargs = {"mean_interarrival": 120.0, **kwargs.pop("trace_kwargs", {})}
    for seed in range(3):
        env = ClusterEnv("generated:30", seed=seed, trace_kwargs=trace_kwargs, **kwargs)
        obs, _ = env.reset(seed=seed)
        pick = _random_policy(seed, p_advance=0.6)
        steps = 0
        while True:
            assert env.observation_space.contains(obs), {k: (v.min(), v.max()) for k, v in obs.items()}
            assert obs["action_mask"].dtype == np.int8 and obs["action_mask"].any()
            assert all(np.isfinite(v).all() for v in obs.values())
            obs, r, term, trunc, _ = env.step(pick(obs))
            assert np.isfinite(r) and not trunc
            steps += 1
            if term:
                assert env.observation_space.contains(obs) and obs["action_mask"].tolist() == [0] * (
                    env.n_actions - 1) + [1]
                break
        assert steps >= env.n_jobs


def test_preempt_only_where_a_waiting_job_does_not_fit():
    # two GPUs: A (1 GPU) from t=0, C (1 GPU) from t=5. At C's arrival C fits on the free GPU: preempting A would
    # make room for no one, so it is masked (and advancing too: C must start); without the rule it is valid.
    jobs = (C.Job(0, 0.0, 100, gpus=1, workload=None, profile={"*": {1: 1.0}}),
            C.Job(1, 5.0, 100, gpus=1, workload=None, profile={"*": {1: 1.0}}))
    for preempt_to_fit, valid in ((True, 0), (False, 1)):
        env = ClusterEnv(C.JobTrace(jobs), "1x2", sharing=False, gpu_choices=("pack",), preempt_to_fit=preempt_to_fit)
        env.reset(seed=0)
        m = env.step(env.action(0, "pack"))[0]["action_mask"]
        assert env.job_view.now == 5.0 and env.preempt_to_fit is preempt_to_fit
        assert m[env.action(0, "preempt")] == valid and m[env.action(1, "pack")] == 1 and m[-1] == 0


def test_trace_seed_names_the_generated_trace():
    kw = {"mean_interarrival": 300.0}
    assert ClusterEnv("generated:10", seed=7, trace_kwargs=kw).trace_seed == 7
    assert ClusterEnv(C.traces.generate(5, seed=1)).trace_seed is None
    env = ClusterEnv("generated:10", resample_trace=True, trace_kwargs=kw)
    seeds = set()
    for s in range(3):
        env.reset(seed=s)
        assert env.trace.jobs == C.traces.generate(10, seed=env.trace_seed, **kw).jobs
        seeds.add(env.trace_seed)
    assert len(seeds) == 3
