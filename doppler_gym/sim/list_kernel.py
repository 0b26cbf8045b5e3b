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

``tests/doppler_gym/sim/test_reference_parity.py`` checks this against SimPy itself and
``test_list_kernel.py`` against the event kernel, ties included. Ops of zero compute time break the
argument above (an op could become ready at the instant it was requested);
:func:`doppler_gym.sim.packing.pack` sends those graphs to the event kernel.
"""

from __future__ import annotations

import numpy as np
from numba import njit

GRANT_WAITED = 2  # grant wave of an op that waited for its device (its predecessor's release grants it)
GRANT_SHIFT = 40  # grant key = wave << GRANT_SHIFT | (request rank, or the predecessor for a waiting op)
GRANT_LOW = (np.int64(1) << GRANT_SHIFT) - 1
C_SOURCE, C_DELAYED, C_ZERO_DELAY = 0, 2, 4  # the wave at which an op's AllOf fires (see above)
TRIG_OP = (np.int64(1) << 32) - 1  # trigger = CSR slot << 32 | producer of the input that fired the AllOf

# The per-op state the tie rules read sits in one int64 array ``state`` of 5 rows of n (a helper
# taking arrays pays reference counting per array and call): start and end times as the bits of
# their float64 (times are >= +0.0, whose bit patterns order like the values), the grant key, the
# AllOf type and the trigger. The kernel writes the times through a float64 view of the same rows.
S_START, S_END, S_GRANT, S_KIND, S_TRIGGER = 0, 1, 2, 3, 4
N_STATE_ROWS = 5


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
def _tie_before(w1, w2, state, n):
    """Whether op ``w1`` requests its device before ``w2``, both ready at the same time."""
    c1 = state[S_KIND * n + w1]
    c2 = state[S_KIND * n + w2]
    if c1 != c2:
        return c1 < c2
    if c1 == C_SOURCE:
        return w1 < w2
    return _input_before(state[S_TRIGGER * n + w1], state[S_TRIGGER * n + w2], state, n)


@njit(cache=True)
def _before(t1, w1, t2, w2, state, n):
    """Request order of ``w1`` (ready at ``t1``) and ``w2`` (ready at ``t2``): by time, then SimPy's tie rule."""
    return t1 < t2 or (t1 == t2 and _tie_before(w1, w2, state, n))


@njit(cache=True)
def alloc_list_workspace(n, n_dev):
    """Scratch of :func:`run_list`: ``(state, scratch, ftimes)`` int64, int64 and float64 buffers."""
    return np.empty(N_STATE_ROWS * n, np.int64), np.empty(2 * n + n_dev, np.int64), np.empty(2 * n + n_dev, np.float64)


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
        in_degree: ``(n,)`` inputs of each op.
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
        ws: workspace from :func:`alloc_list_workspace`.

    The ops whose inputs are all known wait in request order in a sorted array (pop from the
    front, insert by a short scan from the back: the frontier of a dataflow graph is small, and
    this has no unpredictable branches per level as a heap has); when an insertion would scan
    more than ``SORTED_SCAN_LIMIT`` entries, the array (sorted, so already a heap) becomes a
    binary heap for the rest of the run, so the worst case stays ``O((n + E) log n)``.
    """
    n = in_degree.shape[0]
    keep_edges = edge_end.shape[0] > 0
    state, scratch, ftimes = ws
    times = state[: 2 * n].view(np.float64)  # S_START and S_END rows as float64
    missing = scratch[0:n]  # inputs whose arrival time is not known yet
    queue_op = scratch[n : 2 * n]  # ops whose inputs are all known, not yet requested, in request order
    last_op = scratch[2 * n : 2 * n + n_dev]  # op each device served last
    ready = ftimes[0:n]  # latest input arrival so far
    queue_time = ftimes[n : 2 * n]
    free_at = ftimes[2 * n : 2 * n + n_dev]  # when each device finishes its last op
    o_grant = S_GRANT * n
    o_kind = S_KIND * n
    o_trig = S_TRIGGER * n

    for d in range(n_dev):
        free_at[d] = 0.0
        last_op[d] = -1
    head = 0  # sorted mode: the queue is queue_*[head:tail]; heap mode: a heap in queue_*[:tail]
    tail = 0
    for o in range(n):
        missing[o] = in_degree[o]
        ready[o] = -1.0
        if in_degree[o] == 0:  # sources request at time 0, in op-id order
            state[o_kind + o] = C_SOURCE
            queue_time[tail] = 0.0
            queue_op[tail] = o
            tail += 1
    cross_latency = pair_latency[1] if n_dev > 1 else 0.0
    cross_inv_bw = pair_inv_bw[1] if n_dev > 1 else 0.0
    heaped = False
    rank = 0
    makespan = 0.0
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
    if start.shape[0] > 0:
        for o in range(n):
            start[o] = times[o]
            end[o] = times[n + o]
    return makespan
