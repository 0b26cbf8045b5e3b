"""``Doppler-SimAssign-v0``'s ``observation="flat"``: a bounded vector with no ids, whose op-cost block, device
block, padding and mask are checked against hand computations on the toy graph and a 3-device topology."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import doppler_gym as dg
from doppler_gym.envs import AssignEnv
from doppler_gym.envs.masked import InvalidActionWarning
from tests.doppler_gym.envs.env_helpers import RAW, TOY_B, TOY_COMM, TOY_COMP, TOY_T, make_toy

N, D = 8, 4  # padding sizes, larger than the toy graph (5 ops) and the topologies (2 or 3 devices)
OP_COLUMNS, DEV_COLUMNS = 6, 3  # 5 costs + valid flag; 2 static features + valid flag


def _flat_env(graph=None, topology=2, sim_config=RAW, **kwargs) -> AssignEnv:
    graph = make_toy() if graph is None else graph
    return AssignEnv(graph=graph, topology=topology, sim_config=sim_config, max_ops=N, max_devices=D,
                     observation="flat", **kwargs)


def _blocks(features: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (N, 6) op rows, (D, 3) device rows and (2,) globals, split by the documented layout."""
    assert features.shape == (N * OP_COLUMNS + D * DEV_COLUMNS + 2,)
    ops = features[: N * OP_COLUMNS].reshape(N, OP_COLUMNS)
    dev = features[N * OP_COLUMNS : N * OP_COLUMNS + D * DEV_COLUMNS].reshape(D, DEV_COLUMNS)
    return ops, dev, features[-2:]


def _heterogeneous3() -> dg.Topology:
    """3 devices: speeds 1, 2, 4 TFLOP/s and memories 8, 16, 16 GB (device_static by hand: [.25, .5, 1],
    [.5, 1, 1])."""
    return dg.Topology(speed=np.array([1e12, 2e12, 4e12]), memory=np.array([8e9, 16e9, 16e9]),
                       bandwidth=np.full((3, 3), 1e10), latency=np.zeros((3, 3)))


def test_the_env_checker_passes_and_the_space_holds_every_observation():
    env = _flat_env(invalid_action="penalize")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the checker's generic advice; failures raise
        check_env(env, skip_render_check=True)
    first, _ = env.reset(seed=0)
    assert env.observation_space.contains(first)
    with pytest.warns(InvalidActionWarning):  # outside the space: penalised, state kept
        penalised, _, terminated, _, info = env.step(np.full(N, D))
    assert not terminated and info["invalid_action"] and env.observation_space.contains(penalised)
    np.testing.assert_array_equal(penalised["features"], first["features"])
    last, _, terminated, _, _ = env.step(np.random.default_rng(0).integers(0, D, N))
    assert terminated and env.observation_space.contains(last)


@pytest.mark.parametrize("graph, topology, config", [
    (make_toy(), 2, RAW), ("paper/ffnn", 4, None), ("paper/chainmm", 4, None),
    (make_toy(), _heterogeneous3(), dg.SimConfig()),
])
def test_every_feature_lies_in_the_documented_range_0_1(graph, topology, config):
    kwargs = {} if isinstance(graph, str) else {"max_ops": N, "max_devices": D}
    env = AssignEnv(graph=graph, topology=topology, sim_config=config, observation="flat", **kwargs)
    features = env.reset(seed=0)[0]["features"]
    assert features.dtype == np.float32 and np.isfinite(features).all()
    assert features.min() >= 0.0 and features.max() <= 1.0
    assert env.observation_space["features"].low.min() == 0.0 and env.observation_space["features"].high.max() == 1.0


def test_the_op_cost_block_is_each_op_feature_over_its_column_max_by_hand():
    ops, _, _ = _blocks(_flat_env().reset(seed=0)[0]["features"])
    # toy (env_helpers): comp, b-level, t-level; input transfer = sum of the inputs' comm (op 2: 1 + 1, op 3: 2,
    # op 4: 1); output transfer = out-degree * comm (op 0: 1, op 1: 2 * 1, op 2: 2). The common scale cancels.
    in_comm = np.array([0.0, 0.0, 2.0, 2.0, 1.0])
    out_comm = np.array([1.0, 2.0, 2.0, 0.0, 0.0])
    assert np.array_equal(TOY_COMM, [1.0, 1.0, 2.0, 1.0, 1.0])  # the comm the two columns above use
    by_hand = np.stack([TOY_COMP / 5.0, TOY_B / 11.0, TOY_T / 11.0, in_comm / 2.0, out_comm / 2.0], axis=1)
    np.testing.assert_allclose(ops[:5, :5], by_hand, rtol=1e-6)
    assert (ops[:5, 5] == 1.0).all()


def test_the_op_cost_block_equals_the_graph_forms_op_features_over_their_column_max():
    flat = AssignEnv(graph="paper/ffnn", topology=4, observation="flat").reset(seed=0)[0]["features"]
    graph_env = AssignEnv(graph="paper/ffnn", topology=4)
    feats = graph_env.reset(seed=0)[0]["op_features"].astype(np.float64)
    n = graph_env.context.n_ops
    expected = np.zeros((n, 5))
    for column in range(5):  # a plain loop, not the module's helper
        top = max(feats[:n, column])
        expected[:, column] = feats[:n, column] / top if top > 0 else 0.0
    np.testing.assert_allclose(flat[: n * OP_COLUMNS].reshape(n, OP_COLUMNS)[:, :5], expected, rtol=1e-6)


def test_the_device_block_is_device_static_and_a_valid_flag_by_hand():
    env = _flat_env(topology=_heterogeneous3(), sim_config=dg.SimConfig())
    _, dev, glob = _blocks(env.reset(seed=0)[0]["features"])
    np.testing.assert_allclose(dev[:3], [[0.25, 0.5, 1.0], [0.5, 1.0, 1.0], [1.0, 1.0, 1.0]], rtol=1e-6)
    np.testing.assert_allclose(glob, [5 / N, 3 / D], rtol=1e-6)


def test_padding_ops_and_devices_are_zero():
    ops, dev, glob = _blocks(_flat_env().reset(seed=0)[0]["features"])
    assert (ops[5:] == 0.0).all() and (dev[2:] == 0.0).all()
    assert (dev[:2] == [1.0, 1.0, 1.0]).all()  # raw: identical devices, both valid
    np.testing.assert_allclose(glob, [5 / N, 2 / D], rtol=1e-6)


def test_the_mask_equals_action_masks_in_every_form_of_the_instance():
    for topology in (2, _heterogeneous3()):
        env = _flat_env(topology=topology, sim_config=RAW if topology == 2 else dg.SimConfig())
        mask = env.reset(seed=0)[0]["action_mask"]
        assert mask.dtype == np.int8 and mask.shape == (N * D,)
        assert np.array_equal(mask, env.action_masks())
        n_dev = 2 if topology == 2 else 3
        by_hand = np.zeros((N, D), np.int8)
        by_hand[:5, :n_dev] = 1  # real ops: the topology's devices
        by_hand[5:, 0] = 1  # padding ops: device 0
        assert np.array_equal(mask.reshape(N, D), by_hand)


def test_no_entry_depends_on_the_graph_name_or_id():
    toy = make_toy()
    renamed = dg.DataflowGraph(src=toy.src, dst=toy.dst, flops=toy.flops, out_bytes=toy.out_bytes, name="other",
                               units="paper")
    # the same costs doubled: the normalised features are the same, the content id differs
    doubled = dg.DataflowGraph(src=toy.src, dst=toy.dst, flops=2 * toy.flops, out_bytes=2 * toy.out_bytes,
                               name="toy", units="paper")
    seen = []
    for graph in (toy, renamed, doubled):
        env = _flat_env(graph=graph)
        obs, info = env.reset(seed=0)
        seen.append((obs["features"], info["graph_id"], info["graph_name"]))
    assert seen[0][2] != seen[1][2] and seen[0][1] != seen[2][1]
    np.testing.assert_array_equal(seen[0][0], seen[1][0])
    np.testing.assert_allclose(seen[0][0], seen[2][0], rtol=1e-6)


def test_flat_and_graph_forms_simulate_the_same_assignment():
    action = np.array([0, 1, 1, 0, 1, 0, 0, 0])
    infos = []
    for form in ("graph", "flat"):
        env = AssignEnv(graph=make_toy(), topology=2, sim_config=RAW, max_ops=N, max_devices=D, observation=form)
        env.reset(seed=0)
        obs, reward, terminated, _, info = env.step(action)
        assert terminated and env.observation_space.contains(obs)
        infos.append((reward, info["makespan"]))
    assert infos[0] == infos[1]
    assert "graph_id" in AssignEnv(graph=make_toy(), topology=2, sim_config=RAW).reset(seed=0)[0]  # default: graph


def test_the_flat_form_through_gym_make():
    env = gym.make("Doppler-SimAssign-v0", graph=make_toy(), topology=2, sim_config=RAW, observation="flat")
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"features", "action_mask"} and env.observation_space.contains(obs)


def test_an_unknown_observation_form_lists_the_choices():
    with pytest.raises(ValueError, match=r"observation must be one of \('graph', 'flat'\).*got 'mlp'"):
        AssignEnv(graph=make_toy(), topology=2, sim_config=RAW, observation="mlp")
