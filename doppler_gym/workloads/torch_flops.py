"""FLOPs, bytes and precision of one ATen op of a traced PyTorch graph, from its operands' shapes.

The ops are those of a ``make_fx`` trace of a training step (:mod:`doppler_gym.workloads.torch_training`):
ATen overloads such as ``aten.mm.default`` whose operands are fx nodes carrying a ``meta["val"]``
(a ``FakeTensor``, or a tuple of them for multi-output ops such as ``native_layer_norm``). A node's
*kind* is its ATen packet name without the namespace (``"mm"``, ``"convolution_backward"``,
``"_scaled_dot_product_flash_attention_for_cpu_backward"``).

FLOP rules (2 FLOPs per multiply-add, as ``torch.utils.flop_counter`` counts them):

=====================================================  ================================================
kind                                                   FLOPs
=====================================================  ================================================
``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``linear``,   ``2 * out * k`` (``k`` the first matrix operand's
``matmul``                                             last dim; a bias add is not counted)
``convolution`` (``x``, ``w``, ..., ``transposed``)    ``2 * N * prod(spatial) * prod(w.shape)``;
                                                       spatial = the output's (the input's if transposed)
``convolution_backward``                               that forward count once for the input gradient
                                                       and once for the weight gradient, as asked by its
                                                       ``output_mask`` (both the forward's multiply-adds)
SDPA forward (every ``*scaled_dot_product*`` /         ``2 * B * H * L * S * (E + Ev)``: ``q k^T`` and
``*attention_forward`` kernel) ``q (B,H,L,E)``,         ``p v`` over the full ``L x S`` (causal masks
``k (B,H,S,E)``, ``v (B,H,S,Ev)``                      not discounted)
SDPA backward (the same kernels' ``*_backward``),      ``2 * B * H * L * S * (3 E + 2 Ev)``: the flash
operands ``(grad_out, q, k, v, ...)``                  kernel recomputes ``q k^T`` and runs four more
                                                       matmuls (dP, dV, dQ, dK)
elementwise (:data:`PER_ELEMENT`)                      that many FLOPs per output element (per input
                                                       element for reductions and norms)
data movement (:data:`ZERO_FLOP`): views, casts,       0
copies, concatenation, indexing, fills
anything else                                          one FLOP per output element (and the caller
                                                       warns, naming the op)
=====================================================  ================================================

:func:`is_matmul_like` tells the kinds that run on tensor cores (GEMM, convolution, attention), the
ones ``torch.utils.flop_counter.FlopCounterMode`` counts; every other op is vector work.

torch is not imported here: shapes are read from ``meta["val"]`` duck-typed (``.shape``, ``.dtype``).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from doppler_gym.graph.op_kinds import is_tensor_kind

PER_ELEMENT = {
    "add": 1, "sub": 1, "rsub": 1, "mul": 1, "div": 1, "neg": 1, "pow": 1, "sqrt": 1, "rsqrt": 1, "exp": 1,
    "log": 1, "abs": 1, "reciprocal": 1, "maximum": 1, "minimum": 1, "clamp": 1, "clamp_min": 1, "where": 1,
    "eq": 1, "ne": 1, "gt": 1, "lt": 1, "ge": 1, "le": 1, "logical_not": 1, "sign": 1,
    "addcmul": 2, "addcdiv": 2, "lerp": 2, "relu": 1, "threshold_backward": 1, "sigmoid": 4,
    "sigmoid_backward": 2, "tanh": 4, "tanh_backward": 2, "silu": 4, "silu_backward": 6, "gelu": 8,
    "gelu_backward": 12, "native_dropout": 2, "native_dropout_backward": 1, "softmax": 5, "_softmax": 5,
    "_safe_softmax": 5, "log_softmax": 5, "_log_softmax": 5, "_softmax_backward_data": 3,
    "_log_softmax_backward_data": 3, "index_add": 1, "scatter_add": 1, "embedding_dense_backward": 1,
    "nll_loss_forward": 1, "nll_loss_backward": 1, "bernoulli": 1,
}  # fmt: skip
"""FLOPs per output element of elementwise ops (sigmoid/tanh 4: an exp, an add, a divide and a
sign fix; GELU 8, tanh form; softmax 5: max, subtract, exp, sum, divide; ``bernoulli`` 1: one
random draw per element of a dropout mask). ``index_add`` /
``scatter_add`` count one add per *source* element."""

PER_INPUT_ELEMENT = {
    "sum": 1, "mean": 1, "amax": 1, "amin": 1, "max": 1, "min": 1, "argmax": 1, "argmin": 1,
    "var_mean": 3, "var": 3, "native_layer_norm": 5, "native_layer_norm_backward": 8,
    "native_batch_norm": 5, "_native_batch_norm_legit": 5, "_native_batch_norm_legit_functional": 5,
    "native_batch_norm_backward": 8, "topk": 1, "max_pool2d_with_indices": 1, "avg_pool2d": 1,
    "_adaptive_avg_pool2d": 1, "mse_loss": 3, "smooth_l1_loss": 3,
}  # fmt: skip
"""FLOPs per element of the first (input) operand of reductions, norms, pooling and top-k (one
compare per element for ``topk``; layer/batch norm 5: mean, variance, subtract, scale, shift)."""

ZERO_FLOP = frozenset(
    ("view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "unsqueeze", "squeeze",
     "select", "slice", "split", "split_with_sizes", "unsafe_split", "chunk", "unbind", "getitem",
     "alias", "detach", "clone", "_to_copy", "to", "copy", "copy_", "contiguous", "cat", "stack", "flatten",
     "unflatten", "narrow", "as_strided", "index", "index_select", "gather", "scatter", "index_put",
     "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like", "empty_like", "fill",
     "new_zeros", "new_ones", "new_empty", "new_full", "arange", "scalar_tensor", "lift_fresh_copy",
     "embedding", "max_pool2d_with_indices_backward", "_adaptive_avg_pool2d_backward", "avg_pool2d_backward",
     "dropout", "identity", "one_hot", "constant_pad_nd", "slice_backward", "select_backward",
     "squeeze_copy", "view_copy", "_reshape_alias", "tril", "triu")
)  # fmt: skip
"""Ops that only move, cast, fill or relabel data: 0 FLOPs (their bytes still count)."""

ALIAS = frozenset(
    ("view", "_unsafe_view", "reshape", "_reshape_alias", "t", "transpose", "permute", "expand", "unsqueeze",
     "squeeze", "select", "slice", "split", "split_with_sizes", "unsafe_split", "chunk", "unbind", "getitem",
     "alias", "detach", "flatten", "unflatten", "narrow", "as_strided")
)  # fmt: skip
"""Ops that return a view of their input: they read and write no memory (``io_bytes`` 0)."""

GATHER = frozenset(("embedding", "index_select", "gather", "index"))
"""Ops that read only the rows they pick: their ``io_bytes`` count the rows (the output's bytes) and the
integer indices, not the whole table they index."""

_DTYPE_PRECISION = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def is_matmul_like(kind: str) -> bool:
    """Whether ``kind`` runs on tensor cores: a GEMM, convolution or attention kernel
    (:func:`doppler_gym.graph.op_kinds.is_tensor_kind`)."""
    return is_tensor_kind(kind)


def tensors(value: Any) -> list[Any]:
    """The tensors (objects with ``shape`` and ``dtype``) in a node's (possibly nested) value."""
    if value is None:
        return []
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors(item)]
    return []


def nbytes(value: Any) -> int:
    """Bytes of every tensor in ``value`` (elements x element size) [B]."""
    return sum(math.prod(t.shape) * t.dtype.itemsize for t in tensors(value))


def precision_of(dtype: Any) -> str | None:
    """``"bf16"`` for ``torch.bfloat16`` (likewise fp16, fp32, the float8 formats -> ``"fp8"``); None
    for integer, boolean and float64 tensors (no entry in :data:`~doppler_gym.graph.types.PRECISIONS`)."""
    name = str(dtype).removeprefix("torch.")
    if name.startswith("float8"):
        return "fp8"
    return _DTYPE_PRECISION.get(name)


def node_precision(tensor_list: list[Any], kind: str, tf32: bool) -> str | None:
    """An op's format from its first floating tensor (list its outputs first, then its operands):
    ``"tf32"`` for an fp32 matmul-like op when ``tf32``; ``""`` for float64 (no such format);
    None when no tensor is floating."""
    for t in tensor_list:
        if t.dtype.is_floating_point:
            p = precision_of(t.dtype)
            if p is None:
                return ""
            return "tf32" if tf32 and p == "fp32" and is_matmul_like(kind) else p
    return None


def fill_precisions(precs: list[str | None]) -> tuple[str, ...] | None:
    """Per-op formats with the gaps (ops on integer or boolean tensors only) filled by the most common
    format (fp32 when none); None for the whole graph when some op runs in float64 (``""``)."""
    if "" in precs:
        return None
    common = Counter(p for p in precs if p is not None).most_common(1)
    fill = common[0][0] if common else "fp32"
    return tuple(p or fill for p in precs)


def aten_flops(kind: str, args: tuple[Any, ...], out: Any, alpha: bool = False) -> float | None:
    """FLOPs of one ATen op (see the module docstring); None when no rule covers ``kind``.

    Args:
        kind: the ATen packet name (``"mm"``, ``"convolution_backward"``, ...); an in-place name
            (``"add_"``) gets its out-of-place rule.
        args: the op's positional arguments with fx nodes replaced by their values (tensors with
            ``shape``; Python scalars and lists as traced).
        out: the op's value (a tensor, or a tuple of tensors / None).
        alpha: the op has a scale ``alpha != 1`` (``add(x, y, alpha=a)``): one more FLOP per element.
    """
    if kind.endswith("_") and kind not in ZERO_FLOP:  # an in-place op (add_, sigmoid_): its out-of-place rule
        kind = kind[:-1]
    outs = tensors(out)
    n_out = sum(math.prod(t.shape) for t in outs)
    shapes = [tuple(a.shape) if hasattr(a, "shape") else None for a in args]
    if kind in ("mm", "bmm", "matmul", "linear"):
        return float(2 * n_out * shapes[0][-1])
    if kind in ("addmm", "baddbmm"):
        return float(2 * n_out * shapes[1][-1])
    if kind in ("convolution", "_convolution"):
        x, w, transposed = shapes[0], shapes[1], bool(args[6])
        spatial = x[2:] if transposed else tuple(outs[0].shape)[2:]
        return float(2 * x[0] * math.prod(spatial) * math.prod(w))
    if kind == "convolution_backward":
        grad_out, x, w = shapes[0], shapes[1], shapes[2]
        transposed, mask = bool(args[7]), args[10]
        spatial = x[2:] if transposed else grad_out[2:]
        forward = 2 * x[0] * math.prod(spatial) * math.prod(w)
        return float(forward * (int(bool(mask[0])) + int(bool(mask[1]))))
    if "scaled_dot_product" in kind or kind.endswith(("attention_forward", "attention_backward")):
        backward = kind.endswith("backward")
        q, k, v = shapes[1:4] if backward else shapes[0:3]
        batch_heads, length, source = math.prod(q[:-2]), q[-2], k[-2]
        per = 3 * q[-1] + 2 * v[-1] if backward else q[-1] + v[-1]
        return float(2 * batch_heads * length * source * per)
    if kind in ZERO_FLOP:
        return 0.0
    if kind in ("index_add", "scatter_add"):  # (self, dim, index, source): one add per source element
        return float(math.prod(shapes[3])) if shapes[3] is not None else None
    if kind in PER_ELEMENT:
        return float((PER_ELEMENT[kind] + int(alpha)) * n_out)
    if kind in PER_INPUT_ELEMENT and shapes and shapes[0] is not None:
        first = shapes[1] if kind == "native_layer_norm_backward" else shapes[0]  # (grad_out, input, ...)
        return float(PER_INPUT_ELEMENT[kind] * math.prod(first))
    return None
