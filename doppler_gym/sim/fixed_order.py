"""``queue_order="fixed"``: each device runs its ops in one given order and waits for the next one.

The kernels get, in place of priorities, each op's *rank on its device* (``0, 1, ...`` in the
order of the priorities, ties by op id): a device grants a stream only to the ready op whose rank
equals the number of ops it has started (:func:`doppler_gym.sim.event_loop.run`). This module turns
priorities into those ranks and explains a deadlock, an order in which some device's next op can
never become ready.
"""

from __future__ import annotations

import numpy as np

from doppler_gym.graph.types import DataflowGraph

DEADLOCK = -2.0
"""What the kernels return for a fixed order that deadlocks."""


def device_ranks(priorities: np.ndarray, assignments: np.ndarray) -> np.ndarray:
    """Each op's position in its device's order.

    Args:
        priorities: ``(P, n) float64``, lower first; ``P`` is 1 (shared) or ``B``.
        assignments: ``(B, n)`` integer device of each op.

    Returns:
        ``(max(P, B), n) float64`` ranks: row ``b`` ranks the ops of each device of assignment
        ``b % B`` by priority row ``b % P`` (ties by op id), from 0.
    """
    rows = max(priorities.shape[0], assignments.shape[0])
    n = assignments.shape[1]
    out = np.empty((rows, n), np.float64)
    positions = np.arange(n)
    for b in range(rows):
        order = np.argsort(priorities[b % priorities.shape[0]], kind="stable")  # ties by op id
        devices = assignments[b % assignments.shape[0]][order]
        by_device = np.argsort(devices, kind="stable")  # each device's ops, in order
        grouped = devices[by_device]
        first = np.searchsorted(grouped, grouped, side="left")  # where each device's run begins
        out[b, order[by_device]] = positions - first
    return out


def deadlock_message(graph: DataflowGraph, assignment: np.ndarray, ranks: np.ndarray) -> str:
    """Why the fixed order ``ranks`` (``(n,)``, from :func:`device_ranks`) of ``assignment`` deadlocks.

    Runs the order without times (Kahn's algorithm on the data edges plus "rank k before rank k + 1"
    on each device) and names, for each blocked device, its next op and an input that never comes.
    """
    n = graph.n_ops
    order_next = np.full(n, -1, np.int64)  # the op after o on its device
    keys = np.lexsort((ranks, assignment))
    for a, b in zip(keys[:-1], keys[1:]):
        if assignment[a] == assignment[b]:
            order_next[a] = b
    waiting = graph.in_degree.astype(np.int64) + 0
    waiting[order_next[order_next >= 0]] += 1
    done = np.zeros(n, bool)
    stack = list(np.flatnonzero(waiting == 0))
    while stack:
        o = stack.pop()
        done[o] = True
        for c in (*graph.succ[graph.succ_ptr[o] : graph.succ_ptr[o + 1]], order_next[o]):
            if c >= 0:
                waiting[c] -= 1
                if waiting[c] == 0:
                    stack.append(int(c))
    blocked = []
    for d in np.unique(assignment[~done]):
        ops = np.flatnonzero((assignment == d) & ~done)
        head = int(ops[np.argmin(ranks[ops])])
        preds = graph.src[graph.dst == head]
        missing = [int(p) for p in preds if not done[p]]
        why = f"its input {graph.op_name(missing[0])!r} on device {int(assignment[missing[0]])} never runs" if missing \
            else "an earlier op of its device never runs"
        blocked.append(f"device {int(d)} waits for {graph.op_name(head)!r} (rank {int(ranks[head])}): {why}")
    return (
        "queue_order='fixed': the order deadlocks; " + "; ".join(blocked[:4])
        + ". Give priorities that order the graph topologically (e.g. the start times of a valid schedule)"
    )
