"""Drawing for the placement envs, kept out of the dynamics: a text summary and a Gantt image.

matplotlib is imported only by ``render_rgb_array`` (through :mod:`doppler_gym.sim.gantt`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from doppler_gym.envs.context import GraphContext
from doppler_gym.envs.observation import SEL
from doppler_gym.sim.trace import Trace

if TYPE_CHECKING:
    from doppler_gym.envs.placement import PlacementEnv


def _ids(values: np.ndarray, limit: int = 12) -> str:
    shown = ", ".join(str(int(x)) for x in values[:limit])
    return f"[{shown}{', ...' if values.size > limit else ''}]"


def render_ansi(env: PlacementEnv) -> str:
    """A few lines: the instance, the phase, per-device load, estimated and final makespans."""
    ctx = env.context
    if ctx is None:
        return "PlacementEnv: no episode yet (call reset())\n"
    es, div = env.estimate, ctx.time_divisor
    unit = env.sim_config.time_unit
    placed = int((es.device >= 0).sum())
    lines = [
        (
            f"graph {ctx.graph.name!r} ({ctx.n_ops} ops, {ctx.n_edges} edges, graph_id {ctx.graph_id}) on "
            f"{ctx.topology.name!r} ({ctx.n_devices} devices); times in {unit}"
        ),
    ]
    if env.episode_over and env.trace is not None:
        ms = env.trace.makespan
        lines.append(
            f"done: makespan {ms:.6g} (reference {ctx.reference_makespan:.6g}, ratio "
            f"{ms / ctx.reference_makespan:.3f}; lower bound {ctx.lower_bound:.6g}); "
            f"estimated {env.estimated_makespan:.6g}"
        )
    else:
        ready = np.flatnonzero(env.action_masks()[: env.max_ops]) if env.phase == SEL else np.zeros(0)
        phase = f"SEL, ready {_ids(ready)}" if env.phase == SEL else f"PLC, placing op {env.selected_op}"
        lines.append(
            f"placed {placed}/{ctx.n_ops}; phase {phase}; estimated makespan {env.estimated_makespan:.6g} "
            f"(reference {ctx.reference_makespan:.6g}, lower bound {ctx.lower_bound:.6g})"
        )
    lines.append(f"{'device':<8}{'ops':>6}{'work':>14}{'free at':>14}")
    counts = np.bincount(es.device[es.device >= 0], minlength=ctx.n_devices)
    for d in range(ctx.n_devices):
        label = ctx.topology.device_label(d)
        lines.append(f"{label:<8}{counts[d]:>6}{es.work[d] / div:>14.6g}{es.avail[d] / div:>14.6g}")
    return "\n".join(lines) + "\n"


def render_rgb_array(env: PlacementEnv, dpi: int = 60) -> np.ndarray:
    """``(H, W, 3) uint8`` Gantt chart: the backend's trace once the episode is done, else the
    estimated schedule of the ops placed so far."""
    from doppler_gym.sim.gantt import gantt_rgb_array

    ctx = env.context
    if ctx is None:
        raise RuntimeError("PlacementEnv.render: no episode yet; call reset() first")
    title = f"{ctx.graph.name} on {ctx.topology.name}"
    if env.trace is not None:
        return gantt_rgb_array(env.trace, ctx.graph, title=title, lower_bound=ctx.lower_bound, dpi=dpi)
    es, div = env.estimate, ctx.time_divisor
    placed = es.device >= 0
    nan_e = np.full(ctx.n_edges, np.nan)
    partial = Trace(
        makespan=env.estimated_makespan,
        start=np.where(placed, es.start / div, np.nan),
        end=np.where(placed, es.end / div, np.nan),
        assignment=np.where(placed, es.device, 0).astype(np.int32),
        edge_start=nan_e, edge_end=nan_e, n_devices=ctx.n_devices, time_unit=env.sim_config.time_unit,
    )
    return gantt_rgb_array(
        partial, ctx.graph, title=f"{title}: estimated schedule, {int(placed.sum())}/{ctx.n_ops} placed",
        lower_bound=ctx.lower_bound, dpi=dpi,
    )


def render_assign_ansi(ctx: GraphContext, trace: Trace | None) -> str:
    """Text summary of a one-shot (``Doppler-SimAssign-v0``) episode."""
    head = (
        f"graph {ctx.graph.name!r} ({ctx.n_ops} ops, {ctx.n_edges} edges, graph_id {ctx.graph_id}) on "
        f"{ctx.topology.name!r} ({ctx.n_devices} devices); times in {ctx.config.time_unit}\n"
    )
    if trace is None:
        return head + (
            f"waiting for an assignment (reference {ctx.reference_makespan:.6g}, lower bound "
            f"{ctx.lower_bound:.6g})\n"
        )
    counts = np.bincount(trace.assignment, minlength=ctx.n_devices)
    busy = trace.device_busy
    rows = "".join(
        f"{ctx.topology.device_label(d):<8}{counts[d]:>6}{busy[d]:>14.6g}\n" for d in range(ctx.n_devices)
    )
    return head + (
        f"makespan {trace.makespan:.6g} (reference {ctx.reference_makespan:.6g}, ratio "
        f"{trace.makespan / ctx.reference_makespan:.3f}; lower bound {ctx.lower_bound:.6g})\n"
        f"{'device':<8}{'ops':>6}{'busy':>14}\n" + rows
    )


def render_trace_rgb_array(ctx: GraphContext, trace: Trace | None, dpi: int = 60) -> np.ndarray:
    """``(H, W, 3) uint8`` Gantt chart of ``trace`` (an empty chart when ``None``)."""
    from doppler_gym.sim.gantt import gantt_rgb_array

    if trace is None:
        nan_n, nan_e = np.full(ctx.n_ops, np.nan), np.full(ctx.n_edges, np.nan)
        trace = Trace(
            makespan=0.0, start=nan_n, end=nan_n, assignment=np.zeros(ctx.n_ops, np.int32), edge_start=nan_e,
            edge_end=nan_e, n_devices=ctx.n_devices, time_unit=ctx.config.time_unit,
        )
    return gantt_rgb_array(
        trace, ctx.graph, title=f"{ctx.graph.name} on {ctx.topology.name}", lower_bound=ctx.lower_bound,
        dpi=dpi,
    )
