"""Pipeline workloads in the SEL/PLC env: a graph spec with parameters, and the schedule acted out through it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import doppler_gym as dg

SPEC = "pipeline:stages=3,microbatches=6,schedule=1f1b,unit_costs=true"


def test_graph_spec_with_parameters():
    g = dg.instances.resolve_graph(SPEC)
    w = dg.workloads.build("pipeline", stages=3, microbatches=6, schedule="1f1b", unit_costs=True)
    assert g.n_ops == w.graph.n_ops == 2 * 3 * 6 and g.names == w.graph.names
    g2 = dg.instances.resolve_graph("pipeline:stages=2", {"microbatches": 3})
    assert g2.n_ops == 2 * 2 * 3 + 3  # F and B per stage and microbatch, and the first stage's sends
    with pytest.raises(ValueError, match="given both"):
        dg.instances.resolve_graph("pipeline:stages=2", {"stages": 3})
    with pytest.raises(ValueError, match="expected NAME:KEY=VALUE"):
        dg.instances.resolve_graph("pipeline:stages")
    with pytest.raises(ValueError, match="unknown parameter"):
        dg.instances.resolve_graph("pipeline:stage=2")


@pytest.mark.parametrize("schedule", ["1f1b", "zb-h1"])
def test_env_acts_out_the_schedule(schedule):
    # SEL in the schedule's priority order and PLC on its stages reproduce the simulated schedule exactly.
    p, m = 3, 6
    w = dg.workloads.build("pipeline", stages=p, microbatches=m, schedule=schedule, unit_costs=True)
    env = gym.make("Doppler-Sim-v0", graph=f"pipeline:stages={p},microbatches={m},schedule={schedule},unit_costs=true",
                   topology=p, sim_config=w.config)
    env.reset(seed=0)
    base = env.unwrapped
    for op in np.argsort(w.priorities, kind="stable"):
        assert base.action_masks()[op] == 1  # a topological order: the op is ready
        env.step(int(op))
        _, _, terminated, _, info = env.step(base.max_ops + int(w.assignment[op]))
    assert terminated
    want = dg.simulate(w.graph, w.assignment, topology=p, priorities=w.priorities, config=w.config).makespan
    assert info["makespan"] == want == (3 * m + p - 1 if schedule == "zb-h1" else 3 * m + 3 * (p - 1))
    np.testing.assert_array_equal(info["assignment"], w.assignment)


def test_check_env_on_a_pipeline():
    w = dg.workloads.build("pipeline", stages=2, microbatches=2, unit_costs=True)
    env = gym.make("Doppler-Sim-v0", graph=w.graph, topology=2, sim_config=w.config)
    check_env(env.unwrapped, skip_render_check=True)
