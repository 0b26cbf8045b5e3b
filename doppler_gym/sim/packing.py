"""Pack a (graph, topology, config) triple into the three flat arrays the kernels read.

Numba's dispatch costs ~0.1-0.3 us per array argument, so the kernels take one ``int64`` meta array of
sizes, flags and offsets, one ``int32`` array and one ``float64`` array (layout:
``doppler_gym.sim.kernels.M_*``; ``floats`` ends with the default per-op rows of
``run_packed``: zero priorities, unit jitter factors). Packing is cached per graph, device tables and config.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim import kernels as K
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology


@lru_cache(maxsize=64)
def device_tables(topology: Topology | None, n_devices: int, cost_model: str) -> tuple[np.ndarray, ...]:
    """Per-device and per-link tables for the kernels.

    Returns ``(inv_speed (D,) [s/FLOP], route_ptr (D*D+1,), route_link (H,), latency (D*D,) [s],
    bandwidth (D*D,) [B/s], pair_latency (D*D,) [s], pair_inv_bw (D*D,) [s/B])``. Link
    ``a -> b`` has id ``a * D + b``; route ``a -> b`` lists the links it crosses; a transfer of
    ``B`` bytes over it takes ``pair_latency + B * pair_inv_bw`` (store-and-forward: the sum of
    ``latency + B / bandwidth`` over its hops). Raw costs: unit speeds and every pair one direct
    link with zero latency and unit bandwidth, so a transfer takes exactly ``out_bytes`` and an
    op exactly ``flops``. ``topology=None`` with the topology cost model means
    ``Topology.uniform(n_devices)``.
    """
    d = n_devices
    if cost_model == "raw":
        speed = np.ones(d)
        latency = np.zeros(d * d)
        bandwidth = np.ones(d * d)
        routes = [[] if a == b else [a * d + b] for a in range(d) for b in range(d)]
    else:
        topo = topology if topology is not None else Topology.uniform(d)
        speed = topo.speed.copy()
        latency = topo.latency.reshape(-1).copy()
        bandwidth = topo.bandwidth.reshape(-1).copy()
        bandwidth[bandwidth == 0] = np.inf  # not a link: no route uses it
        routes = []
        for a in range(d):
            for b in range(d):
                path = topo.route(a, b)
                routes.append([u * d + v for u, v in zip(path[:-1], path[1:])])
    route_ptr = np.zeros(d * d + 1, np.int32)
    np.cumsum([len(r) for r in routes], out=route_ptr[1:])
    route_link = np.array([ln for r in routes for ln in r], dtype=np.int32)
    pair_latency = np.array([sum(latency[ln] for ln in r) for r in routes], dtype=np.float64)
    pair_inv_bw = np.array([sum(1.0 / bandwidth[ln] for ln in r) for r in routes], dtype=np.float64)
    return 1.0 / speed, route_ptr, route_link, latency, bandwidth, pair_latency, pair_inv_bw


def list_kernel_applies(graph: DataflowGraph, config: SimConfig) -> bool:
    """Whether :mod:`doppler_gym.sim.list_kernel` simulates this problem exactly: one stream per
    device, FIFO queues, ideal point-to-point links, and work on every op (an op of zero duration
    can become ready at the instant it was requested, which the list kernel's order assumes away)."""
    return (
        config.streams == 1
        and config.queue_order == "fifo"
        and config.link_model == "ideal"
        and config.multicast == "p2p"
        and bool(np.all(graph.flops > 0))
    )


@lru_cache(maxsize=64)
def pack(graph: DataflowGraph, topology: Topology | None, n_devices: int, config: SimConfig) -> tuple:
    """``(meta, ints, floats)`` for :func:`doppler_gym.sim.kernels.run`; read-only, cached."""
    topo_key = None if config.cost_model == "raw" else topology
    inv_speed, route_ptr, route_link, latency, bandwidth, pair_latency, pair_inv_bw = device_tables(
        topo_key, n_devices, config.cost_model
    )
    int_parts = [
        graph.succ_ptr, graph.succ_edge, graph.src, graph.dst, graph.in_degree, route_ptr, route_link,
        graph.succ,
    ]
    float_parts = [
        graph.flops, graph.out_bytes, inv_speed, latency, bandwidth, pair_latency, pair_inv_bw,
        np.array([config.time_divisor]),
        np.zeros(graph.n_ops), np.ones(graph.n_ops), np.ones(graph.n_edges),  # default rows of run_packed
    ]
    int_off = np.concatenate([[0], np.cumsum([p.size for p in int_parts])])
    float_off = np.concatenate([[0], np.cumsum([p.size for p in float_parts])])
    max_hops = int(np.diff(route_ptr).max()) if route_ptr.size > 1 else 0
    meta = np.zeros(K.META_LEN, np.int64)
    meta[K.M_N], meta[K.M_E], meta[K.M_D] = graph.n_ops, graph.n_edges, n_devices
    meta[K.M_STREAMS] = config.streams
    meta[K.M_LINK_FIFO] = config.link_model == "fifo"
    meta[K.M_PRIORITY] = config.queue_order == "priority"
    meta[K.M_MAX_HOPS] = max_hops
    meta[K.M_EDGE_TIMES] = config.multicast == "teccl"  # the edge row then holds times: filled per call
    meta[K.M_LIST] = list_kernel_applies(graph, config)
    off_diagonal = ~np.eye(n_devices, dtype=bool).reshape(-1)
    meta[K.M_PLAIN] = not config.has_jitter and all(
        np.unique(table[off_diagonal]).size <= 1 for table in (pair_latency, pair_inv_bw)
    )
    for slot, off in zip(
        (K.M_SUCC_PTR, K.M_SUCC_EDGE, K.M_SRC, K.M_DST, K.M_INDEG, K.M_ROUTE_PTR, K.M_ROUTE_LINK, K.M_SUCC_DST),
        int_off,
    ):
        meta[slot] = off
    float_slots = (
        K.M_COMP, K.M_SIZE, K.M_INV_SPEED, K.M_LAT, K.M_BW, K.M_PAIR_LAT, K.M_PAIR_INV_BW, K.M_DIV,
        K.M_PRIO, K.M_COMP_FACTOR, K.M_EDGE_FACTOR,
    )
    for slot, off in zip(float_slots, float_off):
        meta[slot] = off
    ints = np.concatenate(int_parts).astype(np.int32)
    floats = np.concatenate(float_parts).astype(np.float64)
    for arr in (meta, ints, floats):
        arr.setflags(write=False)
    return meta, ints, floats
