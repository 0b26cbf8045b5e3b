"""What both executors share: the placed graph's bookkeeping, the work-conserving ready queue,
and the result of one run.

The WC rule (the simulator's :class:`~doppler_gym.sim.SimConfig` ``queue_order``):
an op is *ready* on its device when every input has arrived there (same-device inputs when their
producer ends, others when their copy ends); a free lane (CPU worker thread or CUDA stream) of a
device starts its most urgent ready op at once. ``"fifo"``: by the order ops became ready;
``"priority"``: lowest priority first, ties by ready order. Each op's output moves to another
device once per destination device (consumers there share the copy).

Both executors record, per op, the value of one global counter when the op was pushed into its
device's ready queue (``ready_seq``) and when a lane took it (``pick_seq``), so the order can be
checked exactly: when ``b`` was picked, every op ``a`` of the same device with
``ready_seq[a] < pick_seq[b] < pick_seq[a]`` was waiting and must not be more urgent than ``b``.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from doppler_gym.graph.types import DataflowGraph

ERROR_KINDS = ("op_failed", "out_of_memory", "timeout", "invalid", "rank_failed", "aborted")


@dataclass(frozen=True, eq=False)
class PlacedGraph:
    """Static bookkeeping of one (graph, assignment).

    Attributes:
        graph: the graph.
        device: ``(n_ops,) int64`` logical device of each op.
        n_devices: number of logical devices.
        need: ``(n_ops,)`` number of distinct producers whose output must arrive before the op is ready.
        local: per op ``u``, consumers on ``u``'s own device (each once).
        remote: per op ``u``, ``{device: consumers there}`` for the other devices.
        edge_remote: ``(n_edges,) bool``: the edge crosses devices.
    """

    graph: DataflowGraph
    device: np.ndarray
    n_devices: int
    need: list[int]
    local: list[list[int]]
    remote: list[dict[int, list[int]]]
    edge_remote: np.ndarray

    @classmethod
    def build(cls, graph: DataflowGraph, assignment: np.ndarray, n_devices: int) -> PlacedGraph:
        dev = np.asarray(assignment, dtype=np.int64)
        n = graph.n_ops
        need = [0] * n
        local: list[list[int]] = [[] for _ in range(n)]
        remote: list[dict[int, list[int]]] = [{} for _ in range(n)]
        for v in range(n):
            preds = dict.fromkeys(int(u) for u in graph.predecessors(v))
            need[v] = len(preds)
            for u in preds:
                if dev[u] == dev[v]:
                    local[u].append(v)
                else:
                    remote[u].setdefault(int(dev[v]), []).append(v)
        edge_remote = dev[graph.src] != dev[graph.dst]
        return cls(graph, dev, int(n_devices), need, local, remote, edge_remote)


class ReadyQueue:
    """One device's ready ops, popped by the WC rule (``"fifo"`` or ``"priority"``)."""

    __slots__ = ("_heap", "_prio", "_priority")

    def __init__(self, order: str, priorities: np.ndarray | None) -> None:
        self._heap: list[tuple] = []
        self._priority = order == "priority"
        self._prio = priorities

    def push(self, op: int, seq: int) -> None:
        key = (float(self._prio[op]), seq, op) if self._priority else (seq, op)
        heapq.heappush(self._heap, key)

    def pop(self) -> int:
        return heapq.heappop(self._heap)[-1]

    def __len__(self) -> int:
        return len(self._heap)


@dataclass
class RunResult:
    """One execution.

    Attributes (times in seconds from the run's start; NaN where the op never ran):
        makespan: host wall-clock time from the start to the last op's end [s] (NaN on error).
        start, end: ``(n_ops,) float64`` [s].
        edge_start, edge_end: ``(n_edges,) float64`` [s]: copy start/end for cross-device edges
            (shared by edges to the same device), NaN / producer end for same-device edges.
        ready_seq, pick_seq: ``(n_ops,) int64`` counters of the WC order check (-1: never).
        error: ``None`` or a message saying what failed where.
        error_kind: one of :data:`ERROR_KINDS`.
        failed_op: the op that failed (-1 if none or unknown).
        outputs: ``{op: tensor on the host}`` when the run kept its outputs.
        leaked_threads: CPU worker threads still inside an op when the run returned (timeouts).
        timing: ``"host"`` (perf_counter) or ``"cuda-events"``.
    """

    n_ops: int
    n_edges: int
    makespan: float = float("nan")
    start: np.ndarray = field(default=None)  # type: ignore[assignment]
    end: np.ndarray = field(default=None)  # type: ignore[assignment]
    edge_start: np.ndarray = field(default=None)  # type: ignore[assignment]
    edge_end: np.ndarray = field(default=None)  # type: ignore[assignment]
    ready_seq: np.ndarray = field(default=None)  # type: ignore[assignment]
    pick_seq: np.ndarray = field(default=None)  # type: ignore[assignment]
    error: str | None = None
    error_kind: str | None = None
    failed_op: int = -1
    outputs: dict[int, Any] | None = None
    leaked_threads: int = 0
    timing: str = "host"

    def __post_init__(self) -> None:
        for name, size in (
            ("start", self.n_ops),
            ("end", self.n_ops),
            ("edge_start", self.n_edges),
            ("edge_end", self.n_edges),
        ):
            if getattr(self, name) is None:
                setattr(self, name, np.full(size, np.nan))
        for name in ("ready_seq", "pick_seq"):
            if getattr(self, name) is None:
                setattr(self, name, np.full(self.n_ops, -1, np.int64))

    @property
    def ok(self) -> bool:
        return self.error is None

    def fill_edges(self, placed: PlacedGraph, copy_times: dict[tuple[int, int], tuple[float, float]]) -> None:
        """Edge times from the per-(producer, destination device) copy times and the op ends."""
        g = placed.graph
        for k in range(g.n_edges):
            u, v = int(g.src[k]), int(g.dst[k])
            if placed.edge_remote[k]:
                t = copy_times.get((u, int(placed.device[v])))
                if t is not None:
                    self.edge_start[k], self.edge_end[k] = t
            else:
                self.edge_end[k] = self.end[u]


LOST_PEER_TEXTS = ("connection reset by peer", "connection closed by peer", "broken pipe")  # gloo's, lower case


def classify_error(exc: BaseException) -> str:
    """``"out_of_memory"`` for torch/CUDA/host OOMs; ``"rank_failed"`` for a lost connection to another
    rank (gloo's "Connection reset by peer" when the peer left the run: a consequence, not the cause);
    else ``"op_failed"``."""
    if isinstance(exc, MemoryError):
        return "out_of_memory"
    name = type(exc).__name__
    text = str(exc).lower()
    if name == "OutOfMemoryError" or "out of memory" in text:
        return "out_of_memory"
    if isinstance(exc, ConnectionError) or any(s in text for s in LOST_PEER_TEXTS):
        return "rank_failed"
    return "op_failed"


def describe_failure(graph: DataflowGraph, op: int, device: int, phys: str, exc: BaseException) -> str:
    """``op 12 (mm1[0,1,0]) on device 1 (cuda:1) failed: RuntimeError: ...``."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"op {op} ({graph.op_name(op)}) on device {device} ({phys}) failed: {type(exc).__name__}: {msg}"
