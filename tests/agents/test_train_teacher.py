"""The search teacher: relabelled PLC targets, the wrapper's masks, and imitation of a search placement."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from agents.training import Instance, TrainArgs, train
from agents.training.teacher import AssignmentTeacher, devices_interchangeable, relabelled_targets
from doppler_gym import baselines
from tests.agents.train_helpers import small_args


def test_relabelled_targets_by_hand() -> None:
    target = np.array([0, 0, 1, 2, 3])
    nothing = np.full(5, -1)
    assert relabelled_targets(target, nothing, 2, 4).tolist() == [0, 1, 2, 3]  # any device before anything
    placed = np.array([3, -1, 1, -1, -1])  # target device 0 -> 3 and 1 -> 1 so far
    assert relabelled_targets(target, placed, 1, 4).tolist() == [3]  # op 1 joins op 0
    assert relabelled_targets(target, placed, 3, 4).tolist() == [0, 2]  # target device 2: a free label
    clash = np.array([3, -1, 3, -1, -1])  # ops 0 and 2 share a device the target separates: either
    assert relabelled_targets(target, clash, 1, 4).tolist() == [0, 1, 2, 3]  # 0 -> 3 or 1 -> 3 matches one
    two = np.array([3, 3, 1, -1, -1])  # now 0 -> 3 matches two ops: op 3 (target 2) may go to 0 or 2
    assert relabelled_targets(target, two, 3, 4).tolist() == [0, 2]


def test_devices_interchangeable() -> None:
    assert devices_interchangeable(dg.Topology.uniform(4), dg.SimConfig())
    assert devices_interchangeable(dg.Topology.preset("v100x8-dgx1"), dg.SimConfig.reference())  # raw costs
    assert not devices_interchangeable(dg.Topology.preset("v100x8-dgx1"), dg.SimConfig())  # NVLink vs PCIe pairs


@pytest.mark.parametrize("interchangeable", [True, False])
def test_following_the_teacher_rebuilds_the_target(interchangeable: bool) -> None:
    inst = Instance.from_args(TrainArgs(graph="paper/ffnn", devices=4))
    target = np.random.default_rng(3).integers(0, 4, inst.graph.n_ops)
    env = AssignmentTeacher(inst.sim_env(), target, interchangeable)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    done = False
    while not done:  # random ties of the SEL teacher; the PLC label whenever it is unique
        _, _, done, _, info = env.step(int(rng.choice(np.flatnonzero(env.teacher_mask()))))
    got = np.asarray(info["assignment"])
    if interchangeable:
        pairs = set(zip(target.tolist(), got.tolist()))
        assert len(pairs) == 4 and len({a for a, _ in pairs}) == 4  # a permutation of the target's devices
    else:
        np.testing.assert_array_equal(got, target)
    want = dg.simulate(inst.graph, target, inst.topology, config=inst.config).makespan
    assert info["makespan"] == pytest.approx(want, rel=1e-12)


def test_the_search_teacher_is_imitated_and_kept(tmp_path) -> None:
    args = small_args(tmp_path, il_teacher="search", il_teacher_evals=2000, il_episodes=8)
    summary = train(args)
    teacher = summary["il_teacher"]
    inst = Instance.from_args(args)
    cp = baselines.run("critical_path", inst.graph, inst.topology, inst.config, seed=0)
    heft = baselines.run("heft", inst.graph, inst.topology, inst.config)
    again = baselines.run("local_search", inst.graph, inst.topology, inst.config, seed=0, seconds=None,
                          max_evals=2000, starts=[cp, heft])
    assert teacher["assignment"] == list(again.assignment) and teacher["makespan"] == again.makespan
    assert teacher["makespan"] <= min(cp.makespan, heft.makespan) and teacher["interchangeable"]
    with pytest.raises(ValueError, match="il_teacher"):
        TrainArgs(il_teacher="oracle").validate()
    with pytest.raises(ValueError, match="learn='both'"):
        TrainArgs(il_teacher="search", learn="sel").validate()
    with pytest.raises(ValueError, match="il_teacher_evals"):
        TrainArgs(il_teacher="search", il_teacher_evals=0).validate()
