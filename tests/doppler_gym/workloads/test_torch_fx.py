"""Importing torch modules with torch.fx: ops, FLOPs, edges, executable specs, clear errors."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
import warnings
from collections import Counter

import numpy as np
import pytest

from doppler_gym.graph.ops import evaluate_graph_numpy
from doppler_gym.workloads import from_torch

torch = pytest.importorskip("torch")
nn = torch.nn


def test_doppler_gym_does_not_import_torch():
    code = "import sys, doppler_gym, doppler_gym.workloads; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_mlp_ops_flops_edges_and_specs():
    batch, sizes = 3, (8, 16, 16, 4)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.SiLU(), nn.Linear(16, 4))
    g = from_torch(mlp, torch.randn(batch, 8), name="mlp")
    assert (g.name, g.n_ops, g.units) == ("mlp", 5, "physical")
    assert g.kinds == ("linear", "relu", "linear", "silu", "linear")
    linears = [2 * batch * i * o for i, o in itertools.pairwise(sizes)]
    assert g.flops.tolist() == [linears[0], batch * 16, linears[1], 4 * batch * 16, linears[2]]
    assert g.out_bytes.tolist() == [4 * batch * n for n in (16, 16, 16, 16, 4)]
    assert list(zip(g.src.tolist(), g.dst.tolist())) == [(0, 1), (1, 2), (2, 3), (3, 4)]


def test_mlp_specs_execute_to_the_module_output():
    mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).double()
    x = torch.randn(3, 8, dtype=torch.float64)
    g = from_torch(mlp, x)
    params = [p.detach().numpy() for p in mlp.parameters()]  # W1, b1, W2, b2
    externals = {(0, 0): x.numpy(), (0, 1): params[0], (0, 2): params[1], (2, 1): params[2]}
    externals[(2, 2)] = params[3]
    values = evaluate_graph_numpy(g, externals=externals)
    assert np.allclose(values[2], mlp(x).detach().numpy())


class Attention(nn.Module):
    def __init__(self, d: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, -1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), dim=-1)
        return x + self.out((att @ v).transpose(1, 2).reshape(b, t, d))


def test_attention_block():
    b, t, d, h = 2, 5, 16, 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every op here has a FLOP rule
        g = from_torch(Attention(d, h), torch.randn(b, t, d), capture="fx")  # fx's names: qkv, truediv
    kinds = Counter(g.kinds)
    assert kinds["linear"] == 2 and kinds["matmul"] == 2 and kinds["softmax"] == 1 and kinds["add"] == 1
    assert "getattr" not in kinds and "floordiv" not in kinds  # shape arithmetic is not an op
    by_name = dict(zip(g.names, range(g.n_ops)))
    matmul, matmul_1 = by_name["matmul"], by_name["matmul_1"]
    assert g.flops[matmul] == g.flops[matmul_1] == 2 * b * h * t * t * (d // h)
    assert g.flops[by_name["qkv"]] == 2 * b * t * d * 3 * d
    assert g.specs[matmul].fn == "einsum" and g.specs[by_name["softmax"]].fn == "softmax"
    assert g.specs[by_name["truediv"]] is None  # division by a Python float: no vocabulary op
    assert by_name["softmax"] in g.successors(by_name["truediv"]).tolist()
    assert g.predecessors(by_name["add"]).tolist() == [by_name["out"]]  # x itself is external
    assert g.out_bytes[by_name["softmax"]] == 4 * b * h * t * t


def test_conv_flops_and_view_ops():
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(100, 2))
    g = from_torch(net, torch.randn(2, 3, 5, 5))
    assert g.kinds == ("conv2d", "relu", "flatten", "linear")
    assert g.flops.tolist() == [2 * (2 * 4 * 5 * 5) * 3 * 3 * 3, 200, 0, 2 * 2 * 100 * 2]
    assert g.specs[0] is None and g.specs[2] is None and g.specs[3].fn == "linear"


def test_unknown_ops_warn_once_and_cost_their_output_size():
    class Cum(nn.Module):
        def forward(self, x):
            return torch.cumsum(x, 0) + torch.cumsum(x, 1)

    with pytest.warns(UserWarning, match=r"no FLOP rule for \['cumsum'\]") as record:
        g = from_torch(Cum(), torch.randn(3, 4))
    assert len(record) == 1
    assert g.flops.tolist() == [12, 12, 12]


def test_untraceable_module_says_why():
    class Branchy(nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x

    with pytest.raises(ValueError, match="could not trace Branchy.*control flow"):
        from_torch(Branchy(), torch.randn(2))


def test_wrong_example_inputs_say_what_to_pass():
    with pytest.raises(ValueError, match="running Linear on example_inputs failed"):
        from_torch(nn.Linear(4, 2), torch.randn(3, 5))
    with pytest.raises(TypeError, match="torch.nn.Module"):
        from_torch(lambda x: x, torch.randn(2))


def test_missing_torch_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match="pip install torch"):
        from_torch(object(), ())
