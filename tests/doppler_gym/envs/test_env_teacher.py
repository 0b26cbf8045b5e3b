"""The critical-path teacher mask: by hand on the toy graph, and full rollouts on the paper graphs."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.baselines.critical_path import critical_path
from doppler_gym.envs import PlacementEnv
from tests.doppler_gym.envs.env_helpers import RAW, make_toy

N, D = 6, 3


def mask(*actions: int) -> np.ndarray:
    m = np.zeros(N + D, np.int8)
    m[list(actions)] = 1
    return m


def test_teacher_mask_by_hand():
    env = PlacementEnv(graph=make_toy(), topology=2, sim_config=RAW, max_ops=N, max_devices=D)
    env.reset(seed=0)
    # (teacher mask, action taken) per step; b-levels [10, 11, 7, 1, 5]; EST from the estimate
    script = [
        (mask(1), 1),  # ready {0, 1}: b1 = 11
        (mask(N + 0, N + 1), N + 0),  # both devices free at 0: a tie
        (mask(0), 0),  # ready {0, 4}: b0 = 10 > b4 = 5
        (mask(N + 1), N + 1),  # dev0 busy until 3, dev1 free
        (mask(2), 2),  # ready {2, 4}: b2 = 7
        (mask(N + 0), N + 0),  # EST dev0 = 3, dev1 = 4 (op1's output arrives at 3 + 1)
        (mask(4), 4),  # ready {3, 4}: b4 = 5 > b3 = 1
        (mask(N + 1), N + 1),  # EST dev0 = 7, dev1 = max(2, 3 + 1) = 4
        (mask(3), 3),
        (mask(N + 0), N + 0),  # EST dev0 = 7, dev1 = 7 + 2 = 9
    ]
    for expected, action in script:
        np.testing.assert_array_equal(env.teacher_mask(), expected)
        assert np.all(env.action_masks()[expected == 1] == 1)  # the teacher only picks valid actions
        *_, terminated, _, _info = env.step(action)
    assert terminated and not env.teacher_mask().any()


def test_teacher_marks_all_ties():
    g = dg.DataflowGraph(src=[], dst=[], flops=[1.0, 1.0, 1.0, 0.5], out_bytes=[1.0] * 4, units="paper")
    env = PlacementEnv(graph=g, topology=3, sim_config=RAW)
    env.reset(seed=0)
    np.testing.assert_array_equal(env.teacher_mask()[:4], [1, 1, 1, 0])
    env.step(2)
    np.testing.assert_array_equal(env.teacher_mask()[4:], [1, 1, 1])


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("graph", ["paper/chainmm", "paper/ffnn", "paper/llama-block", "paper/llama-layer", "ffnn"])
def test_teacher_rollout_reproduces_the_critical_path_heuristic(graph, seed):
    """Every choice of ``baselines.critical_path`` (random ties) is a teacher action, and playing them
    in the env reproduces its makespan; with seed 0 that is the env's reference makespan."""
    env = PlacementEnv(graph=graph, topology=4 if graph.startswith("paper/") else "p100x4")
    env.reset(seed=0)
    cp = critical_path(env.graph, env.topology, env.sim_config, seed=seed)
    for v in cp.order.tolist():
        assert env.teacher_mask()[v] == 1
        env.step(v)
        action = env.max_ops + int(cp.assignment[v])
        assert env.teacher_mask()[action] == 1
        *_, terminated, _, info = env.step(action)
    assert terminated and info["makespan"] == cp.makespan
    np.testing.assert_array_equal(info["order"], cp.order)
    if seed == 0:
        assert info["makespan"] == info["reference_makespan"]


def test_reference_is_cached_per_instance_content(monkeypatch):
    """Two graph objects with the same content share one reference: the heuristic runs once."""
    import importlib

    from doppler_gym.envs.context import reference_makespan

    module = importlib.import_module("doppler_gym.baselines.critical_path")
    runs = []

    def counted(*args, **kwargs):
        runs.append(1)
        return critical_path(*args, **kwargs)

    monkeypatch.setattr(module, "critical_path", counted)
    base = dg.load_graph("paper/ffnn")
    # content no other test uses, so the first call cannot hit an entry cached by an earlier test
    flops = base.flops.copy()
    flops[0] += 1.0
    g1, g2 = (dg.DataflowGraph(base.src, base.dst, flops.copy(), base.out_bytes, name="ffnn-cache", units="paper")
              for _ in range(2))
    ref = reference_makespan(g1, dg.Topology.uniform(4), dg.SimConfig.reference())
    assert len(runs) == 1
    assert reference_makespan(g2, dg.Topology.uniform(4), dg.SimConfig.reference()) == ref
    assert len(runs) == 1  # the second object hit the cache
    assert ref == critical_path(g1, 4, seed=0).makespan
