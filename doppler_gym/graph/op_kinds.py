"""Which op kinds run on tensor cores: the one list the roofline cost model and the torch importer share."""

from __future__ import annotations

TENSOR_KINDS = frozenset({
    # GEMMs and their ATen names
    "matmul", "gemm", "einsum", "linear", "addmm", "mm", "bmm", "baddbmm", "dot", "matmul_grad", "_scaled_mm",
    # attention kernels
    "attention", "sdpa", "scaled_dot_product_attention", "flash_attention", "efficient_attention",
    # the fused LSTM kernel (its gates' GEMMs dominate)
    "lstm",
    # pipeline-stage ops (doppler_gym.workloads.pipeline): a stage's forward, backward and weight-gradient
    # passes are dominated by its layers' GEMMs
    "forward", "backward", "wgrad",
})  # fmt: skip
"""Op kinds that run on tensor cores (GEMMs, attention); also every kind starting with ``"conv"``
(``conv2d``, ``convolution``, ``convolution_backward``, ...), containing ``"scaled_dot_product"`` or ending in
``"attention_forward"`` / ``"attention_backward"`` (ATen's attention kernels). Every other kind
(elementwise, norms, softmax, reductions, ``formation`` sums, pipeline sends) is a vector op."""


def is_tensor_kind(kind: str | None) -> bool:
    """Whether an op of ``kind`` runs on tensor cores (:data:`TENSOR_KINDS` and the patterns above, case-blind);
    ``None`` (a graph without kinds) counts as a tensor-core op."""
    if kind is None:
        return True
    k = kind.lower()
    return (
        k in TENSOR_KINDS
        or k.startswith("conv")
        or "scaled_dot_product" in k
        or k.endswith(("attention_forward", "attention_backward"))
    )
