"""Kernels of :class:`~doppler_gym.sim.partial.PartialMakespan`: each row is an ``(n,)`` assignment with ``-1``
for an unplaced op, simulated as the subgraph induced by its placed ops, on the simulator's own kernels.

Two paths, both exact (equal to :func:`~doppler_gym.sim.api.simulate` on the induced subgraph, ties included:
the tie rules of both kernels read op ids, CSR slots and request order only relative to each other):

* :func:`list_row`, where ``meta[Meta.LIST_KERNEL]`` allows the list kernel
  (:func:`~doppler_gym.sim.list_kernel.run_list`): the full problem, each unplaced op's in-degree out of reach
  so that it is never queued;
* :func:`induce` then :func:`induced_event_loop`, for the other models (and a row whose op duration rounds to
  zero on the list kernel): the induced subgraph (the placed ops, renumbered ``0 .. m-1`` in op-id order, and
  the edges between them) packed into the buffers that :func:`alloc_subproblem` lays out once per packed
  problem (copies of its ``ints`` and ``floats``, then room for the induced graph segments and per-op rows,
  which the induced problem's ``meta`` points to; the device and link tables stay those of the copies), run on
  the event loop (:func:`~doppler_gym.sim.event_loop.run`): an unplaced op is never requested, queued or sent to.

:func:`partial_rows` runs a batch on one thread, in the caller's buffers, and :func:`partial_rows_parallel` in
``prange`` chunks, each in its own copy; both fill ``(B,)`` makespans [reported unit] and return how many rows
failed (a device outside ``[0, D)``, or a ``"fixed"`` order that deadlocks).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange
from numba.extending import intrinsic

from doppler_gym.sim.event_loop import alloc_workspace, run
from doppler_gym.sim.list_kernel import alloc_list_workspace, run_list
from doppler_gym.sim.packed_layout import Meta, problem_arrays, segment

BAD_DEVICE = -1.0  # the makespan of a row with a device outside [0, D)
NOT_SERVED = -3.0  # list_row: an op's duration rounds to zero, the event loop's case


@intrinsic
def read_only(typingctx, array):
    """``array`` itself (no copy), typed read-only. Numba compiles a kernel once per argument type, and the problem
    arrays that :func:`~doppler_gym.sim.dispatch.run_packed` hands the list kernel and the event loop are read-only
    (``pack`` makes them so): the buffers this module writes go to those kernels typed the same, so that one
    compiled copy of each serves both (a cold cache compiles it once). The kernels write no array they get
    read-only, and this module writes the buffers only between kernel calls."""
    def codegen(context, builder, signature, args):
        context.nrt.incref(builder, signature.args[0], args[0])  # a borrowed reference, returned
        return args[0]

    return array.copy(readonly=True)(array), codegen


@njit(cache=True)
def alloc_subproblem(meta, ints, floats):
    """The buffers of the induced problems of one packed problem.

    Args:
        meta, ints, floats: the packed problem (:func:`~doppler_gym.sim.packing.pack`), ``n`` ops, ``E`` edges.

    Returns:
        ``(metas, sub_ints, sub_floats)``. ``metas`` ``(2, len(Meta)) int64``: ``meta``, then the induced
        problem's, whose graph segments and per-op rows point past the copies. ``sub_ints`` int32: ``ints``, then
        room for SUCC_PTR ``(n+1,)``, SUCC_DST, SUCC_EDGE, SRC, DST ``(E,)`` each and IN_DEGREE ``(n,)``, then
        ``(3n,)`` scratch (the new id of each op, -1 when left out; the induced assignment; the old id of each
        new op). ``sub_floats`` float64: ``floats``, then room for COMP ``(COMP_LEN,)`` (one row of ``n`` per
        device class, rows at the full problem's COMP_ROW), SIZE and PRIORITY_ROW ``(n,)`` each; the factor
        rows stay the copied ones (unit factors, as long as any induced problem needs).
    """
    n, n_edges = meta[Meta.N_OPS], meta[Meta.N_EDGES]
    n_ints, n_floats = ints.shape[0], floats.shape[0]
    metas = np.empty((2, meta.shape[0]), np.int64)
    metas[0] = meta
    metas[1] = meta
    sub_meta = metas[1]
    sub_ints = np.empty(n_ints + 2 * n + 1 + 4 * n_edges + 3 * n, np.int32)
    sub_ints[:n_ints] = ints
    o = n_ints
    sub_meta[Meta.SUCC_PTR] = o
    o += n + 1
    sub_meta[Meta.SUCC_DST] = o
    o += n_edges
    sub_meta[Meta.SUCC_EDGE] = o
    o += n_edges
    sub_meta[Meta.SRC] = o
    o += n_edges
    sub_meta[Meta.DST] = o
    o += n_edges
    sub_meta[Meta.IN_DEGREE] = o
    comp_len = meta[Meta.COMP_LEN]
    sub_floats = np.empty(n_floats + comp_len + 2 * n, np.float64)
    sub_floats[:n_floats] = floats
    sub_meta[Meta.COMP] = n_floats
    sub_meta[Meta.SIZE] = n_floats + comp_len
    sub_meta[Meta.PRIORITY_ROW] = n_floats + comp_len + n
    return metas, sub_ints, sub_floats


@njit(cache=True)
def induce(metas, sub_ints, sub_floats, assignment, priority):
    """Pack the subgraph induced by the placed ops of one row into the buffers of :func:`alloc_subproblem`.

    Args:
        metas, sub_ints, sub_floats: from :func:`alloc_subproblem` (``n`` ops, ``D`` devices); the induced
            problem's parts are written.
        assignment: ``(n,) int32`` device of each op, negative for an unplaced one.
        priority: ``(n,) float64`` the row's device-queue keys (copied for the placed ops under priority or
            fixed queues).

    Returns:
        ``m``, the placed ops (``metas[1, Meta.N_OPS]``; the induced assignment is ``sub_ints[-2n : -2n + m]``),
        or ``-1`` when a placed op's device is ``>= D`` (the buffers are then left half written). Op ``o``
        becomes op ``new_id[o]`` (placed ops in op-id order), and each producer's kept CSR slots keep their
        order: what the tie rules of both kernels read. An edge is kept when both its ends are placed, and an
        op's in-degree counts its kept edges: the induced subgraph of any set of ops (the placement MDP's
        prefixes are closed under predecessors, so a placed op keeps all its inputs). The kept edges are
        numbered in CSR order, not in edge-id order as the induced graph numbers them: the kernels read an edge
        id only to index per-edge arrays (the event loop's heap and link queues order transfers by their push
        order), so the times are the same. SRC and DST are left to :func:`_simulate` (the list kernel reads
        neither).
    """
    meta = metas[0]
    sub_meta = metas[1]
    n, n_dev = meta[Meta.N_OPS], meta[Meta.N_DEVICES]
    scratch = sub_ints.shape[0] - 3 * n
    new_id = sub_ints[scratch : scratch + n]
    sub_assign = sub_ints[scratch + n : scratch + 2 * n]
    old_id = sub_ints[scratch + 2 * n :]
    succ_ptr = segment(sub_ints, meta, Meta.SUCC_PTR, n + 1)  # the full problem's, in the copy of its ints
    succ_dst = segment(sub_ints, meta, Meta.SUCC_DST, meta[Meta.N_EDGES])
    comp_len = meta[Meta.COMP_LEN]
    comp = segment(sub_floats, meta, Meta.COMP, comp_len)
    size = segment(sub_floats, meta, Meta.SIZE, n)
    o_comp, o_size, o_prio = sub_meta[Meta.COMP], sub_meta[Meta.SIZE], sub_meta[Meta.PRIORITY_ROW]
    o_deg = sub_meta[Meta.IN_DEGREE]
    keep_priority = meta[Meta.PRIORITY_QUEUES] != 0
    m = 0
    for o in range(n):
        d = assignment[o]
        if d < 0:
            new_id[o] = -1
            continue
        if d >= n_dev:
            return -1
        new_id[o] = m
        old_id[m] = o
        sub_assign[m] = d
        sub_ints[o_deg + m] = 0
        for row in range(0, comp_len, n):  # each device class's row keeps its start (COMP_ROW is shared)
            sub_floats[o_comp + row + m] = comp[row + o]
        sub_floats[o_size + m] = size[o]
        if keep_priority:
            sub_floats[o_prio + m] = priority[o]
        m += 1
    o_ptr, o_sdst, o_sedge = sub_meta[Meta.SUCC_PTR], sub_meta[Meta.SUCC_DST], sub_meta[Meta.SUCC_EDGE]
    k2 = 0
    for u in range(m):  # CSR by producer, each producer's kept slots in their order
        o = old_id[u]
        sub_ints[o_ptr + u] = k2
        for k in range(succ_ptr[o], succ_ptr[o + 1]):
            w = new_id[succ_dst[k]]
            if w >= 0:
                sub_ints[o_sdst + k2] = w
                sub_ints[o_sedge + k2] = k2
                sub_ints[o_deg + w] += 1
                k2 += 1
    sub_ints[o_ptr + m] = k2
    sub_meta[Meta.N_OPS] = m
    sub_meta[Meta.N_EDGES] = k2
    return m


@njit(cache=True)
def list_row(metas, sub_ints, sub_floats, assignment, list_ws, start, end):
    """One row on the list kernel, without an induced problem: the full problem with each unplaced op's
    in-degree out of reach, so that it is never queued (an unplaced source neither), hence never requested;
    what the relaxations of placed producers write into its state is read for no placed op. For prefixes
    closed under predecessors the run is the induced subgraph's, ties included: the tie rules read op ids,
    CSR slots and request ranks only relative to each other (a placed op with an unplaced input never runs
    here). Faster than :func:`induce` plus the kernel, which the event loop needs.

    Args:
        metas, sub_ints, sub_floats: from :func:`alloc_subproblem` (``n`` ops, ``E`` edges, ``D`` devices); the
            scratch of ``sub_ints`` is written (the in-degrees and devices of the run).
        assignment: ``(n,) int32`` device of each op, negative for an unplaced one.
        list_ws: :func:`~doppler_gym.sim.list_kernel.alloc_list_workspace` for ``n`` ops.
        start, end: out ``(n,) float64`` each op's start and end [internal units] (an unplaced op's entries are
            left meaningless; not written with nothing placed), or empty arrays to skip them.

    Returns:
        The makespan [reported unit] (0 with nothing placed), ``BAD_DEVICE`` for a device ``>= D``, or
        ``NOT_SERVED`` when an op's duration rounds to zero (the event loop's case, as in
        :func:`~doppler_gym.sim.dispatch.run_packed`).
    """
    n = metas[0, Meta.N_OPS]
    scratch = sub_ints.shape[0] - 3 * n
    return list_row_in(metas[0], read_only(sub_ints), read_only(sub_floats), assignment,
                       sub_ints[scratch : scratch + n], sub_ints[scratch + n : scratch + 2 * n], list_ws, start, end)


@njit(cache=True)
def list_row_in(meta, ints, floats, assignment, degree, devices, list_ws, start, end):
    """:func:`list_row` on a packed problem ``(meta, ints, floats)`` (read-only, as
    :func:`~doppler_gym.sim.packing.pack` makes them, or through :func:`read_only`), the run's in-degrees and
    devices written into the caller's ``degree`` and ``devices`` ``(n,) int32``: each placed op's in-degree and
    device, ``E + 1`` and 0 for an unplaced one (not written past a device ``>= D``). Returns as
    :func:`list_row`."""
    n, n_edges, n_dev = meta[Meta.N_OPS], meta[Meta.N_EDGES], meta[Meta.N_DEVICES]
    succ_ptr, succ_dst, succ_edge, in_degree, comp, size, inv_speed, pair_latency, pair_inv_bw, comp_row = (
        problem_arrays(meta, ints, floats)
    )
    placed = 0
    for o in range(n):
        d = assignment[o]
        if d < 0:
            degree[o] = n_edges + 1  # more than its inputs: never counted down to 0
            devices[o] = 0
        elif d >= n_dev:
            return BAD_DEVICE
        else:
            degree[o] = in_degree[o]
            devices[o] = d
            placed += 1
    if placed == 0:
        return 0.0
    makespan = run_list(
        succ_ptr, succ_dst, succ_edge, read_only(degree), comp, size, inv_speed, pair_latency, pair_inv_bw, comp_row,
        segment(floats, meta, Meta.COMP_FACTOR_ROW, n), segment(floats, meta, Meta.EDGE_FACTOR_ROW, n_edges),
        meta[Meta.PLAIN] != 0, devices, n_dev, start, end, start[0:0], start[0:0], list_ws,
    )
    if makespan < 0.0:
        return NOT_SERVED
    return makespan / floats[meta[Meta.DIVISOR]]


@njit(cache=True)
def induced_event_loop(sub_meta, sub_ints, sub_floats, sub_assign, times, ws):
    """The event loop (:func:`~doppler_gym.sim.event_loop.run`) on the induced problem that :func:`induce` packed;
    returns its makespan [reported unit] (``-2.0`` for a ``"fixed"`` order that deadlocks). ``times``
    ``(2n + 2E,)`` and ``ws`` are sized for the full problem (the kernel indexes them from 0). Writes the SRC
    and DST segments first (edge ``k`` is CSR slot ``k``)."""
    m = sub_meta[Meta.N_OPS]
    o_ptr, o_sdst = sub_meta[Meta.SUCC_PTR], sub_meta[Meta.SUCC_DST]
    o_src, o_dst = sub_meta[Meta.SRC], sub_meta[Meta.DST]
    for u in range(m):
        for k in range(sub_ints[o_ptr + u], sub_ints[o_ptr + u + 1]):
            sub_ints[o_src + k] = u
            sub_ints[o_dst + k] = sub_ints[o_sdst + k]
    meta, ints, floats = read_only(sub_meta), read_only(sub_ints), read_only(sub_floats)  # as run_packed passes them
    return run(
        meta, ints, floats, segment(floats, meta, Meta.PRIORITY_ROW, m), segment(floats, meta, Meta.COMP_FACTOR_ROW, m),
        segment(floats, meta, Meta.EDGE_FACTOR_ROW, meta[Meta.N_EDGES]), sub_assign, times, ws,
    )


@njit(cache=True)
def _rows(metas, sub_ints, sub_floats, assignments, priorities, makespans, first, step):
    """Rows ``first, first + step, ...`` of a batch in one set of buffers: :func:`list_row` where
    ``meta[Meta.LIST_KERNEL]`` allows it, else (and when it does not serve a row) :func:`induce` and
    :func:`induced_event_loop`. Returns how many rows failed (makespan ``BAD_DEVICE``, or ``-2.0`` for a
    ``"fixed"`` order that deadlocks)."""
    meta = metas[0]
    n, n_dev = meta[Meta.N_OPS], meta[Meta.N_DEVICES]
    use_list = meta[Meta.LIST_KERNEL] != 0
    assign_at = sub_ints.shape[0] - 2 * n  # the induced assignment (scratch of induce)
    list_ws = alloc_list_workspace(n if use_list else 0, n_dev)
    ws = alloc_workspace(meta)  # the event loop's (a few kB: cheaper than deciding)
    times = np.empty(2 * n + 2 * meta[Meta.N_EDGES], np.float64)
    none = times[0:0]
    failed = 0
    for b in range(first, assignments.shape[0], step):
        makespan = NOT_SERVED
        if use_list:
            makespan = list_row(metas, sub_ints, sub_floats, assignments[b], list_ws, none, none)
        if makespan == NOT_SERVED:
            m = induce(metas, sub_ints, sub_floats, assignments[b], priorities[b % priorities.shape[0]])
            if m < 0:
                makespan = BAD_DEVICE
            elif m == 0:
                makespan = 0.0
            else:
                makespan = induced_event_loop(metas[1], sub_ints, sub_floats, sub_ints[assign_at : assign_at + m],
                                              times, ws)
        makespans[b] = makespan
        failed += makespan < 0.0
    return failed


@njit(cache=True)
def partial_rows(metas, sub_ints, sub_floats, assignments, priorities, makespans):
    """Makespans of the induced subgraphs of ``B`` rows, one after another on this thread.

    Args:
        metas, sub_ints, sub_floats: the buffers of :func:`alloc_subproblem` (``n`` ops); written.
        assignments: ``(B, n) int32`` device of each op, ``-1`` for an unplaced one.
        priorities: ``(P, n) float64`` device-queue keys (SEL positions under ``"priority"``, each op's rank on its
            device under ``"fixed"``; ignored under FIFO queues), ``P`` 1 or ``B``: row ``b % P`` serves row ``b``.
        makespans: out ``(B,) float64`` [reported unit]: 0 for a row with nothing placed, ``BAD_DEVICE`` for a
            device outside ``[0, D)``, ``-2.0`` for a ``"fixed"`` order that deadlocks.

    Returns:
        The number of rows that failed (negative makespans).
    """
    return _rows(metas, sub_ints, sub_floats, assignments, priorities, makespans, 0, 1)


@njit(cache=True, parallel=True)
def partial_rows_parallel(metas, sub_ints, sub_floats, assignments, priorities, makespans, threads):
    """:func:`partial_rows` in parallel: ``prange`` over one chunk of rows per thread (rows ``c, c + T, ...`` for
    ``T = min(B, threads)``; pass ``numba.get_num_threads()``, which a cached kernel cannot call), each in its
    own copy of the buffers (the given ones are only read)."""
    n_batch = assignments.shape[0]
    n_chunks = max(1, min(n_batch, threads))
    failed = np.zeros(n_chunks, np.int64)
    for c in prange(n_chunks):
        failed[c] = _rows(metas.copy(), sub_ints.copy(), sub_floats.copy(), assignments, priorities, makespans, c,
                          n_chunks)
    return failed.sum()
