"""DopplerPolicy(heuristic_prior=True): the untrained policy is a list scheduler (largest b-level first,
earliest finish time device), checked against a hand-written one; the finish-time gap by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.vec_env import DummyVecEnv

from agents.decode import decode
from agents.features import COMP_FLOOR, EFT_GAP_CAP, eft_gap
from agents.policy import DopplerPolicy
from agents.training.rollout import decode as env_decode
from doppler_gym.envs.context import build_context
from doppler_gym.sim.estimate import EstimatedSchedule
from tests.agents.policy_helpers import make_env, random_dag

pytestmark = pytest.mark.usefixtures("one_thread")
SMALL = {"hidden_dim": 16, "n_layers": 2, "head_dim": 16}


def list_schedule(env) -> tuple[list[int], np.ndarray]:
    """The hand-written list scheduler on ``env``'s instance: among the ready ops the one of largest
    b-level (lowest id on ties), placed on the device of earliest estimated finish (start + its
    compute time there)."""
    base = env.unwrapped
    ctx = build_context(base.graph, base.topology, base.sim_config, reference=False)
    graph = ctx.graph
    es = EstimatedSchedule(graph, ctx.topology, ctx.config, time_model="fixed")
    waiting = ctx.in_degree.copy()
    ready = {v for v in range(graph.n_ops) if waiting[v] == 0}
    order = []
    while ready:
        v = max(sorted(ready), key=lambda u: ctx.b_level[u])
        est = es.earliest_start(v)
        finish = est + es.comp_time[v]
        es.place(v, int(np.argmin(finish)), est)
        order.append(v)
        ready.discard(v)
        for s in ctx.succ[v]:
            waiting[s] -= 1
            if waiting[s] == 0:
                ready.add(s)
    return order, es.device.astype(np.int64)


@pytest.mark.parametrize("graph, topology", [(random_dag(14, seed=0), 3), (random_dag(18, edge_prob=0.25, seed=5), 4),
                                             (random_dag(16, edge_prob=0.3, seed=3), "p100x4")])
def test_untrained_prior_policy_is_the_list_scheduler(graph, topology):
    env = make_env(graph=graph, topology=topology)
    torch.manual_seed(0)
    policy = DopplerPolicy(env.observation_space, env.action_space, lambda _: 1e-3, heuristic_prior=True,
                           plc_affinity=True, structure_features=1, **SMALL)
    policy.set_training_mode(False)
    env.reset(seed=0)
    order, assignment = list_schedule(env)
    info = env_decode(policy, env, greedy=True, seed=0)  # through the env (torch heads)
    np.testing.assert_array_equal(info["order"], order)
    np.testing.assert_array_equal(info["assignment"], assignment)
    out = decode(policy, env.unwrapped.graph, topology)  # direct decode (numpy heads)
    np.testing.assert_array_equal(out.orders[0], order)
    np.testing.assert_array_equal(out.assignments[0], assignment)
    # without the prior the same initialisation is not that scheduler on every graph: the prior does the work
    plain = DopplerPolicy(env.observation_space, env.action_space, lambda _: 1e-3, **SMALL)
    assert plain.sel_head.prior is None and plain.plc_head.prior is None


def test_eft_gap_by_hand():
    # 3 devices, relative speeds 1, 0.5, 1 -> times comp * (1/s) / mean(1/s) = 0.1 * [0.75, 1.5, 0.75]
    dfeat = torch.zeros(1, 4, 7)
    dfeat[0, :, 4] = torch.tensor([0.0, 0.0, 0.2, 5.0])  # earliest starts (device 3 is padding)
    dfeat[0, :, 5] = torch.tensor([1.0, 0.5, 1.0, 1.0])
    valid = torch.tensor([[True, True, True, False]])
    gap = eft_gap(dfeat, torch.tensor([0.1]), valid)
    finish = np.array([0.075, 0.15, 0.275])
    np.testing.assert_allclose(gap[0, :3].numpy(), (finish - finish.min()) / 0.1, rtol=1e-5)
    assert gap[0, 3] == 0.0
    # a compute-free op: the denominator is COMP_FLOOR and the gap is capped
    gap0 = eft_gap(dfeat, torch.tensor([0.0]), valid)
    np.testing.assert_allclose(gap0[0, :3].numpy(), [0.0, 0.0, min(0.2 / COMP_FLOOR, EFT_GAP_CAP)], rtol=1e-5)


def test_prior_weights_train_and_survive_save_load(tmp_path):
    env = make_env(graph=random_dag(10, seed=2), topology=2)
    model = MaskablePPO(DopplerPolicy, DummyVecEnv([lambda: env]), n_steps=40, batch_size=20, n_epochs=1,
                        policy_kwargs={**SMALL, "heuristic_prior": True}, seed=0)
    before = (model.policy.sel_head.prior.item(), model.policy.plc_head.prior.item())
    model.learn(40)
    after = (model.policy.sel_head.prior.item(), model.policy.plc_head.prior.item())
    assert after != before  # the prior weights are parameters the optimiser moves
    model.save(tmp_path / "m.zip")
    loaded = MaskablePPO.load(tmp_path / "m.zip", env=DummyVecEnv([lambda: env]))
    assert loaded.policy.heuristic_prior
    assert loaded.policy.plc_head.prior.item() == pytest.approx(after[1])


def test_residual_clip_bounds_the_learned_part_of_every_score():
    env = make_env(graph=random_dag(16, edge_prob=0.3, seed=4), topology=4)
    torch.manual_seed(1)
    policy = DopplerPolicy(env.observation_space, env.action_space, lambda _: 1e-3, heuristic_prior=True,
                           residual_clip=0.5, plc_affinity=True, **SMALL)
    with torch.no_grad():  # large learned parts: the bound must hold them to (-0.5, 0.5)
        for head in (policy.sel_head, policy.plc_head):
            torch.nn.init.normal_(head.tail[-1].weight, std=30.0)
        torch.nn.init.normal_(policy.plc_head.query.weight, std=3.0)
    g = torch.Generator().manual_seed(0)
    d = SMALL["head_dim"]
    static, dyn = torch.randn(9, d, generator=g), torch.randn(9, 7, generator=g)
    with torch.no_grad():
        sel = policy.sel_head(static, dyn)
        learned = sel - policy.sel_head.prior * dyn[:, 1]
        op, devsum = torch.randn(3, d, generator=g), torch.randn(3, 4, d, generator=g)
        dev_in, gap = torch.randn(3, 4, 15, generator=g), torch.rand(3, 4, generator=g) * 5
        valid = torch.ones(3, 4, dtype=torch.bool)
        plc_learned = policy.plc_head(op, devsum, dev_in, valid, gap) + policy.plc_head.prior * gap
        unbounded = policy.plc_head.tail(op.unsqueeze(1) + devsum).abs().max()
    assert learned.abs().max() <= 0.5 + 1e-6 and plc_learned.abs().max() <= 0.5 + 1e-5
    assert learned.abs().max() > 0.4 and unbounded > 5.0  # the bound is active, not a no-op
    # and the direct decode (numpy heads) still takes the env's actions with the bound
    policy.set_training_mode(False)
    info = env_decode(policy, env, greedy=True, seed=0)
    out = decode(policy, env.unwrapped.graph, 4)
    np.testing.assert_array_equal(out.orders[0], info["order"])
    np.testing.assert_array_equal(out.assignments[0], info["assignment"])
