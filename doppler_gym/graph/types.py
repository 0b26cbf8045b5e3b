"""Immutable dataflow-graph type.

A :class:`DataflowGraph` is a DAG of ops. Op ``i`` has a compute cost ``flops[i]`` and produces one
output tensor of ``out_bytes[i]``; edge ``k`` sends the output of ``src[k]`` to ``dst[k]``.

Units: graphs built by :mod:`doppler_gym.workloads` carry real FLOPs and bytes
(``units == "physical"``). The DOPPLER paper files give only abstract costs
(``units == "paper"``): ``flops`` is the einsum's join-shape element count (a FLOP-like count, one
multiply-add per element) and ``out_bytes`` is the file's ``comm`` column, the time-unit cost of
sending the output to another device (4 x comp in every file). :meth:`SimConfig.reference` treats
both columns as time directly, as the authors' simulator does.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from doppler_gym.graph.spec import OpSpec
from doppler_gym.graph.validate import validate_graph_arrays, validate_memory_array

UNITS = ("physical", "paper")
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
"""Numeric formats an op may run in (:attr:`DataflowGraph.precisions`); the roofline cost model reads the
device's peak for each."""


@dataclass(frozen=True, eq=False)
class DataflowGraph:
    """A static dataflow graph (DAG of ops), validated at construction.

    Attributes:
        src: ``(n_edges,) int32`` producer op of each edge.
        dst: ``(n_edges,) int32`` consumer op of each edge.
        flops: ``(n_ops,) float64`` compute cost of each op [FLOP] (paper files: join-shape elements).
        out_bytes: ``(n_ops,) float64`` size of each op's output [B] (paper files: transfer cost).
        names: optional per-op names (``n_ops`` strings).
        kinds: optional per-op kinds, e.g. ``"einsum"``, ``"formation"``, ``"softmax"``.
        specs: optional per-op executable specs (:class:`OpSpec`) for a real backend.
        name: the graph's name (file stem or workload name).
        units: ``"physical"`` (FLOP and bytes) or ``"paper"`` (abstract costs of the paper files).
        workspace_bytes: ``(n_ops,) float64`` scratch memory each op holds on its device while it
            runs [B]; ``None`` (the default) = zeros. See :mod:`doppler_gym.sim.memory`.
        persistent_bytes: ``(n_ops,) float64`` memory each op keeps on its device for the whole
            run (weights, gradients, optimizer state) [B]; ``None`` = zeros.
        io_bytes: ``(n_ops,) float64`` bytes each op reads and writes in device memory (HBM traffic,
            inputs + weights + output) [B], which bounds a memory-bound op's time under a roofline
            cost model; ``None`` = zeros (traffic unknown: only the FLOPs count).
        precisions: optional per-op numeric format, each one of :data:`PRECISIONS`; ``None`` = the
            cost model's default precision for every op.

    Edges keep their input order: edge ids are positions in ``src``/``dst``. Costs are stored as
    float64, which holds the paper files' integer costs exactly (all below 2**53), so events that
    happen at the same time in integer arithmetic stay simultaneous.
    """

    src: np.ndarray
    dst: np.ndarray
    flops: np.ndarray
    out_bytes: np.ndarray
    names: tuple[str, ...] | None = None
    kinds: tuple[str, ...] | None = None
    specs: tuple[OpSpec | None, ...] | None = None
    name: str = "graph"
    units: str = "physical"
    workspace_bytes: np.ndarray | None = None
    persistent_bytes: np.ndarray | None = None
    io_bytes: np.ndarray | None = None
    precisions: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        src, dst, flops, out_bytes = validate_graph_arrays(
            self.src, self.dst, self.flops, self.out_bytes, where=f"graph {self.name!r}"
        )
        n = flops.shape[0]
        for label, values in (
            ("names", self.names), ("kinds", self.kinds), ("specs", self.specs), ("precisions", self.precisions)
        ):
            if values is not None and len(values) != n:
                raise ValueError(
                    f"graph {self.name!r}: {label} has {len(values)} entries but the graph has {n} "
                    f"ops; give one entry per op or None"
                )
        if self.units not in UNITS:
            raise ValueError(f"graph {self.name!r}: units must be one of {UNITS}, got {self.units!r}")
        if self.precisions is not None:
            unknown = sorted({p for p in self.precisions if p not in PRECISIONS}, key=str)
            if unknown:
                raise ValueError(
                    f"graph {self.name!r}: precisions {unknown} are not numeric formats; use one of "
                    f"{PRECISIONS} per op, or None for the cost model's default"
                )
        for label in ("workspace_bytes", "persistent_bytes", "io_bytes"):
            mem = validate_memory_array(getattr(self, label), n, label, where=f"graph {self.name!r}")
            mem.setflags(write=False)
            object.__setattr__(self, label, mem)
        for arr in (src, dst, flops, out_bytes):
            arr.setflags(write=False)
        object.__setattr__(self, "src", src)
        object.__setattr__(self, "dst", dst)
        object.__setattr__(self, "flops", flops)
        object.__setattr__(self, "out_bytes", out_bytes)
        for label in ("names", "kinds", "specs", "precisions"):
            values = getattr(self, label)
            if values is not None:
                object.__setattr__(self, label, tuple(values))

    # ------------------------------------------------------------------ sizes
    @property
    def n_ops(self) -> int:
        """Number of ops."""
        return int(self.flops.shape[0])

    @property
    def n_edges(self) -> int:
        """Number of edges."""
        return int(self.src.shape[0])

    # ------------------------------------------------------------------ CSR views
    @cached_property
    def succ_ptr(self) -> np.ndarray:
        """``(n_ops + 1,) int32``: out-edges of op ``i`` are ``succ_edge[succ_ptr[i]:succ_ptr[i+1]]``."""
        return self._csr(self.src)[0]

    @cached_property
    def succ_edge(self) -> np.ndarray:
        """``(n_edges,) int32`` edge ids grouped by producer, in edge-id order within a producer."""
        return self._csr(self.src)[1]

    @cached_property
    def succ(self) -> np.ndarray:
        """``(n_edges,) int32`` consumers, aligned with :attr:`succ_edge`."""
        out = self.dst[self.succ_edge]
        out.setflags(write=False)
        return out

    @cached_property
    def pred_ptr(self) -> np.ndarray:
        """``(n_ops + 1,) int32``: in-edges of op ``i`` are ``pred_edge[pred_ptr[i]:pred_ptr[i+1]]``."""
        return self._csr(self.dst)[0]

    @cached_property
    def pred_edge(self) -> np.ndarray:
        """``(n_edges,) int32`` edge ids grouped by consumer, in edge-id order within a consumer."""
        return self._csr(self.dst)[1]

    @cached_property
    def pred(self) -> np.ndarray:
        """``(n_edges,) int32`` producers, aligned with :attr:`pred_edge`."""
        out = self.src[self.pred_edge]
        out.setflags(write=False)
        return out

    @cached_property
    def in_degree(self) -> np.ndarray:
        """``(n_ops,) int32`` number of inputs of each op."""
        out = np.diff(self.pred_ptr).astype(np.int32)
        out.setflags(write=False)
        return out

    @cached_property
    def out_degree(self) -> np.ndarray:
        """``(n_ops,) int32`` number of consumers of each op."""
        out = np.diff(self.succ_ptr).astype(np.int32)
        out.setflags(write=False)
        return out

    def _csr(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(key, kind="stable").astype(np.int32)
        ptr = np.zeros(self.n_ops + 1, dtype=np.int32)
        np.cumsum(np.bincount(key, minlength=self.n_ops), out=ptr[1:])
        order.setflags(write=False)
        ptr.setflags(write=False)
        return ptr, order

    def successors(self, op: int) -> np.ndarray:
        """Consumers of ``op`` in edge-id order."""
        return self.succ[self.succ_ptr[op] : self.succ_ptr[op + 1]]

    def predecessors(self, op: int) -> np.ndarray:
        """Producers feeding ``op`` in edge-id order."""
        return self.pred[self.pred_ptr[op] : self.pred_ptr[op + 1]]

    @property
    def has_memory(self) -> bool:
        """Whether any op declares workspace or persistent memory (paper files: never)."""
        return bool(self.workspace_bytes.any() or self.persistent_bytes.any())

    # ------------------------------------------------------------------ misc
    @property
    def total_flops(self) -> float:
        """Sum of all ops' compute cost [FLOP or paper units]."""
        return float(self.flops.sum())

    def op_name(self, op: int) -> str:
        """Human-readable name of ``op`` (``"op<i>"`` when the graph has no names)."""
        return self.names[op] if self.names is not None else f"op{op}"

    def __repr__(self) -> str:
        return (
            f"DataflowGraph(name={self.name!r}, n_ops={self.n_ops}, n_edges={self.n_edges}, "
            f"units={self.units!r})"
        )
