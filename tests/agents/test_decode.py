"""agents.decode: the direct decode against stepping Doppler-Sim-v0 with the same policy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import doppler_gym as dg
from agents.decode import TIE_ATOL, DirectDecoder, NumpyHeads, decode, instance_context
from agents.policy import DopplerPolicy
from agents.training.rollout import decode as env_decode
from doppler_gym.envs.context import build_context
from doppler_gym.sim.costs import Costs
from doppler_gym.sim.estimate import EstimatedSchedule
from tests.agents.policy_helpers import make_env, random_dag

pytestmark = pytest.mark.usefixtures("one_thread")


def sharp_policy(env, seed: int = 0, **kwargs) -> DopplerPolicy:
    """A random DopplerPolicy whose scores spread over the clip range (the init's last layers have
    gain 0.01, which would leave every score near 0)."""
    torch.manual_seed(seed)
    policy = DopplerPolicy(env.observation_space, env.action_space, lambda _: 1e-3, **kwargs)
    with torch.no_grad():
        for head in (policy.sel_head, policy.plc_head):
            head.tail[-1].weight.mul_(300.0)
    policy.set_training_mode(False)
    return policy


CASES = [  # distinct random costs: no two ops or devices tie, so the greedy actions are unique
    (random_dag(14, seed=0), 2, {}),
    (random_dag(16, edge_prob=0.2, seed=1), 3, {"plc_affinity": True}),
    (random_dag(12, edge_prob=0.5, seed=2), 4, {"id_features": 4}),
    (random_dag(18, edge_prob=0.3, seed=3), "p100x4", {"plc_affinity": True}),
]


@pytest.mark.parametrize("graph, topology, kwargs", CASES)
def test_greedy_decode_takes_the_env_greedy_actions(graph, topology, kwargs):
    env = make_env(graph=graph, topology=topology)
    policy = sharp_policy(env, **kwargs)
    info = env_decode(policy, env, greedy=True, seed=0)
    g = env.unwrapped.graph
    out = decode(policy, g, topology, samples=2, seed=3)
    np.testing.assert_array_equal(out.orders[0], info["order"])
    np.testing.assert_array_equal(out.assignments[0], info["assignment"])
    assert out.estimated[0] == pytest.approx(info["estimated_makespan"], rel=1e-12)
    # a policy taken to other padding sizes (8 devices) decodes the same: no weight depends on them
    env8 = make_env(graph=graph, topology=topology, max_devices=8, max_ops=g.n_ops + 5)
    out8 = decode(policy.transfer_to(env8), g, topology)
    np.testing.assert_array_equal(out8.assignments[0], info["assignment"])


@pytest.mark.parametrize("graph, topology", [("paper/chainmm", 4), (dg.workloads.make("ffnn", layers=2), "p100x4")])
def test_every_greedy_action_is_an_argmax_of_the_env_scores_on_symmetric_graphs(graph, topology):
    # chainmm and ffnn have ops (and empty devices) with identical inputs: their scores tie exactly in
    # exact arithmetic, and the env's float32 matmuls break those ties by rounding noise that depends
    # on the row's position in the batch. So replay the direct decode in the env and check that each
    # action scores within TIE_ATOL of the env's best valid action.
    env = make_env(graph=graph, topology=topology)
    policy = sharp_policy(env, plc_affinity=True)
    obs, _ = env.reset(seed=0)
    out = decode(policy, env.unwrapped.graph, topology)
    n_max = env.unwrapped.max_ops
    actions = []
    for v in out.orders[0]:
        actions += [int(v), n_max + int(out.assignments[0][v])]
    gaps = []
    for a in actions:
        with torch.no_grad():
            scores = policy.action_logits(obs)[0].double().numpy()
        valid = obs["action_mask"].astype(bool)
        gaps.append(scores[valid].max() - scores[a])
        assert valid[a]
        obs, _, terminated, _, info = env.step(a)
    assert terminated and max(gaps) <= TIE_ATOL
    assert out.estimated[0] == pytest.approx(info["estimated_makespan"], rel=1e-12)


def test_sampled_rows_are_valid_seeded_and_their_estimate_replays():
    graph = random_dag(15, seed=4)
    env = make_env(graph=graph, topology=3)
    policy = sharp_policy(env, seed=1)
    a = decode(policy, graph, 3, samples=6, greedy=False, seed=7)
    b = decode(policy, graph, 3, samples=6, greedy=False, seed=7)
    c = decode(policy, graph, 3, samples=6, greedy=False, seed=8)
    np.testing.assert_array_equal(a.assignments, b.assignments)
    np.testing.assert_array_equal(a.orders, b.orders)
    assert not np.array_equal(a.orders, c.orders) or not np.array_equal(a.assignments, c.assignments)
    assert len({tuple(r) for r in a.assignments}) > 1  # sharp but not deterministic
    pos = np.empty(graph.n_ops, np.int64)
    for row in range(6):
        order, assignment = a.orders[row], a.assignments[row]
        pos[order] = np.arange(graph.n_ops)
        assert np.all(pos[graph.src] < pos[graph.dst])  # a topological order
        assert assignment.min() >= 0 and assignment.max() < 3
        es = EstimatedSchedule(graph, dg.Topology.uniform(3), dg.instances.default_config(graph), "fixed")
        for v in order:
            es.place(int(v), int(assignment[v]))
        assert a.estimated[row] == pytest.approx(es.makespan / dg.SimConfig.reference().time_divisor, rel=1e-12)
        # plc_probs: a distribution per op, largest where a near-deterministic policy put it
        np.testing.assert_allclose(a.plc_probs[row].sum(1), 1.0, rtol=1e-5)


def test_sampling_follows_the_policy_distribution():
    # one op per step is sampled from softmax(scores): on a graph of independent ops with 2 devices,
    # the share of samples that put op 0 first must match the policy's first-step SEL softmax
    graph = dg.DataflowGraph(src=np.zeros(0, np.int64), dst=np.zeros(0, np.int64),
                             flops=np.array([1.0, 2.0, 3.0]), out_bytes=np.ones(3), name="three", units="paper")
    env = make_env(graph=graph, topology=2)
    torch.manual_seed(0)
    policy = DopplerPolicy(env.observation_space, env.action_space, lambda _: 1e-3)
    with torch.no_grad():
        policy.sel_head.tail[-1].weight.mul_(60.0)
    policy.set_training_mode(False)
    obs, _ = env.reset(seed=0)
    with torch.no_grad():
        logits = policy.action_logits(obs)[0, :3].double()
    want = torch.softmax(logits, 0).numpy()
    out = decode(policy, graph, 2, samples=3000, greedy=False, seed=0)
    got = np.bincount(out.orders[:, 0], minlength=3) / 3000
    np.testing.assert_allclose(got, want, atol=0.03)  # 3000 draws: std <= 0.009


def test_instance_context_equals_build_context():
    for graph, topo in ((random_dag(10, seed=3), dg.Topology.uniform(3)),
                        (dg.workloads.make("ffnn", layers=2), dg.Topology.preset("p100x4"))):
        config = dg.instances.default_config(graph)
        a, b = instance_context(graph, topo, config), build_context(graph, topo, config)
        for name in ("op_features", "edge_attr", "device_static", "in_degree", "comp", "comm"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
        assert (a.scale, a.graph_id, a.succ, a.time_divisor) == (b.scale, b.graph_id, b.succ, b.time_divisor)


def test_numpy_heads_refuse_a_policy_they_do_not_implement():
    env = make_env(graph=random_dag(6, seed=0), topology=2)
    policy = sharp_policy(env)
    NumpyHeads(policy)  # the real architecture passes its own check
    policy.plc_head.tail[0] = torch.nn.ReLU()
    with pytest.raises(TypeError, match="update its numpy heads"):
        NumpyHeads(policy)


def test_bad_inputs_are_clear_errors():
    env = make_env(graph=random_dag(6, seed=0), topology=2)
    policy = sharp_policy(env)
    with pytest.raises(TypeError, match="DopplerPolicy"):
        decode(object(), random_dag(6, seed=0), 2)
    with pytest.raises(ValueError, match="nothing to decode"):
        decode(policy, random_dag(6, seed=0), 2, greedy=False, samples=0)
    with pytest.raises(ValueError, match="samples"):
        DirectDecoder(policy, random_dag(6, seed=0), 2).run(samples=-1)


@pytest.mark.parametrize("kwargs", [{"plc_affinity": True}, {"heuristic_prior": True}])
def test_single_episode_path_equals_the_lockstep_rows(kwargs):
    # run() decodes K == 1 on its own path; with K > 1 it runs the lockstep batch. Greedy rows draw no
    # noise, so the lockstep's row 1 (greedy + 1 sample) consumes the same Gumbel draws as a lone
    # sampled episode with that seed: both rows must take the single-episode decodes' actions (the
    # probabilities agree to float32 rounding: a batch of K rows rounds its matmuls differently).
    graph = random_dag(24, edge_prob=0.25, seed=5)
    env = make_env(graph=graph, topology=3)
    policy = sharp_policy(env, seed=2, **kwargs)
    dec = DirectDecoder(policy, graph, 3)
    both = dec.run(samples=1, greedy=True, seed=11)
    for row, one in ((0, dec.run()), (1, dec.run(samples=1, greedy=False, seed=11))):
        assert one.assignments.shape == (1, graph.n_ops) and one.greedy == (row == 0)
        np.testing.assert_array_equal(one.orders[0], both.orders[row])
        np.testing.assert_array_equal(one.assignments[0], both.assignments[row])
        np.testing.assert_allclose(one.plc_probs[0], both.plc_probs[row], rtol=1e-4, atol=1e-7)
        assert one.estimated[0] == both.estimated[row]


def test_estimated_schedule_device_features_match_their_definition():
    # brute force from the docstring's definition, on random placements in a random topological order,
    # across a reset (the schedule keeps list mirrors of its state for this per-op work)
    graph = random_dag(30, edge_prob=0.2, seed=6)
    topo = dg.Topology.preset("p100x4")
    es = EstimatedSchedule(graph, topo, dg.instances.default_config(graph), "fixed")
    rng = np.random.default_rng(0)
    costs = Costs.of(graph, topo, dg.instances.default_config(graph))
    lat, inv_bw = costs.latency, costs.inv_bw
    for _ in range(2):
        es.reset()
        end, start, dev = np.zeros(graph.n_ops), np.zeros(graph.n_ops), np.full(graph.n_ops, -1)
        avail, work = np.zeros(4), np.zeros(4)
        for v in range(graph.n_ops):  # i < j edges: op id order is topological
            want = np.zeros((4, 5))
            want[:, 0] = work
            want[:, 4] = avail
            preds = [int(p) for p in graph.predecessors(v)]
            for d in range(4):
                on_d = [p for p in preds if dev[p] == d]
                want[d, 1] = sum(es.comp_time[p, d] for p in on_d)
                want[d, 2] = min((start[p] for p in on_d), default=0.0)
                want[d, 3] = max((end[p] for p in on_d), default=0.0)
                for p in preds:
                    hop = 0.0 if dev[p] == d else lat[dev[p], d] + graph.out_bytes[p] * inv_bw[dev[p], d]
                    want[d, 4] = max(want[d, 4], end[p] + hop)
            got = es.device_features(v)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
            np.testing.assert_array_equal(got[:, 4], es.earliest_start(v))
            d = int(rng.integers(4))
            start[v], dev[v] = want[d, 4], d
            end[v] = start[v] + es.comp_time[v, d]
            avail[d], work[d] = end[v], work[d] + es.comp_time[v, d]
            es.place(v, d)
        np.testing.assert_allclose(es.end, end, rtol=1e-12)


def test_a_time_limit_stops_the_decode_early_and_a_generous_one_changes_nothing():
    from agents.decode import TIME_CHECK_STEPS, DecodeTimeLimit

    graph = random_dag(100, edge_prob=0.05, seed=4)
    policy = sharp_policy(make_env(graph=graph, topology=3), seed=2)
    dec = DirectDecoder(policy, graph, 3)
    for kwargs in ({}, {"samples": 2}):  # the single-episode path and the lockstep one
        with pytest.raises(DecodeTimeLimit, match="over its limit") as stop:
            dec.run(time_limit=0.0, **kwargs)
        assert stop.value.steps == TIME_CHECK_STEPS and stop.value.projected > 0.0 == stop.value.limit
        free, limited = dec.run(seed=3, **kwargs), dec.run(seed=3, time_limit=3600.0, **kwargs)
        np.testing.assert_array_equal(free.assignments, limited.assignments)
        np.testing.assert_array_equal(free.orders, limited.orders)
    for bad in (-1.0, "1", True, float("nan")):
        with pytest.raises(ValueError, match="time_limit"):
            dec.run(time_limit=bad)
