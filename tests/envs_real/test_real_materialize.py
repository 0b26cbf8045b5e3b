"""Torch kernels of the op vocabulary and synthetic ops: same math as the NumPy references."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import doppler_gym as dg
from doppler_gym.graph.ops import OP_FUNCTIONS, evaluate_graph_numpy, infer_output_shape, run_numpy
from doppler_gym.graph.spec import OpSpec
from envs_real.materialize import (
    CPU_WORK_BUDGET,
    TORCH_OPS,
    Kernel,
    materialize,
    reference_outputs,
    resolve_scale,
    workload_externals,
)
from tests.envs_real.real_helpers import cost_only_graph, small_ffnn

CASES = [
    ("einsum", [(2, 3), (3, 4)], "ij,jk->ik"),
    ("einsum", [(5, 2, 3), (5, 3, 4)], "bij,bjk->bik"),
    ("einsum", [(2, 3), (3, 4), ()], "ij,jk,->ik"),
    ("einsum", [(2, 3)], "ij->ji"),
    ("add", [(2, 3), (2, 3), (2, 3)], None),
    ("add", [(2, 3), (3,)], None),
    ("mul", [(4, 1), (1, 5)], None),
    ("relu", [(2, 3)], None),
    ("silu", [(2, 3)], None),
    ("swiglu", [(2, 3), (2, 3)], None),
    ("softmax", [(2, 3)], None),
    ("rmsnorm", [(2, 5, 4), (4,)], None),
    ("rotary", [(2, 5, 4), (5, 2), (5, 2)], None),
    ("linear", [(7, 3), (4, 3), (4,)], None),
    ("linear", [(2, 7, 3), (4, 3)], None),
]


def test_every_vocabulary_entry_has_a_torch_kernel():
    assert set(TORCH_OPS) == set(OP_FUNCTIONS)


@pytest.mark.parametrize(("fn", "shapes", "equation"), CASES)
def test_torch_matches_numpy_reference(fn, shapes, equation):
    rng = np.random.default_rng(1)
    arrays = [rng.uniform(-1, 1, s) for s in shapes]
    spec = OpSpec(
        fn, shapes, (-1,) * len(shapes), infer_output_shape(fn, shapes, equation), equation, "float64"
    )
    want = run_numpy(spec, arrays)
    k = Kernel(0, fn, spec.operand_sources, {}, "float64", spec.output_shape, equation)
    got = k([torch.from_numpy(a) for a in arrays]).numpy()
    assert got.shape == spec.output_shape
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_externals_are_seeded_per_op_and_operand():
    g = small_ffnn().graph
    a, b = materialize(g, seed=5), materialize(g, seed=5)
    for ka, kb in zip(a.kernels, b.kernels):
        for i in ka.externals:
            np.testing.assert_array_equal(ka.externals[i], kb.externals[i])
    c = materialize(g, seed=6)
    assert not np.array_equal(a.kernels[0].externals[0], c.kernels[0].externals[0])
    assert not np.array_equal(a.kernels[0].externals[0], a.kernels[0].externals[1])


def test_spec_graph_reference_equals_numpy_evaluation():
    w = small_ffnn()
    mat = materialize(w.graph, externals=workload_externals(w, 0))
    assert not mat.any_synthetic
    got = reference_outputs(mat)
    _, want = w.evaluate(seed=0)
    assembled = w.assemble({v: t.double().numpy() for v, t in got.items()})
    np.testing.assert_allclose(assembled["Y"], want["Y"], rtol=1e-4, atol=1e-5)
    # without a workload, each op draws its own externals: the same as evaluate_graph_numpy fed them
    mat2 = materialize(w.graph, seed=3)
    ext = {(k.op, i): a for k in mat2.kernels for i, a in k.externals.items()}
    ref = evaluate_graph_numpy(w.graph, externals=ext, dtype=np.float64)
    got2 = reference_outputs(mat2)
    for v in range(w.graph.n_ops):
        np.testing.assert_allclose(got2[v].double().numpy(), ref[v], rtol=1e-4, atol=1e-5)


def test_synthetic_ops_are_sized_by_costs():
    g = cost_only_graph("paper")
    mat = materialize(g, synthetic_scale=1.0)
    assert mat.synthetic.all() and mat.scale == 1.0
    for v, k in enumerate(mat.kernels):
        assert k.synthetic_n == max(1, round(g.flops[v] ** (1 / 3)))
        assert k.out_shape == (k.synthetic_n**2,)  # paper units: the product is the output
        assert k.sources[:2] == (-1, -1) and set(k.sources[2:]) == set(g.predecessors(v).tolist())
    phys = cost_only_graph("physical")
    mat = materialize(phys, synthetic_scale=0.5)
    for v, k in enumerate(mat.kernels):
        assert k.synthetic_n == max(1, round((phys.flops[v] / 2 * 0.5) ** (1 / 3)))
        assert k.out_shape == (max(1, round(phys.out_bytes[v] * 0.5 / 4)),)
    out = reference_outputs(mat)
    assert all(torch.isfinite(t).all() for t in out.values())


def test_auto_scale_keeps_cpu_runs_small():
    paper = dg.load_graph("paper/ffnn")
    scale = resolve_scale(paper, "auto", "cpu")
    assert scale * paper.flops.sum() == pytest.approx(CPU_WORK_BUDGET)
    assert resolve_scale(paper, "auto", "cuda") == 1.0
    with pytest.raises(ValueError, match="synthetic_scale"):
        resolve_scale(paper, -1.0, "cpu")


def test_bad_specs_are_rejected():
    g = small_ffnn().graph
    specs = list(g.specs)
    s = specs[0]
    specs[0] = OpSpec(s.fn, s.operand_shapes, s.operand_sources, (3, 3), s.equation)
    bad = dg.DataflowGraph(g.src, g.dst, g.flops, g.out_bytes, specs=specs, name="bad")
    with pytest.raises(ValueError, match="output_shape"):
        materialize(bad)
    with pytest.raises(ValueError, match="should be"):
        materialize(g, externals={(0, 0): np.zeros((2, 2))})
