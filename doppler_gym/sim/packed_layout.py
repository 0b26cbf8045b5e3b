"""The layout of a packed problem: the slots of its ``meta`` array and the views the kernels take of
its ``ints`` and ``floats`` (:func:`doppler_gym.sim.packing.pack` writes them)."""

from __future__ import annotations

from enum import IntEnum

from numba import njit


class Meta(IntEnum):
    """Slots of a packed problem's ``meta`` array, ``(len(Meta),) int64``: sizes and flags, then
    the offset of each array packed into ``ints`` (int32) and ``floats`` (float64).

    :func:`doppler_gym.sim.packing.pack` writes them; the kernels read them (Numba folds a member
    to its value: ``meta[Meta.N_OPS]`` compiles as ``meta[0]``). Shapes: ``n`` ops, ``E`` edges,
    ``D`` devices, pairs ``a * D + b`` of devices, ``H`` links over all routes.
    """

    # sizes and flags (a flag is 0 or 1)
    N_OPS = 0
    N_EDGES = 1
    N_DEVICES = 2
    STREAMS = 3  # ops a device runs at once
    MAX_HOPS = 4  # links on the longest route
    LINK_FIFO = 5  # link_model "fifo": each link carries one transfer at a time, hop by hop
    PRIORITY_QUEUES = 6  # 1: queue_order "priority", device queues ordered by the PRIORITY_ROW; 2: "fixed", the
    # PRIORITY_ROW holds each op's rank on its device (0, 1, ...) and a device starts only its next rank
    EDGE_TIMES = 7  # the EDGE_FACTOR_ROW holds each edge's transfer time, same-device ones too (teccl)
    LIST_KERNEL = 8  # the list kernel applies: one stream, FIFO queues, ideal p2p links, every op with work
    PLAIN = 9  # no jitter, and one latency and one 1/bandwidth for every pair of distinct devices
    EXACT_DEVICES = 10  # run_packed: the assignment must use device N_DEVICES - 1 (topology=None)
    # offsets into ints
    SUCC_PTR = 11  # (n+1,) CSR out-edges by producer (SimPy's transfer order)
    SUCC_DST = 12  # (E,) consumer of each CSR slot
    SUCC_EDGE = 13  # (E,) edge id of each CSR slot
    SRC = 14  # (E,) producer of each edge
    DST = 15  # (E,) consumer of each edge
    IN_DEGREE = 16  # (n,) inputs of each op
    ROUTE_PTR = 17  # (D*D+1,) CSR routes by device pair
    ROUTE_LINK = 18  # (H,) links of each route, in order (link a -> b is a * D + b)
    # offsets into floats
    COMP = 19  # (COMP_LEN,) work of each op, one row of n per device class (class-major) [FLOP, or time units
    # with raw costs, or seconds under the roofline model]; an op w takes comp[COMP_ROW[d] + w] * INV_SPEED[d] on d
    SIZE = 20  # (n,) output size of each op [B, or time units with raw costs]
    INV_SPEED = 21  # (D,) 1 / device speed [s/FLOP]
    LATENCY = 22  # (D*D,) link latency [s]
    BANDWIDTH = 23  # (D*D,) link bandwidth [B/s] (inf where there is no link)
    PAIR_LATENCY = 24  # (D*D,) summed hop latencies of the route [s]
    PAIR_INV_BW = 25  # (D*D,) summed 1 / bandwidth of the route [s/B]
    DIVISOR = 26  # (1,) time divisor: internal units per reported unit
    PRIORITY_ROW = 27  # (n,) run_packed's device-queue priorities (zeros by default)
    COMP_FACTOR_ROW = 28  # (n,) run_packed's compute-time multipliers (ones by default)
    EDGE_FACTOR_ROW = 29  # (E,) run_packed's transfer-time multipliers (ones), or times with EDGE_TIMES
    # stragglers (doppler_gym.sim.stragglers): resource r is device r < D or link r - D; R = D + D*D
    STRAGGLERS = 30  # flag: some device or link has a slowdown (the event loop integrates over its profile)
    STRAG_PTR = 31  # offset into ints: (R+1,) CSR segments of each resource's speed profile (empty without)
    STRAG_PAIR = 32  # offset into ints: (D*D,) 1 where the route of the pair crosses a slowed link
    STRAG_SEG = 33  # offset into floats: (3K,) segment starts, ends [internal time], speed factors
    # per-device-class op costs (doppler_gym.sim.packing.compute_tables): one class (COMP_LEN = n, COMP_ROW
    # zeros) for every model but the roofline with several GPU models
    COMP_LEN = 34  # length of the COMP segment: n times the number of device classes
    COMP_ROW = 35  # offset into ints: (D,) start of each device's class row in COMP (class * n)


@njit(cache=True, inline="always")
def segment(values, meta, slot, length):
    """``values[meta[slot] : meta[slot] + length]``: one of the arrays packed into ``ints``/``floats``."""
    o = meta[slot]
    return values[o : o + length]


@njit(cache=True)
def problem_arrays(meta, ints, floats):
    """The packed problem's graph, op and device-pair arrays, in the order of the first arguments of
    :func:`~doppler_gym.sim.list_kernel.run_list` (:func:`~doppler_gym.sim.event_loop.run` reads them too):
    ``comp`` is the whole ``(COMP_LEN,)`` table and ``comp_row`` ``(D,)`` each device's row start in it."""
    n, n_edges, n_pairs = meta[Meta.N_OPS], meta[Meta.N_EDGES], meta[Meta.N_DEVICES] * meta[Meta.N_DEVICES]
    succ_ptr = segment(ints, meta, Meta.SUCC_PTR, n + 1)
    succ_dst = segment(ints, meta, Meta.SUCC_DST, n_edges)
    succ_edge = segment(ints, meta, Meta.SUCC_EDGE, n_edges)
    in_degree = segment(ints, meta, Meta.IN_DEGREE, n)
    comp = segment(floats, meta, Meta.COMP, meta[Meta.COMP_LEN])
    size = segment(floats, meta, Meta.SIZE, n)
    inv_speed = segment(floats, meta, Meta.INV_SPEED, meta[Meta.N_DEVICES])
    pair_latency = segment(floats, meta, Meta.PAIR_LATENCY, n_pairs)
    pair_inv_bw = segment(floats, meta, Meta.PAIR_INV_BW, n_pairs)
    comp_row = segment(ints, meta, Meta.COMP_ROW, meta[Meta.N_DEVICES])
    return succ_ptr, succ_dst, succ_edge, in_degree, comp, size, inv_speed, pair_latency, pair_inv_bw, comp_row


@njit(cache=True)
def straggler_arrays(meta, ints, floats):
    """``(ptr (R+1,), pair (D*D,), seg (3K,))`` of the packed straggler profiles (empty arrays when
    ``meta[Meta.STRAGGLERS]`` is 0); shapes and units at :class:`Meta`."""
    n_dev = meta[Meta.N_DEVICES]
    on = meta[Meta.STRAGGLERS] != 0
    ptr = segment(ints, meta, Meta.STRAG_PTR, n_dev + n_dev * n_dev + 1 if on else 0)
    pair = segment(ints, meta, Meta.STRAG_PAIR, n_dev * n_dev if on else 0)
    seg = segment(floats, meta, Meta.STRAG_SEG, 3 * ptr[n_dev + n_dev * n_dev] if on else 0)
    return ptr, pair, seg
