"""LLAMA-BLOCK and LLAMA-LAYER: a Llama attention block, and the block plus its SwiGLU MLP.

The batch is cut into ``blocks`` row blocks ``r`` and the heads into ``blocks`` head groups ``h``
(tensor-parallel attention). Per row block ``r``:

- ``norm1[r]``: RMSNorm of ``x[r]`` (full rows; ``x`` is ``(batch, seq, d_model)``);
- per head group ``h``: projections ``q/k/v[r,h]`` (einsum with ``Wq/Wk/Wv[:, h]``, weights
  ``(d_model, n_heads, head_dim)``), ``qrot/krot[r,h]`` (rotary), ``scores[r,h]`` =
  ``q k^T * scale`` (einsum with the scalar ``scale = 1/sqrt(head_dim)``), ``probs[r,h]`` (softmax
  over keys), ``attn[r,h]`` = ``probs @ v``, ``proj[r,h]`` = ``attn @ Wo[h]`` (partial output
  projection, ``Wo`` is ``(n_heads, head_dim, d_model)``);
- ``proj.sum[r]`` adds the head-group partials (formation), ``resid1[r]`` adds ``x[r]``.

The layer continues per row block with ``norm2[r]``, per hidden block ``j``: ``gate/up[r,j]``
(einsum with ``Wg/Wu[:, j]``, ``(d_model, ffn_hidden)``), ``swiglu[r,j]`` = ``silu(gate) * up``,
``down[r,j]`` (partial ``@ Wd[j]``, ``(ffn_hidden, d_model)``), then ``down.sum[r]`` and
``resid2[r]``. Attention is not causally masked.

Ops: block ``12 B^2 + 3 B`` (156 at the defaults, ``B = blocks``); layer adds ``5 B^2 + 3 B`` (232).

``collectives=True`` gives the two reductions of partial outputs, ``proj.sum[r]`` (the head groups'
partial ``attn @ Wo[h]``) and ``down.sum[r]`` (the hidden blocks' partial ``@ Wd[j]``), the collective
kind ``"allreduce"`` instead of ``"formation"``: in tensor-parallel (Megatron-style) attention and MLP
these sums are the all-reduce of the ``(tb, seq, d_model)`` partials, and each op's ``out_bytes``
is that reduced tensor, what every member holds after an allreduce. Everything else is unchanged
(ops, edges, FLOPs, bytes, specs: a real backend still runs the ``add``); only
``SimConfig(multicast="teccl")`` times these ops differently (:mod:`doppler_gym.sim.multicast`: a
TE-CCL allreduce over the devices of the partials, the sum and its consumer, the residual). The
graph's sum has that one consumer, so this charges the TP pattern (every member ends with the sum),
more than a reduce to the residual's device alone would need.

Memory: the norm weights and ``Wq, Wk, Wv, Wo`` (and ``Wg, Wu, Wd``) are trained parameters; the
ops reading their tiles hold their training state as ``persistent_bytes``
(:mod:`doppler_gym.workloads.builder`); ``x``, the rotary tables and the scale hold nothing.
With ``recompute`` given (``"none"``, ``"selective"`` or ``"full"``: a training forward), each row
block also keeps the activations its backward needs, per Korthikanti et al. 2022
(:func:`~doppler_gym.workloads.activation.layer_activation_bytes` for ``tb`` sequences: the whole
layer, or its attention half for the block, with ``tensor_parallel`` and ``sequence_parallel``): the
backward is not in the graph, so they are held for the whole run as ``persistent_bytes`` of the row
block's last op (``resid1[r]`` / ``resid2[r]``), and the run's peak is that of the end of a training
forward. ``recompute=None`` (the default) is a forward alone, which keeps nothing.

Traffic and precision (:class:`~doppler_gym.workloads.builder.GraphBuilder`): ``io_bytes`` of each op
is the bytes of its operands (inputs and weight tiles) and its output, what a roofline cost model reads
from device memory; ``precisions`` is ``dtype``'s format for every op (:func:`precision_of`; ``bf16``
for a ``bfloat16`` layer's matmuls), ``None`` for ``float64``, which has no tensor-core format.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from doppler_gym.workloads.activation import layer_activation_bytes
from doppler_gym.workloads.builder import (
    DTYPE_PRECISIONS,
    Ext,
    GraphBuilder,
    block_size,
    check_ints,
    reduction_kind,
    tile,
)
from doppler_gym.workloads.workload import Workload

ROPE_THETA = 10000.0
"""Base of the rotary frequencies: angle ``pos * ROPE_THETA ** (-2 i / head_dim)``."""

# Einsum equations; b: sequences, s/q/k: tokens, d: model, n: heads, e: head dim, f: MLP hidden.
_QKV = "bsd,dne->bnse"
_SCORES = "bnqe,bnke,->bnqk"  # the third operand is the scalar scale
_AV = "bnqk,bnke->bnqe"
_OUT = "bnse,ned->bsd"
_UP = "bsd,df->bsf"
_DOWN = "bsf,fd->bsd"


@dataclass(frozen=True)
class _Tiling:
    tb: int  # sequences per row block
    tn: int  # heads per head group
    blocks: int
    sum_kind: str  # kind of the ops adding partial outputs ("formation" or "allreduce")


def build_block(
    batch: int = 4,
    seq: int = 2048,
    d_model: int = 4096,
    n_heads: int = 32,
    blocks: int = 4,
    dtype: str = "float32",
    collectives: bool = False,
    optimizer: str = "adam",
    recompute: str | None = None,
    tensor_parallel: int = 1,
    sequence_parallel: bool = False,
) -> Workload:
    """Build LLAMA-BLOCK (attention with RMSNorm, rotary and residual).

    Args:
        batch: sequences [count]; divisible by ``blocks``.
        seq: tokens per sequence [count].
        d_model: model width [elements]; divisible by ``n_heads``, giving an even ``head_dim``.
        n_heads: attention heads [count]; divisible by ``blocks``.
        blocks: row blocks of the batch and head groups.
        dtype: element type, sets ``out_bytes`` (float32: 4 B per element).
        collectives: label ``proj.sum[r]`` ``"allreduce"`` (a collective op) instead of ``"formation"``.
        optimizer: training state of the parameters held as persistent memory: ``"adam"``,
            ``"sgd"`` or ``"none"`` (:func:`~doppler_gym.workloads.builder.parameter_bytes`).
        recompute: ``None`` (a forward alone: no stash) or the activation recomputation of a training
            forward (``"none"``, ``"selective"``, ``"full"``), whose stash each row block holds (module
            docstring).
        tensor_parallel, sequence_parallel: the stash's tensor-parallel size ``t`` and sequence
            parallelism (Korthikanti et al.); the graph's own tiling is ``blocks``.

    Returns:
        Inputs ``x, norm1, Wq, Wk, Wv, Wo`` (random) and ``rope_cos, rope_sin, scale`` (constants);
        output ``y`` = ``x + attention(rmsnorm(x))``, ``(batch, seq, d_model)``.
    """
    b, dims = _start("llama-block", batch, seq, d_model, n_heads, blocks, dtype, collectives, optimizer)
    last = []
    for r in range(blocks):
        last.append(_attention(b, dims, r))
        b.output("y", (batch, seq, d_model), last[-1], (tile(r, dims.tb),))
    stash = _stash("llama-block", "attention", seq, dims.tb, d_model, n_heads, recompute, tensor_parallel,
                   sequence_parallel, dtype)
    return _with_stash(b.build(), last, stash)


def build_layer(
    batch: int = 4,
    seq: int = 2048,
    d_model: int = 4096,
    n_heads: int = 32,
    ffn_hidden: int = 11008,
    blocks: int = 4,
    dtype: str = "float32",
    collectives: bool = False,
    optimizer: str = "adam",
    recompute: str | None = None,
    tensor_parallel: int = 1,
    sequence_parallel: bool = False,
) -> Workload:
    """Build LLAMA-LAYER: :func:`build_block` followed by RMSNorm, SwiGLU MLP and residual.

    Args:
        batch, seq, d_model, n_heads, blocks, dtype, optimizer, recompute, tensor_parallel, sequence_parallel:
            as in :func:`build_block` (the stash is the whole layer's).
        ffn_hidden: MLP hidden width [elements]; divisible by ``blocks``.
        collectives: label ``proj.sum[r]`` and ``down.sum[r]`` ``"allreduce"`` instead of ``"formation"``.

    Returns:
        The block's inputs plus ``norm2, Wg, Wu, Wd``; output ``y`` = ``h + mlp(rmsnorm(h))`` with
        ``h`` the block's output.
    """
    b, dims = _start("llama-layer", batch, seq, d_model, n_heads, blocks, dtype, collectives, optimizer)
    (ffn_hidden,) = check_ints("llama-layer", ffn_hidden=ffn_hidden)
    tf = block_size("llama-layer", "ffn_hidden", ffn_hidden, blocks)
    b.input("norm2", (d_model,), parameter=True)
    for w in ("Wg", "Wu"):
        b.input(w, (d_model, ffn_hidden), parameter=True)
    b.input("Wd", (ffn_hidden, d_model), parameter=True)
    last = []
    for r in range(blocks):
        h = _attention(b, dims, r)
        x = b.op(f"norm2[{r}]", "rmsnorm", "rmsnorm", [h, Ext("norm2")])
        parts = []
        for j in range(blocks):
            cols = (slice(None), tile(j, tf))
            gate = b.op(f"gate[{r},{j}]", "einsum", "einsum", [x, Ext("Wg", cols)], _UP)
            up = b.op(f"up[{r},{j}]", "einsum", "einsum", [x, Ext("Wu", cols)], _UP)
            act = b.op(f"swiglu[{r},{j}]", "swiglu", "swiglu", [gate, up])
            down = [act, Ext("Wd", (tile(j, tf),))]
            parts.append(b.op(f"down[{r},{j}]", "einsum", "einsum", down, _DOWN))
        out = b.op(f"resid2[{r}]", "residual", "add", [b.sum(f"down.sum[{r}]", parts, dims.sum_kind), h])
        b.output("y", (batch, seq, d_model), out, (tile(r, dims.tb),))
        last.append(out)
    stash = _stash("llama-layer", "layer", seq, dims.tb, d_model, n_heads, recompute, tensor_parallel,
                   sequence_parallel, dtype)
    return _with_stash(b.build(), last, stash)


def precision_of(dtype: str) -> str | None:
    """The numeric format of ``dtype`` (:data:`~doppler_gym.workloads.builder.DTYPE_PRECISIONS`), ``None``
    for ``float64``."""
    return DTYPE_PRECISIONS.get(dtype)


def _stash(family: str, part: str, seq: int, rows: int, d_model: int, n_heads: int, recompute: str | None,
           tensor_parallel: int, sequence_parallel: bool, dtype: str) -> float:
    """Activations one row block of ``rows`` sequences keeps for its backward [B]; 0 for ``recompute=None``."""
    if recompute is None:
        return 0.0
    return layer_activation_bytes(seq, rows, d_model, n_heads, recompute, tensor_parallel, sequence_parallel,
                                  dtype, where=family, part=part)


def _with_stash(w: Workload, holders: list[int], stash: float) -> Workload:
    """``w`` with each row block's ``stash`` [B] added to the persistent bytes of its op in ``holders``."""
    if stash == 0.0:
        return w
    persistent = np.array(w.graph.persistent_bytes)
    persistent[holders] += stash
    return dataclasses.replace(w, graph=dataclasses.replace(w.graph, persistent_bytes=persistent))


def _start(
    family: str, batch: int, seq: int, d_model: int, n_heads: int, blocks: int, dtype: str, collectives: object,
    optimizer: str = "adam",
) -> tuple[GraphBuilder, _Tiling]:
    """Check the attention parameters and declare the attention inputs; returns the builder and
    the tiling."""
    batch, seq, d_model, n_heads, blocks = check_ints(
        family, batch=batch, seq=seq, d_model=d_model, n_heads=n_heads, blocks=blocks
    )
    if d_model % n_heads or (d_model // n_heads) % 2:
        raise ValueError(
            f"{family}: d_model={d_model} must be n_heads={n_heads} times an even head_dim "
            f"(rotary rotates pairs of features)"
        )
    head_dim = d_model // n_heads
    dims = _Tiling(
        tb=block_size(family, "batch", batch, blocks),
        tn=block_size(family, "n_heads", n_heads, blocks),
        blocks=blocks,
        sum_kind=reduction_kind(family, collectives),
    )
    b = GraphBuilder(family, dtype, optimizer)
    b.input("x", (batch, seq, d_model))
    b.input("norm1", (d_model,), parameter=True)
    for w in ("Wq", "Wk", "Wv"):
        b.input(w, (d_model, n_heads, head_dim), parameter=True)
    b.input("Wo", (n_heads, head_dim, d_model), parameter=True)
    inv_freq = ROPE_THETA ** (-np.arange(head_dim // 2) * 2.0 / head_dim)
    angles = np.outer(np.arange(seq), inv_freq)  # (seq, head_dim / 2) [rad]
    b.input("rope_cos", angles.shape, np.cos(angles))
    b.input("rope_sin", angles.shape, np.sin(angles))
    b.input("scale", (), np.array(1.0 / np.sqrt(head_dim)))
    return b, dims


def _attention(b: GraphBuilder, dims: _Tiling, r: int) -> int:
    """The attention ops of row block ``r``; returns the op computing ``y[r]`` (after the residual)."""
    rows = (tile(r, dims.tb),)
    x = b.op(f"norm1[{r}]", "rmsnorm", "rmsnorm", [Ext("x", rows), Ext("norm1")])
    rope = [Ext("rope_cos"), Ext("rope_sin")]
    parts = []
    for h in range(dims.blocks):
        heads = tile(h, dims.tn)
        q, k, v = (
            b.op(f"{w[1]}[{r},{h}]", "einsum", "einsum", [x, Ext(w, (slice(None), heads))], _QKV)
            for w in ("Wq", "Wk", "Wv")
        )
        q = b.op(f"qrot[{r},{h}]", "rotary", "rotary", [q, *rope])
        k = b.op(f"krot[{r},{h}]", "rotary", "rotary", [k, *rope])
        s = b.op(f"scores[{r},{h}]", "einsum", "einsum", [q, k, Ext("scale")], _SCORES)
        p = b.op(f"probs[{r},{h}]", "softmax", "softmax", [s])
        a = b.op(f"attn[{r},{h}]", "einsum", "einsum", [p, v], _AV)
        parts.append(b.op(f"proj[{r},{h}]", "einsum", "einsum", [a, Ext("Wo", (heads,))], _OUT))
    return b.op(f"resid1[{r}]", "residual", "add", [b.sum(f"proj.sum[{r}]", parts, dims.sum_kind), Ext("x", rows)])
