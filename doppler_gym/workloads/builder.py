"""A tiny builder for block-decomposed workload graphs, shared by the generators.

:meth:`GraphBuilder.op` adds one op from its function, operands and (for einsum) equation: the
output shape and FLOPs come from :mod:`doppler_gym.graph.ops`, ``out_bytes`` is output elements x
dtype size, and an edge is added from every producer operand, so the spec's operand sources and the
graph's edges always agree. An operand is either a producer op id or an :class:`Ext`, a slice of a
named full input tensor; the builder records which tile each external operand is, so that
:class:`~doppler_gym.workloads.workload.Workload` can feed consistent tiles and reassemble outputs.

Memory (:mod:`doppler_gym.sim.memory`): inputs declared with ``parameter=True`` are trained
weights. Each op that reads a tile of one gets ``persistent_bytes`` for the tile's training state,
:func:`parameter_bytes` per element (weights, gradients and, with Adam, its two moments and fp32
master weights); a tile read by ``k`` ops is split equally among them (ZeRO-3 / FSDP-style sharding
of the state over the ops that use it), so co-located readers hold exactly one copy and the graph
holds one copy in all. Data inputs and constants hold nothing; activations are the ops' outputs.

Roofline inputs: each op's ``io_bytes`` is its operands' bytes plus its output's (every operand read once
from device memory, the output written once: inputs + weights + output), and ``precisions`` is the dtype's
format (:data:`DTYPE_PRECISIONS`; none for float64).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from doppler_gym.graph.ops import infer_output_shape, op_flops
from doppler_gym.graph.spec import OpSpec
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.workloads.workload import Index, Workload

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
"""Element size [B] of each dtype a generator accepts."""

DTYPE_PRECISIONS = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}
"""The numeric format (``DataflowGraph.precisions``, read by the roofline cost model) of each dtype that
has one; float64 has none (its graphs carry no precisions)."""

OPTIMIZERS = ("adam", "sgd", "none")
"""Training state per parameter: ``"adam"`` (a training step with Adam), ``"sgd"`` (plain SGD: no
state), ``"none"`` (inference: the weights only)."""


def parameter_bytes(dtype: str, optimizer: str = "adam") -> int:
    """Persistent bytes per parameter element for a training step in ``dtype`` [B].

    ==========  ===============================================  ==========================
    optimizer   holds                                            float32 / 16-bit / float64
    ==========  ===============================================  ==========================
    ``adam``    weight + gradient (dtype) + 2 Adam moments       16 / 16 / 32
                (fp32, or dtype when wider) + fp32 master
                weights when dtype is narrower than fp32
    ``sgd``     weight + gradient (dtype)                        8 / 4 / 16
    ``none``    weight (dtype)                                   4 / 2 / 8
    ==========  ===============================================  ==========================

    The 16 B of mixed-precision Adam are the figure of ZeRO (Rajbhandari et al., SC 2020, sec. 3.1:
    2 + 2 + 12 bytes per parameter); keeping fp32 master weights for 16-bit training is our
    documented choice (the usual mixed-precision recipe).
    """
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {sorted(DTYPE_BYTES)}, got {dtype!r}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    size = DTYPE_BYTES[dtype]
    if optimizer == "none":
        return size
    if optimizer == "sgd":
        return 2 * size
    state = max(size, 4)
    master = 4 if size < 4 else 0
    return 2 * size + 2 * state + master


@dataclass(frozen=True)
class Ext:
    """External operand: ``tensor[index]`` of a full input declared with :meth:`GraphBuilder.input`."""

    tensor: str
    index: Index = ()


Operand = int | Ext


def tile(i: int, size: int) -> slice:
    """The ``i``-th block of ``size`` elements along one dimension."""
    return slice(i * size, (i + 1) * size)


def check_ints(family: str, minimum: int = 1, **values: object) -> list[int]:
    """The ``values`` as ints, in order, each >= ``minimum``; else ValueError naming the parameter."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"{family}: {name} must be an integer >= {minimum}, got {value!r}")
    return [int(v) for v in values.values()]


def reduction_kind(family: str, collectives: object) -> str:
    """Kind of the ops that add partial results: ``"allreduce"`` (a collective op, see
    :mod:`doppler_gym.graph.collective`) when ``collectives`` is True, else ``"formation"``."""
    if not isinstance(collectives, (bool, np.bool_)):
        raise TypeError(f"{family}: collectives must be True or False, got {collectives!r}")
    return "allreduce" if collectives else "formation"


def block_size(family: str, name: str, size: int, blocks: int) -> int:
    """``size // blocks``, or ValueError when ``blocks`` does not divide ``size``."""
    if size % blocks:
        raise ValueError(
            f"{family}: {name}={size} is not divisible by blocks={blocks}; pick sizes that are "
            f"multiples of the block count"
        )
    return size // blocks


class GraphBuilder:
    """Accumulates ops, edges, external-tile bindings and output tiles of one workload.

    Args:
        name: graph name (the workload family).
        dtype: element type of every tensor, a key of :data:`DTYPE_BYTES`.
        optimizer: training state of the parameters (:data:`OPTIMIZERS`, :func:`parameter_bytes`).
    """

    def __init__(self, name: str, dtype: str = "float32", optimizer: str = "adam") -> None:
        if dtype not in DTYPE_BYTES:
            raise ValueError(f"{name}: dtype must be one of {sorted(DTYPE_BYTES)}, got {dtype!r}")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"{name}: optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        self.name = name
        self.dtype = dtype
        self.optimizer = optimizer
        self._parameters: set[str] = set()
        self._inputs: dict[str, tuple[int, ...]] = {}
        self._constants: dict[str, np.ndarray] = {}
        self._specs: list[OpSpec] = []
        self._names: list[str] = []
        self._kinds: list[str] = []
        self._edges: list[tuple[int, int]] = []
        self._bindings: dict[tuple[int, int], tuple[str, Index]] = {}
        self._outputs: dict[str, tuple[tuple[int, ...], list[tuple[int, Index]]]] = {}

    def input(
        self, tensor: str, shape: tuple[int, ...], value: np.ndarray | None = None, parameter: bool = False
    ) -> None:
        """Declare a full external tensor; ``value`` fixes it (a constant such as a rotary table);
        ``parameter=True`` marks trained weights (their readers hold their training state)."""
        self._inputs[tensor] = tuple(shape)
        if parameter:
            self._parameters.add(tensor)
        if value is not None:
            self._constants[tensor] = np.asarray(value)

    def op(self, name: str, kind: str, fn: str, operands: list[Operand], equation: str | None = None) -> int:
        """Add an op computing ``fn(*operands)``; returns its id."""
        op_id = len(self._specs)
        shapes, sources = [], []
        for i, operand in enumerate(operands):
            if isinstance(operand, Ext):
                shapes.append(_slice_shape(self._inputs[operand.tensor], operand.index))
                sources.append(-1)
                self._bindings[(op_id, i)] = (operand.tensor, operand.index)
            else:
                shapes.append(self._specs[operand].output_shape)
                sources.append(operand)
        where = f"{self.name} op {name!r}"
        out = infer_output_shape(fn, shapes, equation, where)
        self._specs.append(OpSpec(fn, tuple(shapes), tuple(sources), out, equation, self.dtype))
        self._names.append(name)
        self._kinds.append(kind)
        self._edges.extend((s, op_id) for s in dict.fromkeys(s for s in sources if s != -1))
        return op_id

    def sum(self, name: str, parts: list[int], kind: str = "formation") -> int:
        """An op of ``kind`` adding partial-product tiles; a single part is returned as is."""
        return parts[0] if len(parts) == 1 else self.op(name, kind, "add", list(parts))

    def output(self, tensor: str, shape: tuple[int, ...], op: int, index: Index) -> None:
        """Record that op ``op`` computes ``tensor[index]`` of the final output ``tensor``."""
        self._outputs.setdefault(tensor, (tuple(shape), []))[1].append((op, index))

    def build(self) -> Workload:
        """The finished :class:`Workload` (graph with names, kinds, specs; tiles of inputs/outputs)."""
        src, dst = (np.array(col, dtype=np.int64) for col in zip(*self._edges)) if self._edges else ([], [])
        size = DTYPE_BYTES[self.dtype]
        graph = DataflowGraph(
            src=src,
            dst=dst,
            flops=[op_flops(s) for s in self._specs],
            out_bytes=[math.prod(s.output_shape) * DTYPE_BYTES[self.dtype] for s in self._specs],
            names=tuple(self._names),
            kinds=tuple(self._kinds),
            specs=tuple(self._specs),
            name=self.name,
            persistent_bytes=self._persistent_bytes(),
            io_bytes=[
                (sum(math.prod(shape) for shape in s.operand_shapes) + math.prod(s.output_shape)) * size
                for s in self._specs
            ],
            precisions=(DTYPE_PRECISIONS[self.dtype],) * len(self._specs) if self.dtype in DTYPE_PRECISIONS else None,
        )
        outputs = {k: (shape, tuple(tiles)) for k, (shape, tiles) in self._outputs.items()}
        return Workload(graph, dict(self._inputs), dict(self._constants), dict(self._bindings), outputs)


    def _persistent_bytes(self) -> np.ndarray:
        """``(n_ops,) float64`` [B]: each parameter tile's training state, split equally among its readers."""
        readers: dict[tuple, list[tuple[int, int]]] = {}  # (tensor, tile) -> [(op, elements)]
        for (op, i), (tensor, index) in self._bindings.items():
            if tensor in self._parameters:
                key = (tensor, tuple((s.start, s.stop, s.step) if isinstance(s, slice) else s for s in index))
                readers.setdefault(key, []).append((op, math.prod(self._specs[op].operand_shapes[i])))
        out = np.zeros(len(self._specs))
        per_element = parameter_bytes(self.dtype, self.optimizer)
        for ops in readers.values():
            for op, elements in ops:
                out[op] += elements * per_element / len(ops)
        return out


def matmul_grid(
    b: GraphBuilder,
    name: str,
    left: Callable[[int, int], Operand],
    right: Callable[[int, int], Operand],
    grid: tuple[int, int, int],
    equation: str,
    sum_kind: str = "formation",
) -> list[list[int]]:
    """Block matmul: op ``name[i,j,k]`` multiplies ``left(i, k)`` by ``right(k, j)`` for every tile
    of the ``(rows, cols, inner) = grid`` block grid; ``name.sum[i,j]`` (kind ``sum_kind``) adds the
    ``inner`` partial products of output tile ``(i, j)``. Returns the ``rows x cols`` grid of
    output-tile op ids."""
    rows, cols, inner = grid
    out = []
    for i in range(rows):
        row = []
        for j in range(cols):
            parts = [
                b.op(f"{name}[{i},{j},{k}]", "einsum", "einsum", [left(i, k), right(k, j)], equation)
                for k in range(inner)
            ]
            row.append(b.sum(f"{name}.sum[{i},{j}]", parts, sum_kind))
        out.append(row)
    return out


def _slice_shape(full: tuple[int, ...], index: Index) -> tuple[int, ...]:
    sliced = tuple(len(range(*s.indices(d))) for s, d in zip(index, full))
    return sliced + full[len(index) :]
