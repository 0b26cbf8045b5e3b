"""GDP baseline: network shapes, masks, a short training run on Doppler-SimAssign-v0, determinism,
checkpoints, learning; and the LearnedResult checks."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import doppler_gym as dg
from agents.gdp import GDPArgs, load_gdp, sample_assignments, train_gdp
from agents.gdp_policy import NEG_LOGIT, GDPGraph, GDPNet, positional_encoding
from agents.learned_result import LearnedResult
from agents.training import load_checkpoint
from tests.agents.learned_helpers import assert_same_result, assert_valid_result, comm_chain, graph_context, tiny_graph

pytestmark = pytest.mark.usefixtures("one_thread")

FAST = GDPArgs(hidden_dim=16, n_sage=1, n_heads=2, ff_dim=32, samples_per_update=8, ppo_epochs=2,
               eval_every_updates=2, final_samples=8)


def gdp_graph(graph: dg.DataflowGraph, devices: int) -> GDPGraph:
    """GDP's tensors of ``graph`` on ``devices`` devices, positions from its topological order."""
    return GDPGraph.from_context(graph_context(graph, devices), dg.topological_order(graph))


def test_network_shapes_and_device_mask():
    g = tiny_graph()
    gg = gdp_graph(g, 2)
    net = GDPNet(max_devices=4, hidden_dim=16, n_sage=2, n_heads=4, ff_dim=32)
    logits = net(gg)
    assert logits.shape == (g.n_ops, 4)
    assert torch.all(logits[:, 2:] == NEG_LOGIT) and torch.all(logits[:, :2] > NEG_LOGIT / 2)
    assert gg.x.shape == (g.n_ops, 10) and gg.edge_index.shape == (2, 2 * g.n_edges)
    assert positional_encoding(torch.arange(5), 7).shape == (5, 7)


def test_observation_and_context_give_the_same_inputs():
    g = tiny_graph()
    env = gym.make("Doppler-SimAssign-v0", graph=g, topology=2, max_ops=16, max_edges=40, disable_env_checker=True)
    obs, _ = env.reset(seed=0)
    a = GDPGraph.from_observation(obs, dg.topological_order(g))
    b = gdp_graph(g, 2)
    assert torch.allclose(a.x, b.x) and torch.equal(a.edge_index, b.edge_index)
    assert torch.equal(a.position, b.position) and a.n_devices == b.n_devices == 2


def test_symmetric_ops_are_told_apart():
    """Ops with identical features get different logits (the position encoding), so the greedy decode
    can spread parallel branches."""
    n = 6
    g = dg.DataflowGraph(src=np.zeros(0, np.int64), dst=np.zeros(0, np.int64), flops=np.ones(n),
                         out_bytes=np.ones(n), name="independent", units="paper")
    torch.manual_seed(0)
    logits = GDPNet(max_devices=2, hidden_dim=16, n_sage=1, n_heads=2, ff_dim=32)(gdp_graph(g, 2))
    assert len({tuple(np.round(r, 6)) for r in logits.detach().numpy().tolist()}) == n


def test_samples_stay_on_usable_devices():
    g = tiny_graph()
    torch.manual_seed(0)
    net = GDPNet(max_devices=4, hidden_dim=16, n_sage=1, n_heads=2, ff_dim=32)
    with torch.no_grad():
        net.out.bias.copy_(torch.tensor([0.0, 0.0, 50.0, 50.0]))  # the masked devices would win unmasked
        logits = net(gdp_graph(g, 2))
        samples = sample_assignments(logits, 64, torch.Generator().manual_seed(0))
    assert samples.shape == (64, g.n_ops) and samples.dtype == torch.int64
    assert set(samples.flatten().tolist()) == {0, 1}
    # row k is one assignment: over many rows each op's device frequencies are its softmax
    # probabilities (4000 draws: a standard error below 0.008 per entry)
    many = sample_assignments(logits, 4000, torch.Generator().manual_seed(1)).numpy()
    freq = np.stack([(many == d).mean(axis=0) for d in range(4)], axis=1)  # (n, D)
    np.testing.assert_allclose(freq, torch.softmax(logits, dim=-1).numpy(), atol=0.04)


def test_short_training_returns_a_valid_result():
    g = tiny_graph()
    res = train_gdp(g, 2, episodes=16, budget_seconds=None, seed=0, args=FAST)
    assert_valid_result(res, "gdp", g, 2, episodes=16, updates=2)
    # the makespan is the env's: Doppler-SimAssign-v0 gives the same number for the assignment
    env = gym.make("Doppler-SimAssign-v0", graph=g, topology=2, disable_env_checker=True)
    env.reset(seed=0)
    _, _, _, _, info = env.step(res.assignment)
    assert res.makespan == pytest.approx(info["makespan"], rel=1e-12)
    assert np.array_equal(res.order, info["order"])


def test_same_seed_same_result():
    g = tiny_graph()
    a = train_gdp(g, 2, episodes=16, budget_seconds=None, seed=7, args=FAST)
    b = train_gdp(g, 2, episodes=16, budget_seconds=None, seed=7, args=FAST)
    assert_same_result(a, b)


@pytest.mark.slow
def test_learns_the_obvious_placement():
    """On a chain with huge transfers the trained greedy decode puts every op on one device (both devices
    are optimal, so the independent per-op softmaxes must first agree on one: a high learning rate)."""
    g = comm_chain(10)
    random_ms = [dg.baselines.random_placement(g, 2, seed=s).makespan for s in range(32)]
    res = train_gdp(g, 2, episodes=640, budget_seconds=None, seed=0,
                    args=GDPArgs(hidden_dim=32, n_sage=1, n_heads=2, ff_dim=64, lr=3e-2))
    assert res.info["final_greedy"] == pytest.approx(10.0)  # no transfer: the optimum
    assert res.info["final_greedy"] < 0.5 * np.mean(random_ms)
    assert res.info["sampled_mean"] < 0.5 * np.mean(random_ms)  # the policy, not only its argmax
    assert res.curve[0][1] > res.info["final_greedy"]  # the untrained decode was not already optimal


def test_checkpoint_round_trip(tmp_path):
    g = tiny_graph()
    res = train_gdp(g, 2, episodes=16, budget_seconds=None, seed=0, out=tmp_path, args=FAST)
    payload = load_checkpoint(tmp_path)
    assert payload["agent"] == "gdp" and payload["episodes"] == 16
    net = load_gdp(tmp_path / "checkpoint.pt")
    with torch.no_grad():
        greedy = net(gdp_graph(g, 2)).argmax(-1).numpy()
    assert dg.simulate(g, greedy, dg.Topology.uniform(2)).makespan == pytest.approx(res.info["final_greedy"])
    with pytest.raises(ValueError, match="not from train_gdp"):
        load_gdp({**payload, "agent": "placeto"})


def test_sim_config_as_dict_and_paper_default():
    g = comm_chain(6)
    ref = train_gdp(g, 2, episodes=8, budget_seconds=None, seed=0, args=FAST)  # paper graph: reference model
    as_dict = train_gdp(g, 2, sim_config={"cost_model": "raw", "time_divisor": 1e10}, episodes=8,
                        budget_seconds=None, seed=0, args=FAST)
    assert ref.info["time_unit"] == as_dict.info["time_unit"] == "paper"
    assert ref.makespan == as_dict.makespan


def test_learned_result_checks_its_fields():
    with pytest.raises(ValueError, match="assignment"):
        LearnedResult("gdp", 1.0, np.array([0, -1]), 1, 0.1, [])
    with pytest.raises(ValueError, match="makespan"):
        LearnedResult("gdp", float("nan"), np.array([0, 1]), 1, 0.1, [])
    res = LearnedResult("gdp", 2, [0, 1], 3, 0.5, [(0, 4)], order=[1, 0])
    assert res.assignment.dtype == np.int64 and res.curve == [(0, 4.0)]
    assert res.to_dict()["order"] == [1, 0]
