"""Pure-Python reference of the simulator's GENERAL work-conserving model (the oracle of
``test_general_model.py``). Written for readability, not speed; it shares no code with
the Numba kernels: only the graph, the topology's figures and ``Topology.route``.

The model (``SimConfig``'s docstring, ``doppler_gym.sim.event_loop``'s module docstring):

* **Compute.** Op ``o`` on device ``d`` runs for ``flops[o] / speed[d]`` (``cost_model="topology"``)
  or ``flops[o]`` (``"raw"``), times its jitter factor.
* **Transfers.** Every edge whose producer and consumer sit on different devices is its own
  transfer of the producer's ``out_bytes``; it starts when the producer ends. It crosses the hops
  of ``Topology.route(a, b)``; one hop over the direct link ``x -> y`` takes
  ``latency[x, y] + out_bytes / bandwidth[x, y]`` (raw costs: one hop ``a -> b`` taking
  ``out_bytes``), times the edge's jitter factor. Same-device edges are free: the data is there
  when the producer ends.
* **Links.** ``"ideal"``: no contention, a transfer takes the sum of its hop times.
  ``"fifo"``: each directed link carries one transfer at a time, first come first served
  (by the time the transfer reached that link, ties by request order); store-and-forward, so a
  multi-hop transfer queues again at every hop.
* **Devices.** An op is ready when all its inputs have arrived. A device runs up to ``streams``
  ops at once, each at full speed. Its waiting ops start by ready time (``queue_order="fifo"``)
  or by priority, lower first, ties by ready time (``"priority"``). Same-time ties: ops made ready
  by the same event become ready in edge-id order.

Same-time semantics: at each instant, all the events due then are processed first (ops end,
transfers arrive, ops become ready), *then* every free stream takes the best waiting op and every
free link its first waiting transfer. A device freed at ``t`` therefore sees the ops that became
ready at ``t`` too, and in priority mode picks among all of them. (In FIFO queue order this gives
the same schedule as SimPy's immediate grants: everything already waiting was ready earlier.)

Reported times are divided by ``config.time_divisor``. Edge times follow the Trace's convention:
``edge_start`` is when the data began moving over the first hop (NaN for same-device edges) and
``edge_end`` when it reached the consumer (the producer's end for same-device edges).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology


@dataclass
class ReferenceTrace:
    """Times of one simulated run, in the config's reporting unit.

    Attributes:
        makespan: the largest op end.
        start: ``(n_ops,) float64`` op start times.
        end: ``(n_ops,) float64`` op end times.
        edge_start: ``(n_edges,) float64`` when each transfer began moving (NaN: same device).
        edge_end: ``(n_edges,) float64`` when each edge's data reached its consumer.
    """

    makespan: float
    start: np.ndarray
    end: np.ndarray
    edge_start: np.ndarray
    edge_end: np.ndarray


def compute_time(
    graph: DataflowGraph, op: int, device: int, topology: Topology | None, cost_model: str
) -> float:
    """Unjittered compute time of ``op`` on ``device`` (internal units: [s] or raw cost)."""
    if cost_model == "raw":
        return float(graph.flops[op])
    return float(graph.flops[op]) / float(topology.speed[device])


def transfer_hops(
    graph: DataflowGraph, edge: int, a: int, b: int, topology: Topology | None, cost_model: str
) -> list[tuple[tuple[int, int], float]]:
    """Unjittered hops ``[((x, y), time), ...]`` of ``edge`` sent from device ``a`` to ``b``."""
    if a == b:
        return []
    nbytes = float(graph.out_bytes[graph.src[edge]])
    if cost_model == "raw":
        return [((a, b), nbytes)]
    path = topology.route(a, b)
    return [
        ((x, y), float(topology.latency[x, y]) + nbytes / float(topology.bandwidth[x, y]))
        for x, y in itertools.pairwise(path)
    ]


def transfer_time(
    graph: DataflowGraph, edge: int, a: int, b: int, topology: Topology | None, cost_model: str
) -> float:
    """Uncontended, unjittered time of ``edge`` from device ``a`` to ``b`` (0 on one device)."""
    total = 0.0
    for _, hop_time in transfer_hops(graph, edge, a, b, topology, cost_model):
        total += hop_time
    return total


def resolve_topology(
    topology: Topology | None, assignment: list[int], cost_model: str
) -> tuple[Topology | None, int]:
    """``(topology used for costs or None for raw, device count)`` as ``dg.simulate`` documents."""
    n_devices = topology.n_devices if topology is not None else (max(assignment) + 1 if assignment else 1)
    if cost_model == "raw":
        return None, n_devices
    return (topology if topology is not None else Topology.uniform(n_devices)), n_devices


def reference_simulate(
    graph: DataflowGraph,
    assignment: object,
    topology: Topology | None = None,
    priorities: object | None = None,
    config: SimConfig | None = None,
    comp_factor: object | None = None,
    edge_factor: object | None = None,
) -> ReferenceTrace:
    """Simulate ``graph`` placed by ``assignment`` under the general model.

    Args:
        graph: the dataflow graph.
        assignment: ``(n_ops,)`` device of each op.
        topology: as in ``dg.simulate`` (``None``: uniform over ``max(assignment) + 1`` devices).
        priorities: ``(n_ops,)`` lower runs first; used only when ``config.queue_order == "priority"``.
        config: the model (default ``SimConfig()``); its jitter and seed are ignored: give
            the factors explicitly instead.
        comp_factor: ``(n_ops,)`` multipliers of compute times (default ones).
        edge_factor: ``(n_edges,)`` multipliers of transfer times (default ones).
    """
    config = SimConfig() if config is None else config
    sim = _Simulation(graph, assignment, topology, priorities, config, comp_factor, edge_factor)
    return sim.run()


class _Simulation:
    def __init__(self, graph, assignment, topology, priorities, config, comp_factor, edge_factor):
        self.graph = graph
        self.config = config
        self.dev = [int(x) for x in np.asarray(assignment).reshape(-1)]
        self.topology, self.n_devices = resolve_topology(topology, self.dev, config.cost_model)
        n, n_edges = graph.n_ops, graph.n_edges
        self.comp_factor = [1.0] * n if comp_factor is None else [float(x) for x in comp_factor]
        self.edge_factor = [1.0] * n_edges if edge_factor is None else [float(x) for x in edge_factor]
        self.use_priority = config.queue_order == "priority"
        self.priority = [0.0] * n if priorities is None else [float(x) for x in priorities]

        self.src = [int(x) for x in graph.src]
        self.dst = [int(x) for x in graph.dst]
        self.out_edges = [[] for _ in range(n)]  # edge ids of each producer, ascending
        for e in range(n_edges):
            self.out_edges[self.src[e]].append(e)
        self.missing = [0] * n  # inputs not yet arrived
        for e in range(n_edges):
            self.missing[self.dst[e]] += 1

        self.start = [float("nan")] * n
        self.end = [float("nan")] * n
        self.edge_start = [float("nan")] * n_edges
        self.edge_end = [float("nan")] * n_edges

        self.events: list[tuple] = []  # heap of (time, seq, kind, payload)
        self.seq = 0  # global counter: order of pushes and of same-time requests
        self.free_streams = [config.streams] * self.n_devices
        self.waiting: list[list[tuple]] = [[] for _ in range(self.n_devices)]  # heaps of (key..., op)
        self.link_busy: dict[tuple[int, int], bool] = {}
        self.link_queue: dict[tuple[int, int], list[tuple]] = {}  # heaps of (time, seq, edge, hop)
        self.hops: dict[int, list[tuple[tuple[int, int], float]]] = {}  # jittered hops of each transfer

    # ------------------------------------------------------------------ helpers
    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def _push_event(self, time: float, kind: str, payload: object) -> None:
        heapq.heappush(self.events, (time, self._next_seq(), kind, payload))

    # ------------------------------------------------------------------ state changes
    def _make_ready(self, op: int, now: float) -> None:
        d = self.dev[op]
        seq = self._next_seq()
        key = (self.priority[op], now, seq) if self.use_priority else (now, seq)
        heapq.heappush(self.waiting[d], (*key, op))

    def _input_arrived(self, edge: int, now: float) -> None:
        self.edge_end[edge] = now
        consumer = self.dst[edge]
        self.missing[consumer] -= 1
        if self.missing[consumer] == 0:
            self._make_ready(consumer, now)

    def _request_link(self, edge: int, hop: int, now: float) -> None:
        link = self.hops[edge][hop][0]
        heapq.heappush(self.link_queue.setdefault(link, []), (now, self._next_seq(), edge, hop))

    def _op_done(self, op: int, now: float) -> None:
        self.end[op] = now
        a = self.dev[op]
        self.free_streams[a] += 1
        for e in self.out_edges[op]:
            b = self.dev[self.dst[e]]
            if a == b:
                self._input_arrived(e, now)
                continue
            base = transfer_hops(self.graph, e, a, b, self.topology, self.config.cost_model)
            factor = self.edge_factor[e]
            if self.config.link_model == "ideal":
                self.edge_start[e] = now
                total = 0.0
                for _, hop_time in base:
                    total += hop_time
                self._push_event(now + total * factor, "arrive", e)
            else:
                self.hops[e] = [(link, hop_time * factor) for link, hop_time in base]
                self._request_link(e, 0, now)

    def _hop_done(self, edge: int, hop: int, now: float) -> None:
        link = self.hops[edge][hop][0]
        self.link_busy[link] = False
        if hop + 1 < len(self.hops[edge]):
            self._request_link(edge, hop + 1, now)
        else:
            self._input_arrived(edge, now)

    def _dispatch(self, now: float) -> None:
        """Start every waiting transfer whose link is free (FCFS) and fill every free stream."""
        requests = sorted(
            (item, link) for link, queue in self.link_queue.items() if queue for item in [queue[0]]
        )
        for _, link in requests:
            if self.link_busy.get(link, False):
                continue
            _, _, edge, hop = heapq.heappop(self.link_queue[link])
            self.link_busy[link] = True
            if hop == 0:
                self.edge_start[edge] = now
            self._push_event(now + self.hops[edge][hop][1], "hop_done", (edge, hop))
        for d in range(self.n_devices):
            while self.free_streams[d] > 0 and self.waiting[d]:
                op = heapq.heappop(self.waiting[d])[-1]
                self.free_streams[d] -= 1
                self.start[op] = now
                duration = compute_time(self.graph, op, d, self.topology, self.config.cost_model)
                self._push_event(now + duration * self.comp_factor[op], "op_done", op)

    # ------------------------------------------------------------------ the loop
    def run(self) -> ReferenceTrace:
        now = 0.0
        for op in range(self.graph.n_ops):
            if self.missing[op] == 0:
                self._make_ready(op, now)
        self._dispatch(now)
        while self.events:
            now = self.events[0][0]
            while self.events and self.events[0][0] == now:
                _, _, kind, payload = heapq.heappop(self.events)
                if kind == "op_done":
                    self._op_done(payload, now)
                elif kind == "arrive":
                    self._input_arrived(payload, now)
                else:
                    self._hop_done(payload[0], payload[1], now)
            self._dispatch(now)  # documented semantics: grant after the whole instant
        assert all(m == 0 for m in self.missing), "reference: some op never became ready"
        div = self.config.time_divisor
        end = np.array(self.end, dtype=np.float64)
        makespan = float(end.max()) if end.size else 0.0
        return ReferenceTrace(
            makespan=makespan / div,
            start=np.array(self.start, dtype=np.float64) / div,
            end=end / div,
            edge_start=np.array(self.edge_start, dtype=np.float64) / div,
            edge_end=np.array(self.edge_end, dtype=np.float64) / div,
        )
