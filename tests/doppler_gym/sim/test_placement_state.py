"""PlacementState: ready sets, the SEL order, device features and errors on a hand-checked DAG."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.sim.placement_state import PLC, SEL, PlacementState

RAW = dg.SimConfig(cost_model="raw")  # compute time = flops, transfer time = out_bytes (no latency)


def _diamond() -> dg.DataflowGraph:
    # op0 (2, out 5) -> op2, op3; op1 (1, out 3) -> op2; op2 (4, out 1) -> op3; op3 (3)
    return dg.DataflowGraph(src=[0, 0, 1, 2], dst=[2, 3, 2, 3], flops=[2.0, 1.0, 4.0, 3.0],
                            out_bytes=[5.0, 3.0, 1.0, 1.0])


def test_an_episode_by_hand():
    state = PlacementState(_diamond(), dg.Topology.uniform(2), RAW)
    assert list(state.ready) == [0, 1] and state.phase == SEL and state.selected == -1 and not state.done
    # op1 first, on device 1: [0, 1); nothing new is ready (op2 still waits for op0)
    np.testing.assert_array_equal(state.select(1), np.zeros((2, 5)))
    assert state.phase == PLC and state.selected == 1
    assert state.place(1) == [] and list(state.ready) == [0]
    # op0 on device 0: [0, 2); op2 becomes ready
    feats = state.select(0)
    np.testing.assert_array_equal(feats[:, 0], [0.0, 1.0])  # compute placed on each device
    np.testing.assert_array_equal(feats[:, 4], [0.0, 1.0])  # earliest start: when the device is free
    assert state.place(0) == [2] and list(state.ready) == [2]
    # op2: inputs op0 on device 0 (ends 2, 5 to move) and op1 on device 1 (ends 1, 3 to move)
    feats = state.select(2)
    np.testing.assert_array_equal(feats, [[2.0, 2.0, 0.0, 2.0, 4.0],  # start on 0: op1's output at 1 + 3
                                          [1.0, 1.0, 0.0, 1.0, 7.0]])  # start on 1: op0's output at 2 + 5
    np.testing.assert_array_equal(state.selected_features, feats)
    assert state.place(0) == [3]  # [4, 8) on device 0
    feats = state.select(3)
    np.testing.assert_array_equal(feats, [[6.0, 6.0, 0.0, 8.0, 8.0],
                                          [1.0, 0.0, 0.0, 0.0, 9.0]])  # op2's output at 8 + 1
    assert state.place(1) == [] and state.done  # [9, 12) on device 1
    np.testing.assert_array_equal(state.order, [1, 0, 2, 3])
    np.testing.assert_array_equal(state.assignment, [0, 1, 0, 1])
    assert state.n_placed == 4 and state.makespan == 12.0 and state.phase == SEL
    assert state.order.dtype == state.assignment.dtype == np.int64
    np.testing.assert_array_equal(state.schedule.start, [0.0, 0.0, 4.0, 9.0])
    state.reset()
    assert list(state.ready) == [0, 1] and state.n_placed == 0 and state.makespan == 0.0
    assert state.order.shape == (0,) and (state.assignment == -1).all()


def test_ready_ops_keep_the_order_they_became_ready():
    # sources 0, 1, 2; op0 -> op4, op1 -> op3: placing 0 then 1 makes 4 ready before 3
    g = dg.DataflowGraph(src=[0, 1], dst=[4, 3], flops=[1.0] * 5, out_bytes=[1.0] * 5)
    state = PlacementState(g, dg.Topology.uniform(2), RAW)
    for op, want in ((0, [1, 2, 4]), (1, [2, 4, 3])):
        state.select(op)
        state.place(0)
        assert list(state.ready) == want


def test_faithful_time_model_reaches_the_schedule():
    state = PlacementState(_diamond(), dg.Topology.uniform(2), RAW, time_model="faithful")
    for op, device in ((1, 1), (0, 0), (2, 0)):
        state.select(op)
        state.place(device)
    assert (state.schedule.start[2], state.schedule.end[2]) == (2.0, 6.0)  # the compute already on device 0


def test_misuse_is_a_clear_error():
    state = PlacementState(_diamond(), dg.Topology.uniform(2), RAW)
    with pytest.raises(ValueError, match="no op is selected"):
        state.place(0)
    with pytest.raises(ValueError, match=r"op 2 is not ready.*ready ops are \[0, 1\]"):
        state.select(2)
    with pytest.raises(ValueError, match="not ready"):
        state.select(7)
    state.select(0)
    with pytest.raises(ValueError, match="op 0 is selected and not placed yet"):
        state.select(1)
    with pytest.raises(ValueError, match="not a device id"):
        state.place(2)
    state.place(1)
    with pytest.raises(ValueError, match="op 0 is not ready"):  # placed already
        state.select(0)
    assert list(state.ready) == [1] and state.n_placed == 1
