"""CHAINMM: a chain of block-partitioned matrix products ``Y = (((M0 @ M1) @ M2) ... @ Mk)``.

Every ``n x n`` matrix is cut into a ``blocks x blocks`` grid. Product ``p`` (1-based) has one op
``mm<p>[i,j,k]`` per partial product ``X[i,k] @ M<p>[k,j]`` and one ``formation`` op
``mm<p>.sum[i,j]`` per output tile that adds its ``blocks`` partials (none when ``blocks == 1``).
Ops: ``k * (blocks**3 + blocks**2)``; 108 at the defaults.

Memory: ``M1..Mk`` are treated as trained weights (a deep linear network on the data ``M0``): the
ops reading their tiles hold their training state as ``persistent_bytes``
(:mod:`doppler_gym.workloads.builder`, :func:`~doppler_gym.workloads.builder.parameter_bytes`).
"""

from __future__ import annotations

from doppler_gym.workloads.builder import Ext, GraphBuilder, block_size, check_ints, matmul_grid, tile
from doppler_gym.workloads.workload import Workload


def build(
    n: int = 12288, k: int = 3, blocks: int = 3, batch: int = 1, dtype: str = "float32", optimizer: str = "adam"
) -> Workload:
    """Build the CHAINMM workload.

    Args:
        n: matrix size [elements per side]; each matrix is ``(batch, n, n)``, or ``(n, n)`` when
            ``batch == 1``. Must be divisible by ``blocks``.
        k: number of matrix products (``k + 1`` input matrices ``M0..Mk``).
        blocks: blocks per matrix dimension (tiles are ``n/blocks`` on a side).
        batch: independent matrix chains computed together (an unsplit batch dimension).
        dtype: element type, sets ``out_bytes`` (float32: 4 B per element), ``io_bytes`` (operands + output)
            and ``precisions`` (float32 -> ``"fp32"``, bfloat16 -> ``"bf16"``, float16 -> ``"fp16"``; none for
            float64), which the roofline cost model reads (:mod:`doppler_gym.workloads.builder`).
        optimizer: training state of ``M1..Mk`` held as persistent memory: ``"adam"``, ``"sgd"`` or
            ``"none"`` (:func:`~doppler_gym.workloads.builder.parameter_bytes`).

    Returns:
        Inputs ``M0..Mk``; output ``Y`` = the chain product.
    """
    n, k, blocks, batch = check_ints("chainmm", n=n, k=k, blocks=blocks, batch=batch)
    t = block_size("chainmm", "n", n, blocks)
    lead, prefix = ((batch,), (slice(None),)) if batch > 1 else ((), ())
    equation = "bij,bjk->bik" if batch > 1 else "ij,jk->ik"
    b = GraphBuilder("chainmm", dtype, optimizer)
    for p in range(k + 1):
        b.input(f"M{p}", (*lead, n, n), parameter=p > 0)
    grid: list[list[int]] | None = None
    for p in range(1, k + 1):

        def left(i: int, c: int, prev: list[list[int]] | None = grid) -> Ext | int:
            return Ext("M0", (*prefix, tile(i, t), tile(c, t))) if prev is None else prev[i][c]

        def right(c: int, j: int, p: int = p) -> Ext:
            return Ext(f"M{p}", (*prefix, tile(c, t), tile(j, t)))

        grid = matmul_grid(b, f"mm{p}", left, right, (blocks, blocks, blocks), equation)
    for i in range(blocks):
        for j in range(blocks):
            b.output("Y", (*lead, n, n), grid[i][j], (*prefix, tile(i, t), tile(j, t)))
    return b.build()
