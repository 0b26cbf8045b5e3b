"""Built-in workload families: sizes, determinism, FLOP totals, specs vs edges, and the real check:
the block-decomposed graph, executed op by op, computes the untiled result."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from doppler_gym import workloads
from doppler_gym.graph.ops import check_graph_specs

SPEC_FAMILIES = ("chainmm", "ffnn", "llama-block", "llama-layer")
SMALL = {
    "chainmm": {"n": 6, "k": 3, "blocks": 3, "batch": 2},
    "ffnn": {"batch": 4, "d_in": 6, "hidden": 4, "layers": 3, "blocks": 2},
    "llama-block": {"batch": 2, "seq": 5, "d_model": 16, "n_heads": 4, "blocks": 2},
    "llama-layer": {"batch": 2, "seq": 5, "d_model": 16, "n_heads": 4, "ffn_hidden": 12, "blocks": 2},
}


def flops_by_kind(g):
    out = Counter()
    for kind, f in zip(g.kinds, g.flops):
        out[kind] += f
    return out


@pytest.mark.parametrize("name", workloads.names())
def test_defaults_are_paper_sized_and_deterministic(name):
    g, again = workloads.make(name), workloads.make(name)
    assert 80 <= g.n_ops <= 300
    assert g.units == "physical" and g.name == name
    compute = np.array(g.kinds) != "send"  # a pipeline's send ops (no FLOPs) follow their forward
    assert np.all(g.flops[compute] > 0) and np.all(g.out_bytes > 0)
    for field in ("src", "dst", "flops", "out_bytes"):
        assert np.array_equal(getattr(g, field), getattr(again, field))
    assert (g.names, g.kinds, g.specs) == (again.names, again.kinds, again.specs)
    assert len(set(g.names)) == g.n_ops


def test_op_counts_at_defaults():
    counts = {name: workloads.make(name).n_ops for name in workloads.names()}
    assert counts == {"chainmm": 108, "ffnn": 160, "llama-block": 156, "llama-layer": 232, "pipeline": 176,
                      "random": 100}


@pytest.mark.parametrize("name", SPEC_FAMILIES)
def test_specs_match_edges_and_costs(name):
    g = workloads.make(name)
    check_graph_specs(g)
    from_specs = {(u, v) for v, s in enumerate(g.specs) for u in s.operand_sources if u != -1}
    assert from_specs == set(zip(g.src.tolist(), g.dst.tolist()))
    assert g.n_edges == len(from_specs)  # no duplicate edges
    for v, s in enumerate(g.specs):
        assert g.out_bytes[v] == math.prod(s.output_shape) * 4  # float32
        assert s.dtype == "float32"


def test_chainmm_flops_match_untiled_products():
    n, k, blocks, batch = 12288, 3, 3, 1
    by_kind = flops_by_kind(workloads.make("chainmm"))
    assert by_kind["einsum"] == k * 2 * batch * n**3
    assert by_kind["formation"] == k * (blocks - 1) * batch * n**2
    assert set(by_kind) == {"einsum", "formation"}
    g = workloads.make("chainmm", n=8, k=2, blocks=2, batch=3)
    assert flops_by_kind(g)["einsum"] == 2 * 2 * 3 * 8**3 and g.n_ops == 2 * (8 + 4)


def test_ffnn_flops_match_untiled_layers():
    batch, d_in, hidden, layers = 4096, 4096, 4096, 8
    by_kind = flops_by_kind(workloads.make("ffnn"))
    assert by_kind["einsum"] == 2 * batch * (d_in * hidden + (layers - 1) * hidden**2)
    assert by_kind["formation"] == layers * batch * hidden  # blocks=2: one add per element
    assert by_kind["bias"] == by_kind["relu"] == layers * batch * hidden


@pytest.mark.parametrize("name", ["llama-block", "llama-layer"])
def test_llama_flops_match_untiled_model(name):
    b, s, d, h, f, blocks = 4, 2048, 4096, 32, 11008, 4
    hd = d // h
    tokens = b * s
    by_kind = flops_by_kind(workloads.make(name))
    attn = 2 * tokens * d * d * 4 + 2 * 2 * b * h * s * s * hd + b * h * s * s  # proj, QK^T & PV, scale
    norms, residual = 4 * tokens * d, tokens * d
    want = {
        "rmsnorm": norms,
        "einsum": attn,
        "rotary": 2 * 3 * tokens * d,
        "softmax": 5 * b * h * s * s,
        "formation": (blocks - 1) * tokens * d,
        "residual": residual,
    }
    if name == "llama-layer":
        want["rmsnorm"] += norms
        want["einsum"] += 3 * 2 * tokens * d * f
        want["swiglu"] = 5 * tokens * f
        want["formation"] *= 2
        want["residual"] *= 2
    assert dict(by_kind) == want


# ------------------------------------------------------------------ correctness vs untiled NumPy
def test_chainmm_computes_the_chain_product():
    inputs, out = workloads.build("chainmm", **SMALL["chainmm"]).evaluate(seed=1)
    m = inputs
    assert np.allclose(out["Y"], m["M0"] @ m["M1"] @ m["M2"] @ m["M3"], rtol=1e-12, atol=1e-12)


def test_chainmm_single_block_and_unbatched():
    w = workloads.build("chainmm", n=4, k=2, blocks=1)
    assert w.graph.n_ops == 2 and w.graph.n_edges == 1
    inputs, out = w.evaluate()
    assert np.allclose(out["Y"], inputs["M0"] @ inputs["M1"] @ inputs["M2"])


def test_ffnn_computes_the_network():
    p = SMALL["ffnn"]
    x, out = workloads.build("ffnn", **p).evaluate(seed=2)
    h = x["X"]
    for layer in range(1, p["layers"] + 1):
        h = np.maximum(h @ x[f"W{layer}"] + x[f"b{layer}"], 0.0)
    assert np.abs(h).max() > 0.01  # not trivially all-zero
    assert np.allclose(out["Y"], h, rtol=1e-12, atol=1e-12)


def _rmsnorm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


def _rope(x, seq):
    """Llama rotary embedding (half-split) at positions 0..seq-1 of x (b, heads, seq, hd)."""
    hd = x.shape[-1]
    ang = np.arange(seq)[:, None] * 10000.0 ** (-np.arange(0, hd, 2) / hd)
    x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
    return np.concatenate([x1 * np.cos(ang) - x2 * np.sin(ang), x1 * np.sin(ang) + x2 * np.cos(ang)], -1)


def _attention_reference(t, n_heads):
    x = t["x"]
    b, s, d = x.shape
    xn = _rmsnorm(x, t["norm1"])

    def heads(w):  # (d, heads, hd) weights -> (b, heads, s, hd) activations
        return (xn @ w.reshape(d, d)).reshape(b, s, n_heads, -1).transpose(0, 2, 1, 3)

    q, k, v = _rope(heads(t["Wq"]), s), _rope(heads(t["Wk"]), s), heads(t["Wv"])
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d // n_heads)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = (p @ v).transpose(0, 2, 1, 3).reshape(b, s, d)
    return x + o @ t["Wo"].reshape(d, d)


def test_llama_block_computes_attention():
    p = SMALL["llama-block"]
    inputs, out = workloads.build("llama-block", **p).evaluate(seed=3)
    assert np.allclose(out["y"], _attention_reference(inputs, p["n_heads"]), rtol=1e-10, atol=1e-12)


def test_llama_layer_computes_attention_and_swiglu_mlp():
    p = SMALL["llama-layer"]
    t, out = workloads.build("llama-layer", **p).evaluate(seed=4)
    h = _attention_reference(t, p["n_heads"])
    hn = _rmsnorm(h, t["norm2"])
    gate, up = hn @ t["Wg"], hn @ t["Wu"]
    want = h + (gate / (1 + np.exp(-gate)) * up) @ t["Wd"]
    assert np.allclose(out["y"], want, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------ registry and parameter errors
def test_registry_lists_families_and_defaults():
    assert workloads.names() == ("chainmm", "ffnn", "llama-block", "llama-layer", "pipeline", "random")
    assert workloads.params("chainmm") == {"n": 12288, "k": 3, "blocks": 3, "batch": 1, "dtype": "float32",
                                          "optimizer": "adam"}
    assert "ffn_hidden" in workloads.params("llama-layer")
    assert "ffn_hidden" not in workloads.params("llama-block")
    g16 = workloads.make("ffnn", dtype="bfloat16")
    assert np.array_equal(g16.out_bytes * 2, workloads.make("ffnn").out_bytes)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("resnet", {}, "unknown workload 'resnet'; valid names: chainmm, ffnn, llama-block"),
        ("chainmm", {"size": 4}, r"unknown parameter\(s\) \['size'\]; valid \(with defaults\): n=12288"),
        ("llama-block", {"ffn_hidden": 8}, r"unknown parameter\(s\) \['ffn_hidden'\]"),
        ("chainmm", {"n": 10, "blocks": 3}, "chainmm: n=10 is not divisible by blocks=3"),
        ("chainmm", {"k": 0}, "chainmm: k must be an integer >= 1, got 0"),
        ("ffnn", {"hidden": 4.5}, "ffnn: hidden must be an integer >= 1, got 4.5"),
        ("ffnn", {"dtype": "int8"}, "ffnn: dtype must be one of"),
        ("llama-block", {"d_model": 4096, "n_heads": 5}, "must be n_heads=5 times an even head_dim"),
        ("llama-block", {"n_heads": 6, "d_model": 384}, "n_heads=6 is not divisible by blocks=4"),
        ("llama-layer", {"ffn_hidden": 10}, "ffn_hidden=10 is not divisible by blocks=4"),
    ],
)
def test_bad_parameters_raise_clear_errors(name, params, message):
    with pytest.raises(ValueError, match=message):
        workloads.make(name, **params)
