"""The op vocabulary (doppler_gym.graph.ops): shapes, FLOPs, NumPy references, graph evaluation."""

from __future__ import annotations

import numpy as np
import pytest

from doppler_gym.graph.ops import (
    OP_FUNCTIONS,
    RMSNORM_EPS,
    check_graph_specs,
    evaluate_graph_numpy,
    infer_output_shape,
    op_flops,
    run_numpy,
)
from doppler_gym.graph.spec import OpSpec
from doppler_gym.graph.types import DataflowGraph

RNG = np.random.default_rng(0)


def spec(fn, shapes, equation=None, sources=None):
    out = infer_output_shape(fn, shapes, equation)
    return OpSpec(fn, shapes, sources or (-1,) * len(shapes), out, equation)


@pytest.mark.parametrize(
    ("fn", "shapes", "equation", "out", "flops"),
    [
        ("einsum", [(2, 3), (3, 4)], "ij,jk->ik", (2, 4), 2 * 2 * 3 * 4),
        ("einsum", [(5, 2, 3), (5, 3, 4)], "bij,bjk->bik", (5, 2, 4), 2 * 5 * 2 * 3 * 4),
        ("einsum", [(2, 3), (3, 4), ()], "ij,jk,->ik", (2, 4), 2 * 24 + 8),
        ("einsum", [(2, 3)], "ij->ji", (3, 2), 6),
        ("einsum", [(2, 3)], "ij->i", (2,), 6),
        ("add", [(2, 3), (2, 3), (2, 3)], None, (2, 3), 12),
        ("add", [(2, 3), (3,)], None, (2, 3), 6),
        ("mul", [(4, 1), (1, 5)], None, (4, 5), 20),
        ("relu", [(2, 3)], None, (2, 3), 6),
        ("silu", [(2, 3)], None, (2, 3), 24),
        ("swiglu", [(2, 3), (2, 3)], None, (2, 3), 30),
        ("softmax", [(2, 3)], None, (2, 3), 30),
        ("rmsnorm", [(2, 5, 4), (4,)], None, (2, 5, 4), 160),
        ("rotary", [(2, 5, 4), (5, 2), (5, 2)], None, (2, 5, 4), 120),
        ("linear", [(7, 3), (4, 3), (4,)], None, (7, 4), 2 * 7 * 3 * 4),
        ("linear", [(2, 7, 3), (4, 3)], None, (2, 7, 4), 2 * 14 * 3 * 4),
    ],
)
def test_shape_and_flops(fn, shapes, equation, out, flops):
    assert infer_output_shape(fn, shapes, equation) == out
    assert op_flops(spec(fn, shapes, equation)) == flops


@pytest.mark.parametrize(
    ("fn", "shapes", "equation", "message"),
    [
        ("einsum", [(2, 3), (4, 5)], "ij,jk->ik", "index 'j' is 3"),
        ("einsum", [(2, 3)], "ijk->i", "rank 3"),
        ("einsum", [(2, 3), (3, 4)], "ij,jk", "explicit output"),
        ("einsum", [(2, 3)], "ij->z", "appear in no operand"),
        ("einsum", [(2, 3)], "ij,jk->ik", "2 operand terms but 1"),
        ("add", [(2, 3), (4, 3)], None, "do not broadcast"),
        ("add", [(2, 3)], None, "2 or more operands"),
        ("swiglu", [(2, 3), (3, 2)], None, "same shape"),
        ("rmsnorm", [(2, 4), (3,)], None, "w must be (d,)"),
        ("rotary", [(2, 5, 3), (5, 1), (5, 1)], None, "even last dim"),
        ("rotary", [(2, 5, 4), (4, 2), (4, 2)], None, "cos and sin must be (5, 2)"),
        ("linear", [(7, 3), (4, 2)], None, "in_features"),
        ("nope", [(1,)], None, "unknown op function 'nope'"),
    ],
)
def test_shape_errors_say_what_is_wrong(fn, shapes, equation, message):
    with pytest.raises(ValueError, match="op7: .*" + message.replace("(", r"\(").replace(")", r"\)")):
        infer_output_shape(fn, shapes, equation, where="op7")


def test_numpy_references_match_direct_formulas():
    x, w = RNG.normal(size=(3, 4)), RNG.normal(size=(4,))
    a, b = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 5))
    silu = x / (1 + np.exp(-x))
    assert np.allclose(run_numpy(spec("einsum", [(3, 4), (4, 5)], "ij,jk->ik"), [a, b]), a @ b)
    assert np.allclose(run_numpy(spec("add", [(3, 4), (4,)]), [x, w]), x + w)
    assert np.allclose(run_numpy(spec("mul", [(3, 4), (3, 4)]), [x, a]), x * a)
    assert np.allclose(run_numpy(spec("relu", [(3, 4)]), [x]), np.where(x > 0, x, 0))
    assert np.allclose(run_numpy(spec("silu", [(3, 4)]), [x]), silu)
    assert np.allclose(run_numpy(spec("swiglu", [(3, 4), (3, 4)]), [x, a]), silu * a)
    soft = run_numpy(spec("softmax", [(3, 4)]), [x])
    assert np.allclose(soft, np.exp(x) / np.exp(x).sum(-1, keepdims=True))
    rms = x / np.sqrt((x**2).mean(-1, keepdims=True) + RMSNORM_EPS) * w
    assert np.allclose(run_numpy(spec("rmsnorm", [(3, 4), (4,)]), [x, w]), rms)
    lin = run_numpy(spec("linear", [(3, 4), (5, 4), (5,)]), [x, b.T, b[0]])
    assert np.allclose(lin, x @ b + b[0])


def test_rotary_rotates_feature_pairs():
    x = RNG.normal(size=(2, 3, 4))
    theta = RNG.normal(size=(3, 2))
    out = run_numpy(spec("rotary", [(2, 3, 4), (3, 2), (3, 2)]), [x, np.cos(theta), np.sin(theta)])
    # pair (x[..., i], x[..., i + 2]) is rotated by theta[:, i] as a complex number
    z = (x[..., :2] + 1j * x[..., 2:]) * np.exp(1j * theta)
    assert np.allclose(out, np.concatenate([z.real, z.imag], axis=-1))
    assert np.allclose(np.linalg.norm(out, axis=-1), np.linalg.norm(x, axis=-1))


def test_vocabulary_is_complete():
    needed = {"einsum", "add", "mul", "relu", "silu", "swiglu", "softmax", "rmsnorm", "rotary", "linear"}
    assert needed <= set(OP_FUNCTIONS)


def _tiny_graph(specs, edges):
    src, dst = zip(*edges, strict=True) if edges else ((), ())
    ones = [1.0] * len(specs)
    return DataflowGraph(src=src, dst=dst, flops=ones, out_bytes=ones, specs=specs)


def test_evaluate_graph_runs_specs_in_topological_order():
    # op 1 (produced first in topological order, listed second) feeds op 0
    mm = OpSpec("einsum", ((2, 3), (3, 4)), (-1, -1), (2, 4), "ij,jk->ik")
    relu = OpSpec("relu", ((2, 4),), (1,), (2, 4))
    g = _tiny_graph((relu, mm), [(1, 0)])
    a, b = RNG.normal(size=(2, 3)), RNG.normal(size=(3, 4))
    values = evaluate_graph_numpy(g, externals={(1, 0): a, (1, 1): b})
    assert np.allclose(values[0], np.maximum(a @ b, 0))
    again = evaluate_graph_numpy(g, seed=3)
    assert np.array_equal(again[1], evaluate_graph_numpy(g, seed=3)[1])
    assert np.abs(again[1]).max() < 3 * 0.5**2  # small uniform externals


def test_evaluate_graph_rejects_inconsistent_specs():
    mm = OpSpec("einsum", ((2, 3), (3, 4)), (-1, -1), (2, 4), "ij,jk->ik")
    with pytest.raises(ValueError, match="differ from the graph's predecessors"):
        check_graph_specs(_tiny_graph((mm, OpSpec("relu", ((2, 4),), (-1,), (2, 4))), [(0, 1)]))
    with pytest.raises(ValueError, match="gives shape \\(2, 4\\), but the spec says \\(4, 2\\)"):
        wrong = OpSpec("einsum", ((2, 3), (3, 4)), (-1, -1), (4, 2), "ij,jk->ik")
        check_graph_specs(_tiny_graph((wrong,), []))
    with pytest.raises(ValueError, match="op 0 \\(op0\\) has no spec"):
        check_graph_specs(_tiny_graph((None,), []))
    with pytest.raises(ValueError, match="operand 0 should be \\(2, 3\\)"):
        evaluate_graph_numpy(_tiny_graph((mm,), []), externals={(0, 0): np.zeros((3, 3))})
