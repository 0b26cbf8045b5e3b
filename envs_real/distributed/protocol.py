"""What the controller and the ranks exchange through the control store (a ``torch.distributed.TCPStore``).

Keys (``k`` the job number, ``r`` the rank):

==================  =========================================================================
``hello/r``         a rank's :class:`Hello`, set once it joined the process group
``job/k/r``         the pickled :class:`RankJob` of rank ``r`` (or :data:`STOP`)
``result/k/r``      the pickled :class:`RankReply` of rank ``r``
``abort/k``         set (to a message) by the first rank whose run failed; the others stop
``bye/r``           set by rank ``r`` once it left the group after :data:`STOP`
``heartbeat/r``     a counter rank ``r`` raises every :data:`HEARTBEAT_S` while its process runs
``seq/k/n/a/b/i``   ordered transfers: the op whose output is the ``i``-th from rank ``a`` to ``b`` in run ``n``
==================  =========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from doppler_gym.graph.types import DataflowGraph

STOP = b"STOP"
HEARTBEAT_S = 0.2
"""[s] how often a rank raises its heartbeat counter (a thread of its own, on its own store connection)."""


def job_key(k: int, rank: int) -> str:
    return f"job/{k}/{rank}"


def result_key(k: int, rank: int) -> str:
    return f"result/{k}/{rank}"


def abort_key(k: int) -> str:
    return f"abort/{k}"


def hello_key(rank: int) -> str:
    return f"hello/{rank}"


def bye_key(rank: int) -> str:
    return f"bye/{rank}"


def heartbeat_key(rank: int) -> str:
    return f"heartbeat/{rank}"


@dataclass(frozen=True)
class Hello:
    """A rank's identity: host name, process id, torch device, world size, backend."""

    rank: int
    world: int
    host: str
    pid: int
    device: str
    backend: str


@dataclass
class RankJob:
    """One :meth:`RealBackend.execute` call, as one rank sees it.

    Attributes:
        k: job number.
        graph: the executable graph (sent once per graph: ``None`` when the rank has ``graph_key``).
        graph_key: the graph's identity in the rank's kernel cache.
        assignment: ``(n_ops,) int64`` rank of each op.
        priorities: ``(n_ops,) float64`` lower first, or ``None`` (FIFO).
        order: ``"fifo"`` or ``"priority"``.
        lanes: compute threads of the rank.
        runs: warm-up plus measured runs; every run starts after a barrier.
        timeout_s: wall-clock limit of each run [s] (``None``: none).
        keep_outputs: return the last run's outputs of the rank's ops (host tensors).
        seed, synthetic_scale: materialisation (:func:`envs_real.materialize.materialize`).
        externals: ``{(op, operand_index): array}`` overrides, a
            :class:`~envs_real.materialize.WorkloadExternals` (the rank draws the tiles), or ``None``.
        intra_op_threads: torch threads of the rank during the runs.
        fault: fault injection for tests and drills: ``{"op": v, "kind": "raise" | "exit"}`` makes
            op ``v`` raise, or its rank's process exit (code 13) when it would run ``v``.
        p2p: ``"tagged"`` (Gloo: every ``irecv`` posted at the run's start, matched by tag = op id)
            or ``"ordered"`` (NCCL, which ignores tags: each transfer announced in the control store,
            received in the sender's order; :mod:`envs_real.distributed.rank`).
    """

    k: int
    graph: DataflowGraph | None
    graph_key: int
    assignment: np.ndarray
    priorities: np.ndarray | None
    order: str
    lanes: int
    runs: int
    timeout_s: float | None
    keep_outputs: bool
    seed: int
    synthetic_scale: float | str
    externals: dict | None
    intra_op_threads: int | None
    fault: dict | None = None
    p2p: str = "tagged"


@dataclass
class RankRun:
    """One run on one rank; times are the rank's ``time.perf_counter()`` [s] (absolute).

    Attributes:
        t_barrier: when the rank left the run's starting barrier.
        start, end: ``{op: time}`` of the rank's ops.
        arrival: ``{producer: time}`` its output arrived here (``irecv`` completed).
        sent: ``{(producer, destination): time}`` the ``isend`` was posted.
        ready_seq, pick_seq: ``{op: counter}`` of the rank's WC order (rank-local counter).
        error, error_kind, failed_op: the failure, if any.
        outputs: ``{op: host tensor}`` (last run, ``keep_outputs``).
    """

    t_barrier: float = float("nan")
    start: dict[int, float] = field(default_factory=dict)
    end: dict[int, float] = field(default_factory=dict)
    arrival: dict[int, float] = field(default_factory=dict)
    sent: dict[tuple[int, int], float] = field(default_factory=dict)
    ready_seq: dict[int, int] = field(default_factory=dict)
    pick_seq: dict[int, int] = field(default_factory=dict)
    error: str | None = None
    error_kind: str | None = None
    failed_op: int = -1
    outputs: dict[int, Any] | None = None


@dataclass
class RankReply:
    """A rank's answer to a job: its runs (the last one failed when ``runs[-1].error`` is set)."""

    rank: int
    runs: list[RankRun]
    exiting: bool = False  # the rank leaves the group after this reply (after a failure)
