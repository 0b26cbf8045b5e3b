"""Gantt chart of a :class:`~doppler_gym.sim.trace.Trace`: one row per device, one bar per op.

Drawing only; matplotlib (the ``plot`` extra) is imported inside :func:`gantt_figure`, :func:`draw_memory`
and :func:`plot_memory` and used through its Agg canvas (no pyplot, so the caller's matplotlib backend
is left alone).
"""

from __future__ import annotations

import os

import numpy as np

from doppler_gym.extras import require
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.trace import Trace

_UNIT_LABEL = {"paper": "paper units (raw cost / 1e10)", "cost": "cost units", "s": "s"}
THIN_OP_FRACTION = 0.002  # ops shorter than this share of the makespan are drawn as lines, not bars


def plot_gantt(
    trace: Trace,
    graph: DataflowGraph,
    path: str | os.PathLike,
    title: str | None = None,
    lower_bound: float | None = None,
    dpi: int = 120,
    memory: bool = False,
) -> None:
    """Write a Gantt chart of ``trace`` to ``path`` (PNG, or any format matplotlib infers from the suffix).

    Rows are devices (device 0 on top). Each op is a bar from its start to its end, coloured by
    op kind when the graph has kinds, else by op id (early ops dark, late ops light); an op
    shorter than ``THIN_OP_FRACTION`` of the makespan, which would be too narrow to see, is a
    full-height line at its start instead (counted in the legend). Each
    transfer between devices is a thin grey line from the producer's row at the moment the data
    leaves to the consumer's row when it arrives, ending in a dot. A dashed line marks
    ``lower_bound`` when given; the title reports the makespan.

    Args:
        trace: the simulated (or measured) execution.
        graph: the graph that was run (for edges, kinds and op count).
        path: output file; parent folders are created.
        title: first line of the title (default: the graph name).
        lower_bound: a makespan lower bound to mark, in ``trace.time_unit``.
        dpi: resolution of raster output.
        memory: add a panel under the chart with each device's memory in use over time and its
            capacity (:func:`draw_memory`; needs ``trace.memory``, i.e. ``SimConfig(memory="track")``).
    """
    fig = gantt_figure(trace, graph, title=title, lower_bound=lower_bound, dpi=dpi, memory=memory)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)


def gantt_rgb_array(
    trace: Trace,
    graph: DataflowGraph,
    title: str | None = None,
    lower_bound: float | None = None,
    dpi: int = 80,
) -> np.ndarray:
    """The chart of :func:`plot_gantt` as an ``(H, W, 3) uint8`` RGB image (e.g. for ``render()``).

    Ops whose ``start``/``end`` are NaN are not drawn (a partial schedule). Arguments as in
    :func:`plot_gantt`; ``dpi`` sets the image size (the figure is 12 inches wide).
    """
    fig = gantt_figure(trace, graph, title=title, lower_bound=lower_bound, dpi=dpi)
    fig.canvas.draw()
    return np.array(fig.canvas.buffer_rgba(), dtype=np.uint8)[:, :, :3]


def gantt_figure(
    trace: Trace, graph: DataflowGraph, title: str | None = None, lower_bound: float | None = None, dpi: int = 120,
    memory: bool = False,
):
    """The chart of :func:`plot_gantt` as a matplotlib ``Figure`` on an Agg canvas (no pyplot), to
    save, draw or inspect (its first axes hold the bars, lines and legend). Arguments as in
    :func:`plot_gantt`."""
    require("matplotlib", "gantt_figure (a Gantt chart)")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    if trace.start.shape != (graph.n_ops,):
        raise ValueError(
            f"plot_gantt: trace has {trace.start.shape[0]} ops but graph {graph.name!r} has {graph.n_ops}"
        )
    n_dev = trace.n_devices
    row = (n_dev - 1 - trace.assignment).astype(np.float64)  # device 0 on top
    height = 0.7

    if graph.kinds is not None:
        kinds = sorted(set(graph.kinds))
        palette = _palette(len(kinds))
        colour_of = {k: palette[i] for i, k in enumerate(kinds)}
        colours = [colour_of[k] for k in graph.kinds]
        legend = [Patch(facecolor=colour_of[k], edgecolor="black", linewidth=0.4, label=k) for k in kinds]
    else:
        from matplotlib import colormaps

        cmap = colormaps["viridis"]
        colours = [cmap(0.1 + 0.8 * i / max(graph.n_ops - 1, 1)) for i in range(graph.n_ops)]
        legend = []

    if memory and trace.memory is None:
        raise ValueError("plot_gantt(memory=True) needs a trace with memory: simulate with SimConfig(memory='track')")
    chart_height = 1.4 + 0.55 * n_dev
    fig = Figure(figsize=(12, chart_height + (2.8 if memory else 0.0)), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    if memory:  # the chart on top, the memory panel below on the same time axis
        ax, mem_ax = fig.subplots(2, 1, sharex=True, height_ratios=[chart_height, 2.8])
        draw_memory(mem_ax, trace)
    else:
        ax = fig.add_subplot()
    dur = trace.end - trace.start
    ax.barh(row, dur, left=trace.start, height=height, color=colours, edgecolor="black", linewidth=0.3, zorder=2)

    span = max(trace.makespan, 1e-300)
    thin = np.flatnonzero(dur < THIN_OP_FRACTION * span)  # bars too narrow to see: a full-height line each
    if thin.size:
        ax.vlines(trace.start[thin], row[thin] - height / 2, row[thin] + height / 2,
                  colors=[colours[v] for v in thin], linewidths=2, zorder=3)
        legend.append(_line_handle(f"op under {THIN_OP_FRACTION:.1%} of the makespan ({thin.size})",
                                   color="0.35", linewidth=2))
    for v in np.flatnonzero(dur > 0.025 * span):  # label ops wide enough to hold their id
        ax.text(trace.start[v] + dur[v] / 2, row[v], str(int(v)), ha="center", va="center", fontsize=6,
                color="white" if graph.kinds is None and v < 0.6 * graph.n_ops else "black", zorder=4)

    moved = trace.transfers
    if moved.size:
        src_row = row[graph.src[moved]]
        dst_row = row[graph.dst[moved]]
        # leave from the bottom/top edge of the producer's row towards the consumer's row
        offset = np.sign(dst_row - src_row) * height / 2
        segs = np.stack(
            [np.stack([trace.edge_start[moved], src_row + offset], 1),
             np.stack([trace.edge_end[moved], dst_row - offset], 1)], 1)
        ax.add_collection(LineCollection(segs, colors="0.35", linewidths=0.5, alpha=0.5, zorder=3))
        ax.scatter(segs[:, 1, 0], segs[:, 1, 1], s=4, color="0.25", zorder=3, linewidths=0)
        legend.append(_line_handle(f"transfer ({moved.size} edges)"))

    if lower_bound is not None:
        ax.axvline(lower_bound, color="tab:red", linestyle="--", linewidth=1, zorder=1)
        legend.append(_line_handle(f"lower bound {lower_bound:.4g}", color="tab:red", linestyle="--"))

    ax.set_yticks(np.arange(n_dev), [f"dev{d}" for d in range(n_dev - 1, -1, -1)])
    ax.set_ylim(-0.6, n_dev - 0.4)
    ax.set_xlim(0, span * 1.01)
    ax.set_xlabel(f"time [{_UNIT_LABEL.get(trace.time_unit, trace.time_unit)}]")
    ax.grid(axis="x", linestyle=":", linewidth=0.5, zorder=0)
    head = title if title is not None else graph.name
    short = {"paper": " paper units", "cost": " cost units"}.get(trace.time_unit, f" {trace.time_unit}")
    ax.set_title(f"{head}\nmakespan {trace.makespan:.4g}{short}, {graph.n_ops} ops, {moved.size} transfers",
                 fontsize=10)
    if legend:
        ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)
    return fig


def draw_memory(ax, trace: Trace) -> None:
    """Draw each device's memory in use over time (a step line per device, from ``trace.memory``'s
    timeline) and its capacity (dashed, when finite) on matplotlib axes ``ax``; the y axis is in GB
    (decimal), a point where a device runs out of memory is marked with a red cross."""
    require("matplotlib", "draw_memory")
    from matplotlib import colormaps

    mem = trace.memory
    cmap = colormaps["tab10"]
    for d in range(mem.n_devices):
        t, b = mem.timeline(d)
        colour = cmap(d % cmap.N)
        ax.step(t, b / 1e9, where="post", color=colour, linewidth=1, label=f"dev{d} (peak {mem.peak[d] / 1e9:.3g} GB)")
        if np.isfinite(mem.capacity[d]) and mem.capacity[d] <= 1.5 * max(mem.peak.max(), 1.0):
            ax.axhline(mem.capacity[d] / 1e9, color=colour, linestyle="--", linewidth=0.8)
    if mem.violation is not None:
        v = mem.violation
        ax.plot([v.time], [v.capacity / 1e9], marker="x", color="tab:red", markersize=8,
                label=f"dev{v.device} out of memory (+{v.excess / 1e9:.3g} GB)")
    ax.set_ylabel("memory in use [GB]")
    ax.set_ylim(bottom=0)
    ax.grid(axis="both", linestyle=":", linewidth=0.5)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)


def plot_memory(trace: Trace, path: str | os.PathLike, title: str | None = None, dpi: int = 120) -> None:
    """Write the memory panel of :func:`draw_memory` alone to ``path`` (needs ``trace.memory``)."""
    require("matplotlib", "plot_memory")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if trace.memory is None:
        raise ValueError("plot_memory needs a trace with memory: simulate with SimConfig(memory='track')")
    fig = Figure(figsize=(12, 3.2), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    draw_memory(ax, trace)
    ax.set_xlabel(f"time [{_UNIT_LABEL.get(trace.time_unit, trace.time_unit)}]")
    ax.set_title(title or "memory in use per device", fontsize=10)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)


def _palette(n: int) -> list[tuple[float, float, float, float]]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _line_handle(label: str, color: str = "0.35", linestyle: str = "-", linewidth: float = 1):
    from matplotlib.lines import Line2D

    return Line2D([], [], color=color, linestyle=linestyle, linewidth=linewidth, label=label)
