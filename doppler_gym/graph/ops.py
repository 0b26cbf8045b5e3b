"""The op-function vocabulary an :class:`~doppler_gym.graph.spec.OpSpec` may name.

Each entry of :data:`OP_FUNCTIONS` gives, for operand shapes (and an einsum equation):
the output shape (with errors that say which operand is wrong), a FLOP count, and a NumPy
reference implementation. :func:`evaluate_graph_numpy` runs every op of a graph through these
references, checking shapes on the way, so a generated graph can be executed and compared against
an untiled computation.

Functions (operands -> output; FLOPs), ``x (..., d)`` meaning any leading dims and last dim ``d``:

- ``einsum``: per the equation, e.g. ``"ij,jk->ik"``, letters only, explicit output; a rank-0
  operand (subscript ``""``) scales the result. FLOPs: ``joint * (T - 1 + c) + out * S``, at least
  ``out``, with ``joint`` the product of all index sizes, ``T`` the tensor operands, ``c = 1`` when
  an index is summed over, ``S`` the rank-0 operands: a matmul tile ``(m,k) x (k,n)`` costs
  ``2*m*n*k``, an elementwise product ``out``.
- ``add``, ``mul``: two or more tensors, NumPy broadcasting -> broadcast shape; ``out * (n - 1)``.
- ``relu``, ``silu``: ``x`` -> ``x.shape``; ``out``, ``4 * out``.
- ``swiglu``: ``a, b`` of equal shape -> ``silu(a) * b``; ``5 * out``.
- ``softmax``: ``x (..., d)``, over the last axis; ``5 * out``.
- ``rmsnorm``: ``x (..., d), w (d,)`` -> ``x.shape``; ``4 * out``.
- ``rotary``: ``x (..., s, 2h), cos (s, h), sin (s, h)`` -> ``x.shape``; ``3 * out``.
- ``linear``: ``x (..., i), w (o, i)[, b (o,)]`` -> ``(..., o)``; ``2 * out * i``.

``out`` is the number of output elements. Per-element counts treat ``exp``, ``sqrt`` and a division
as one FLOP each (softmax: max, subtract, exp, sum, divide; silu: negate-exp, add, divide, multiply;
rmsnorm: square, sum, scale, multiply by the weight). ``linear`` is ``torch.nn.functional.linear``
(``x @ w.T + b``); its bias add is folded into the multiply-add count, as usual for layer FLOPs.
``rotary`` uses the half-split (GPT-NeoX / Llama) convention with the cos/sin tables as operands,
so a tile of the sequence takes the matching rows of the tables. ``rmsnorm`` uses
``eps = RMSNORM_EPS``.

torch is not imported here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from doppler_gym.graph.analysis import topological_order
from doppler_gym.graph.spec import OpSpec
from doppler_gym.graph.types import DataflowGraph

Shape = tuple[int, ...]

RMSNORM_EPS = 1e-6
"""The epsilon of ``rmsnorm``: ``x / sqrt(mean(x**2, -1) + eps) * w``."""


@dataclass(frozen=True)
class OpFunction:
    """One vocabulary entry.

    Attributes:
        name: the ``OpSpec.fn`` value.
        infer: ``(operand_shapes, equation) -> output_shape``; raises ValueError on bad shapes.
        flops: ``(operand_shapes, output_shape, equation) -> FLOPs``.
        numpy: ``(operands, equation) -> output`` reference implementation.
    """

    name: str
    infer: Callable[[Sequence[Shape], str | None], Shape]
    flops: Callable[[Sequence[Shape], Shape, str | None], float]
    numpy: Callable[[Sequence[np.ndarray], str | None], np.ndarray]


# ---------------------------------------------------------------------------------------- einsum
def _parse_einsum(equation: str | None) -> tuple[list[str], str]:
    if not equation or "->" not in equation:
        raise ValueError(f"einsum equation {equation!r} needs an explicit output, e.g. 'ij,jk->ik'")
    lhs, out = equation.replace(" ", "").split("->")
    terms = lhs.split(",")
    for term in (*terms, out):
        if not all(c.isalpha() for c in term):
            raise ValueError(
                f"einsum equation {equation!r}: subscripts must be letters (no '...'), got {term!r}"
            )
    if len(set(out)) != len(out):
        raise ValueError(f"einsum equation {equation!r}: output subscripts {out!r} repeat a letter")
    missing = set(out) - set("".join(terms))
    if missing:
        raise ValueError(
            f"einsum equation {equation!r}: output letters {sorted(missing)} appear in no operand"
        )
    return terms, out


def _einsum_sizes(shapes: Sequence[Shape], equation: str | None) -> tuple[dict[str, int], str]:
    terms, out = _parse_einsum(equation)
    if len(terms) != len(shapes):
        raise ValueError(
            f"einsum {equation!r} has {len(terms)} operand terms but {len(shapes)} operands were given"
        )
    sizes: dict[str, int] = {}
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        if len(term) != len(shape):
            raise ValueError(
                f"einsum {equation!r}: operand {i} has shape {shape} (rank {len(shape)}) but its "
                f"subscripts {term!r} need rank {len(term)}"
            )
        for letter, dim in zip(term, shape):
            if sizes.setdefault(letter, dim) != dim:
                raise ValueError(
                    f"einsum {equation!r}: index {letter!r} is {sizes[letter]} in an earlier operand "
                    f"but {dim} in operand {i} (shape {shape}); sizes of a shared index must agree"
                )
    return sizes, out


def _einsum_infer(shapes: Sequence[Shape], equation: str | None) -> Shape:
    sizes, out = _einsum_sizes(shapes, equation)
    return tuple(sizes[c] for c in out)


def _einsum_flops(shapes: Sequence[Shape], out_shape: Shape, equation: str | None) -> float:
    """``joint * (T - 1 + c) + out * S``, at least ``out``.

    ``joint`` is the product of all index sizes, ``T`` the number of tensor (rank >= 1) operands,
    ``c`` is 1 when some index is summed over (one add per multiply), ``S`` the number of scalar
    (rank-0) operands (one multiply per output element each). A matmul tile ``(m,k) x (k,n)``
    costs ``2*m*n*k``; an elementwise product ``joint``; a transpose one FLOP per element.
    """
    sizes, out = _einsum_sizes(shapes, equation)
    joint = math.prod(sizes.values())
    n_out = math.prod(out_shape)
    tensors = sum(1 for s in shapes if len(s) > 0)
    contracted = int(bool(set(sizes) - set(out)))
    scalars = len(shapes) - tensors
    return float(max(joint * (tensors - 1 + contracted) + n_out * scalars, n_out))


def _einsum_numpy(operands: Sequence[np.ndarray], equation: str | None) -> np.ndarray:
    return np.einsum(equation, *operands)


# ----------------------------------------------------------------------------------- elementwise
def _check_count(name: str, shapes: Sequence[Shape], lo: int, hi: int | None) -> None:
    n = len(shapes)
    if n < lo or (hi is not None and n > hi):
        want = f"{lo}" if hi == lo else f"{lo} or more" if hi is None else f"{lo} to {hi}"
        raise ValueError(f"{name} takes {want} operands, got {n} (shapes {list(shapes)})")


def _broadcast_infer(name: str) -> Callable[[Sequence[Shape], str | None], Shape]:
    def infer(shapes: Sequence[Shape], equation: str | None) -> Shape:
        _check_count(name, shapes, 2, None)
        try:
            return tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise ValueError(
                f"{name}: operand shapes {list(shapes)} do not broadcast together (NumPy rules: "
                f"trailing dims must match or be 1)"
            ) from None

    return infer


def _same_shape_infer(name: str, n: int) -> Callable[[Sequence[Shape], str | None], Shape]:
    def infer(shapes: Sequence[Shape], equation: str | None) -> Shape:
        _check_count(name, shapes, n, n)
        if any(s != shapes[0] for s in shapes):
            raise ValueError(f"{name}: operands must have the same shape, got {list(shapes)}")
        return tuple(shapes[0])

    return infer


def _per_element(k: float) -> Callable[[Sequence[Shape], Shape, str | None], float]:
    def flops(shapes: Sequence[Shape], out_shape: Shape, equation: str | None) -> float:
        return float(k * math.prod(out_shape))

    return flops


def _per_extra_operand(shapes: Sequence[Shape], out_shape: Shape, equation: str | None) -> float:
    return float(math.prod(out_shape) * (len(shapes) - 1))


def _add(operands: Sequence[np.ndarray], equation: str | None) -> np.ndarray:
    return np.sum(np.broadcast_arrays(*operands), axis=0)


def _mul(operands: Sequence[np.ndarray], equation: str | None) -> np.ndarray:
    return np.prod(np.broadcast_arrays(*operands), axis=0)


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def _relu_op(operands: Sequence[np.ndarray], equation: str | None) -> np.ndarray:
    return np.maximum(operands[0], 0)


def _silu_op(operands: Sequence[np.ndarray], equation: str | None) -> np.ndarray:
    return _silu(operands[0])


def _swiglu(operands: Sequence[np.ndarray], equation: str | None) -> np.ndarray:
    return _silu(operands[0]) * operands[1]


def _softmax_infer(shapes: Sequence[Shape], equation: str | None) -> Shape:
    _check_count("softmax", shapes, 1, 1)
    if len(shapes[0]) < 1:
        raise ValueError("softmax: the operand is a scalar; it needs at least one axis")
    return tuple(shapes[0])


def _softmax(operands: Sequence[np.ndarray], equation: str | None) -> np.ndarray:
    x = operands[0]
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# ------------------------------------------------------------------------- normalisation, rotary
def _rmsnorm_infer(shapes: Sequence[Shape], equation: str | None) -> Shape:
    _check_count("rmsnorm", shapes, 2, 2)
    x, w = shapes
    if len(x) < 1 or w != (x[-1],):
        raise ValueError(f"rmsnorm: x has shape {x} and w {w}; w must be (d,) with d the last dim of x")
    return tuple(x)


def _rmsnorm(operands: Sequence[np.ndarray], equation: str | None) -> np.ndarray:
    x, w = operands
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + RMSNORM_EPS) * w


def _rotary_infer(shapes: Sequence[Shape], equation: str | None) -> Shape:
    _check_count("rotary", shapes, 3, 3)
    x, cos, sin = shapes
    if len(x) < 2 or x[-1] % 2:
        raise ValueError(f"rotary: x has shape {x}; it needs shape (..., seq, 2*h) with an even last dim")
    want = (x[-2], x[-1] // 2)
    if cos != want or sin != want:
        raise ValueError(
            f"rotary: x has shape {x}, so cos and sin must be {want} (seq, half head dim); "
            f"got cos {cos}, sin {sin}"
        )
    return tuple(x)


def _rotary(operands: Sequence[np.ndarray], equation: str | None) -> np.ndarray:
    x, cos, sin = operands
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


# ------------------------------------------------------------------------------------- linear
def _linear_infer(shapes: Sequence[Shape], equation: str | None) -> Shape:
    _check_count("linear", shapes, 2, 3)
    x, w = shapes[0], shapes[1]
    if len(x) < 1 or len(w) != 2 or w[1] != x[-1]:
        raise ValueError(
            f"linear: x has shape {x} and w {w}; w must be (out_features, in_features) with "
            f"in_features = x's last dim"
        )
    if len(shapes) == 3 and shapes[2] != (w[0],):
        raise ValueError(f"linear: bias has shape {shapes[2]}; it must be (out_features,) = {(w[0],)}")
    return (*x[:-1], w[0])


def _linear_flops(shapes: Sequence[Shape], out_shape: Shape, equation: str | None) -> float:
    return float(2 * math.prod(out_shape) * shapes[0][-1])


def _linear(operands: Sequence[np.ndarray], equation: str | None) -> np.ndarray:
    y = operands[0] @ operands[1].T
    return y + operands[2] if len(operands) == 3 else y


OP_FUNCTIONS: dict[str, OpFunction] = {
    f.name: f
    for f in (
        OpFunction("einsum", _einsum_infer, _einsum_flops, _einsum_numpy),
        OpFunction("add", _broadcast_infer("add"), _per_extra_operand, _add),
        OpFunction("mul", _broadcast_infer("mul"), _per_extra_operand, _mul),
        OpFunction("relu", _same_shape_infer("relu", 1), _per_element(1), _relu_op),
        OpFunction("silu", _same_shape_infer("silu", 1), _per_element(4), _silu_op),
        OpFunction("swiglu", _same_shape_infer("swiglu", 2), _per_element(5), _swiglu),
        OpFunction("softmax", _softmax_infer, _per_element(5), _softmax),
        OpFunction("rmsnorm", _rmsnorm_infer, _per_element(4), _rmsnorm),
        OpFunction("rotary", _rotary_infer, _per_element(3), _rotary),
        OpFunction("linear", _linear_infer, _linear_flops, _linear),
    )
}
"""Every function an ``OpSpec.fn`` may name, by name."""


def _function(fn: str, where: str) -> OpFunction:
    try:
        return OP_FUNCTIONS[fn]
    except KeyError:
        raise ValueError(f"{where}: unknown op function {fn!r}; known: {sorted(OP_FUNCTIONS)}") from None


def infer_output_shape(
    fn: str, operand_shapes: Sequence[Sequence[int]], equation: str | None = None, where: str = "op"
) -> Shape:
    """Output shape of ``fn`` on operands of ``operand_shapes``; ValueError (prefixed by ``where``)
    saying what is wrong when the shapes do not fit."""
    shapes = [tuple(int(d) for d in s) for s in operand_shapes]
    function = _function(fn, where)
    try:
        return function.infer(shapes, equation)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def check_spec(spec: OpSpec, where: str = "op") -> None:
    """Raise ValueError unless ``spec`` names a known function whose output shape, inferred from
    its operand shapes, equals ``spec.output_shape``."""
    shape = infer_output_shape(spec.fn, spec.operand_shapes, spec.equation, where)
    if shape != spec.output_shape:
        raise ValueError(
            f"{where}: {spec.fn} of operands {list(spec.operand_shapes)} gives shape {shape}, but the "
            f"spec says {spec.output_shape}; fix output_shape"
        )


def op_flops(spec: OpSpec) -> float:
    """FLOPs of one op per the vocabulary's rule (see the module docstring)."""
    return _function(spec.fn, "op_flops").flops(spec.operand_shapes, spec.output_shape, spec.equation)


def run_numpy(spec: OpSpec, operands: Sequence[np.ndarray]) -> np.ndarray:
    """Execute ``spec`` on NumPy ``operands`` (in call order) with the reference implementation."""
    return _function(spec.fn, "run_numpy").numpy(operands, spec.equation)


def check_graph_specs(graph: DataflowGraph) -> None:
    """Raise ValueError unless every op has a valid spec whose producer operands are exactly the op's
    predecessors: each edge ``u -> v`` is an operand of ``v`` with source ``u`` and each operand
    source is ``-1`` (external) or a predecessor."""
    if graph.specs is None:
        raise ValueError(
            f"graph {graph.name!r} has no specs (paper files and random graphs carry costs only); "
            f"only graphs with an OpSpec per op, such as doppler_gym.workloads' generators, can run"
        )
    for v, spec in enumerate(graph.specs):
        where = f"graph {graph.name!r} op {v} ({graph.op_name(v)})"
        if spec is None:
            raise ValueError(f"{where} has no spec; every op needs one to be executed")
        check_spec(spec, where)
        sources = {s for s in spec.operand_sources if s != -1}
        preds = {int(u) for u in graph.predecessors(v)}
        if sources != preds:
            raise ValueError(
                f"{where}: spec operand sources {sorted(sources)} differ from the graph's predecessors "
                f"{sorted(preds)}; every edge must feed an operand and every operand source be an edge"
            )


def evaluate_graph_numpy(
    graph: DataflowGraph,
    seed: int = 0,
    dtype: type | np.dtype = np.float64,
    externals: Mapping[tuple[int, int], np.ndarray] | None = None,
) -> dict[int, np.ndarray]:
    """Run every op's spec with the NumPy references, in topological order.

    Args:
        graph: a graph with a spec on every op (see :func:`check_graph_specs`).
        seed: seed of the generator that draws external operands (source ``-1``) not in
            ``externals``: uniform in ``[-0.5, 0.5)``, drawn in topological order, operand order.
        dtype: element type of every array (the specs' dtypes are ignored).
        externals: optional ``{(op, operand_index): array}`` that fixes external operands, e.g.
            tiles of one full input tensor so that ops sharing a tile see the same values.

    Returns:
        ``{op: output}`` for every op, each of its spec's ``output_shape``.

    Raises:
        ValueError: a missing or invalid spec, operand sources that disagree with the edges, an
            external of the wrong shape, or an output of an unexpected shape.
    """
    check_graph_specs(graph)
    rng = np.random.default_rng(seed)
    externals = externals or {}
    values: dict[int, np.ndarray] = {}
    for v in topological_order(graph):
        v = int(v)
        spec = graph.specs[v]
        where = f"graph {graph.name!r} op {v} ({graph.op_name(v)})"
        operands = []
        for i, (src, shape) in enumerate(zip(spec.operand_sources, spec.operand_shapes)):
            if src != -1:
                arr = values[src]
            elif (v, i) in externals:
                arr = np.asarray(externals[(v, i)], dtype=dtype)
            else:
                arr = rng.uniform(-0.5, 0.5, size=shape).astype(dtype)
            if arr.shape != shape:
                origin = f"op {src}'s output" if src != -1 else "the external array"
                raise ValueError(f"{where}: operand {i} should be {shape} but {origin} is {arr.shape}")
            operands.append(arr)
        out = np.asarray(run_numpy(spec, operands), dtype=dtype)
        if out.shape != spec.output_shape:
            raise ValueError(f"{where}: {spec.fn} produced shape {out.shape}, spec says {spec.output_shape}")
        values[v] = out
    return values
