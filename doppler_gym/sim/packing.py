"""Pack a (graph, topology, config) triple into the :class:`PackedProblem` the kernels read.

Numba's dispatch costs ~0.1-0.3 us per array argument, so the kernels take one ``int64`` meta array of
sizes, flags and offsets (slots: :class:`doppler_gym.sim.packed_layout.Meta`), one ``int32`` array and one
``float64`` array; ``floats`` ends with the default per-op rows of ``run_packed`` (zero priorities,
unit jitter factors). Packing is cached per graph, device tables and config.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import QUEUE_ORDERS, SimConfig
from doppler_gym.sim.kernel_cache import ensure_fresh_cache
from doppler_gym.sim.packed_layout import Meta
from doppler_gym.sim.roofline import op_times
from doppler_gym.sim.straggler_profiles import profile_arrays
from doppler_gym.sim.stragglers import check_indices
from doppler_gym.topology.gpus import gpu_spec
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


def compute_tables(
    graph: DataflowGraph, topology: Topology | None, n_devices: int, config: SimConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(comp (C n,) float64, comp_row (D,) int32, inv_speed (D,) float64)``: op ``w`` takes
    ``comp[comp_row[d] + w] * inv_speed[d]`` on device ``d`` (internal time, before jitter and stragglers).

    ``"topology"`` and ``"raw"``: one device class, ``comp = graph.flops``, ``comp_row`` zeros and
    ``inv_speed`` of :func:`device_tables` (``flops / speed[d]``, or ``flops`` itself), so these models charge
    exactly what they did before classes existed. ``"roofline"``: one class per distinct GPU model of
    ``topology.gpus`` (in order of first appearance), row ``c`` holding every op's time on that model [s]
    (:func:`doppler_gym.sim.roofline.op_times`, default precision ``config.precision``), ``comp_row[d]`` =
    ``n *`` the class of device ``d``, ``inv_speed`` ones (the op's time is the table's). The roofline is not
    ``flops * f(device)`` when GPU models differ (a GEMM gains more from tensor cores than a layer norm from
    HBM), hence a row per model rather than a speed per device.
    """
    d = n_devices
    if config.cost_model != "roofline":
        topo_key = None if config.cost_model == "raw" else topology
        return graph.flops, np.zeros(d, np.int32), device_tables(topo_key, d, config.cost_model)[0]
    if topology is None or topology.gpus is None:
        name = "no topology" if topology is None else f"topology {topology.name!r}"
        raise ValueError(f"cost_model='roofline' needs each device's GPU model, but {name} has no gpus; use a "
                         f"preset (e.g. Topology.preset('h100x8-nvswitch')) or build the Topology with "
                         f"gpus=('h100-sxm', ...), or use cost_model='topology'")
    models = list(dict.fromkeys(topology.gpus[:d]))
    rows = [op_times(graph, gpu_spec(m), config.precision) for m in models]
    comp_row = np.array([models.index(g) * graph.n_ops for g in topology.gpus[:d]], dtype=np.int32)
    return np.concatenate(rows), comp_row, np.ones(d)


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
        and not config.stragglers  # the event loop integrates over speed profiles
    )


def _straggler_tables(
    topology: Topology | None, n_devices: int, config: SimConfig, route_ptr: np.ndarray, route_link: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ptr (R+1,) int32, pair (D*D,) int32, seg (3K,) float64)`` of ``config.stragglers``
    (:func:`doppler_gym.sim.stragglers.profile_arrays`; ``pair`` flags the routes that cross a slowed
    link); three empty arrays without stragglers. Checks that they name this run's devices and links."""
    if not config.stragglers:
        return np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0)
    d = n_devices
    linked = None
    if config.cost_model != "raw":
        linked = (topology if topology is not None else Topology.uniform(d)).bandwidth > 0
    check_indices(config.stragglers, d, linked)
    ptr, seg = profile_arrays(config.stragglers, d, config.time_divisor)
    slowed = np.diff(ptr)[d:] > 0  # (D*D,) links with segments
    pair = np.array([slowed[route_link[route_ptr[p] : route_ptr[p + 1]]].any() for p in range(d * d)], np.int32)
    return ptr, pair, seg


@dataclass(frozen=True, slots=True, eq=False)
class PackedProblem:
    """One ``(graph, topology, device count, config)`` as the kernels read it: three flat read-only arrays
    (three arguments: Numba's dispatch costs ~0.1-0.3 us per array argument) and the sizes callers need.

    Attributes:
        meta: ``(len(Meta),) int64`` sizes, flags and offsets; slot names in
            :class:`~doppler_gym.sim.packed_layout.Meta`.
        ints: ``int32`` CSR out-edges, edge endpoints, in-degrees, route tables.
        floats: ``float64`` op costs, output sizes, device and link tables, the time divisor, then the
            default per-op rows of :func:`~doppler_gym.sim.dispatch.run_packed` (zero priorities, unit
            jitter factors).
        n_ops: ops of the graph.
        n_times: ``2 n_ops + 2 n_edges``: length of the kernels' ``times`` buffer.
        n_devices: devices the assignment may use.
        time_unit: the unit of the reported times (``config.time_unit``).
        time_divisor: internal time units per reported unit (``config.time_divisor``).
    """

    meta: np.ndarray
    ints: np.ndarray
    floats: np.ndarray
    n_ops: int
    n_times: int
    n_devices: int
    time_unit: str
    time_divisor: float

    def with_exact_devices(self) -> PackedProblem:
        """This problem, for assignments that must use device ``n_devices - 1`` (``meta[Meta.EXACT_DEVICES]``:
        :func:`~doppler_gym.sim.dispatch.run_packed` rejects others, as when ``topology=None`` took
        the device count from an assignment); cached per problem."""
        return _with_exact_devices(self)


@lru_cache(maxsize=64)
def _with_exact_devices(problem: PackedProblem) -> PackedProblem:
    meta = problem.meta.copy()
    meta[Meta.EXACT_DEVICES] = 1
    meta.setflags(write=False)
    return replace(problem, meta=meta)


@lru_cache(maxsize=64)
def pack(graph: DataflowGraph, topology: Topology | None, n_devices: int, config: SimConfig) -> PackedProblem:
    """The :class:`PackedProblem` of the kernels (:mod:`doppler_gym.sim.dispatch`); read-only, cached by value.

    Every kernel run reads a packed problem, so the first pack of a process first checks the kernels'
    Numba cache (:func:`~doppler_gym.sim.kernel_cache.ensure_fresh_cache`)."""
    ensure_fresh_cache()
    topo_key = None if config.cost_model == "raw" else topology
    _, route_ptr, route_link, latency, bandwidth, pair_latency, pair_inv_bw = device_tables(
        topo_key, n_devices, config.cost_model
    )
    comp, comp_row, inv_speed = compute_tables(graph, topology, n_devices, config)
    int_parts = {
        Meta.SUCC_PTR: graph.succ_ptr, Meta.SUCC_EDGE: graph.succ_edge, Meta.SRC: graph.src, Meta.DST: graph.dst,
        Meta.IN_DEGREE: graph.in_degree, Meta.ROUTE_PTR: route_ptr, Meta.ROUTE_LINK: route_link,
        Meta.SUCC_DST: graph.succ, Meta.COMP_ROW: comp_row,
    }
    strag_ptr, strag_pair, strag_seg = _straggler_tables(topology, n_devices, config, route_ptr, route_link)
    int_parts[Meta.STRAG_PTR] = strag_ptr
    int_parts[Meta.STRAG_PAIR] = strag_pair
    float_parts = {
        Meta.COMP: comp, Meta.SIZE: graph.out_bytes, Meta.INV_SPEED: inv_speed, Meta.LATENCY: latency,
        Meta.BANDWIDTH: bandwidth, Meta.PAIR_LATENCY: pair_latency, Meta.PAIR_INV_BW: pair_inv_bw,
        Meta.DIVISOR: np.array([config.time_divisor]),
        Meta.PRIORITY_ROW: np.zeros(graph.n_ops),
        Meta.COMP_FACTOR_ROW: np.ones(graph.n_ops),
        Meta.EDGE_FACTOR_ROW: np.ones(graph.n_edges),  # under EDGE_TIMES it holds times: filled per call
        Meta.STRAG_SEG: strag_seg,
    }
    off_diagonal = ~np.eye(n_devices, dtype=bool).reshape(-1)
    meta = np.zeros(len(Meta), np.int64)
    meta[Meta.N_OPS] = graph.n_ops
    meta[Meta.N_EDGES] = graph.n_edges
    meta[Meta.N_DEVICES] = n_devices
    meta[Meta.COMP_LEN] = comp.size
    meta[Meta.STREAMS] = config.streams
    meta[Meta.MAX_HOPS] = int(np.diff(route_ptr).max()) if route_ptr.size > 1 else 0
    meta[Meta.LINK_FIFO] = config.link_model == "fifo"
    meta[Meta.PRIORITY_QUEUES] = QUEUE_ORDERS.index(config.queue_order)  # fifo 0, priority 1, fixed 2
    meta[Meta.EDGE_TIMES] = config.multicast == "teccl"
    meta[Meta.LIST_KERNEL] = list_kernel_applies(graph, config) and bool(np.all(comp > 0))
    meta[Meta.STRAGGLERS] = bool(config.stragglers)
    meta[Meta.PLAIN] = not config.has_jitter and all(
        np.unique(table[off_diagonal]).size <= 1 for table in (pair_latency, pair_inv_bw)
    )
    for parts in (int_parts, float_parts):
        offset = 0
        for slot, part in parts.items():
            meta[slot] = offset
            offset += part.size
    ints = np.concatenate(list(int_parts.values())).astype(np.int32)
    floats = np.concatenate(list(float_parts.values())).astype(np.float64)
    for arr in (meta, ints, floats):
        arr.setflags(write=False)
    return PackedProblem(
        meta=meta, ints=ints, floats=floats, n_ops=graph.n_ops, n_times=2 * graph.n_ops + 2 * graph.n_edges,
        n_devices=n_devices, time_unit=config.time_unit, time_divisor=config.time_divisor,
    )
