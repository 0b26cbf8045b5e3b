"""Which kernel simulates a packed problem: the entry points of the simulator's Numba code.

:func:`run_packed` (one assignment) and :func:`run_many` (a batch, in parallel) hand the models
without contention (one stream per device, FIFO queues, ideal point-to-point links;
:meth:`SimConfig.reference` among them) to the exact list kernel of
:mod:`doppler_gym.sim.list_kernel`, about twice as fast; the event loop of
:mod:`doppler_gym.sim.event_loop` simulates every model, and is the fallback for ops of zero
duration. Single calls go through :func:`run_packed` (five arguments, device range checked inside)
and leave times undivided for :class:`~doppler_gym.sim.trace.Trace` to divide lazily.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from doppler_gym.sim.event_loop import alloc_workspace, run
from doppler_gym.sim.list_kernel import alloc_list_workspace, run_list
from doppler_gym.sim.packed_layout import Meta, problem_arrays, segment


@njit(cache=True)
def value_range(values):
    """``(min, max)`` of a 1-D integer array in one pass (``(0, -1)`` when empty)."""
    if values.shape[0] == 0:
        return 0, -1
    low = values[0]
    high = values[0]
    for x in values:
        if x < low:
            low = x
        elif x > high:
            high = x
    return low, high


@njit(cache=True)
def run_packed(meta, ints, floats, assignment, times):
    """One assignment of a packed problem on a fresh workspace, the per-op rows taken from ``floats``
    (``Meta.PRIORITY_ROW``, ``Meta.COMP_FACTOR_ROW``, ``Meta.EDGE_FACTOR_ROW``): five arguments,
    since Numba's dispatch costs about as much per argument as simulating an op. Runs the list
    kernel where ``meta[Meta.LIST_KERNEL]`` allows it (the event loop when an op's duration rounds
    to zero there), else the event loop :func:`~doppler_gym.sim.event_loop.run`. ``times`` stay in
    internal units (:class:`~doppler_gym.sim.trace.Trace` divides them when first read); the
    returned makespan is divided. ``assignment`` (int32 or int64) is checked first: ``-1.0`` is returned, nothing
    simulated, when a device lies outside ``[0, D)`` (or, with ``meta[Meta.EXACT_DEVICES]``, when
    device ``D - 1`` is unused)."""
    n, n_edges, n_dev = meta[Meta.N_OPS], meta[Meta.N_EDGES], meta[Meta.N_DEVICES]
    low, high = value_range(assignment)
    if low < 0 or high >= n_dev or (meta[Meta.EXACT_DEVICES] != 0 and high + 1 != n_dev):
        return -1.0  # not this problem's devices: the caller checks and reports
    comp_factor = segment(floats, meta, Meta.COMP_FACTOR_ROW, n)
    edge_factor = segment(floats, meta, Meta.EDGE_FACTOR_ROW, n_edges)
    if meta[Meta.LIST_KERNEL] != 0:
        makespan = run_list(
            *problem_arrays(meta, ints, floats), comp_factor, edge_factor, meta[Meta.PLAIN] != 0, assignment, n_dev,
            times[0:n], times[n : 2 * n], times[2 * n : 2 * n + n_edges], times[2 * n + n_edges :],
            alloc_list_workspace(n, n_dev),
        )
        if makespan >= 0.0:
            return makespan / floats[meta[Meta.DIVISOR]]
    priority = segment(floats, meta, Meta.PRIORITY_ROW, n)
    return run(meta, ints, floats, priority, comp_factor, edge_factor, assignment, times, alloc_workspace(meta))


@njit(cache=True, parallel=True)
def run_many(meta, ints, floats, priority, comp_factor, edge_factor, assignments, makespans):
    """Run ``B`` assignments in parallel (``prange`` over chunks, one workspace per chunk).

    ``priority`` is ``(P, n)`` and the factors ``(J, n)``/``(J, E)`` with ``P, J`` in ``{1, B}``:
    row ``b % P`` serves assignment ``b``. Fills ``makespans`` ``(B,)``. Uses the list kernel
    where ``meta[Meta.LIST_KERNEL]`` allows it, as :func:`run_packed` does.
    """
    n_batch = assignments.shape[0]
    n_chunks = min(n_batch, 64)
    n, n_dev = meta[Meta.N_OPS], meta[Meta.N_DEVICES]
    n_times = 2 * n + 2 * meta[Meta.N_EDGES]
    use_list = meta[Meta.LIST_KERNEL] != 0
    plain = meta[Meta.PLAIN] != 0
    divisor = floats[meta[Meta.DIVISOR]]
    for c in prange(n_chunks):
        problem = problem_arrays(meta, ints, floats)
        list_ws = alloc_list_workspace(n if use_list else 0, n_dev)
        none = np.empty(0, np.float64)
        ws = alloc_workspace(meta)  # the event loop's (a few kB per chunk: cheaper than deciding)
        times = np.empty(n_times, np.float64)
        for b in range(c, n_batch, n_chunks):
            jr = b % comp_factor.shape[0]
            makespan = -1.0
            if use_list:
                makespan = run_list(
                    *problem, comp_factor[jr], edge_factor[jr], plain, assignments[b], n_dev, none, none, none, none,
                    list_ws,
                )
            if makespan >= 0.0:
                makespans[b] = makespan / divisor
            else:  # the event loop: another model, or a duration that rounds to zero
                makespans[b] = run(
                    meta, ints, floats, priority[b % priority.shape[0]], comp_factor[jr], edge_factor[jr],
                    assignments[b], times, ws,
                )
