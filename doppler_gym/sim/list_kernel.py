"""Exact list-scheduling kernel: the single-stream FIFO runtime with ideal links, without an event loop.

Under ``streams=1``, ``queue_order="fifo"``, ``link_model="ideal"`` and point-to-point transfers
(:meth:`SimConfig.reference` among them), every op has a positive compute time and transfers never
contend, so a device is a single FIFO server and an op's timing follows from its *request order*:
``start = max(ready, end of the op its device served before it)``. Requests are made in the order
of (ready time, SimPy's processing order of the ops' ``AllOf`` events), and an op can only become
ready after every op requested before it has *started* (``ready[w] >= end[u] > start[u] >=
ready[u]`` for each producer ``u``). So one queue of ready ops, taken in request order, replaces
the event loop of :mod:`doppler_gym.sim.event_loop` (no completion, arrival or delivery events): per
op one insertion and one removal, per edge one relaxation.

The tie order is SimPy's, derived from the authors' process structure (see
``doppler_gym/sim/simpy_reference.py``; the event kernel's docstring has the waves). Within one
timestamp SimPy processes breadth-first in waves: wave 0 are the timeouts due now, in event-id
(scheduling) order. Counting waves from there:

* a transfer with a positive delay (cross-device) reaches its consumer's ``AllOf`` at wave 1 and,
  when it is the last input, the ``AllOf`` fires at wave 2 (its *type* ``c = 2``);
* a zero-delay transfer (same device) goes ``COMPUTED`` (0) -> finish (1) -> timeout (2) ->
  process end (3): its ``AllOf`` fires at wave 4 (``c = 4``); sources fire at time 0 (``c = 0``,
  op-id order);
* a device grant is at wave 2 when the op waited (its predecessor's release, wave 1, grants it)
  and right after the ``AllOf`` (wave ``c + 1``) when the device was idle.

Hence these orders, all lexicographic, each used only between events of the same time:

* ``COMPUTED(u)`` (timeouts scheduled at the grant): ``(start[u], grant wave, then for a waiting op
  the order of COMPUTED(predecessor on its device), for an idle grant its request rank)``
  (:func:`_computed_before`; the recursion goes back in time and ends within a step or two);
* an input of ``w`` arriving at ``T`` through CSR slot ``k`` of producer ``u``: ``(c, end[u],
  COMPUTED(u) order, k)`` (:func:`_input_before`): the last of them fires ``w``'s ``AllOf``;
* requests: ``(ready, c, trigger input order)`` (:func:`_before`, :func:`_tie_before`), the
  queue's order.

Since requests are made in that order, a run extends by one op that no requested op consumes without running
again from the start (:func:`resume_list`, for :mod:`doppler_gym.sim.partial_incremental_kernel`): the requests
before the new op's stand, and the loop (:func:`_drain`, which :func:`run_list` runs after its setup) goes on
from the state at its request.

``tests/doppler_gym/sim/test_reference_parity.py`` checks this against SimPy itself and
``test_list_kernel.py`` against the event kernel, ties included. Ops of zero compute time break the
argument above (an op could become ready at the instant it was requested);
:func:`doppler_gym.sim.packing.pack` sends those graphs to the event kernel.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from doppler_gym.sim.compiled_step import compiled_step

GRANT_WAITED = 2  # grant wave of an op that waited for its device (its predecessor's release grants it)
GRANT_SHIFT = 40  # grant key = wave << GRANT_SHIFT | (request rank, or the predecessor for a waiting op)
GRANT_LOW = (np.int64(1) << GRANT_SHIFT) - 1
C_SOURCE, C_DELAYED, C_ZERO_DELAY = 0, 2, 4  # the wave at which an op's AllOf fires (see above)
TRIG_OP = (np.int64(1) << 32) - 1  # trigger = CSR slot << 32 | producer of the input that fired the AllOf

# The per-op state the tie rules read sits in one int64 array ``state`` of 5 rows of n (the rules are
# steps compiled without reference counting, :mod:`doppler_gym.sim.compiled_step`): start and end times as the bits of
# their float64 (times are >= +0.0, whose bit patterns order like the values), the grant key, the
# AllOf type and the trigger. The kernel writes the times through a float64 view of the same rows.
S_START, S_END, S_GRANT, S_KIND, S_TRIGGER = 0, 1, 2, 3, 4
N_STATE_ROWS = 5


@compiled_step
def _computed_before(a, b, state, n):
    """Whether SimPy processes ``COMPUTED(a)`` before ``COMPUTED(b)``; both end at the same time."""
    while a != b:
        sa = state[S_START * n + a]
        sb = state[S_START * n + b]
        if sa != sb:
            return sa < sb
        ka = state[S_GRANT * n + a]
        kb = state[S_GRANT * n + b]
        wave = ka >> GRANT_SHIFT
        if wave != kb >> GRANT_SHIFT or wave != GRANT_WAITED:
            return ka < kb  # different grant waves, or two idle grants: by wave, then request rank
        a = ka & GRANT_LOW  # two waiting grants: in the order of their predecessors' COMPUTED
        b = kb & GRANT_LOW
    return False


@compiled_step
def _input_before(x, y, state, n):
    """Order of two same-type inputs arriving at the same time, given as triggers (slot << 32 | producer)."""
    u1 = x & TRIG_OP
    u2 = y & TRIG_OP
    if u1 == u2:
        return x < y  # one producer: by CSR slot
    e1 = state[S_END * n + u1]
    e2 = state[S_END * n + u2]
    if e1 != e2:
        return e1 < e2
    return _computed_before(u1, u2, state, n)


@compiled_step
def _tie_before(w1, w2, state, n):
    """Whether op ``w1`` requests its device before ``w2``, both ready at the same time."""
    c1 = state[S_KIND * n + w1]
    c2 = state[S_KIND * n + w2]
    if c1 != c2:
        return c1 < c2
    if c1 == C_SOURCE:
        return w1 < w2
    return _input_before(state[S_TRIGGER * n + w1], state[S_TRIGGER * n + w2], state, n)


@compiled_step
def _before(t1, w1, t2, w2, state, n):
    """Request order of ``w1`` (ready at ``t1``) and ``w2`` (ready at ``t2``): by time, then SimPy's tie rule."""
    return t1 < t2 or (t1 == t2 and _tie_before(w1, w2, state, n))


# The workspace (:func:`alloc_list_workspace`) of ``n`` ops on ``D`` devices, all a run reads and writes besides the
# problem: ``state`` (above); ``scratch`` int64: each op's inputs whose arrival is not known yet (``n``), the queue's
# ops (``n``), the op each device served last (``D``), the ops in request order (``n``), how many requests the run
# made (1); ``ftimes`` float64: each op's latest input arrival so far (``n``; its ready time once queued), the
# queue's times (``n``), when each device finishes its last op (``D``). After a run it holds that run, which
# :func:`resume_list` extends by one op.


@njit(cache=True)
def alloc_list_workspace(n, n_dev):
    """Scratch of :func:`run_list`: ``(state, scratch, ftimes)`` int64 ``(5n,)``, int64 ``(3n + D + 1,)`` and float64
    ``(2n + D,)`` buffers (layout above)."""
    return (np.empty(N_STATE_ROWS * n, np.int64), np.empty(3 * n + n_dev + 1, np.int64),
            np.empty(2 * n + n_dev, np.float64))


@njit(cache=True, inline="always")
def _views(ws, n, n_dev):
    """The parts of a workspace (layout above): ``(times, missing, queue_op, last_op, order, ready, queue_time,
    free_at)``, ``times`` the S_START and S_END rows of ``state`` as float64 ``(2n,)``."""
    state, scratch, ftimes = ws
    return (state[: 2 * n].view(np.float64), scratch[0:n], scratch[n : 2 * n], scratch[2 * n : 2 * n + n_dev],
            scratch[2 * n + n_dev : 3 * n + n_dev], ftimes[0:n], ftimes[n : 2 * n], ftimes[2 * n : 2 * n + n_dev])


@njit(cache=True)
def requests_made(ws):
    """How many ops the run in ``ws`` requested (every op it ran)."""
    scratch = ws[1]
    return scratch[scratch.shape[0] - 1]


SORTED_SCAN_LIMIT = 32  # longest insertion scan of the sorted queue before it turns into a heap


@njit(cache=True)
def run_list(
    succ_ptr, succ_dst, succ_edge, in_degree, comp, size, inv_speed, pair_latency, pair_inv_bw, comp_row,
    comp_factor, edge_factor, plain, assignment, n_dev, start, end, edge_start, edge_end, ws,
):
    """Simulate one assignment; returns the makespan in internal units (the largest op end), or
    -1.0 when an op's duration rounds to zero at its start time (the caller then runs the event
    kernel, :func:`doppler_gym.sim.event_loop.run`).

    Args:
        succ_ptr, succ_dst, succ_edge: ``(n+1,)``, ``(E,)``, ``(E,)`` CSR out-edges by producer
            (SimPy's transfer order): consumer and edge id of each slot.
        in_degree: ``(n,)`` inputs of each op (an op given more than ``E`` is never requested).
        comp: ``(C n,)`` work, one row of ``n`` per device class; op ``w`` takes
            ``comp[comp_row[d] + w] * inv_speed[d] * comp_factor[w]`` on device ``d`` (> 0 for every op).
        size: ``(n,)`` output sizes; edge ``e`` of device pair ``p`` takes
            ``(pair_latency[p] + size * pair_inv_bw[p]) * edge_factor[e]``.
        inv_speed: ``(D,)``; pair_latency, pair_inv_bw: ``(D*D,)`` per device pair ``a * D + b``;
            both 0 on the pairs ``(d, d)``, so that a same-device edge takes exactly 0.
        comp_row: ``(D,)`` start of each device's row in ``comp`` (zeros with one class).
        comp_factor, edge_factor: ``(n,)``, ``(E,)`` jitter multipliers.
        plain: the factors are all ones and every pair of distinct devices has the latency and
            1/bandwidth of pair ``(0, 1)`` (the reference mode): the loop then reads neither the
            factors nor the pair tables (same times: ``x * 1.0 == x``).
        assignment: ``(n,)`` device of each op, in ``[0, n_dev)``.
        start, end: out ``(n,)`` op start and end times; pass empty arrays to skip them.
        edge_start, edge_end: out ``(E,)`` when each transfer began (NaN on one device) and when
            its data reached the consumer; pass empty arrays to skip them.
        ws: workspace from :func:`alloc_list_workspace`; holds the run afterwards.

    Its setup (:func:`_queue_sources`) then the loop (:func:`_drain`), both inlined at Numba's IR
    (``inline="always"``): as two calls they cost about 0.35 us per run (4-16 % on the paper graphs).
    """
    n = in_degree.shape[0]
    times = ws[0][: 2 * n].view(np.float64)
    makespan = _drain(
        succ_ptr, succ_dst, succ_edge, comp, size, inv_speed, pair_latency, pair_inv_bw, comp_row, comp_factor,
        edge_factor, plain, assignment, n_dev, edge_start, edge_end, ws, _queue_sources(in_degree, n_dev, ws), 0, 0.0,
    )
    if start.shape[0] > 0 and makespan >= 0.0:
        for o in range(n):
            start[o] = times[o]
            end[o] = times[n + o]
    return makespan


@njit(cache=True, inline="always")
def _queue_sources(in_degree, n_dev, ws):
    """A run's start in ``ws``: every device free at 0, every op's inputs missing, the sources queued at time 0 in
    op-id order (their AllOf type ``C_SOURCE``); returns the queue's length."""
    n = in_degree.shape[0]
    state, scratch, ftimes = ws
    missing = scratch[0:n]
    queue_op = scratch[n : 2 * n]
    last_op = scratch[2 * n : 2 * n + n_dev]
    ready = ftimes[0:n]
    queue_time = ftimes[n : 2 * n]
    free_at = ftimes[2 * n : 2 * n + n_dev]
    for d in range(n_dev):
        free_at[d] = 0.0
        last_op[d] = -1
    tail = 0
    for o in range(n):
        missing[o] = in_degree[o]
        ready[o] = -1.0
        if in_degree[o] == 0:  # sources request at time 0, in op-id order
            ready[o] = 0.0
            state[S_KIND * n + o] = C_SOURCE
            queue_time[tail] = 0.0
            queue_op[tail] = o
            tail += 1
    return tail


@njit(cache=True, inline="always")
def _drain(
    succ_ptr, succ_dst, succ_edge, comp, size, inv_speed, pair_latency, pair_inv_bw, comp_row, comp_factor,
    edge_factor, plain, assignment, n_dev, edge_start, edge_end, ws, tail, rank, makespan,
):
    """The run's loop, from the state in ``ws`` (arguments as :func:`run_list`'s) to its end: request the queued
    ops in order, each granting its device, relaxing its out-edges and queueing the ops whose inputs are then
    all known. Starts with ``tail`` ops queued, sorted, at ``queue_*[0:tail]``, ``rank`` requests made and
    ``makespan`` the largest end so far; returns the makespan, or -1.0 for a duration that rounds to zero.

    The ops whose inputs are all known wait in request order in a sorted array (pop from the
    front, insert by a short scan from the back: the frontier of a dataflow graph is small, and
    this has no unpredictable branches per level as a heap has); when an insertion would scan
    more than ``SORTED_SCAN_LIMIT`` entries, the array (sorted, so already a heap) becomes a
    binary heap for the rest of the run, so the worst case stays ``O((n + E) log n)``.
    """
    n = size.shape[0]
    keep_edges = edge_end.shape[0] > 0
    state, scratch, ftimes = ws
    times = state[: 2 * n].view(np.float64)  # S_START and S_END rows as float64
    missing = scratch[0:n]
    queue_op = scratch[n : 2 * n]
    last_op = scratch[2 * n : 2 * n + n_dev]
    order = scratch[2 * n + n_dev : 3 * n + n_dev]
    ready = ftimes[0:n]
    queue_time = ftimes[n : 2 * n]
    free_at = ftimes[2 * n : 2 * n + n_dev]
    o_grant = S_GRANT * n
    o_kind = S_KIND * n
    o_trig = S_TRIGGER * n
    cross_latency = pair_latency[1] if n_dev > 1 else 0.0
    cross_inv_bw = pair_inv_bw[1] if n_dev > 1 else 0.0
    head = 0  # sorted mode: the queue is queue_*[head:tail]; heap mode: a heap in queue_*[:tail]
    heaped = False
    # One loop with its steps written out (pop the next request, grant its device, relax its out-edges,
    # queue the ops whose inputs are all known): as inlined handlers, the queueing step alone made the
    # kernel 2-6% slower on the paper graphs, with the pop 20-40%.
    while head < tail:
        w = queue_op[head]
        t = queue_time[head]
        if not heaped:
            head += 1
        else:  # pop: sift the last entry down from the root
            tail -= 1
            lt = queue_time[tail]
            lw = queue_op[tail]
            i = 0
            while True:
                child = 2 * i + 1
                if child >= tail:
                    break
                if child + 1 < tail and _before(
                    queue_time[child + 1], queue_op[child + 1], queue_time[child], queue_op[child], state, n
                ):
                    child += 1
                if _before(queue_time[child], queue_op[child], lt, lw, state, n):
                    queue_time[i] = queue_time[child]
                    queue_op[i] = queue_op[child]
                    i = child
                else:
                    break
            queue_time[i] = lt
            queue_op[i] = lw

        d = assignment[w]
        if free_at[d] > t:  # the device is busy: w waits behind the op it served last
            s = free_at[d]
            state[o_grant + w] = (np.int64(GRANT_WAITED) << GRANT_SHIFT) | last_op[d]
        else:
            s = t
            state[o_grant + w] = ((state[o_kind + w] + 1) << GRANT_SHIFT) | rank
        order[rank] = w
        rank += 1
        work = comp[comp_row[d] + w] * inv_speed[d]
        e = s + (work if plain else work * comp_factor[w])
        if e == s:
            return -1.0  # a duration that rounds to zero: not this kernel's model
        times[w] = s
        times[n + w] = e
        free_at[d] = e
        last_op[d] = w
        if e > makespan:
            makespan = e
        xw = size[w]
        cross = cross_latency + xw * cross_inv_bw  # plain: any transfer of w's output to another device
        for k in range(succ_ptr[w], succ_ptr[w + 1]):
            c = succ_dst[k]
            b = assignment[c]
            if plain:
                a = e + (cross if b != d else 0.0)
            else:  # pair (d, d) has zero latency and zero 1/bandwidth: a == e
                p = d * n_dev + b
                a = e + (pair_latency[p] + xw * pair_inv_bw[p]) * edge_factor[succ_edge[k]]
            if keep_edges:
                edge_start[succ_edge[k]] = e if b != d else np.nan
                edge_end[succ_edge[k]] = a
            r = ready[c]
            if a == r:  # a same-time input: the later one in SimPy's order fires the AllOf
                typ = C_DELAYED if a != e else C_ZERO_DELAY
                kc = state[o_kind + c]
                trig = (np.int64(k) << 32) | w
                if typ > kc or (typ == kc and _input_before(state[o_trig + c], trig, state, n)):
                    state[o_kind + c] = typ
                    state[o_trig + c] = trig
            elif a > r:
                ready[c] = a
                state[o_kind + c] = C_DELAYED if a != e else C_ZERO_DELAY
                state[o_trig + c] = (np.int64(k) << 32) | w
            missing[c] -= 1
            if missing[c] != 0:
                continue
            # All of c's inputs are known: queue it (its time is after t, so it follows w).
            a = ready[c]
            if not heaped:
                i = tail
                while i > head and i + SORTED_SCAN_LIMIT > tail:
                    ti = queue_time[i - 1]
                    if ti < a or (ti == a and not _tie_before(c, queue_op[i - 1], state, n)):
                        break
                    i -= 1
                if i == head or i + SORTED_SCAN_LIMIT > tail:  # found: shift the later entries up
                    for j in range(tail, i, -1):
                        queue_time[j] = queue_time[j - 1]
                        queue_op[j] = queue_op[j - 1]
                    queue_time[i] = a
                    queue_op[i] = c
                    tail += 1
                    continue
                # A long scan: turn the sorted queue into a heap at the start of the arrays.
                tail -= head
                for j in range(tail):
                    queue_time[j] = queue_time[head + j]
                    queue_op[j] = queue_op[head + j]
                head = 0
                heaped = True
            i = tail  # heap push: sift up
            tail += 1
            while i > 0:
                parent = (i - 1) >> 1
                if _before(a, c, queue_time[parent], queue_op[parent], state, n):
                    queue_time[i] = queue_time[parent]
                    queue_op[i] = queue_op[parent]
                    i = parent
                else:
                    break
            queue_time[i] = a
            queue_op[i] = c
    scratch[scratch.shape[0] - 1] = rank
    return makespan


@njit(cache=True, inline="always")
def resume_list(
    succ_ptr, succ_dst, succ_edge, in_degree, comp, size, inv_speed, pair_latency, pair_inv_bw, comp_row,
    comp_factor, edge_factor, plain, assignment, n_dev, preds, w, requested, ws,
):
    """The run in ``ws`` with one more op, ``w``: the result of :func:`run_list` on the new problem, bit for bit,
    from the run's state at ``w``'s request instead of from the start. Returns ``(makespan, drained)``: the
    makespan in internal units (-1.0 as :func:`run_list`), and whether the requests after ``w``'s ran again;
    ``ws`` then holds the new run.

    Args:
        succ_ptr .. n_dev: as :func:`run_list`'s, ``in_degree`` and ``assignment`` with ``w`` given its real
            in-degree and device (every other entry as in the run in ``ws``).
        preds: ``(pred_ptr (n+1,), pred_src (E,), pred_slot (E,))`` int64: op ``x``'s inputs at
            ``pred_ptr[x] : pred_ptr[x + 1]``, each its producer and the producer's CSR slot of the edge.
        w: the new op. The run in ``ws`` (from :func:`run_list` or this function, not -1.0) requested every op
            whose in-degree is at most ``E`` save ``w``: ``w``'s inputs among them, none its consumer.
        requested: how many requests that run made (:func:`requests_made`; 0 for a run with nothing to
            request, whose ``ws`` may be left unwritten).

    Why it is exact: requests are made in the order of (ready time, SimPy's tie rule) (module docstring), and
    ``w``, a sink of the requested ops, changes neither the requests before its own nor anything they read (tie
    rules compare grant ranks only relatively). So the first ``p`` requests of the old run stand, ``p`` the
    requests before ``w``'s (:func:`_position`). Where ``w`` fits an idle stretch of its device, nothing after it
    changes but the idle grants' ranks (:func:`_fit_idle`); else this rebuilds the state at ``w``'s request
    (each device's last op, each later op's known inputs, the queue: :func:`_rebuild_at`) and :func:`_drain`
    runs the rest.
    """
    n = in_degree.shape[0]
    state, scratch, _ = ws
    times, _, _, last_op, order, ready, _, _ = _views(ws, n, n_dev)
    order[requested] = w  # a free entry
    _relax_known(requested, requested + 1, succ_ptr, succ_dst, succ_edge, in_degree, size, pair_latency,
                 pair_inv_bw, edge_factor, plain, assignment, n_dev, preds, ws)  # w's inputs: all requested
    p = _position(w, requested, state, order, ready)
    makespan = _fit_idle(w, p, requested, comp, inv_speed, comp_row, comp_factor, plain, assignment, n_dev, state,
                         times, last_op, order, ready)
    if makespan >= 0.0:
        scratch[scratch.shape[0] - 1] = requested + 1
        return makespan, False
    tail, makespan = _rebuild_at(succ_ptr, succ_dst, succ_edge, in_degree, size, pair_latency, pair_inv_bw,
                                 edge_factor, plain, assignment, n_dev, preds, w, p, requested, ws)
    return _drain(
        succ_ptr, succ_dst, succ_edge, comp, size, inv_speed, pair_latency, pair_inv_bw, comp_row, comp_factor,
        edge_factor, plain, assignment, n_dev, ws[2][0:0], ws[2][0:0], ws, tail, p, makespan,
    ), True


@njit(cache=True, inline="always")
def _position(w, requested, state, order, ready):
    """How many of the run's ``requested`` requests (``order``, the workspace's request order) come before ``w``'s
    (whose ready time, AllOf type and trigger are set) in SimPy's order."""
    n = ready.shape[0]
    p = requested
    t = ready[w]
    while p > 0:  # (the tie rule only on a tie)
        tp = ready[order[p - 1]]
        if tp < t or (tp == t and not _tie_before(w, order[p - 1], state, n)):
            break
        p -= 1
    return p


@njit(cache=True, inline="always")
def _fit_idle(w, p, requested, comp, inv_speed, comp_row, comp_factor, plain, assignment, n_dev, state, times,
              last_op, order, ready):
    """Add ``w`` at request position ``p`` where it changes no other op's times: its device ``d`` serves no later
    op, or the next one is ready at or after ``w``'s end (it found ``d`` idle and still does, and so every later
    op is as it was; only the later idle grants' ranks move up one). Returns the new makespan in internal units,
    or -1.0 (``ws`` untouched but for ``w``'s own entries) where it does not fit (or its duration rounds to
    zero, which the full resume reports). The workspace's parts as :func:`_views` names them."""
    n = ready.shape[0]
    d = assignment[w]
    t = ready[w]
    prev = -1
    for i in range(p - 1, -1, -1):
        if assignment[order[i]] == d:
            prev = order[i]
            break
    s = t
    if prev >= 0 and times[n + prev] > t:
        s = times[n + prev]
    work = comp[comp_row[d] + w] * inv_speed[d]
    e = s + (work if plain else work * comp_factor[w])
    if e == s:
        return -1.0
    for i in range(p, requested):
        if assignment[order[i]] == d:
            if e > ready[order[i]]:
                return -1.0
            break
    makespan = e
    for dv in range(n_dev):
        last_op[dv] = -1
    found = 0
    for i in range(requested - 1, -1, -1):  # shift the later requests up one; the largest end: the devices' last
        o = order[i]
        if i >= p:
            order[i + 1] = o
            if state[S_GRANT * n + o] >> GRANT_SHIFT != GRANT_WAITED:
                state[S_GRANT * n + o] += 1  # an idle grant's rank, one request later
        elif found == n_dev:
            break
        if last_op[assignment[o]] < 0:
            last_op[assignment[o]] = o
            found += 1
            makespan = max(makespan, times[n + o])
    order[p] = w
    times[w] = s
    times[n + w] = e
    if prev >= 0 and times[n + prev] > t:
        state[S_GRANT * n + w] = (np.int64(GRANT_WAITED) << GRANT_SHIFT) | prev
    else:
        state[S_GRANT * n + w] = ((state[S_KIND * n + w] + 1) << GRANT_SHIFT) | p
    return makespan


@njit(cache=True, inline="always")
def _rebuild_at(succ_ptr, succ_dst, succ_edge, in_degree, size, pair_latency, pair_inv_bw, edge_factor, plain,
                assignment, n_dev, preds, w, p, requested, ws):
    """:func:`resume_list`'s state at ``w``'s request position ``p`` (``w``'s ready time, AllOf type, trigger set),
    in ``ws``: returns ``(tail, makespan)``, the queue's length (``w`` first) and the largest end before ``w``."""
    n = in_degree.shape[0]
    times, missing, queue_op, last_op, order, ready, queue_time, free_at = _views(ws, n, n_dev)
    for i in range(p, requested):
        missing[order[i]] = -1  # requested again, after w: not a known input
    _relax_known(p, requested, succ_ptr, succ_dst, succ_edge, in_degree, size, pair_latency, pair_inv_bw,
                 edge_factor, plain, assignment, n_dev, preds, ws)
    queue_op[0] = w
    queue_time[0] = ready[w]
    tail = 1
    for i in range(p, requested):  # the later ops whose inputs are all known, in request order (after w's)
        x = order[i]
        if missing[x] == 0:
            queue_op[tail] = x
            queue_time[tail] = ready[x]
            tail += 1
    for d in range(n_dev):
        free_at[d] = 0.0
        last_op[d] = -1
    found = 0
    makespan = 0.0
    for i in range(p - 1, -1, -1):  # each device's last op before w (its ends increase in request order)
        if found == n_dev:
            break
        o = order[i]
        d = assignment[o]
        if last_op[d] < 0:
            last_op[d] = o
            free_at[d] = times[n + o]
            makespan = max(makespan, times[n + o])
            found += 1
    return tail, makespan


@njit(cache=True, inline="always")
def _relax_known(lo, hi, succ_ptr, succ_dst, succ_edge, in_degree, size, pair_latency, pair_inv_bw, edge_factor,
                 plain, assignment, n_dev, preds, ws):
    """For the ops ``x = order[i]``, ``i`` from ``hi - 1`` down to ``lo`` (consumers before their producers, which
    stay marked meanwhile): ``x``'s ready time, AllOf type and trigger from its inputs already requested (an input
    whose ``missing`` is -1 is not), relaxed with :func:`_drain`'s arithmetic and tie rule (the latest arrival,
    same-time ones in SimPy's order, which does not depend on the order of relaxation); its ``missing``, the
    inputs left; and each consumer that is never requested (in-degree above ``E``) put out of reach again."""
    pred_ptr, pred_src, pred_slot = preds
    n = in_degree.shape[0]
    n_edges = succ_dst.shape[0]
    state = ws[0]
    times, missing, _, _, order, ready, _, _ = _views(ws, n, n_dev)
    o_kind = S_KIND * n
    o_trig = S_TRIGGER * n
    cross_latency = pair_latency[1] if n_dev > 1 else 0.0
    cross_inv_bw = pair_inv_bw[1] if n_dev > 1 else 0.0
    for i in range(hi - 1, lo - 1, -1):
        x = order[i]
        b = assignment[x]
        ready[x] = -1.0
        if in_degree[x] == 0:
            ready[x] = 0.0
            state[o_kind + x] = C_SOURCE
        left = in_degree[x]
        for j in range(pred_ptr[x], pred_ptr[x + 1]):
            u = pred_src[j]
            if missing[u] == -1:
                continue
            left -= 1
            k = pred_slot[j]
            d = assignment[u]
            e = times[n + u]
            xw = size[u]
            if plain:
                cross = cross_latency + xw * cross_inv_bw
                a = e + (cross if b != d else 0.0)
            else:
                p = d * n_dev + b
                a = e + (pair_latency[p] + xw * pair_inv_bw[p]) * edge_factor[succ_edge[k]]
            typ = C_DELAYED if a != e else C_ZERO_DELAY
            trig = (np.int64(k) << 32) | u
            r = ready[x]
            if a > r or (a == r and (typ > state[o_kind + x] or (
                    typ == state[o_kind + x] and _input_before(state[o_trig + x], trig, state, n)))):
                ready[x] = a
                state[o_kind + x] = typ
                state[o_trig + x] = trig
        missing[x] = left
        for k in range(succ_ptr[x], succ_ptr[x + 1]):
            c = succ_dst[k]
            if in_degree[c] > n_edges:
                missing[c] = in_degree[c]
