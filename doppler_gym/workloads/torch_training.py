"""Capture one whole training step of a ``torch.nn.Module``: forward, loss, backward, optimizer update.

:func:`capture_step` traces a pure function of the step with ``torch.fx.experimental.proxy_tensor.make_fx``
on fake tensors (no real compute, no memory for activations)::

    outputs = functional_call(model, params + buffers, inputs)
    loss    = loss(outputs)                                  # a scalar
    grads   = torch.autograd.grad(loss, params)
    params', master', m', v' = optimizer(params, grads, master, m, v)

The trace holds post-autograd ATen ops (``mm``, ``addmm``, ``convolution_backward``,
``native_layer_norm_backward``, ``_scaled_dot_product_flash_attention_for_cpu_backward``, ...): the
same kernels ``loss.backward()`` dispatches. oneDNN (mkldnn) is switched off while tracing, so an
``nn.LSTM`` decomposes into its per-timestep ``addmm``/``mm`` and gate ops instead of one opaque
``mkldnn_rnn_layer``. :mod:`doppler_gym.workloads.torch_graph` turns the trace into a graph.

Precision (``precision=``): ``"fp32"`` (and ``"tf32"``: fp32 tensors, matmul-like ops labelled tf32)
traces the module as it is in float32; ``"bf16"`` / ``"fp16"`` follows the mixed-precision convention
of Micikevicius et al., "Mixed Precision Training" (ICLR 2018), as ZeRO counts it (Rajbhandari et
al., SC 2020, section 3.1: 2 + 2 + 12 = 16 bytes per parameter with Adam): weights, activations and
gradients in 16 bits, an fp32 master copy of the weights and fp32 optimizer state; the update runs in
fp32 on the master copy and casts the new weights back to 16 bits.

Optimizer update per parameter element, as traced (``lr``, betas, ``eps`` as PyTorch's defaults; the
step is the first, so bias corrections are host constants, as ``torch.optim.Adam`` with
``capturable=False`` computes them):

========  ==============================================================  =====================
name      update                                                          FLOPs per element
========  ==============================================================  =====================
``sgd``   ``w -= lr * g`` (no momentum)                                   2
``adam``  ``m += (1-b1)(g - m)``; ``v += (1-b2)(g g - v)``;               14
          ``w -= lr (m / c1) / (sqrt(v / c2) + eps)``
``adamw`` Adam with ``u + wd w`` as the update ``u`` (decoupled decay)      16
========  ==============================================================  =====================

By default (``fuse=True``) each parameter's update is then one op of kind ``"<optimizer>_update"``
(``"adam_update"``), as a fused optimizer kernel (``torch.optim.Adam(fused=True)``, apex ``FusedAdam``)
runs it: the table's FLOPs, its operands and results as ``io_bytes``, no temporaries
(:func:`doppler_gym.workloads.torch_graph.aten_graph`).

The moments are written in their interpolation form (``torch.optim.Adam``'s ``lerp_``), so every
update op reads the gradient: a dataflow scheduler cannot start an update before the backward made
its gradient (a state-only op such as ``b1 * m`` would be a root and hold memory from time 0).

Persistent memory per parameter element [B] (:func:`persistent_bytes_per_element`): the weight and its
gradient at the weights' width (2 for 16-bit, 4 for fp32), plus 4 for the fp32 master copy in mixed
precision, plus 8 for Adam's m and v (fp32). ``None`` and ``"sgd"`` (no momentum) keep no optimizer
state: weights, gradients and, in mixed precision, the master copy.

torch is imported inside the functions that need it.
"""

from __future__ import annotations

import copy
import functools
import operator
import warnings
from collections.abc import Callable
from typing import Any

from doppler_gym.graph.types import DataflowGraph

OPTIMIZERS = (None, "sgd", "adam", "adamw")
STEP_PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
LOSSES = ("sum", "mean")

_LR, _BETAS, _EPS, _WEIGHT_DECAY = 1e-3, (0.9, 0.999), 1e-8, 1e-2
_STATE_BYTES = {None: 0, "sgd": 0, "adam": 8, "adamw": 8}


def persistent_bytes_per_element(precision: str, optimizer: str | None) -> int:
    """Bytes one parameter element keeps for the whole step: weight + gradient (+ fp32 master copy in
    bf16/fp16) (+ Adam's fp32 m and v). E.g. 16 for ``("bf16", "adam")`` (ZeRO's 2 + 2 + 12)."""
    _check_options(precision, optimizer)
    width = 2 if precision in ("bf16", "fp16") else 4
    master = 4 if width == 2 else 0
    return 2 * width + master + _STATE_BYTES[optimizer]


def capture_step(
    module: Any,
    args: tuple[Any, ...],
    loss: str | Callable[[Any], Any] = "mean",
    optimizer: str | None = "adam",
    precision: str = "fp32",
    name: str | None = None,
    fuse: bool = True,
) -> DataflowGraph:
    """A dataflow graph of one training step of ``module`` on ``args`` (see the module docstring).

    Args:
        module: a ``torch.nn.Module`` (copied, never changed; traced in training mode).
        args: the positional arguments of ``forward``; floating tensors are cast to the step's
            16-bit type under ``"bf16"``/``"fp16"``.
        loss: a callable ``outputs -> scalar tensor``, or ``"sum"`` / ``"mean"``: the sum over every
            floating tensor in the outputs of its sum / mean (in fp32).
        optimizer: ``None`` (forward and backward only), ``"sgd"``, ``"adam"`` or ``"adamw"``.
        precision: one of :data:`STEP_PRECISIONS`.
        name: the graph's name; default ``"<class>-step"``.
        fuse: one op per parameter's update (kind ``"<optimizer>_update"``, as a fused optimizer
            kernel runs it: FLOPs the traced ops' sum, no temporaries); False keeps every traced op
            of the update (``mul``, ``sqrt``, ...), whose fp32 temporaries then count as memory.

    Returns:
        A graph whose op names are ``"fwd.<node>"``, ``"bwd.<node>"`` or ``"opt.<node>"`` (forward:
        the loss's ancestors; backward: the gradients' other ancestors; optimizer: the rest), kinds
        the ATen op names, ``persistent_bytes`` for parameters, gradients, master weights and
        optimizer state on the first op that reads each parameter (buffers such as batch-norm
        statistics, frozen parameters: their own size), ``io_bytes`` and ``precisions`` per op; see
        :func:`doppler_gym.workloads.torch_graph.aten_graph`.

    Raises:
        ValueError: an unknown option, a module without trainable parameters, a loss that is not a
            scalar, or a step that ``make_fx`` cannot trace (the message gives its reason).
    """
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from doppler_gym.workloads.torch_graph import aten_graph

    _check_options(precision, optimizer)
    loss_fn = _loss_function(loss)
    name = name or f"{type(module).__name__}-step"
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    model = copy.deepcopy(module).train()
    if dtype is not None:
        model = model.to(dtype)
        args = tuple(a.to(dtype) if torch.is_tensor(a) and a.is_floating_point() else a for a in args)
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    frozen = {k: p.detach() for k, p in model.named_parameters() if not p.requires_grad}
    buffers = {**frozen, **dict(model.named_buffers())}  # held at their own size, like buffers
    if not params:
        raise ValueError(f"from_torch({name}): the module has no trainable parameters; there is no step to capture")
    names = list(params)
    masters = [p.detach().float().clone() for p in params.values()] if dtype is not None else []
    adam = optimizer in ("adam", "adamw")
    states = [torch.zeros_like(p, dtype=torch.float32) for p in params.values()] if adam else []
    groups = [len(names), len(buffers), len(masters), len(states), len(states), len(args)]

    def step(*flat: Any) -> list[Any]:
        parts, start = [], 0
        for size in groups:
            parts.append(list(flat[start : start + size]))
            start += size
        ps, bs, ms, m1, m2, inputs = parts
        out = torch.func.functional_call(model, {**dict(zip(names, ps)), **dict(zip(buffers, bs))}, tuple(inputs))
        value = loss_fn(out)
        if not (torch.is_tensor(value) and value.dim() == 0):
            raise ValueError(f"from_torch({name}): loss must return a scalar tensor, got {_describe(value)}")
        grads = torch.autograd.grad(value, ps, allow_unused=True)
        present = [g for g in grads if g is not None]
        n_grads.append(len(present))
        return [value, *present, *_update(optimizer, ps, grads, ms, m1, m2, dtype)]

    n_grads: list[int] = []
    flat = [*params.values(), *buffers.values(), *masters, *states, *[s.clone() for s in states], *args]
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="TF32 acceleration on top of oneDNN")  # flags() restoring it
            with torch.backends.mkldnn.flags(enabled=False):
                gm = make_fx(step, tracing_mode="fake")(*flat)
    except ValueError:
        raise
    except Exception as exc:
        raise ValueError(
            f"from_torch({name}): tracing the training step failed: {type(exc).__name__}: {str(exc)[:500]}; "
            f"the step must run on the example inputs without data-dependent shapes or Python control flow on "
            f"tensor values"
        ) from exc
    width = persistent_bytes_per_element(precision, optimizer)
    held = [width * p.numel() for p in params.values()] + [b.numel() * b.element_size() for b in buffers.values()]
    n_owned = len(names) + len(buffers)
    labels = [*names, *buffers, *(f"{k}:master" for k in names[: len(masters)])]
    labels += [f"{k}:m" for k in names[: len(states)]] + [f"{k}:v" for k in names[: len(states)]]
    labels += [f"input{i}" for i in range(len(args))]
    return aten_graph(
        gm, name, held + [0.0] * (len(flat) - n_owned), n_grads[-1], tf32=precision == "tf32",
        fused_update=None if optimizer is None or not fuse else f"{optimizer}_update", placeholder_names=labels,
    )  # fmt: skip


def _check_options(precision: str, optimizer: str | None) -> None:
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"from_torch: optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    if precision not in STEP_PRECISIONS:
        raise ValueError(
            f"from_torch: precision must be one of {STEP_PRECISIONS} for a training step, got {precision!r}"
        )


def _loss_function(loss: str | Callable[[Any], Any]) -> Callable[[Any], Any]:
    if callable(loss):
        return loss
    if loss not in LOSSES:
        raise ValueError(f"from_torch: loss must be a callable on the outputs or one of {LOSSES}, got {loss!r}")

    def reduce(outputs: Any) -> Any:
        import torch

        leaves = [t for t in torch.utils._pytree.tree_leaves(outputs) if torch.is_tensor(t) and t.is_floating_point()]
        if not leaves:
            raise ValueError(f"from_torch: loss={loss!r} found no floating tensor in the outputs; pass a callable")
        return functools.reduce(operator.add, (getattr(t.float(), loss)() for t in leaves))

    return reduce


def _update(
    optimizer: str | None, params: list, grads: tuple, masters: list, m1: list, m2: list, dtype: Any
) -> list[Any]:
    """The new parameters (and master copies and moments): one pure update per parameter."""
    if optimizer is None:
        return []
    new_params, new_masters, new_m1, new_m2 = [], [], [], []
    for i, (p, g) in enumerate(zip(params, grads)):
        if g is None:
            continue
        w = masters[i] if masters else p
        g = g.float()
        if optimizer == "sgd":
            w = w - _LR * g
        else:  # every op reads the gradient, so none runs before the backward has made it
            b1, b2 = _BETAS
            m = m1[i] + (1 - b1) * (g - m1[i])
            v = m2[i] + (1 - b2) * (g * g - m2[i])
            update = (m / (1 - b1)) / ((v / (1 - b2)).sqrt() + _EPS)
            if optimizer == "adamw":
                update = update.add(w, alpha=_WEIGHT_DECAY)
            w = w - _LR * update
            new_m1.append(m)
            new_m2.append(v)
        if masters:
            new_masters.append(w)
            w = w.to(dtype)
        new_params.append(w)
    return [*new_params, *new_masters, *new_m1, *new_m2]


def _describe(value: Any) -> str:
    shape = getattr(value, "shape", None)
    return f"a tensor of shape {tuple(shape)}" if shape is not None else type(value).__name__
