"""Importing torch modules through torch.export: a stock TransformerEncoderLayer (which torch.fx cannot trace),
a GPT-style decoder block with scaled_dot_product_attention, and a small CNN. FLOPs are checked against the
hand formulas (2 M N K for a linear, 2 out (C_in / groups) kh kw for a convolution, 2 N L S (E + Ev) for
attention) and their sum against torch.utils.flop_counter.FlopCounterMode run on the module itself."""

from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.workloads import from_torch

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch): the importer needs it")
nn = torch.nn
F = torch.nn.functional
MATMUL_KINDS = ("linear", "matmul", "addmm", "conv2d", "scaled_dot_product_attention")

from tests.doppler_gym.workloads.torch_cases import GPTBlock  # noqa: E402  (needs torch)


def counted_flops(module, *args) -> int:
    """FLOPs that PyTorch's own counter gives for running ``module`` (matmuls and convolutions)."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        module(*args)
    return counter.get_total_flops()


def matmul_flops(g: dg.DataflowGraph, include_attention: bool = True) -> float:
    kinds = MATMUL_KINDS if include_attention else MATMUL_KINDS[:-1]
    return float(sum(f for f, k in zip(g.flops, g.kinds) if k in kinds))


def test_transformer_encoder_layer_needs_export():
    b, t, d, h, ff = 2, 5, 32, 4, 64
    layer = nn.TransformerEncoderLayer(d_model=d, nhead=h, dim_feedforward=ff, batch_first=True, dropout=0.0)
    x = torch.randn(b, t, d)
    with pytest.raises(ValueError, match="torch.fx could not trace TransformerEncoderLayer"):
        from_torch(layer, x, capture="fx")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every op has a FLOP rule
        g = from_torch(layer, x)
    kinds = Counter(g.kinds)
    assert kinds["linear"] == 4 and kinds["scaled_dot_product_attention"] == 1
    assert kinds["layer_norm"] == 2 and kinds["add"] == 2
    by_name = dict(zip(g.names, range(g.n_ops)))
    assert g.flops[by_name["linear"]] == 2 * (b * t) * d * (3 * d)  # the packed q, k, v projection
    assert g.flops[by_name["linear_2"]] == 2 * (b * t) * d * ff
    assert g.flops[by_name["scaled_dot_product_attention"]] == 2 * b * h * t * t * (d // h + d // h)
    assert g.out_bytes[by_name["layer_norm_1"]] == 4 * b * t * d
    # PyTorch's counter sees the attention's matmuls under another op on CPU (or not at all): compare the rest
    assert matmul_flops(g, include_attention=False) == counted_flops(layer, x)
    last = by_name["layer_norm_1"]
    assert g.out_degree[last] == 0 and g.in_degree[last] == 1


def test_gpt_block_with_sdpa():
    b, t, d, h = 2, 8, 32, 4
    block = GPTBlock(d, h)
    x = torch.randn(b, t, d)
    g = from_torch(block, x, capture="export")
    kinds = Counter(g.kinds)
    assert kinds["linear"] == 4 and kinds["scaled_dot_product_attention"] == 1 and kinds["gelu"] == 1
    sdpa = g.kinds.index("scaled_dot_product_attention")
    assert g.flops[sdpa] == 2 * b * h * t * t * 2 * (d // h)  # q k^T and p v, full L x S (causal not discounted)
    assert g.out_bytes[sdpa] == 4 * b * t * d
    linears = sorted(f for f, k in zip(g.flops, g.kinds) if k == "linear")
    assert linears == sorted([2 * b * t * d * 3 * d, 2 * b * t * d * d, 2 * b * t * d * 4 * d, 2 * b * t * 4 * d * d])
    assert matmul_flops(g, include_attention=False) == counted_flops(block, x) - _counted_sdpa(block, x)
    # the graph is connected from the input's consumers to the output
    assert g.n_edges >= g.n_ops - 1
    tr = dg.simulate(g, np.zeros(g.n_ops, np.int32), topology=1)
    assert tr.makespan > 0


def _counted_sdpa(block, x) -> int:
    """FlopCounterMode's count for the attention alone (0 where it has no formula for the CPU kernel)."""
    b, t, d = x.shape
    q = torch.randn(b, block.heads, t, d // block.heads)
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        F.scaled_dot_product_attention(q, q, q, is_causal=True)
    return counter.get_total_flops()


def test_small_cnn_export_and_fx_agree():
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, groups=2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10),
    )
    x = torch.randn(2, 3, 8, 8)
    g = from_torch(net, x, capture="export")
    assert g.kinds == ("conv2d", "relu", "max_pool2d", "conv2d", "adaptive_avg_pool2d", "flatten", "linear")
    conv1 = 2 * (2 * 8 * 8 * 8) * 3 * 3 * 3  # 2 x output elements x C_in x kh x kw
    conv2 = 2 * (2 * 16 * 2 * 2) * (8 // 2) * 3 * 3  # groups=2: C_in / groups inputs per output
    pool = (2 * 8 * 4 * 4) * 2 * 2  # each output compares a 2 x 2 window
    assert g.flops.tolist() == [conv1, 2 * 8 * 8 * 8, pool, conv2, 2 * 16 * 2 * 2, 0, 2 * 2 * 16 * 10]
    assert g.out_bytes.tolist() == [4 * n for n in (1024, 1024, 256, 128, 32, 32, 20)]
    assert list(zip(g.src.tolist(), g.dst.tolist())) == [(i, i + 1) for i in range(6)]
    assert matmul_flops(g) == counted_flops(net, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # fx's module calls get the same rules
        fx = from_torch(net, x, capture="fx")
    assert fx.kinds == g.kinds
    np.testing.assert_array_equal(fx.flops, g.flops)
    np.testing.assert_array_equal(fx.out_bytes, g.out_bytes)


def test_auto_falls_back_to_fx_and_reports_both():
    class Branchy(nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x

    with pytest.raises(ValueError, match=r"torch.fx could not trace Branchy.*torch.export could not capture"):
        from_torch(Branchy(), torch.randn(2))
    with pytest.raises(ValueError, match="capture must be one of"):
        from_torch(nn.ReLU(), torch.randn(2), capture="jit")
