"""The search teacher: relabelled PLC targets, the wrapper's masks, and imitation of a search placement."""

from __future__ import annotations

import numba
import numpy as np
import pytest

import doppler_gym as dg
from agents.training import Instance, TrainArgs, train
from agents.training.teacher import (
    RESTART_OP_EVALS,
    AssignmentTeacher,
    devices_interchangeable,
    relabelled_targets,
    search_placement,
)
from doppler_gym import baselines
from doppler_gym.parallel.search import island_search
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


@pytest.mark.slow
def test_the_search_teacher_is_imitated_and_kept(tmp_path) -> None:
    args = small_args(tmp_path, imitation={"teacher": "search", "teacher_evals": 2000}, episodes={"il": 8})
    summary = train(args)
    teacher = summary["il_teacher"]
    inst = Instance.from_args(args)
    cp = baselines.run("critical_path", inst.graph, inst.topology, inst.config, seed=0)
    heft = baselines.run("heft", inst.graph, inst.topology, inst.config)
    assert teacher["batch_size"] == 16 and teacher["restarts"] == 16  # the defaults on one graph
    main = baselines.run("local_search", inst.graph, inst.topology, inst.config, seed=0, seconds=None,
                         max_evals=2000, starts=[cp, heft], batch_size=16)
    more = island_search(inst.graph, inst.topology, inst.config, islands=16, max_evals=500, seed=0,
                         batch_size=16)  # the restarts from their own default starts
    again = more if more.makespan < main.makespan else main
    assert teacher["assignment"] == list(again.assignment) and teacher["makespan"] == again.makespan
    assert teacher["makespan"] <= min(cp.makespan, heft.makespan) and teacher["interchangeable"]
    with pytest.raises(ValueError, match="imitation.teacher"):
        TrainArgs(imitation={"teacher": "oracle"}).validate()
    with pytest.raises(ValueError, match="learn='both'"):
        TrainArgs(imitation={"teacher": "search"}, learn="sel").validate()
    with pytest.raises(ValueError, match="imitation.teacher_evals"):
        TrainArgs(imitation={"teacher": "search", "teacher_evals": 0}).validate()


def test_teacher_restarts_keep_the_best_of_the_main_run_and_the_islands() -> None:
    # a 40-op random DAG on 3 devices where 4 short restarts find a better placement than the main run
    graph, topo, config = dg.workloads.make("random", n_ops=40, levels=8, seed=0), dg.Topology.uniform(3), \
        dg.SimConfig()
    starts = [baselines.run("critical_path", graph, topo, config, seed=0), baselines.run("heft", graph, topo, config)]
    main = baselines.run("local_search", graph, topo, config, seed=0, seconds=None, max_evals=2000, starts=starts)
    islands = island_search(graph, topo, config, islands=4, max_evals=500, seed=0)
    plain = search_placement(graph, topo, config, 2000, 0)
    more = search_placement(graph, topo, config, 2000, 0, restarts=4)
    assert plain["makespan"] == main.makespan and plain["total_evals"] == main.info["evals"]
    assert more["makespan"] == min(main.makespan, islands.makespan) < plain["makespan"]
    assert more["total_evals"] == main.info["evals"] + islands.info["evals"] and more["restarts"] == 4
    again = dg.simulate(graph, np.array(more["assignment"]), topo, config=config).makespan
    assert again == pytest.approx(more["makespan"], rel=1e-12)


def test_teacher_runs_fewer_restarts_on_large_graphs() -> None:
    graph, topo, config = dg.workloads.make("random", n_ops=40, levels=8, seed=0), dg.Topology.uniform(3), \
        dg.SimConfig()
    # 40 ops x 500 evaluations per restart = 20,000 op-evaluations each: a cap of 50,000 allows 2 of the 4
    capped = search_placement(graph, topo, config, 2000, 0, restarts=4, restart_op_evals=50_000)
    starts = [baselines.run("critical_path", graph, topo, config, seed=0), baselines.run("heft", graph, topo, config)]
    main = baselines.run("local_search", graph, topo, config, seed=0, seconds=None, max_evals=2000, starts=starts)
    two = island_search(graph, topo, config, islands=2, max_evals=500, seed=0)
    assert capped["restarts"] == 2 and capped["total_evals"] == main.info["evals"] + two.info["evals"]
    assert capped["makespan"] == min(main.makespan, two.makespan)
    none = search_placement(graph, topo, config, 2000, 0, restarts=4, restart_op_evals=19_999)
    assert none["restarts"] == 0 and none["total_evals"] == main.info["evals"]
    # the default cap: 16 restarts of 50,000 evaluations up to 1,000 ops, 4 at 4,000 ops
    assert RESTART_OP_EVALS // (1000 * 50_000) == 16 and RESTART_OP_EVALS // (4000 * 50_000) == 4


def test_teacher_skips_restarts_once_the_main_run_reaches_the_bound() -> None:
    chain = dg.workloads.make("random", n_ops=6, levels=6, seed=1)  # all on one device = the lower bound
    found = search_placement(chain, dg.Topology.uniform(2), dg.SimConfig(), 2000, 0, restarts=8)
    bound = dg.makespan_lower_bound(chain, dg.Topology.uniform(2), dg.SimConfig())
    assert found["makespan"] == pytest.approx(bound, rel=1e-12) and found["total_evals"] == 0
    assert found["restarts"] == 0  # none run


def test_restarts_default_to_16_on_one_graph_and_none_on_a_mix() -> None:
    assert TrainArgs().imitation.teacher_restarts == 16
    assert TrainArgs(graph="mix", mix={"graphs": ("random:n_ops=10..20",)}).imitation.teacher_restarts == 0
    with pytest.raises(ValueError, match="imitation.teacher_restarts"):
        TrainArgs(imitation={"teacher_restarts": -1}).validate()


def test_teacher_batch_defaults_to_16_on_one_graph_and_256_on_a_mix() -> None:
    assert TrainArgs().imitation.teacher_batch == 16
    assert TrainArgs(graph="mix", mix={"graphs": ("random:n_ops=10..20",)}).imitation.teacher_batch == 256
    assert TrainArgs(imitation={"teacher_batch": 64}).imitation.teacher_batch == 64  # an explicit value wins
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="imitation.teacher_batch"):
            TrainArgs(imitation={"teacher_batch": bad}).validate()


def test_teacher_runs_score_the_given_batch_per_step() -> None:
    # the main run and the restarts are local_search / island_search runs with that batch size
    graph, topo, config = dg.workloads.make("random", n_ops=40, levels=8, seed=0), dg.Topology.uniform(3), \
        dg.SimConfig()
    starts = [baselines.run("critical_path", graph, topo, config, seed=0), baselines.run("heft", graph, topo, config)]
    main = baselines.run("local_search", graph, topo, config, seed=0, seconds=None, max_evals=2000, starts=starts,
                         batch_size=16)
    islands = island_search(graph, topo, config, islands=4, max_evals=500, seed=0, batch_size=16)
    threads = numba.get_num_threads()
    found = search_placement(graph, topo, config, 2000, 0, restarts=4, batch_size=16)  # on one Numba thread
    assert numba.get_num_threads() == threads  # given back
    assert main.info["iterations"] == 2000 // 16 and found["batch_size"] == 16
    assert found["makespan"] == min(main.makespan, islands.makespan)
    assert found["total_evals"] == main.info["evals"] + islands.info["evals"]
