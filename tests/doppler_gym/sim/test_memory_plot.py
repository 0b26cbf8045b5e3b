"""The memory panel of the Gantt chart (doppler_gym/sim/gantt.py)."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.gantt import gantt_figure, plot_memory
from tests.doppler_gym.sim.test_memory import TOY_ASSIGNMENT, toy, toy_topology


def test_memory_panel_draws_each_device_timeline(tmp_path):
    g = toy()
    tr = dg.simulate(g, TOY_ASSIGNMENT, topology=toy_topology([118.0, 1e9]), config=SimConfig(memory="track"))
    fig = gantt_figure(tr, g, memory=True)
    assert len(fig.axes) == 2
    lines = fig.axes[1].get_lines()
    for d in range(2):  # one step line per device, through its timeline's points
        t, b = tr.memory.timeline(d)
        line = next(ln for ln in lines if ln.get_label().startswith(f"dev{d} (peak"))
        assert np.max(line.get_ydata()) == pytest.approx(tr.peak_memory[d] / 1e9)
        np.testing.assert_array_equal(np.unique(line.get_xdata()), np.unique(t))
    assert any("out of memory" in ln.get_label() for ln in lines)  # the violation on device 0
    plot_memory(tr, tmp_path / "m.png")
    assert (tmp_path / "m.png").stat().st_size > 0


def test_memory_panel_needs_a_tracked_trace():
    g = toy()
    tr = dg.simulate(g, TOY_ASSIGNMENT, topology=toy_topology())
    with pytest.raises(ValueError, match="memory='track'"):
        gantt_figure(tr, g, memory=True)
