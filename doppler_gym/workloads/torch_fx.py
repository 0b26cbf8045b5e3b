"""Import a ``torch.nn.Module`` as a :class:`DataflowGraph` via ``torch.export`` or ``torch.fx``.

:func:`from_torch` captures the module with ``torch.export`` (:mod:`doppler_gym.workloads.torch_export`:
ATen ops such as ``aten.linear``, ``aten.scaled_dot_product_attention``, ``aten.conv2d``, shapes from
the exported graph), falling back to ``torch.fx.symbolic_trace`` plus ``ShapeProp`` on the example
inputs (``capture="auto"``; ``"export"`` or ``"fx"`` forces one). Either way it makes one op per
``call_module`` / ``call_function`` / ``call_method`` node that produces a tensor (or a tuple of
tensors: ``split``, ``lstm``, ``topk``, ``max(dim)``, whose shapes torch.export gives only in
``meta["val"]``; each ``getitem`` of an element is then a zero-FLOP op fed by the producer), in graph
order. Given ``loss`` or ``optimizer``, :func:`from_torch` captures a whole training step instead
(:mod:`doppler_gym.workloads.torch_training`). Placeholders and ``get_attr`` nodes
become external operands (no op, no edge); the output node is dropped; nodes that produce no
tensor (shape arithmetic such as ``x.shape[0] // h``) are static host-side values, not ops. An
edge ``u -> v`` is added for every op node ``u`` among ``v``'s inputs.

Costs:
    ``out_bytes``: bytes of the node's output tensor(s) (elements x element size).
    ``io_bytes``: bytes read (tensor operands; a ``call_module``'s parameters and buffers) plus
    bytes written (the output); 0 for views (``view``, ``transpose``, ``getitem``, ...); a gather
    (``embedding``, ``index_select``, ...) reads only its rows (the output's bytes) and its indices.
    ``precisions``: the format of the op's first floating output, else operand (``"tf32"`` for fp32
    matmul-like ops under ``precision="tf32"``); ``None`` for a graph with float64 ops.
    ``flops``: an op with a spec gets the vocabulary's count (:mod:`doppler_gym.graph.ops`);
    otherwise ``linear``: ``2 * out * in_features``; ``matmul``/``mm``/``bmm``:
    ``2 * out * k`` (``k`` the first operand's last dim); ``addmm``: the same plus nothing for the bias;
    ``conv2d``/``convolution``: ``2 * out * (C_in / groups) * kh * kw``;
    ``scaled_dot_product_attention`` with ``q (..., L, E)``, ``k (..., S, E)``, ``v (..., S, Ev)``:
    ``2 * N * L * S * (E + Ev)`` (``N`` the batch and head dims; its two matmuls, as
    ``torch.utils.flop_counter`` counts it, the full ``L x S`` even when causal);
    ``max_pool2d``/``avg_pool2d``: ``out * kh * kw``; ``adaptive_avg_pool2d``: the input's elements;
    ``lstm``: ``2 * T * B * sum(weight matrix sizes)`` (each step's ``x W_ih^T`` and
    ``h W_hh^T``) plus ``32 * T * B * H`` per layer and direction (gate biases 8, three sigmoids 12,
    two tanh 8, cell and hidden update 4; 24 without biases); ``topk``/``max``/``min``/``sort``/
    ``argmax``/``argmin``: one compare per input element;
    elementwise ops (:data:`PER_ELEMENT`): that many FLOPs per output element;
    view/shape ops and dropout (:data:`ZERO_FLOP`): 0; anything else: one FLOP per output element,
    with one warning listing those ops.

Specs: ``Linear``/``F.linear`` -> ``linear`` (weight and bias external), ``matmul``/``mm``/``bmm``
-> ``einsum`` (equal batch dims, or a 2-D right operand), ``add``/``mul`` of tensors -> ``add``/
``mul``, ``relu``/``silu`` -> same, ``softmax`` over the last dim -> ``softmax``; every other op
(or one with scalar operands or extra keyword arguments) gets ``None``.

torch is imported inside :func:`from_torch` only.
"""

from __future__ import annotations

import math
import string
import warnings
from collections.abc import Callable
from typing import Any

from doppler_gym.graph.ops import infer_output_shape, op_flops
from doppler_gym.graph.spec import OpSpec
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.workloads.torch_export import aten_name
from doppler_gym.workloads.torch_flops import ALIAS, GATHER, fill_precisions, node_precision, tensors

PER_ELEMENT = {
    "add": 1, "sub": 1, "mul": 1, "div": 1, "neg": 1, "pow": 1, "sqrt": 1, "rsqrt": 1, "exp": 1,
    "relu": 1, "sigmoid": 4, "tanh": 4, "silu": 4, "gelu": 8, "softmax": 5, "log_softmax": 5,
    "layer_norm": 5,
}  # fmt: skip
"""FLOPs per output element of elementwise-like ops without a spec."""

ZERO_FLOP = frozenset(
    ("view", "reshape", "transpose", "permute", "flatten", "unsqueeze", "squeeze", "contiguous",
     "expand", "getitem", "chunk", "split", "t", "dropout", "identity",
     # ATen names of torch.export graphs
     "select", "slice", "unflatten", "unsafe_view", "alias", "detach", "clone", "split_with_sizes", "narrow",
     "unbind", "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like", "empty_like", "new_zeros")
)  # fmt: skip
"""Ops that only move, relabel or fill data; they cost 0 FLOPs."""

_MODULE_KEYS = {
    "Linear": "linear", "Conv2d": "conv2d", "ReLU": "relu", "SiLU": "silu", "GELU": "gelu",
    "Sigmoid": "sigmoid", "Tanh": "tanh", "Softmax": "softmax", "LayerNorm": "layer_norm",
    "Dropout": "dropout", "Identity": "identity", "Flatten": "flatten", "MaxPool2d": "max_pool2d",
    "AvgPool2d": "avg_pool2d", "AdaptiveAvgPool2d": "adaptive_avg_pool2d",
}  # fmt: skip
_ALIASES = {"truediv": "div", "iadd": "add", "imul": "mul", "mm": "matmul", "bmm": "matmul", "convolution": "conv2d"}
_OP_NODES = ("call_module", "call_function", "call_method")
_VIEWS = ALIAS | {"identity", "chunk", "flatten"}
"""Keys of ops that return a view of their input: no memory traffic (``io_bytes`` 0)."""


CAPTURES = ("auto", "export", "fx")


def from_torch(
    module: Any,
    example_inputs: Any,
    name: str | None = None,
    capture: str = "auto",
    *,
    loss: str | Callable[[Any], Any] | None = None,
    optimizer: str | None = None,
    precision: str | None = None,
) -> DataflowGraph:
    """Capture ``module`` on ``example_inputs`` into a dataflow graph (see the module docstring).

    With ``loss`` or ``optimizer`` given it captures a whole training step instead: forward, loss,
    backward and the optimizer's update, with parameter, gradient and optimizer-state memory
    (:func:`doppler_gym.workloads.torch_training.capture_step`; ``loss`` defaults to ``"mean"``,
    ``precision`` to ``"fp32"``).

    Args:
        module: a ``torch.nn.Module`` that ``torch.export`` or ``torch.fx.symbolic_trace`` can capture.
        example_inputs: a tensor, or a tuple/list of the positional arguments of ``forward``.
        name: graph name; default the module's class name.
        capture: ``"auto"`` (``torch.export``, then ``torch.fx`` when export fails), ``"export"``
            or ``"fx"``. The two name ops differently (fx: module paths and Python names such as
            ``qkv`` or ``truediv``; export: ATen names such as ``linear`` or ``div``); kinds, FLOPs
            and bytes agree where both capture a module. A training step is always traced with
            ``make_fx``; ``capture="fx"`` is then an error.
        loss: a callable ``outputs -> scalar`` or ``"sum"`` / ``"mean"``; given, a training step.
        optimizer: ``None``, ``"sgd"``, ``"adam"`` or ``"adamw"``; given, a training step.
        precision: forward only: ``None`` (the module's own dtypes), ``"fp32"``, ``"tf32"``,
            ``"bf16"`` or ``"fp16"`` (a copy of the module and the floating inputs cast to it);
            a training step: see :func:`~doppler_gym.workloads.torch_training.capture_step`.

    Returns:
        A graph with ``units="physical"``, node names as op names, op keys (``"linear"``,
        ``"matmul"``, ...) as kinds, and a spec or ``None`` per op.

    Raises:
        ImportError: torch is not installed.
        TypeError: ``module`` is not a ``torch.nn.Module``.
        ValueError: capture or shape propagation failed (the message says why and what to do;
            under ``"auto"`` both captures' reasons), an unknown ``capture``, or no ops.
    """
    try:
        import torch
        from torch.fx import symbolic_trace
        from torch.fx.passes.shape_prop import ShapeProp
    except ImportError as exc:
        raise ImportError(f"from_torch needs PyTorch ({exc}); install it with `pip install torch`") from None
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"from_torch: module must be a torch.nn.Module, got {type(module).__name__}")
    if capture not in CAPTURES:
        raise ValueError(f"from_torch: capture must be one of {CAPTURES}, got {capture!r}")
    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    if loss is not None or optimizer is not None:
        from doppler_gym.workloads.torch_training import capture_step

        if capture == "fx":
            raise ValueError(
                "from_torch: a training step (loss or optimizer given) is traced with make_fx; "
                "leave capture at 'auto' or 'export'"
            )
        return capture_step(module, args, loss if loss is not None else "mean", optimizer, precision or "fp32", name)
    name = name or type(module).__name__
    tf32 = precision == "tf32"
    if precision is not None:
        module, args = _cast(module, args, precision)
    export_error = ""
    if capture != "fx":
        from doppler_gym.workloads.torch_export import export_graph_module

        try:
            return _to_graph(export_graph_module(module, args, name), name, tf32)
        except ValueError as exc:
            if capture == "export":
                raise
            export_error = f" ({exc}; then torch.fx was tried)"
    try:
        gm = symbolic_trace(module)
    except Exception as exc:
        raise ValueError(
            f"from_torch: torch.fx could not trace {name}: {type(exc).__name__}: {exc}. Symbolic "
            f"tracing cannot follow control flow that depends on tensor values or calls it cannot "
            f"record; make that code static, wrap the helper with torch.fx.wrap, or import a "
            f"traceable submodule instead{export_error}"
        ) from exc
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(*args)
    except Exception as exc:
        raise ValueError(
            f"from_torch: running {name} on example_inputs failed: {type(exc).__name__}: {exc}; pass "
            f"a tensor or a tuple of the positional arguments forward() accepts{export_error}"
        ) from exc
    return _to_graph(gm, name, tf32)


def _cast(module: Any, args: tuple[Any, ...], precision: str) -> tuple[Any, tuple[Any, ...]]:
    """A copy of ``module`` and ``args`` with floating tensors in ``precision``'s dtype."""
    import copy

    import torch

    dtypes = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    if precision not in dtypes:
        raise ValueError(f"from_torch: precision must be None or one of {tuple(dtypes)}, got {precision!r}")
    dtype = dtypes[precision]
    cast = tuple(a.to(dtype) if torch.is_tensor(a) and a.is_floating_point() else a for a in args)
    return copy.deepcopy(module).to(dtype), cast


def _metas(node: Any) -> list[Any]:
    """A node's output tensors' metadata: ``tensor_meta`` (shape propagation, export), else the
    traced ``val`` (torch.export gives multi-output ops such as ``split`` or ``lstm`` only that)."""
    return tensors(node.meta.get("tensor_meta")) or tensors(node.meta.get("val"))


def _to_graph(gm: Any, name: str, tf32: bool = False) -> DataflowGraph:
    nodes = [n for n in gm.graph.nodes if n.op in _OP_NODES and _metas(n)]
    if not nodes:
        raise ValueError(f"from_torch: {name} traced to a graph without ops; nothing to place")
    ids = {n: i for i, n in enumerate(nodes)}
    flops, out_bytes, io_bytes, kinds, specs, precs, src, dst, unknown = [], [], [], [], [], [], [], [], set()
    for v, node in enumerate(nodes):
        key = _op_key(node, gm)
        spec = _spec(node, key, gm, ids)
        metas = _metas(node)
        out = sum(math.prod(m.shape) for m in metas)
        if spec is not None:
            cost = op_flops(spec)
        elif key in ZERO_FLOP:
            cost = 0.0
        elif key in PER_ELEMENT:
            cost = float(PER_ELEMENT[key] * out)
        else:
            cost = _shape_flops(node, key, gm, out)
            if cost is None:
                unknown.add(key)
                cost = float(out)
        flops.append(cost)
        written = sum(math.prod(m.shape) * m.dtype.itemsize for m in metas)
        out_bytes.append(written)
        if key in GATHER:  # the rows picked (the output's bytes) and the integer indices
            read = written + sum(_nbytes(u) for u in node.all_input_nodes if not _floating(u))
        else:
            read = sum(_nbytes(u) for u in node.all_input_nodes) + _module_bytes(node, gm)
        io_bytes.append(0 if key in _VIEWS else written + read)
        kinds.append(key)
        specs.append(spec)
        precs.append(_precision(node, metas, key, tf32))
        for u in node.all_input_nodes:
            if u in ids:
                src.append(ids[u])
                dst.append(v)
    if unknown:
        warnings.warn(
            f"from_torch({name}): no FLOP rule for {sorted(unknown)}; counted one FLOP per output element",
            stacklevel=3,
        )
    return DataflowGraph(
        src=src, dst=dst, flops=flops, out_bytes=out_bytes, names=tuple(n.name for n in nodes),
        kinds=tuple(kinds), specs=tuple(specs), name=name, io_bytes=io_bytes,
        precisions=fill_precisions(precs),
    )  # fmt: skip


def _nbytes(node: Any) -> int:
    """Bytes of an fx node's output tensor(s) (placeholders and parameters included); 0 for non-tensors."""
    metas = _metas(node) if hasattr(node, "meta") else []
    return sum(math.prod(m.shape) * m.dtype.itemsize for m in metas)


def _floating(node: Any) -> bool:
    """Whether an fx node's output is a floating tensor."""
    metas = _metas(node) if hasattr(node, "meta") else []
    return bool(metas) and metas[0].dtype.is_floating_point


def _module_bytes(node: Any, gm: Any) -> int:
    """Bytes of the parameters and buffers a ``call_module`` node reads (fx capture); 0 otherwise."""
    if node.op != "call_module":
        return 0
    mod = gm.get_submodule(node.target)
    return sum(t.numel() * t.element_size() for t in (*mod.parameters(), *mod.buffers()))


def _precision(node: Any, metas: list[Any], key: str, tf32: bool) -> str | None:
    """The op's format (:func:`~doppler_gym.workloads.torch_flops.node_precision`): outputs, then operands."""
    operands = [m for u in node.all_input_nodes for m in (_metas(u) if hasattr(u, "meta") else [])]
    return node_precision(metas + operands, key, tf32)


def _op_key(node: Any, gm: Any) -> str:
    """A normalised op name: ``"linear"``, ``"matmul"``, ``"add"``, ``"view"``, ..."""
    if node.op == "call_module":
        cls = type(gm.get_submodule(node.target)).__name__
        return _MODULE_KEYS.get(cls, cls.lower())
    if node.op == "call_method":
        raw = node.target
    else:  # an ATen overload of torch.export (aten.linear.default -> "linear"), or a Python callable
        raw = aten_name(node.target) or getattr(node.target, "__name__", str(node.target))
    raw = raw.strip("_")
    return _ALIASES.get(raw, raw)


def _shape(arg: Any) -> tuple[int, ...] | None:
    """Shape of an fx node's tensor output, or None when ``arg`` is not a single-tensor node."""
    meta = getattr(arg, "meta", {}).get("tensor_meta")
    return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else None


def _shape_flops(node: Any, key: str, gm: Any, out: int) -> float | None:
    """FLOPs of ops without a spec from their shapes; None when there is no rule."""
    if key == "linear":
        x = _shape(node.args[0])
        return None if not x else float(2 * out * x[-1])
    if key in ("matmul", "addmm"):
        a = _shape(node.args[1 if key == "addmm" else 0])  # addmm(bias, mat1, mat2)
        return None if not a else float(2 * out * a[-1])
    if key in ("max_pool2d", "avg_pool2d"):  # (input, kernel_size, ...): one compare or add per window element
        if node.op == "call_module":
            kernel = gm.get_submodule(node.target).kernel_size
        else:
            kernel = node.args[1] if len(node.args) > 1 else node.kwargs.get("kernel_size")
        kernel = (kernel, kernel) if isinstance(kernel, int) else kernel
        return None if not kernel else float(out * math.prod(kernel))
    if key == "adaptive_avg_pool2d":  # every input element is added once (sizes divisible by the output)
        x = _shape(node.args[0])
        return None if not x else float(math.prod(x))
    if key == "scaled_dot_product_attention":
        q, k, v = (_shape(a) for a in node.args[:3])
        if not (q and k and v):
            return None
        return float(2 * math.prod(q[:-1]) * k[-2] * (q[-1] + v[-1]))
    if key == "lstm":  # (input, hx, params, has_biases, num_layers, dropout, train, bidirectional, ...)
        x, weights = _shape(node.args[0]), [_shape(p) for p in node.args[2]]
        if not x or None in weights:
            return None
        steps = math.prod(x[:-1])  # time steps x batch (either layout)
        hidden = [w[1] for w in weights if len(w) == 2 and w[0] == 4 * w[1]]  # w_hh (4H, H) per layer-direction
        per_unit = 32 if node.args[3] else 24
        return float(2 * steps * sum(math.prod(w) for w in weights if len(w) == 2) + per_unit * steps * sum(hidden))
    if key in ("topk", "max", "min", "sort", "argmax", "argmin"):  # one compare per input element
        x = _shape(node.args[0])
        return None if x is None else float(math.prod(x))
    if key == "conv2d":
        if node.op == "call_module":
            weight = tuple(gm.get_submodule(node.target).weight.shape)
        else:
            weight = _shape(node.args[1])
        return None if weight is None else float(2 * out * math.prod(weight[1:]))
    return None


def _spec(node: Any, key: str, gm: Any, ids: dict[Any, int]) -> OpSpec | None:
    """The vocabulary spec of ``node``, or None when it has no exact counterpart."""
    out = _shape(node)
    if out is None:
        return None
    dtype = str(node.meta["tensor_meta"].dtype).removeprefix("torch.")
    operands, extras = _operands(node, key, gm, ids)
    if operands is None or extras:
        return None
    shapes = [s for s, _ in operands]
    sources = [src for _, src in operands]
    fn, equation = key, None
    if key == "matmul":
        fn, equation = "einsum", _matmul_equation(*shapes) if len(shapes) == 2 else None
        if equation is None:
            return None
    elif key == "softmax":
        if len(shapes) != 1 or _softmax_dim(node, gm) not in (-1, len(shapes[0]) - 1):
            return None
    elif key not in ("linear", "add", "mul", "relu", "silu"):
        return None
    try:
        inferred = infer_output_shape(fn, shapes, equation)
    except ValueError:
        return None
    return OpSpec(fn, tuple(shapes), tuple(sources), inferred, equation, dtype) if inferred == out else None


def _operands(node: Any, key: str, gm: Any, ids: dict[Any, int]) -> tuple[list | None, bool]:
    """``([(shape, source), ...], has_extra_kwargs)`` of a node's tensor operands; ``None`` operands
    when a positional argument is not a tensor node (e.g. a Python scalar)."""
    args = list(node.args)
    kwargs = dict(node.kwargs)
    if key in ("softmax", "relu", "silu"):  # keep the tensor; dim / inplace are options
        args, kwargs = args[:1], {}
    if node.op == "call_module":
        mod = gm.get_submodule(node.target)
        params = [p for p in (getattr(mod, "weight", None), getattr(mod, "bias", None)) if p is not None]
        externals = [(tuple(p.shape), -1) for p in params] if key == "linear" else []
    else:
        externals = []
    operands = []
    for arg in args:
        shape = _shape(arg)
        if shape is None:
            return None, False
        operands.append((shape, ids.get(arg, -1)))
    return operands + externals, bool(kwargs)


def _softmax_dim(node: Any, gm: Any) -> int | None:
    if node.op == "call_module":
        return gm.get_submodule(node.target).dim
    if len(node.args) > 1:
        return node.args[1]
    return node.kwargs.get("dim")


def _matmul_equation(a: tuple[int, ...], b: tuple[int, ...]) -> str | None:
    """Einsum equation of ``a @ b`` for equal batch dims or a 2-D ``b``; None otherwise."""
    if len(a) < 2 or len(b) < 2 or (len(b) > 2 and a[:-2] != b[:-2]) or len(a) > 25:
        return None
    batch = string.ascii_lowercase[: len(a) - 2]  # the letters before x, y, z
    b_batch = batch if len(b) > 2 else ""
    return f"{batch}xy,{b_batch}yz->{batch}xz"
