"""Activation memory of a transformer layer kept for its backward pass, as Korthikanti et al. publish it.

Korthikanti et al., *Reducing Activation Recomputation in Large Transformer Models* (MLSys 2023,
arXiv 2205.05198), Section 4 and Table 2: with sequence length ``s``, micro-batch ``b`` sequences,
hidden size ``h``, ``a`` attention heads and 16-bit activations, one layer stores, per device,

======================================  ====================================
setting                                 bytes per layer
======================================  ====================================
no parallelism                          ``s b h (34 + 5 a s / h)``
tensor parallel (``t``)                 ``s b h (10 + 24 / t + 5 a s / (h t))``
tensor + sequence parallel              ``s b h (34 + 5 a s / h) / t``
selective recomputation, TP             ``s b h (10 + 24 / t)``
selective recomputation, TP + SP        ``s b h 34 / t``
full recomputation                      ``2 s b h`` (the layer's input only)
full recomputation, SP                  ``2 s b h / t`` (the input is split along the sequence)
======================================  ====================================

The attention half of a layer (its layer norm and attention block, ``part="attention"``; the paper's
Section 4.1 breakdown: attention ``11 s b h + 5 a s^2 b``, each layer norm ``2 s b h``; with tensor
parallelism the attention input and dropout mask, ``3 s b h``, and the norm stay whole and ``8 s b h +
5 a s^2 b`` splits) keeps ``s b h (13 + 5 a s / h)``, or ``s b h (5 + 8 / t + 5 a s / (h t))``, or that
over ``t`` with sequence parallelism; the rest is the MLP half.

Selective recomputation drops the ``5 a s / h`` term (the attention core's softmax, its dropout
mask and output, recomputed in the backward). The last row's division by ``t`` is our reading: the
paper lists full recomputation without sequence parallelism; with it each device keeps its sequence
shard of the input. The figures are the paper's GPT layer (a ``4h`` MLP with GeLU, dropout masks of
1 byte); they are used as published for every transformer layer here, Llama's SwiGLU MLP included.
Other element sizes than 16 bits scale the figure by ``size / 2`` (an approximation: the dropout
masks are 1 byte whatever the dtype).
"""

from __future__ import annotations

import numpy as np

from doppler_gym.workloads.builder import DTYPE_BYTES

PARTS = ("layer", "attention")
"""What :func:`layer_activation_bytes` counts: the whole layer, or its attention half."""

_TERMS = {"layer": (10.0, 24.0), "attention": (5.0, 8.0)}
"""Stored activations without the attention core [s b h]: ``(kept whole under tensor parallelism, split
over t)``; Korthikanti et al. Section 4.2.1 (layer: ``10 + 24 / t``)."""

RECOMPUTE = ("none", "selective", "full")
"""Activation recomputation: ``"none"`` (store everything), ``"selective"`` (recompute the attention
core), ``"full"`` (store each layer's input, recompute the layer in its backward)."""


def layer_activation_bytes(
    seq: int,
    micro_batch: int,
    d_model: int,
    n_heads: int,
    recompute: str = "none",
    tensor_parallel: int = 1,
    sequence_parallel: bool = False,
    dtype: str = "bfloat16",
    where: str = "activation",
    part: str = "layer",
) -> float:
    """Bytes one transformer layer keeps on one device for its backward, per micro-batch (module table).

    Args:
        seq: tokens per sequence ``s`` [count].
        micro_batch: sequences per micro-batch ``b`` [count].
        d_model: hidden size ``h`` [elements].
        n_heads: attention heads ``a`` [count].
        recompute: one of :data:`RECOMPUTE`.
        tensor_parallel: tensor-parallel size ``t`` [devices] (Megatron-LM's split of each layer).
        sequence_parallel: also split the layer norms and dropouts along the sequence (needs nothing
            with ``t = 1``, where it changes nothing).
        dtype: element type of the activations (a key of :data:`~doppler_gym.workloads.builder.DTYPE_BYTES`).
        where: how the caller names itself in error messages (the workload family).
        part: ``"layer"`` (the whole layer) or ``"attention"`` (its first layer norm and attention block).

    Returns:
        The layer's stored activations [B].

    Raises:
        ValueError: an unknown ``recompute`` or ``dtype``, or a size or ``t`` below 1.
        TypeError: ``sequence_parallel`` is not a bool.
    """
    for name, value in (("seq", seq), ("micro_batch", micro_batch), ("d_model", d_model), ("n_heads", n_heads),
                        ("tensor_parallel", tensor_parallel)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{where}: {name} must be an integer >= 1, got {value!r}")
    if recompute not in RECOMPUTE:
        raise ValueError(f"{where}: recompute must be one of {RECOMPUTE}, got {recompute!r}")
    if not isinstance(sequence_parallel, (bool, np.bool_)):
        raise TypeError(f"{where}: sequence_parallel must be True or False, got {sequence_parallel!r}")
    if part not in PARTS:
        raise ValueError(f"{where}: part must be one of {PARTS}, got {part!r}")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"{where}: dtype must be one of {sorted(DTYPE_BYTES)}, got {dtype!r}")
    s, b, h, a, t = (int(x) for x in (seq, micro_batch, d_model, n_heads, tensor_parallel))
    sbh = float(s) * b * h
    if recompute == "full":
        per_16bit = 2.0 * sbh / (t if sequence_parallel else 1)
    else:
        attention_core = 0.0 if recompute == "selective" else 5.0 * a * s / h
        whole, split = _TERMS[part]  # [s b h]: kept whole on each device, split over t without SP
        if sequence_parallel:
            per_16bit = sbh * (whole + split + attention_core) / t
        else:
            per_16bit = sbh * (whole + split / t + attention_core / t)
    return per_16bit * DTYPE_BYTES[dtype] / 2.0
