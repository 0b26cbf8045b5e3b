"""Public simulator entry points: validate at the boundary, then run the Numba kernels."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim import fixed_order, memory
from doppler_gym.sim.assignment import MAX_IMPLICIT_DEVICES, as_device_ids, device_count
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.dispatch import run_many, run_packed, value_range
from doppler_gym.sim.packed_layout import Meta
from doppler_gym.sim.packing import PackedProblem, pack
from doppler_gym.sim.trace import Trace
from doppler_gym.topology.types import Topology

_DEFAULT_CONFIG = SimConfig()


def simulate(
    graph: DataflowGraph,
    assignment: object,
    topology: Topology | int | None = None,
    priorities: object | None = None,
    config: SimConfig = _DEFAULT_CONFIG,
) -> Trace:
    """Execute ``graph`` under ``assignment`` on a work-conserving runtime; returns the :class:`Trace`.

    Args:
        graph: the dataflow graph.
        assignment: ``(n_ops,)`` integer device of each op, in ``[0, topology.n_devices)``.
        topology: devices and links; ``None`` = ``Topology.uniform(max(assignment) + 1)``; a
            device count ``k`` = ``Topology.uniform(k)`` (through the checked path: pass the
            ``Topology`` itself in tight loops)
            (with ``cost_model="raw"`` only the device count matters).
        priorities: ``(n_ops,)`` float, lower runs first; used when
            ``config.queue_order == "priority"`` (required then) or ``"fixed"`` (each device's
            order; ``None`` = op id order), ignored otherwise.
        config: the runtime model; :meth:`SimConfig.reference` is the DOPPLER authors' simulator. The
            default is ``SimConfig()`` (FLOP-rate op times) for every graph; the CLI, envs, baselines and agents,
            given no config, use :func:`doppler_gym.instances.default_config` ``(graph, topology)`` instead (the
            reference model for paper graphs, the roofline on GPU presets): pass that config to re-simulate
            what they reported.

    Raises:
        ValueError: assignment of the wrong length or with non-integer or out-of-range devices,
            priorities of the wrong shape, no priorities under ``queue_order="priority"``, or
            a ``"fixed"`` order that deadlocks (the message names the blocked devices).
    """
    # Fast paths: a valid int32/int64 numpy assignment (what search loops pass). Everything
    # else, errors included, goes through the full checks below.
    if type(assignment) is np.ndarray and assignment.ndim == 1 and assignment.dtype.num in _FAST_NUMS:
        if not assignment.flags.writeable:  # Numba types read-only arrays apart: one more compiled kernel
            assignment = assignment.copy()
        # Fastest: the problem of this call's (graph, topology, config) last time, device range
        # checked by the kernel itself (one Numba call in all). The objects were checked when cached.
        entry = _LAST_CALL[0]
        if entry is None or entry.graph is not graph or entry.topology is not topology or entry.config is not config:
            entry = _FAST.get((id(graph), id(topology), id(config)))
        if (
            entry is not None
            and entry.graph is graph
            and entry.topology is topology
            and entry.config is config
            and assignment.shape[0] == entry.problem.n_ops
            and assignment.flags.c_contiguous
        ):
            _LAST_CALL[0] = entry
            problem = entry.problem
            times = np.empty(problem.n_times, np.float64)
            makespan = run_packed(problem.meta, problem.ints, problem.floats, assignment, times)
            if makespan >= 0.0:
                if assignment.dtype.num != _INT32_NUM:
                    assignment = assignment.astype(np.int32)
                return Trace.from_kernel_times(
                    makespan, times, problem.n_ops, assignment, problem.n_devices, problem.time_unit,
                    problem.time_divisor,
                )
        # A cache miss: check the objects, then cache their problem for the calls that follow.
        if isinstance(graph, DataflowGraph) and isinstance(config, SimConfig):
            low, high = value_range(assignment)
            if topology is None:
                topo_devices = high + 1
                ok = low >= 0 and topo_devices <= MAX_IMPLICIT_DEVICES
            else:
                topo_devices = topology.n_devices if isinstance(topology, Topology) else 0
                ok = low >= 0 and high < topo_devices
            if ok:
                entry = _packed(graph, topology, topo_devices, config)
                problem = entry.problem
                if (config.queue_order == "fifo" and not config.has_jitter and config.multicast == "p2p"
                        and config.memory == "off"):
                    if len(_FAST) >= 64:
                        _FAST.clear()
                    if topology is None:  # the device count came from this assignment: later ones must match
                        entry = CacheEntry(graph, topology, config, problem.with_exact_devices())
                    _FAST[(id(graph), id(topology), id(config))] = entry
                if assignment.shape[0] == problem.n_ops > 0:
                    if assignment.dtype.num != _INT32_NUM or not assignment.flags.c_contiguous:
                        assignment = assignment.astype(np.int32)
                    return _run_single(problem, graph, assignment, topology, priorities, config)
    _check_graph(graph)
    _check_config(config)
    if np.ndim(assignment) != 1:
        raise ValueError(
            f"simulate takes one assignment of shape ({graph.n_ops},), got shape {np.shape(assignment)}; "
            f"use simulate_batch for a (B, n_ops) array"
        )
    assign = as_device_ids(graph, assignment, "assignment")
    topology = _topology_arg(topology)
    topo_devices = device_count(topology, assign)
    problem = _packed(graph, topology, topo_devices, config).problem
    return _run_single(problem, graph, assign, topology, priorities, config)


def _run_single(
    problem: PackedProblem, graph: DataflowGraph, assign: np.ndarray, topology: Topology | None,
    priorities: object | None, config: SimConfig,
) -> Trace:
    """Simulate a checked ``(n,) int32`` assignment; returns a :class:`Trace` over one times buffer."""
    meta, floats, n = problem.meta, problem.floats, problem.n_ops
    teccl = config.multicast == "teccl"
    if teccl or config.queue_order != "fifo" or config.has_jitter:
        floats = floats.copy()  # this call's rows replace the packed defaults
        if config.queue_order != "fifo":
            o = meta[Meta.PRIORITY_ROW]
            floats[o : o + n] = _queue_keys(graph, priorities, config, assign[None, :])[0]
        comp_factor, edge_factor = jitter_factors(graph, config, rows=1)
        if config.has_jitter:
            o = meta[Meta.COMP_FACTOR_ROW]
            floats[o : o + n] = comp_factor[0]
        o = meta[Meta.EDGE_FACTOR_ROW]
        if teccl:  # the edge row holds this assignment's multicast times, jitter included
            floats[o : o + graph.n_edges] = _multicast_times(
                graph, assign[None, :], topology, problem.n_devices, config
            )[0] * edge_factor[0]
        elif config.has_jitter:
            floats[o : o + graph.n_edges] = edge_factor[0]
    times = np.empty(problem.n_times, np.float64)
    makespan = run_packed(meta, problem.ints, floats, assign, times)
    if makespan == fixed_order.DEADLOCK:
        raise ValueError(fixed_order.deadlock_message(graph, assign, floats[meta[Meta.PRIORITY_ROW] :][:n]))
    trace = Trace.from_kernel_times(
        makespan, times, n, assign, problem.n_devices, problem.time_unit, problem.time_divisor
    )
    if config.memory != "off":  # derived from the times, after the run (sim/memory.py)
        trace = memory.attach(trace, graph, topology, config)
    return trace


@dataclass(frozen=True, slots=True, eq=False)
class CacheEntry:
    """A packed problem cached by the identities of the objects it was packed from.

    The entry holds the objects themselves, so that their ids stay theirs while it is cached; a
    lookup by ``id`` checks them with ``is``.
    """

    graph: DataflowGraph
    topology: Topology | None
    config: SimConfig
    problem: PackedProblem


_FAST_NUMS = (np.dtype(np.int64).num, np.dtype(np.int32).num)
_INT32_NUM = np.dtype(np.int32).num
_FAST: dict = {}  # (id(graph), id(topology), id(config)) -> CacheEntry: simulate's one-call path
_LAST_CALL: list = [None]  # the _FAST entry of the most recent fast call
_PACKED: dict = {}  # (id(graph), id(topology), n_devices, id(config)) -> CacheEntry


def _packed(graph: DataflowGraph, topology: Topology | None, n_devices: int, config: SimConfig) -> CacheEntry:
    """The entry of :func:`~doppler_gym.sim.packing.pack`'s problem, cached by object identity first
    (a dict lookup and three ``is`` checks, cheaper than hashing the objects by value as ``pack``'s
    cache does)."""
    key = (id(graph), id(topology), n_devices, id(config))
    entry = _PACKED.get(key)
    if entry is not None and entry.graph is graph and entry.topology is topology and entry.config is config:
        return entry
    entry = CacheEntry(graph, topology, config, pack(graph, topology, n_devices, config))
    if len(_PACKED) >= 64:
        _PACKED.clear()
    _PACKED[key] = entry
    return entry


def simulate_batch(
    graph: DataflowGraph,
    assignments: object,
    topology: Topology | int | None = None,
    priorities: object | None = None,
    config: SimConfig = _DEFAULT_CONFIG,
) -> np.ndarray:
    """Makespans of many assignments, simulated in parallel; returns ``(B,) float64``.

    Args:
        graph: the dataflow graph.
        assignments: ``(B, n_ops)`` integer devices, one assignment per row.
        topology, config: as in :func:`simulate`.
        priorities: ``(n_ops,)`` shared by all rows, or ``(B, n_ops)`` one row per assignment.

    With jitter, row ``b`` draws its own factors from ``config.seed``: the result depends only on
    the seed and the inputs, never on the thread count.

    Under ``SimConfig(memory="enforce")`` a row whose run exceeds a device's memory
    (:mod:`doppler_gym.sim.memory`) gets makespan ``inf`` (each row is rerun once to get its
    times, about the cost of a serial batch); ``"track"`` changes nothing here (use
    :func:`simulate` for the profile).
    """
    _check_graph(graph)
    _check_config(config)
    arr = np.asarray(assignments)
    if arr.ndim != 2:
        raise ValueError(
            f"simulate_batch: assignments must be a (B, {graph.n_ops}) array, got shape {arr.shape}; "
            f"use simulate() for a single assignment"
        )
    assign = as_device_ids(graph, arr, "assignments")
    topology = _topology_arg(topology)
    topo_devices = device_count(topology, assign)
    problem = pack(graph, topology, topo_devices, config)
    prio = _queue_keys(graph, priorities, config, assign)
    comp_factor, edge_factor = jitter_factors(graph, config, rows=assign.shape[0])
    if config.multicast == "teccl":  # per-row multicast times (jitter included) replace the factors
        edge_factor = _multicast_times(graph, assign, topology, topo_devices, config) * edge_factor
        comp_factor = np.ascontiguousarray(np.broadcast_to(comp_factor, (assign.shape[0], graph.n_ops)))
    out = np.empty(assign.shape[0], np.float64)
    threads = _torch_threads()
    run_many(problem.meta, problem.ints, problem.floats, prio, comp_factor, edge_factor, assign, out)
    if threads is not None:
        _restore_torch_threads(threads)
    if config.queue_order == "fixed" and np.any(out == fixed_order.DEADLOCK):
        b = int(np.argmax(out == fixed_order.DEADLOCK))
        raise ValueError(f"assignments[{b}]: " + fixed_order.deadlock_message(graph, assign[b], prio[b % len(prio)]))
    if config.memory == "enforce":  # a row that runs out of memory is infeasible: makespan inf
        memory.enforce_batch(graph, topology, problem, prio, comp_factor, edge_factor, assign, out)
    return out


def _multicast_times(
    graph: DataflowGraph, assign: np.ndarray, topology: Topology | None, n_devices: int, config: SimConfig
) -> np.ndarray:
    """``(B, n_edges) float64`` [s] transfer times under ``multicast="teccl"``
    (:mod:`doppler_gym.sim.multicast`; ``topology=None`` is ``Topology.uniform(n_devices)``)."""
    from doppler_gym.sim.multicast import edge_times, timer_for

    topo = topology if topology is not None else _uniform(n_devices)
    return edge_times(graph, assign, timer_for(topo, config))


def _topology_arg(topology: object) -> object:
    """``Topology.uniform(k)`` for a device count ``k >= 1`` (one object per ``k``); anything else as is."""
    if isinstance(topology, (int, np.integer)) and not isinstance(topology, bool):
        if topology < 1:
            raise ValueError(f"topology={int(topology)}: a device count must be >= 1")
        return _uniform(int(topology))
    return topology


@lru_cache(maxsize=16)
def _uniform(n_devices: int) -> Topology:
    return Topology.uniform(n_devices)


def _torch_threads() -> int | None:
    """torch's intra-op thread count when torch is loaded (never imports it), else None.

    Numba's OpenMP threading layer sets the OpenMP thread count of the calling thread at each
    parallel launch, which silently changes torch's (e.g. a policy trained with one thread goes
    back to all cores, many times slower on a shared CPU); :func:`simulate_batch` puts it back.
    """
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def _restore_torch_threads(threads: int) -> None:
    torch = sys.modules["torch"]
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


# ---------------------------------------------------------------- boundary checks
def _check_graph(graph: object) -> None:
    if not isinstance(graph, DataflowGraph):
        raise TypeError(
            f"expected a DataflowGraph, got {type(graph).__name__}; load one with "
            f"doppler_gym.load_graph(path_or_name) or doppler_gym.workloads.make(name)"
        )


def _check_config(config: object) -> None:
    if not isinstance(config, SimConfig):
        raise TypeError(
            f"config must be a SimConfig, got {type(config).__name__}; e.g. SimConfig(link_model='fifo') "
            f"or SimConfig.reference()"
        )


def _queue_keys(graph: DataflowGraph, priorities: object, config: SimConfig, assign: np.ndarray) -> np.ndarray:
    """The kernels' priority rows for ``(B, n_ops)`` assignments: the checked priorities, or under
    ``queue_order="fixed"`` each op's rank on its device (:func:`~doppler_gym.sim.fixed_order.device_ranks`)."""
    if config.queue_order == "fixed":
        if priorities is None:
            priorities = np.arange(graph.n_ops, dtype=np.float64)  # the graph's op order
        return fixed_order.device_ranks(_check_priorities(graph, priorities, config, assign.shape[0]), assign)
    return _check_priorities(graph, priorities, config, n_rows=assign.shape[0])


def _check_priorities(graph: DataflowGraph, priorities: object, config: SimConfig, n_rows: int) -> np.ndarray:
    """``(1 or n_rows, n_ops) float64`` priorities (zeros, unused, under ``queue_order="fifo"``)."""
    if config.queue_order == "fifo":
        return _unused_priorities(graph)
    if priorities is None:
        raise ValueError(
            "SimConfig(queue_order='priority') needs priorities: a (n_ops,) array, lower runs "
            "first (e.g. the SEL order, or minus the b-level)"
        )
    try:
        arr = np.asarray(priorities, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"priorities must be numbers, one per op (lower runs first); got {priorities!r:.80}") from None
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != graph.n_ops or arr.shape[0] not in (1, n_rows):
        raise ValueError(
            f"priorities has shape {np.shape(priorities)}; expected ({graph.n_ops},)"
            + (f" or ({n_rows}, {graph.n_ops})" if n_rows > 1 else "")
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("priorities must be finite numbers")
    return np.ascontiguousarray(arr)


def jitter_factors(graph: DataflowGraph, config: SimConfig, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The jitter multipliers of compute and transfer times that :func:`simulate_batch` uses for ``rows`` assignments.

    Returns mean-one lognormal factors ``(rows, n_ops) float64`` and ``(rows, n_edges) float64``
    (sigmas ``config.compute_jitter`` and ``config.transfer_jitter``), drawn from ``config.seed``:
    row ``b`` serves assignment ``b``; :func:`simulate` uses row 0 of ``rows=1``. Without jitter,
    one read-only row of ones each.
    """
    if not config.has_jitter:
        return _unit_factors(graph)
    rng = np.random.default_rng(config.seed)
    sc, st = config.compute_jitter, config.transfer_jitter
    comp = np.exp(sc * rng.standard_normal((rows, graph.n_ops)) - 0.5 * sc * sc)
    edge = np.exp(st * rng.standard_normal((rows, graph.n_edges)) - 0.5 * st * st)
    return comp, edge


@lru_cache(maxsize=64)
def _unit_factors(graph: DataflowGraph) -> tuple[np.ndarray, np.ndarray]:
    comp, edge = np.ones((1, graph.n_ops)), np.ones((1, graph.n_edges))
    comp.setflags(write=False)
    edge.setflags(write=False)
    return comp, edge


@lru_cache(maxsize=64)
def _unused_priorities(graph: DataflowGraph) -> np.ndarray:
    out = np.zeros((1, graph.n_ops))
    out.setflags(write=False)
    return out
