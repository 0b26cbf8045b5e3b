"""FFNN: a feed-forward network ``H_l = relu(H_{l-1} @ W_l + b_l)``, ``H_0 = X``, block-partitioned.

Layer ``l`` (1-based) is a ``blocks x blocks x blocks`` block matmul (ops ``mm<l>[i,j,k]``, partial
sums ``mm<l>.sum[i,j]``) followed, per output tile, by ``bias<l>[i,j]`` (add the bias slice) and
``relu<l>[i,j]``. Ops: ``layers * (blocks**3 + 3 * blocks**2)``; 160 at the defaults.

``collectives=True`` gives the partial sums ``mm<l>.sum[i,j]`` the collective kind ``"allreduce"``
instead of ``"formation"`` (the sum over the ``blocks`` contraction tiles is the all-reduce of a
k-split matmul; see :mod:`doppler_gym.workloads.llama` for what that charges); nothing else changes.

Memory: ``W<l>`` and ``b<l>`` are trained parameters; the ops reading their tiles hold their
training state as ``persistent_bytes`` (:mod:`doppler_gym.workloads.builder`).
"""

from __future__ import annotations

from doppler_gym.workloads.builder import (
    Ext,
    GraphBuilder,
    block_size,
    check_ints,
    matmul_grid,
    reduction_kind,
    tile,
)
from doppler_gym.workloads.workload import Workload


def build(
    batch: int = 4096,
    d_in: int = 4096,
    hidden: int = 4096,
    layers: int = 8,
    blocks: int = 2,
    dtype: str = "float32",
    collectives: bool = False,
    optimizer: str = "adam",
) -> Workload:
    """Build the FFNN workload.

    Args:
        batch: rows of the input ``X`` [samples]; divisible by ``blocks``.
        d_in: input features [elements]; divisible by ``blocks``.
        hidden: width of every layer [elements]; divisible by ``blocks``.
        layers: number of linear + bias + relu layers (``W1: (d_in, hidden)``, then ``(hidden, hidden)``).
        blocks: blocks per matrix dimension.
        dtype: element type, sets ``out_bytes`` (float32: 4 B per element), ``io_bytes`` (operands + output)
            and ``precisions`` (float32 -> ``"fp32"``, bfloat16 -> ``"bf16"``, float16 -> ``"fp16"``; none for
            float64), which the roofline cost model reads (:mod:`doppler_gym.workloads.builder`).
        collectives: label the partial sums ``"allreduce"`` (collective ops) instead of ``"formation"``.
        optimizer: training state of the parameters held as persistent memory: ``"adam"``,
            ``"sgd"`` or ``"none"`` (:func:`~doppler_gym.workloads.builder.parameter_bytes`).

    Returns:
        Inputs ``X``, ``W<l>``, ``b<l>``; output ``Y`` = ``H_layers``.
    """
    batch, d_in, hidden, layers, blocks = check_ints(
        "ffnn", batch=batch, d_in=d_in, hidden=hidden, layers=layers, blocks=blocks
    )
    sum_kind = reduction_kind("ffnn", collectives)
    tb = block_size("ffnn", "batch", batch, blocks)
    th = block_size("ffnn", "hidden", hidden, blocks)
    b = GraphBuilder("ffnn", dtype, optimizer)
    b.input("X", (batch, d_in))
    grid: list[list[int]] | None = None
    for layer in range(1, layers + 1):
        fan_in = d_in if layer == 1 else hidden
        tk = block_size("ffnn", "d_in" if layer == 1 else "hidden", fan_in, blocks)
        b.input(f"W{layer}", (fan_in, hidden), parameter=True)
        b.input(f"b{layer}", (hidden,), parameter=True)

        def left(i: int, c: int, prev: list[list[int]] | None = grid, tk: int = tk) -> Ext | int:
            return Ext("X", (tile(i, tb), tile(c, tk))) if prev is None else prev[i][c]

        def right(c: int, j: int, layer: int = layer, tk: int = tk) -> Ext:
            return Ext(f"W{layer}", (tile(c, tk), tile(j, th)))

        sums = matmul_grid(b, f"mm{layer}", left, right, (blocks, blocks, blocks), "ij,jk->ik", sum_kind)
        grid = [[_bias_relu(b, layer, i, j, sums[i][j], th) for j in range(blocks)] for i in range(blocks)]
    for i in range(blocks):
        for j in range(blocks):
            b.output("Y", (batch, hidden), grid[i][j], (tile(i, tb), tile(j, th)))
    return b.build()


def _bias_relu(b: GraphBuilder, layer: int, i: int, j: int, x: int, th: int) -> int:
    """``relu(x + b<layer>[j-th tile])`` for output tile ``(i, j)``; returns the relu op."""
    biased = b.op(f"bias{layer}[{i},{j}]", "bias", "add", [x, Ext(f"b{layer}", (tile(j, th),))])
    return b.op(f"relu{layer}[{i},{j}]", "relu", "relu", [biased])
