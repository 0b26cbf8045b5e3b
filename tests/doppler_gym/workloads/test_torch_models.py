"""The shipped training-step graphs of GPT-2 small and SmolLM2-135M (doppler_gym/data/torch/): their
matmul FLOPs against the published per-iteration formulas, their parameter memory against the
architectures' parameter counts. Reading them needs neither torch nor transformers."""

from __future__ import annotations

import numpy as np
import pytest

from doppler_gym.workloads import torch_models
from doppler_gym.workloads.torch_flops import is_matmul_like


def matmul_flops(graph) -> float:
    """Matmul-like FLOPs of forward and backward (the optimizer's ops excluded)."""
    return float(sum(f for n, k, f in zip(graph.names, graph.kinds, graph.flops)
                     if not n.startswith("opt.") and is_matmul_like(k)))  # fmt: skip


def test_gpt2_small_matches_narayanan_flops_and_its_parameter_count():
    g = torch_models.load("gpt2-small")
    b, s, layers, h, vocab, positions = 1, 1024, 12, 768, 50257, 1024
    # Narayanan et al. (SC 2021), eq. 2 without recomputation: 72 B s l h^2 (1 + s / 6h + V / 12 l h)
    assert matmul_flops(g) == pytest.approx(72 * b * s * layers * h**2 * (1 + s / (6 * h) + vocab / (12 * layers * h)))
    params = (vocab + positions) * h + layers * (12 * h**2 + 13 * h) + 2 * h  # = 124,439,808 (GPT-2 small)
    assert params == 124_439_808
    assert g.persistent_bytes.sum() == 16 * params  # bf16 weight + grad, fp32 master, Adam m and v
    assert g.precisions is not None and g.io_bytes.sum() > 0
    # one fused update per tensor: 4 weights, 4 biases, 2 norms' weight and bias a layer; wte, wpe, ln_f (2)
    assert sum(k == "adam_update" for k in g.kinds) == 12 * layers + 2 + 2


def test_smollm2_matches_its_matmul_count_and_parameter_count():
    g = torch_models.load("smollm2-135m")
    b, s, layers, h, heads, kv_heads, ff, vocab = 1, 2048, 30, 576, 9, 3, 1536, 49152
    head_dim = h // heads
    linears = 2 * b * s * (2 * h * h + 2 * h * kv_heads * head_dim + 3 * h * ff)  # q, o; k, v (GQA); gate, up, down
    attention = 4 * b * s * s * h  # q k^T and p v over 9 heads of 64, full s x s
    head = 2 * b * s * h * vocab
    # backward: two matmuls per forward one; flash attention's backward five per forward two
    assert matmul_flops(g) == 3 * (layers * linears + head) + 3.5 * layers * attention
    params = vocab * h + layers * (2 * h * h + 2 * h * kv_heads * head_dim + 3 * h * ff + 2 * h) + h
    assert params == 134_515_008
    rotary = 2 * (head_dim // 2) * 2  # inv_freq and original_inv_freq buffers, bf16, held once each
    assert g.persistent_bytes.sum() == 16 * params + rotary
    assert np.all(g.out_bytes >= 0) and g.n_ops == len(set(g.names))


def test_unknown_name_lists_the_shipped_graphs():
    with pytest.raises(ValueError, match="shipped: gpt2-small, smollm2-135m"):
        torch_models.load("gpt3")


@pytest.mark.slow
def test_rebuilding_gives_the_shipped_graph():
    pytest.importorskip("transformers", reason="transformers is not installed (pip install doppler-gym[models])")
    built, shipped = torch_models.build("gpt2-small"), torch_models.load("gpt2-small")
    assert built.names == shipped.names and built.kinds == shipped.kinds
    np.testing.assert_array_equal(built.flops, shipped.flops)
    np.testing.assert_array_equal(built.io_bytes, shipped.io_bytes)
    np.testing.assert_array_equal(built.src, shipped.src)


@pytest.mark.parametrize(
    ("name", "published_macs", "published_params", "buffer_bytes"),
    [
        # torchvision's model tables: ResNet-18 1.814 GFLOPS (multiply-adds) and 11,689,512 parameters; its 20
        # batch norms keep 4800 channels' running mean and variance (bf16) and an int64 counter each
        ("resnet18", 1.814e9, 11_689_512, 2 * 4800 * 2 + 20 * 8),
        ("vit-b-16", 17.564e9, 86_567_656, 0),  # ViT-B/16: 17.564 GFLOPS, 86,567,656 parameters, no buffers
    ],
)
def test_vision_models_match_torchvision_published_costs(name, published_macs, published_params, buffer_bytes):
    g = torch_models.load(name)
    batch = 32
    forward = sum(f for n, k, f in zip(g.names, g.kinds, g.flops) if n.startswith("fwd.") and is_matmul_like(k))
    assert forward / (2 * batch) == pytest.approx(published_macs, rel=5e-4)  # 2 FLOPs a multiply-add
    assert 1.9 * forward < matmul_flops(g) - forward < 2.1 * forward  # the backward: about twice the forward
    assert g.persistent_bytes.sum() == 16 * published_params + buffer_bytes
