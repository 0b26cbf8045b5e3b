"""Whole training steps from PyTorch (issue 34): no op lost, FLOPs against torch's FlopCounterMode,
parameter / gradient / optimizer-state / activation memory against hand sums, io bytes and precisions."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.sim.config import SimConfig
from doppler_gym.workloads import from_torch
from doppler_gym.workloads.torch_flops import is_matmul_like
from doppler_gym.workloads.torch_training import capture_step

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch): the importer needs it")
nn = torch.nn
from tests.doppler_gym.workloads import torch_cases as cases_module  # noqa: E402  (needs torch)

BATCH, SIZES = 3, (8, 16, 4)


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(SIZES[0], SIZES[1]), nn.ReLU(), nn.Linear(SIZES[1], SIZES[2]))


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_issue_examples_keep_tuple_ops():
    class M(nn.Module):
        def __init__(s):
            super().__init__()
            s.qkv, s.o = nn.Linear(8, 24), nn.Linear(8, 8)

        def forward(s, x):
            q, k, v = s.qkv(x).split(8, dim=-1)
            return s.o(q * k + v)

    g = from_torch(M(), torch.randn(2, 8))
    roots = [g.kinds[i] for i in range(g.n_ops) if g.in_degree[i] == 0]
    assert roots == ["linear"]  # the split and its getitems hang off the projection
    split = g.kinds.index("split")
    assert g.out_bytes[split] == 4 * 2 * 24 and g.out_degree[split] == 3
    lstm, x = nn.LSTM(32, 64), torch.randn(12, 2, 32)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="from_torch")  # every op has a FLOP rule
        g = from_torch(lstm, x)
    steps, hidden = 12 * 2, 64
    matmuls = 2 * steps * 4 * hidden * (32 + hidden)  # x W_ih^T and h W_hh^T per step
    with torch.no_grad(), torch.backends.mkldnn.flags(enabled=False):
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter:
            lstm(x)
    assert counter.get_total_flops() == matmuls == 1_179_648
    assert g.flops[g.kinds.index("lstm")] == matmuls + 32 * steps * hidden  # + biases, gates, cell per unit


@pytest.mark.parametrize("case", list(cases_module.cases()))
def test_training_step_flops_match_flop_counter(case):
    module, inputs = cases_module.cases()[case]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # every op has a FLOP rule
        g = from_torch(module, inputs, loss="mean", optimizer="adam", precision="bf16")
    matmul, other, optimizer = cases_module.graph_flops(g)
    assert matmul == cases_module.counted_step_flops(module, inputs)  # exact: the same matmuls, counted apart
    assert 0 < other < 0.2 * matmul
    assert optimizer == 14 * n_params(module)  # Adam: 14 FLOPs per parameter element (torch_training's table)
    assert any(n.startswith("bwd.") and is_matmul_like(k) for n, k in zip(g.names, g.kinds))
    # memory on one device: 16 B a parameter (bf16 weight and gradient, fp32 master, m, v) and the buffers
    # (cast to bf16 when floating) all run, and activations on top while the loss runs
    buffers = sum(t.numel() * (2 if t.is_floating_point() else t.element_size()) for t in module.buffers())
    trace = dg.simulate(g, np.zeros(g.n_ops, np.int32), topology=1, config=SimConfig(memory="track"))
    assert trace.memory.persistent[0] == 16 * n_params(module) + buffers
    loss = max(i for i, n in enumerate(g.names) if n.startswith("fwd."))
    saved = [i for i in range(loss) if any(g.names[j].startswith("bwd.") for j in g.successors(i))]
    assert saved  # forward outputs that the backward reads ...
    live = memory_at(trace.memory, (trace.start[loss] + trace.end[loss]) / 2)
    assert live >= trace.memory.persistent[0] + sum(g.out_bytes[i] for i in saved)  # ... are all live then


def test_phases_are_in_program_order_and_the_backward_doubles_the_matmuls():
    g = from_torch(mlp(), torch.randn(BATCH, SIZES[0]), optimizer="sgd")
    phases = [n.split(".")[0] for n in g.names]
    assert phases == sorted(phases, key=["fwd", "bwd", "opt"].index)
    fwd = sum(f for n, f, k in zip(g.names, g.flops, g.kinds) if n.startswith("fwd.") and is_matmul_like(k))
    bwd = sum(f for n, f, k in zip(g.names, g.flops, g.kinds) if n.startswith("bwd.") and is_matmul_like(k))
    linears = [2 * BATCH * i * o for i, o in itertools.pairwise(SIZES)]
    assert fwd == sum(linears)
    assert bwd == 2 * linears[1] + linears[0]  # the first layer needs no input gradient
    opt = sum(f for n, f in zip(g.names, g.flops) if n.startswith("opt."))
    assert opt == 2 * n_params(mlp())  # SGD: w - lr g


@pytest.mark.parametrize(
    ("precision", "optimizer", "per_param", "update_flops"),
    [("bf16", "adam", 2 + 2 + 4 + 4 + 4, 3 + 4 + 5 + 2), ("fp32", "adam", 4 + 4 + 4 + 4, 3 + 4 + 5 + 2),
     ("fp32", "sgd", 4 + 4, 2), ("fp16", "adamw", 2 + 2 + 4 + 4 + 4, 3 + 4 + 5 + 2 + 2), ("bf16", None, 2 + 2 + 4, 0)],
)  # fmt: skip
def test_persistent_bytes_follow_the_mixed_precision_convention(precision, optimizer, per_param, update_flops):
    # update FLOPs per element: m (sub, mul, add), v (mul, sub, mul, add), m/c1, v/c2, sqrt, + eps, divide;
    # w - lr u (mul, sub); AdamW adds wd w to u (mul, add); SGD w - lr g (mul, sub)
    module = mlp()
    g = from_torch(module, torch.randn(BATCH, SIZES[0]), optimizer=optimizer, loss="sum", precision=precision)
    assert sum(f for n, f in zip(g.names, g.flops) if n.startswith("opt.")) == update_flops * n_params(module)
    assert g.persistent_bytes.sum() == per_param * n_params(module)
    owners = np.flatnonzero(g.persistent_bytes)
    assert [g.kinds[i] for i in owners] == ["addmm", "addmm"]  # each layer's matmul owns its weight and bias
    assert g.persistent_bytes[owners[0]] == per_param * (SIZES[0] * SIZES[1] + SIZES[1])


def memory_at(profile, time: float) -> float:
    """In-use bytes of device 0 at ``time`` (not an event time)."""
    times, used = profile.timeline(0)
    return float(used[np.searchsorted(times, time, side="right") - 1])


def test_tracked_memory_holds_parameters_gradients_state_and_activations():
    module = mlp()
    g = from_torch(module, torch.randn(BATCH, SIZES[0]), optimizer="adam", precision="bf16")
    trace = dg.simulate(g, np.zeros(g.n_ops, np.int32), topology=1, config=SimConfig(memory="track"))
    held = 16 * n_params(module)  # bf16 weight + bf16 grad + fp32 master, m, v (ZeRO: 2 + 2 + 12 B)
    assert trace.memory.persistent[0] == held
    loss = max(i for i, n in enumerate(g.names) if n.startswith("fwd."))
    assert g.kinds[loss] == "mean"
    # while the loss runs: the ReLU output (bf16), kept for the backward, and the loss's fp32 input
    saved, loss_input = 2 * BATCH * SIZES[1], 4 * BATCH * SIZES[2]
    middle = (trace.start[loss] + trace.end[loss]) / 2
    assert memory_at(trace.memory, middle) == held + saved + loss_input
    relu = g.kinds.index("relu")
    consumers = g.successors(relu)
    assert {g.names[c].split(".")[0] for c in consumers} == {"fwd", "bwd"}
    assert trace.memory.peak[0] >= held + saved


def test_io_bytes_precisions_and_kinds():
    module = mlp()
    x = torch.randn(BATCH, SIZES[0])
    g = from_torch(module, x, optimizer="adam", precision="bf16")
    first = g.kinds.index("addmm")
    i, o = SIZES[0], SIZES[1]
    assert g.io_bytes[first] == 2 * (BATCH * i + o * i + o + BATCH * o)  # x, W, b read; out written (bf16)
    assert g.precisions[first] == "bf16" and is_matmul_like("addmm") and not is_matmul_like("relu")
    update = g.names.index("opt.0.weight")  # the first layer's weight: one fused Adam op
    assert g.kinds[update] == "adam_update" and g.precisions[update] == "fp32" and g.out_bytes[update] == 0
    # reads the bf16 gradient and the fp32 master, m, v; writes the bf16 weight and the fp32 master, m, v
    assert g.io_bytes[update] == 2 * (2 + 4 + 4 + 4) * i * o
    assert g.flops[update] == 14 * i * o
    traced = capture_step(module, (x,), optimizer="adam", precision="bf16", fuse=False)
    opt_kinds = {k for n, k in zip(traced.names, traced.kinds) if n.startswith("opt.")}
    assert opt_kinds == {"_to_copy", "sub", "mul", "add", "div", "sqrt"}
    assert sum(f for n, f in zip(traced.names, traced.flops) if n.startswith("opt.")) == 14 * n_params(module)
    tf32 = from_torch(module, x, optimizer="sgd", precision="tf32")
    assert {p for p, k in zip(tf32.precisions, tf32.kinds) if is_matmul_like(k)} == {"tf32"}
    assert {p for p, k in zip(tf32.precisions, tf32.kinds) if not is_matmul_like(k)} == {"fp32"}
    forward = from_torch(module, x)
    lin = forward.kinds.index("linear")
    assert forward.io_bytes[lin] == 4 * (BATCH * i + o * i + o + BATCH * o)
    assert forward.io_bytes[forward.kinds.index("relu")] == 4 * 2 * BATCH * o
    assert set(forward.precisions) == {"fp32"}
    assert set(from_torch(module, x, precision="bf16").precisions) == {"bf16"}


def test_bad_options_say_what_to_pass():
    x = torch.randn(BATCH, SIZES[0])
    with pytest.raises(ValueError, match="optimizer must be one of"):
        from_torch(mlp(), x, optimizer="lamb")
    with pytest.raises(ValueError, match="precision must be one of"):
        from_torch(mlp(), x, optimizer="adam", precision="fp8")
    with pytest.raises(ValueError, match="loss must be a callable"):
        from_torch(mlp(), x, loss="max")
    with pytest.raises(ValueError, match="loss must return a scalar"):
        from_torch(mlp(), x, loss=lambda out: out)
    with pytest.raises(ValueError, match="traced with make_fx"):
        from_torch(mlp(), x, optimizer="sgd", capture="fx")
    with pytest.raises(ValueError, match="no trainable parameters"):
        from_torch(nn.ReLU(), x, optimizer="sgd")


def test_the_module_is_left_unchanged():
    module = mlp()
    before = [p.detach().clone() for p in module.parameters()]
    from_torch(module, torch.randn(BATCH, SIZES[0]), optimizer="adam", precision="bf16")
    assert all(p.dtype == torch.float32 and torch.equal(p, b) for p, b in zip(module.parameters(), before))
    assert all(p.grad is None for p in module.parameters())


def test_router_forward_keeps_topk_and_its_consumers():
    moe, x = cases_module.TopKMoE(32, 4, 2, 8), torch.randn(16, 32)
    g = from_torch(moe, x, capture="export")
    topks = [i for i, k in enumerate(g.kinds) if k == "topk"]
    assert len(topks) == 1 + 4  # the router's top-2, then each expert's top-capacity
    assert g.flops[topks[0]] == 16 * 4  # one compare per router probability
    assert all(g.out_degree[i] > 0 for i in topks)  # their values and indices feed the dispatch
    assert g.kinds.count("index_add") == 4 and g.kinds.count("index_select") == 4


def test_frozen_parameters_are_held_but_not_updated():
    module = mlp()
    module[0].weight.requires_grad_(False)
    g = from_torch(module, torch.randn(BATCH, SIZES[0]), optimizer="adam", precision="fp32")
    frozen = SIZES[0] * SIZES[1]
    assert g.persistent_bytes.sum() == 16 * (n_params(module) - frozen) + 4 * frozen
    assert sum(k == "adam_update" for k in g.kinds) == 3  # the first bias, the second weight and bias


def test_each_device_holds_the_state_of_the_layers_placed_on_it():
    module = mlp()
    g = from_torch(module, torch.randn(BATCH, SIZES[0]), optimizer="adam", precision="bf16")
    first = g.kinds.index("addmm")
    assignment = np.ones(g.n_ops, np.int32)
    assignment[first] = 0  # the first layer's matmul, which owns its weight and bias, on device 0
    trace = dg.simulate(g, assignment, topology=2, config=SimConfig(memory="track"))
    layer1 = SIZES[0] * SIZES[1] + SIZES[1]
    assert trace.memory.persistent.tolist() == [16 * layer1, 16 * (n_params(module) - layer1)]


def test_layer_activations_follow_korthikanti():
    s, b, h, a = 64, 2, 128, 4
    layer = cases_module.MegatronLayer(h, a)
    g = from_torch(layer, torch.randn(b, s, h), optimizer="adam", precision="bf16")
    trace = dg.simulate(g, np.zeros(g.n_ops, np.int32), topology=1, config=SimConfig(memory="track"))
    loss = max(i for i, n in enumerate(g.names) if n.startswith("fwd."))
    live = memory_at(trace.memory, (trace.start[loss] + trace.end[loss]) / 2) - g.persistent_bytes.sum()
    sbh, as2b = s * b * h, a * s * s * b
    published = 34 * sbh + 5 * as2b  # Korthikanti et al. 2022, eq. 1: 16-bit activations, 1-byte dropout masks
    masks = as2b + 2 * sbh  # CPU dropout keeps its three masks in bf16 (2 bytes): one more byte each
    step_input = 2 * sbh  # the first layer norm's input is the step's input, not an op's output
    loss_input = 4 * sbh  # the fp32 copy of the output the mean reads
    norm_stats = 2 * 2 * 2 * s * b  # mean and rstd of both layer norms (bf16 on CPU, like their input)
    assert live == published + masks - step_input + loss_input + norm_stats
