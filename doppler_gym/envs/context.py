"""Per-episode instance data: the sources episodes draw graphs and topologies from, and what is static
about an instance.

An *instance* is a (graph, topology, sim config) triple; :mod:`doppler_gym.instances` resolves each
part from the env's keyword arguments. :class:`GraphContext` holds everything the
env derives from it once (never per step): DOPPLER's static op features as times under the sim
config, the normalisation scale, adjacency lists, the stable ``graph_id``, the reference
(critical-path heuristic) makespan and the lower bound.

Time units: ``comp``, ``comm``, ``b_level``, ``t_level`` and ``scale`` are in the simulator's
*internal* unit (seconds, or raw cost units; before ``SimConfig.time_divisor``), the unit of
:class:`~doppler_gym.sim.estimate.EstimatedSchedule`. ``reference_makespan`` and ``lower_bound``
are in the *reported* unit (after the divisor), the unit of ``Trace.makespan``.
"""

from __future__ import annotations

import hashlib
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from doppler_gym.envs.masked import reset_options
from doppler_gym.graph.analysis import b_level, critical_path, t_level
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.instances import default_config, resolve_graph, resolve_topology
from doppler_gym.sim.bounds import makespan_lower_bound
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.costs import Costs
from doppler_gym.sim.packing import device_tables
from doppler_gym.topology.types import Topology

# The largest value a float feature of the placement observation takes: times are in units of the graph's
# compute-only critical path and memory in units of a device's memory, so real values stay far below; larger
# ones are clipped to it, which keeps every Box finite (Gymnasium's and SB3's checkers ask for finite bounds).
FEATURE_MAX = 1.0e4
GRAPH_ID_MODULUS = 2**24  # ids stay exact after SB3 casts observations to float32 (24-bit mantissa)
N_OP_FEATURES = 5
N_DEVICE_STATIC = 2

# ---------------------------------------------------------------------------- graph identity
_DIGESTS: weakref.WeakKeyDictionary[DataflowGraph, bytes] = weakref.WeakKeyDictionary()


def graph_digest(graph: DataflowGraph) -> bytes:
    """16-byte BLAKE2b digest of the graph's content (edges, flops, out_bytes); cached per object.

    Names, kinds, specs and the graph's name do not enter it: two graphs with the same structure
    and costs are the same instance. Fixed little-endian dtypes make it identical across
    processes, runs and machines.
    """
    digest = _DIGESTS.get(graph)
    if digest is None:
        h = hashlib.blake2b(digest_size=16)
        h.update(np.array([graph.n_ops, graph.n_edges], dtype="<i8").tobytes())
        columns = ((graph.src, "<i8"), (graph.dst, "<i8"), (graph.flops, "<f8"), (graph.out_bytes, "<f8"))
        for arr, dtype in columns:
            h.update(np.ascontiguousarray(arr, dtype=dtype).tobytes())
        digest = h.digest()
        _DIGESTS[graph] = digest
    return digest


def graph_id(graph: DataflowGraph) -> int:
    """Stable id of the graph's content in ``[0, 2**24)`` (first 8 digest bytes mod 2**24).

    ``2**24`` rather than ``2**31`` so that the id survives the float32 cast that SB3 applies to
    every ``Box`` observation; the chance that two of ``k`` graphs collide is about ``k**2 / 2**25``.
    """
    return int.from_bytes(graph_digest(graph)[:8], "little") % GRAPH_ID_MODULUS


def topology_key(topology: Topology, config: SimConfig) -> tuple:
    """Hashable content key of what the topology contributes under ``config``.

    Under ``cost_model="raw"`` only the device count matters (the figures are ignored).
    """
    if config.cost_model == "raw":
        return ("raw", topology.n_devices)
    h = hashlib.blake2b(digest_size=16)
    for arr in (topology.speed, topology.memory, topology.bandwidth, topology.latency):
        h.update(np.ascontiguousarray(arr, dtype="<f8").tobytes())
    return ("topology", topology.n_devices, h.digest())


# ---------------------------------------------------------------------------- resolving kwargs
def placeable_graph(spec: object, where: str = "graph") -> DataflowGraph:
    """:func:`~doppler_gym.instances.resolve_graph`, refusing a graph without ops (nothing to place)."""
    graph = resolve_graph(spec, where=where)
    if graph.n_ops == 0:
        raise ValueError(f"{where}: graph {graph.name!r} has no ops; there is nothing to place")
    return graph


def check_render_mode(render_mode: str | None, modes: list[str]) -> None:
    """ValueError unless ``render_mode`` is ``None`` or one of ``modes``."""
    if render_mode is not None and render_mode not in modes:
        raise ValueError(f"render_mode must be None or one of {modes}, got {render_mode!r}")


class InstanceSource:
    """Where each episode's graph (or topology) comes from.

    ``kind`` is ``"fixed"`` (one object), ``"choice"`` (a sequence: one drawn uniformly with the
    env's ``np_random`` per reset), ``"callable"`` (``fn(rng)`` called per reset with the env's
    ``np_random``) or ``"iterator"`` (``next(it)`` per reset; reproducibility is then up to it).
    """

    def __init__(self, spec: object, resolve: Callable[[object, str], object], where: str) -> None:
        self.where = where
        self._resolve = resolve
        if isinstance(spec, Iterator):
            self.kind, self.items = "iterator", None
        elif callable(spec) and not isinstance(spec, (DataflowGraph, Topology)):
            self.kind, self.items = "callable", None
        elif isinstance(spec, Sequence) and not isinstance(spec, str):
            if len(spec) == 0:
                raise ValueError(f"{where}: an empty sequence; give at least one")
            self.kind = "choice"
            self.items = [resolve(s, f"{where}[{i}]") for i, s in enumerate(spec)]
        else:
            self.kind, self.items = "fixed", [resolve(spec, where)]
        self._spec = spec

    @property
    def known(self) -> list | None:
        """All the objects it can produce, when they are known in advance (fixed or choice)."""
        return self.items

    def draw(self, rng: np.random.Generator) -> object:
        """The next graph (or topology): resolved, for ``rng`` the env's ``np_random``."""
        if self.kind == "fixed":
            return self.items[0]
        if self.kind == "choice":
            return self.items[int(rng.integers(len(self.items)))] if len(self.items) > 1 else self.items[0]
        if self.kind == "iterator":
            try:
                value = next(self._spec)
            except StopIteration:
                raise RuntimeError(f"the {self.where} iterator is exhausted; give a longer one or a callable") from None
        else:
            value = self._spec(rng)
        return self._resolve(value, f"{self.where} (generated)")


def padding_sizes(
    graphs: InstanceSource, topologies: InstanceSource, max_ops: int | None, max_edges: int | None,
    max_devices: int | None,
) -> tuple[int, int, int]:
    """``(max_ops, max_edges, max_devices)``: the given values, or the largest known sizes."""
    out = []
    for label, given, source, size in (
        ("max_ops", max_ops, graphs, lambda g: g.n_ops),
        ("max_edges", max_edges, graphs, lambda g: g.n_edges),
        ("max_devices", max_devices, topologies, lambda t: t.n_devices),
    ):
        if given is None:
            if source.known is None:
                raise ValueError(
                    f"{source.where} is generated ({source.kind}), so {label} cannot be read from it; pass "
                    f"{label}=<the largest size it can produce> (padding of the observation and action "
                    f"spaces)"
                )
            value = max(size(x) for x in source.known)
        else:
            least = 0 if label == "max_edges" else 1
            if isinstance(given, bool) or not isinstance(given, (int, np.integer)) or given < least:
                raise ValueError(f"{label} must be an integer >= {least}, got {given!r}")
            value = int(given)
            if source.known is not None:
                need = max(size(x) for x in source.known)
                if need > value:
                    raise ValueError(f"{label}={value} is below the {source.where}'s size {need}; raise it")
        out.append(value)
    return out[0], max(out[1], 1), out[2]  # at least one edge column: a (2, 0) Box is awkward


class Instances:
    """The instances an env draws from: graph and topology sources, sim config rule, padding.

    Args:
        graph, topology, sim_config, max_ops, max_edges, max_devices: the env's keyword
            arguments of the same names (see ``PlacementEnv.default_config``).
    """

    def __init__(
        self, graph: object, topology: object, sim_config: SimConfig | None, max_ops: int | None,
        max_edges: int | None, max_devices: int | None,
    ) -> None:
        if sim_config is not None and not isinstance(sim_config, SimConfig):
            raise TypeError(f"sim_config must be a SimConfig or None, got {type(sim_config).__name__}")
        self.sim_config = sim_config
        self.graphs = InstanceSource(graph, placeable_graph, "graph")
        self.topologies = InstanceSource(topology, resolve_topology, "topology")
        self.max_ops, self.max_edges, self.max_devices = padding_sizes(
            self.graphs, self.topologies, max_ops, max_edges, max_devices
        )
        self._contexts: OrderedDict[tuple, GraphContext] = OrderedDict()
        self._last_context: GraphContext | None = None
        self._defaults: OrderedDict[tuple, tuple[DataflowGraph, Topology, SimConfig]] = OrderedDict()

    def sample(self, rng: np.random.Generator, options: dict[str, Any] | None) -> GraphContext:
        """This episode's instance: drawn with ``rng``, or fixed by ``options["graph"/"topology"]``."""
        options = reset_options(options, ("graph", "topology"), "reset")
        if "graph" in options:
            graph = placeable_graph(options["graph"], "options['graph']")
        else:
            graph = self.graphs.draw(rng)
        if "topology" in options:
            topology = resolve_topology(options["topology"], "options['topology']")
        else:
            topology = self.topologies.draw(rng)
        for label, have, cap in (
            ("ops", graph.n_ops, self.max_ops), ("edges", graph.n_edges, self.max_edges),
            ("devices", topology.n_devices, self.max_devices),
        ):
            if have > cap:
                what = f"topology {topology.name!r}" if label == "devices" else f"graph {graph.name!r}"
                raise ValueError(
                    f"{what} has {have} {label} but the env pads to max_{label}={cap}; create the env with "
                    f"a larger max_{label}"
                )
        config = self.sim_config if self.sim_config is not None else self.default_config(graph, topology)
        return self.context(graph, topology, config)

    def default_config(self, graph: DataflowGraph, topology: Topology) -> SimConfig:
        """:func:`~doppler_gym.instances.default_config` of the instance, memoised for the last 32 (graph,
        topology) objects (a config is built in about 13 us, once per episode of every env otherwise)."""
        key = (id(graph), id(topology))
        hit = self._defaults.get(key)
        if hit is not None and hit[0] is graph and hit[1] is topology:
            self._defaults.move_to_end(key)
            return hit[2]
        config = default_config(graph, topology)
        self._defaults[key] = (graph, topology, config)
        if len(self._defaults) > 32:
            self._defaults.popitem(last=False)
        return config

    def context(self, graph: DataflowGraph, topology: Topology, config: SimConfig) -> GraphContext:
        """:func:`build_context`, memoised for the last 32 (graph, topology, config) objects."""
        last = self._last_context
        if last is not None and last.graph is graph and last.topology is topology and last.config is config:
            return last  # the same objects as the last call (every episode on one instance): no config hash
        key = (id(graph), id(topology), config)
        ctx = self._contexts.get(key)
        if ctx is not None and ctx.graph is graph and ctx.topology is topology:
            self._contexts.move_to_end(key)
            self._last_context = ctx
            return ctx
        ctx = build_context(graph, topology, config)
        self._last_context = ctx
        self._contexts[key] = ctx
        if len(self._contexts) > 32:
            self._contexts.popitem(last=False)
        return ctx


# ---------------------------------------------------------------------------- static context
@dataclass(frozen=True, eq=False)
class GraphContext:
    """Static data of one instance; built once per (graph, topology, config).

    Attributes:
        graph, topology, config: the instance.
        n_ops, n_edges, n_devices: its sizes.
        comp: ``(n_ops,) float64`` mean compute time of each op over the devices [internal time].
        comm: ``(n_ops,) float64`` mean cross-device transfer time of each op's output
            [internal time]; zeros with one device (nothing ever moves).
        b_level: ``(n_ops,) float64`` DOPPLER's b-level with these times [internal time].
        t_level: ``(n_ops,) float64`` DOPPLER's t-level (includes the op's own comp and comm).
        scale: the compute-only critical path of ``comp`` [internal time] (1 if it is 0): every
            time feature of the observation is divided by it, once per graph.
        op_features: ``(n_ops, 5) float64`` comp, b-level, t-level, input transfer (sum of the
            inputs' ``comm``), output transfer (``out_degree * comm``), divided by ``scale``.
        edge_attr: ``(n_edges,) float64`` ``comm`` of each edge's producer / ``scale``.
        device_static: ``(n_devices, 2) float64`` speed / fastest speed, memory / largest memory
            (ones under ``cost_model="raw"``, whose devices are identical).
        succ: per-op successor lists (Python ints, edge order).
        in_degree: ``(n_ops,) int64`` number of inputs.
        graph_id: :func:`graph_id`.
        digest: :func:`graph_digest`.
        time_divisor: ``config.time_divisor`` (internal time / divisor = reported time).
        reference_makespan: the critical-path heuristic's simulated makespan [reported unit].
        lower_bound: :func:`~doppler_gym.sim.makespan_lower_bound` [reported unit].
    """

    graph: DataflowGraph
    topology: Topology
    config: SimConfig
    n_ops: int
    n_edges: int
    n_devices: int
    comp: np.ndarray
    comm: np.ndarray
    b_level: np.ndarray
    t_level: np.ndarray
    scale: float
    op_features: np.ndarray
    edge_attr: np.ndarray
    device_static: np.ndarray
    succ: list[list[int]]
    in_degree: np.ndarray
    graph_id: int
    digest: bytes
    time_divisor: float
    reference_makespan: float
    lower_bound: float


def mean_times(graph: DataflowGraph, topology: Topology, config: SimConfig) -> tuple[np.ndarray, np.ndarray]:
    """``(comp, comm)``, each ``(n_ops,) float64`` [internal time]: mean compute time of each op
    over the devices, and mean transfer time of its output over ordered device pairs ``i != j``."""
    d = topology.n_devices
    topo_key = None if config.cost_model == "raw" else topology
    inv_speed, *_, pair_latency, pair_inv_bw = device_tables(topo_key, d, config.cost_model)
    if config.cost_model == "roofline":  # per-op times differ by GPU model: average the simulator's table
        comp = Costs.of(graph, topology, config).mean_comp
    else:
        comp = graph.flops * float(inv_speed.mean())
    if d == 1:
        return comp, np.zeros(graph.n_ops)
    off = ~np.eye(d, dtype=bool).reshape(-1)
    comm = float(pair_latency[off].mean()) + graph.out_bytes * float(pair_inv_bw[off].mean())
    return comp, comm


def build_context(
    graph: DataflowGraph, topology: Topology, config: SimConfig, reference: bool = True
) -> GraphContext:
    """The :class:`GraphContext` of an instance: O(n + E), plus a cached reference run.

    ``reference=False`` skips the reference run (the critical-path heuristic, which costs more than
    a whole policy decode on large graphs) and the lower bound: ``reference_makespan`` and
    ``lower_bound`` are then NaN, every other field is the same."""
    comp, comm = mean_times(graph, topology, config)
    bl = b_level(graph, comp, comm)
    tl = t_level(graph, comp, comm)
    cp_len, _ = critical_path(graph, comp)
    scale = cp_len if cp_len > 0 and np.isfinite(cp_len) else 1.0
    in_comm = np.bincount(graph.dst, weights=comm[graph.src], minlength=graph.n_ops)
    out_comm = graph.out_degree * comm
    feats = np.stack([comp, bl, tl, in_comm, out_comm], axis=1) / scale
    if config.cost_model == "raw":
        dev = np.ones((topology.n_devices, N_DEVICE_STATIC))
    else:
        mem_max = float(topology.memory.max())
        dev = np.stack(
            [topology.speed / topology.speed.max(),
             topology.memory / mem_max if mem_max > 0 else np.zeros(topology.n_devices)], axis=1)
    ptr, succ = graph.succ_ptr.tolist(), graph.succ.tolist()
    succ_lists = [succ[ptr[v] : ptr[v + 1]] for v in range(graph.n_ops)]
    edge_attr = comm[graph.src] / scale
    for arr in (comp, comm, bl, tl, feats, dev, edge_attr):
        arr.setflags(write=False)
    return GraphContext(
        graph=graph, topology=topology, config=config, n_ops=graph.n_ops, n_edges=graph.n_edges,
        n_devices=topology.n_devices, comp=comp, comm=comm, b_level=bl, t_level=tl, scale=float(scale),
        op_features=feats, edge_attr=edge_attr, device_static=dev, succ=succ_lists,
        in_degree=graph.in_degree.astype(np.int64), graph_id=graph_id(graph), digest=graph_digest(graph),
        time_divisor=config.time_divisor,
        reference_makespan=reference_makespan(graph, topology, config) if reference else float("nan"),
        lower_bound=float(makespan_lower_bound(graph, topology, config)) if reference else float("nan"),
    )


# ---------------------------------------------------------------------------- reference makespan
_REFERENCE_CACHE: OrderedDict[tuple, float] = OrderedDict()
_REFERENCE_CACHE_SIZE = 4096


def reference_makespan(graph: DataflowGraph, topology: Topology, config: SimConfig) -> float:
    """The critical-path heuristic's simulated makespan on this instance [reported unit].

    :func:`doppler_gym.baselines.critical_path` with ``seed=0`` (its random tie-breaks fixed), so
    the reference of an instance is one number everywhere. Cached per instance content:
    ``(graph_digest, topology_key, config)``.
    """
    key = (graph_digest(graph), topology_key(topology, config), config)
    value = _REFERENCE_CACHE.get(key)
    if value is not None:
        _REFERENCE_CACHE.move_to_end(key)
        return value
    from doppler_gym.baselines.critical_path import critical_path  # lazy: envs sit above baselines

    value = float(critical_path(graph, topology, config, seed=0).makespan)
    _REFERENCE_CACHE[key] = value
    if len(_REFERENCE_CACHE) > _REFERENCE_CACHE_SIZE:
        _REFERENCE_CACHE.popitem(last=False)
    return value
