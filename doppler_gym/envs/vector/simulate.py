"""The simulator calls of a batched step: the partial makespans of the envs that placed an op, and the final runs of
the envs that finished, each a batched call per instance.

Envs on one instance (graph, topology, config: the main case, all of them) share one call:
:class:`~doppler_gym.sim.partial_incremental.IncrementalPartialMakespan` over ``(B, n_ops)`` assignments, one slot
per env (its ``PartialMakespan`` for the lookahead's candidate rows), and
:func:`~doppler_gym.sim.api.simulate_batch` for the final runs. Each equals the single env's per-env call: the same
kernels on the same numbers. Under a config with jitter, :func:`~doppler_gym.simulate` draws the factors of row 0
for every run where ``simulate_batch`` draws one row per assignment, so the final runs there go one by one through
``simulate``, as the single env's backend does.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import numpy as np

from doppler_gym.envs.vector.tables import InstanceData, InstanceTables
from doppler_gym.sim.api import simulate, simulate_batch
from doppler_gym.sim.partial_incremental import IncrementalPartialMakespan


def group_rows(tables: InstanceTables, rows: np.ndarray) -> list[tuple[InstanceData, np.ndarray]]:
    """``rows`` (env indices) grouped by the instance each env places now, in first-seen order."""
    if tables.shared is not None:
        return [(tables.shared, rows)]
    data = tables.data
    first = data[rows[0]]
    if all(data[i] is first for i in rows.tolist()):
        return [(first, rows)]
    groups: dict[int, tuple[InstanceData, list[int]]] = {}
    for i in rows.tolist():
        groups.setdefault(id(data[i]), (data[i], []))[1].append(i)
    return [(d, np.array(r, np.int64)) for d, r in groups.values()]


def partial_makespans(
    tables: InstanceTables, rows: np.ndarray, op_device: np.ndarray, position: np.ndarray, out: np.ndarray,
    timed: Callable[[int], AbstractContextManager] = lambda rows: nullcontext(),
) -> None:
    """``out[rows]`` = the simulated makespan of each env's placed ops [reported unit] (the ``"simulated"``
    measure of :mod:`doppler_gym.envs.rewards`).

    Args:
        tables: the batch's instance rows.
        rows: ``(k,) int64`` envs that placed an op (each with at least one op placed).
        op_device: ``(N, max_ops)`` int32 (as the partial makespans take it: no conversion) or int64, the device of
            each placed op, -1 for the others.
        position: ``(N, max_ops) float64`` SEL position of each placed op (the priorities of the partial run
            under ``queue_order`` ``"priority"``/``"fixed"``).
        out: ``(N,) float64``, written at ``rows``.
        timed: the context of a call of ``k`` rows that may run on several threads (an instance whose rows run
            whole, :class:`~doppler_gym.sim.partial.PartialMakespan`'s parallel path); the incremental calls are
            serial and run without it.
    """
    for data, group in group_rows(tables, rows):
        ctx = data.ctx
        partial = _partial_of(data, op_device.shape[0])
        n = ctx.n_ops
        every = group.size == op_device.shape[0]  # rows are ascending and distinct: every env, in order
        assign = op_device[:, :n] if every else op_device[group, :n]
        at = slice(None) if every else group
        priorities = None if ctx.config.queue_order == "fifo" else position[group, :n]
        if partial.incremental:
            out[at] = partial(assign, group, priorities)
        else:
            with timed(group.size):
                out[at] = partial(assign, group, priorities)


def final_makespans(
    tables: InstanceTables, rows: np.ndarray, op_device: np.ndarray, position: np.ndarray, out: np.ndarray
) -> None:
    """``out[rows]`` = the simulated makespan of each finished env's placement [reported unit], with the SEL
    order as priorities (what ``SimBackend.execute`` returns to the single env).

    Where the envs' partial makespans resume their runs (:func:`partial_makespans` made the instance's
    ``IncrementalPartialMakespan``, and the config has no jitter), the last op's run is resumed the same way: the
    list kernel's queues are FIFO, so the priorities change nothing, and the run of every op is the whole
    simulation's, bit for bit. Otherwise ``simulate_batch`` runs them.

    Args as :func:`partial_makespans`; every op of ``rows`` is placed.
    """
    for data, group in group_rows(tables, rows):
        ctx = data.ctx
        n = ctx.n_ops
        partial = data.partial
        if (partial is not None and partial.incremental and partial.n_slots == op_device.shape[0]
                and not ctx.config.has_jitter):
            out[group] = partial(op_device[group, :n], group)
            continue
        assign = np.ascontiguousarray(op_device[group, :n])
        prio = np.ascontiguousarray(position[group, :n])
        if ctx.config.has_jitter:
            out[group] = [simulate(ctx.graph, a, ctx.topology, priorities=p, config=ctx.config).makespan
                          for a, p in zip(assign, prio)]
        else:
            out[group] = simulate_batch(ctx.graph, assign, ctx.topology, priorities=prio, config=ctx.config)


def lookahead_increase(
    tables: InstanceTables, rows: np.ndarray, op_device: np.ndarray, position: np.ndarray, n_placed: np.ndarray,
    selected: np.ndarray, measured: np.ndarray | None, out: np.ndarray,
) -> None:
    """``out[i, :n_devices]`` for each env ``i`` of ``rows`` (an op just selected): how much the simulated
    makespan of the placed ops grows with the selected op on each device, / the reward's reference (the flat
    observation's lookahead, ``PlacementEnv._increase_by_device``), one partial-makespan call per instance.

    Args:
        tables, op_device, position: as :func:`partial_makespans`.
        rows: ``(k,) int64`` envs in the PLC phase, their op selected this step.
        n_placed: ``(N,) int64`` ops placed so far; selected: ``(N,) int64`` the selected op of each env.
        measured: ``(N,)`` the simulated makespan of the placed ops where the reward measures it (``None``
            where it does not: it is simulated here, 0 with nothing placed) [reported unit].
        out: ``(N, D) float64``, written at ``rows`` (the first ``n_devices`` columns).
    """
    for data, group in group_rows(tables, rows):
        ctx = data.ctx
        whole = _partial_of(data, op_device.shape[0]).whole
        n, d, k = ctx.n_ops, ctx.n_devices, group.size
        current = op_device[group, :n]
        sel = selected[group]
        prio = position[group, :n].copy()
        prio[np.arange(k), sel] = n_placed[group]  # the selected op runs after the placed ones
        candidates = np.repeat(current, d, axis=0)  # (k * d, n): the selected op on each device
        candidates[np.arange(k * d), np.repeat(sel, d)] = np.tile(np.arange(d), k)
        assign, prios = [candidates], [np.repeat(prio, d, axis=0)]
        now = np.zeros(k)
        simulate_now = np.zeros(0, np.int64)
        if measured is not None:
            now[:] = measured[group]
        else:
            simulate_now = np.flatnonzero(n_placed[group] > 0)
            assign.append(current[simulate_now])
            prios.append(prio[simulate_now])
        assign_all = np.concatenate(assign)
        if ctx.config.queue_order == "fifo":
            makespans = whole(assign_all)
        else:
            makespans = whole(assign_all, np.concatenate(prios))
        now[simulate_now] = makespans[k * d :]
        out[group, :d] = (makespans[: k * d].reshape(k, d) - now[:, None]) / data.reference


def _partial_of(data: InstanceData, num_envs: int) -> IncrementalPartialMakespan:
    """The instance's partial makespans, one slot per env of the batch (built on first use)."""
    if data.partial is None or data.partial.n_slots != num_envs:
        ctx = data.ctx
        data.partial = IncrementalPartialMakespan(ctx.graph, ctx.topology, ctx.config, n_slots=num_envs)
    return data.partial
