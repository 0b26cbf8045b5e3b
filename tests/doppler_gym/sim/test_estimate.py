"""EstimatedSchedule: the incremental earliest-start estimate, fixed and faithful time models."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.sim.estimate import EstimatedSchedule

RAW = dg.SimConfig(cost_model="raw")


def _chain() -> dg.DataflowGraph:
    # op0 (2) -> op1 (3), op0's output costs 5 to move; op2 (4) is independent.
    return dg.DataflowGraph(src=[0], dst=[1], flops=[2.0, 3.0, 4.0], out_bytes=[5.0, 1.0, 1.0])


def test_fixed_model_starts_ops_at_their_earliest_start():
    es = EstimatedSchedule(_chain(), dg.Topology.uniform(2), RAW)
    np.testing.assert_array_equal(es.earliest_start(0), [0.0, 0.0])
    es.place(0, 0)
    np.testing.assert_array_equal(es.earliest_start(1), [2.0, 7.0])  # same device / after the transfer
    es.place(1, 1)
    assert (es.start[1], es.end[1]) == (7.0, 10.0)
    np.testing.assert_array_equal(es.avail, [2.0, 10.0])
    np.testing.assert_array_equal(es.work, [2.0, 3.0])
    assert es.makespan == 10.0


def test_faithful_model_packs_ops_by_device_work():
    es = EstimatedSchedule(_chain(), dg.Topology.uniform(2), RAW, time_model="faithful")
    es.place(0, 0)
    np.testing.assert_array_equal(es.earliest_start(1), [2.0, 7.0])  # the EST feature still sees inputs
    es.place(1, 1)
    assert (es.start[1], es.end[1]) == (0.0, 3.0)  # the authors' start: work already on device 1
    np.testing.assert_array_equal(es.avail, [2.0, 3.0])


def test_device_features_columns():
    es = EstimatedSchedule(_chain(), dg.Topology.uniform(2), RAW)
    es.place(2, 1)  # [0, 4) on device 1
    es.place(0, 0)  # [0, 2) on device 0
    feats = es.device_features(1)
    np.testing.assert_array_equal(feats[:, 0], [2.0, 4.0])  # work placed
    np.testing.assert_array_equal(feats[:, 1], [2.0, 0.0])  # input work there
    np.testing.assert_array_equal(feats[:, 2], [0.0, 0.0])  # first input start (0 if none)
    np.testing.assert_array_equal(feats[:, 3], [2.0, 0.0])  # last input end (0 if none)
    np.testing.assert_array_equal(feats[:, 4], [2.0, 7.0])  # earliest start


def test_topology_costs_and_reset():
    topo = dg.Topology.uniform(2, speed=2.0, bandwidth=5.0, latency=1.0)
    es = EstimatedSchedule(_chain(), topo, dg.SimConfig())
    es.place(0, 0)  # 2 FLOP at 2 FLOP/s: [0, 1)
    np.testing.assert_allclose(es.earliest_start(1), [1.0, 1.0 + 1.0 + 5.0 / 5.0])
    es.reset()
    assert es.makespan == 0.0 and (es.device == -1).all()
    with pytest.raises(ValueError, match="time_model"):
        EstimatedSchedule(_chain(), topo, time_model="other")
