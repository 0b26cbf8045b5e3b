"""The Gantt chart: ops too short to see as bars are drawn as full-height lines."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.sim.gantt import THIN_OP_FRACTION, gantt_figure, gantt_rgb_array

RAW = dg.SimConfig(cost_model="raw")


def _chain(flops: list[float]) -> dg.DataflowGraph:
    n = len(flops)
    return dg.DataflowGraph(
        src=np.arange(n - 1), dst=np.arange(1, n), flops=np.asarray(flops), out_bytes=np.zeros(n), name="chain"
    )


def _thin_segments(fig) -> list[np.ndarray]:
    """Segments of the full-height op lines (the only line collection drawn 2 points wide)."""
    ax = fig.axes[0]
    return [seg for coll in ax.collections if np.all(coll.get_linewidths() == 2) for seg in coll.get_segments()]


def _legend_labels(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_op_shorter_than_the_threshold_is_a_full_height_line_at_its_start():
    g = _chain([10.0, 1e-3, 10.0])  # op 1 lasts 1e-3 / 20 of the makespan, far under the threshold
    trace = dg.simulate(g, np.zeros(3, np.int64), config=RAW)
    assert (trace.end[1] - trace.start[1]) < THIN_OP_FRACTION * trace.makespan
    fig = gantt_figure(trace, g, title=None, lower_bound=None, dpi=50)
    segs = _thin_segments(fig)
    assert len(segs) == 1
    (x0, y0), (x1, y1) = segs[0]
    assert x0 == x1 == pytest.approx(trace.start[1])
    assert y1 - y0 == pytest.approx(0.7)  # the bar height: the whole row
    assert "op under 0.2% of the makespan (1)" in _legend_labels(fig)


def test_no_lines_or_legend_entry_when_every_op_is_wide_enough():
    g = _chain([10.0, 5.0, 10.0])
    trace = dg.simulate(g, np.array([0, 1, 0]), config=RAW)
    fig = gantt_figure(trace, g, title=None, lower_bound=None, dpi=50)
    assert _thin_segments(fig) == []
    assert not any(label.startswith("op under") for label in _legend_labels(fig))


def test_paper_chainmm_shows_every_op():
    """chainmm's 28 add ops (1e8 of 1e12 cost) would vanish as bars: each must be a bar or a line."""
    g = dg.load_graph("paper/chainmm")
    trace = dg.simulate(g, np.arange(g.n_ops) % 4, config=dg.SimConfig.reference())
    fig = gantt_figure(trace, g, title=None, lower_bound=None, dpi=50)
    dur = trace.end - trace.start
    wide = int(np.sum(dur >= THIN_OP_FRACTION * trace.makespan))
    bars = [p for p in fig.axes[0].patches if p.get_width() >= THIN_OP_FRACTION * trace.makespan]
    assert wide == len(bars) and len(_thin_segments(fig)) == g.n_ops - wide == 28


def test_rgb_array_is_an_image():
    g = _chain([10.0, 1e-3, 10.0])
    img = gantt_rgb_array(dg.simulate(g, np.zeros(3, np.int64), config=RAW), g, dpi=40)
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3 and img.shape[1] == 12 * 40
