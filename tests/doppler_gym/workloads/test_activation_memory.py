"""Activation memory as published: Korthikanti et al. 2022 per layer, and the pipeline schedules' peaks.

Per layer (s tokens, b sequences, h hidden, a heads, 16-bit): s b h (34 + 5 a s / h) bytes without
recomputation, s b h 34 with selective recomputation, 2 s b h (the input) with full recomputation; over t
with tensor + sequence parallelism, s b h (10 + 24 / t + 5 a s / (h t)) with tensor parallelism only
(Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", Table 2).

Peaks of stashed activations, in chunk-microbatches, on the device of stage s (read off the simulated
memory profile, ``SimConfig(memory="track")``):

- GPipe (Huang et al. 2019): m on every stage.
- 1F1B (Narayanan et al. 2021): min(p - s, m); p on the first stage.
- Interleaved 1F1B with v chunks (same paper): Megatron-LM's warm-up is 2 (p - s - 1) + (v - 1) p forwards,
  then one more forward before the first backward, so 2 (p - s - 1) + (v - 1) p + 1 chunks for m > p; for
  m = p every forward runs first: v m. On the first stage, v p + p - 1 chunks = p (1 + (p - 1) / (p v))
  stages' worth: the paper's memory factor over 1F1B's p, exactly.
- ZB-H1 (Qi et al., ICLR 2024): at most 1F1B's peak; each stage s delays its W by s microbatches and holds
  p - s + s = p, min(p, m) in all.

Checked for p in {2, 4, 8}, m in {p, 2p, 4p} (v in {2, 3}), and a few m < p.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.sim.memory import memory_profile
from doppler_gym.workloads.activation import layer_activation_bytes

SMALL = dict(micro_batch=2, seq=16, d_model=32, n_heads=4, ffn_hidden=64)


def korthikanti(s, b, h, a, t=1, sp=False, recompute="none"):
    """Table 2 of the paper, written out [B] (16-bit activations)."""
    if recompute == "full":
        return 2 * s * b * h / (t if sp else 1)
    if recompute == "selective":
        return s * b * h * 34 / t if sp else s * b * h * (10 + 24 / t)
    return s * b * h * (34 + 5 * a * s / h) / t if sp else s * b * h * (10 + 24 / t + 5 * a * s / (h * t))


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize(("t", "sp"), [(1, False), (1, True), (8, False), (8, True), (4, True)])
def test_layer_formula(recompute, t, sp):
    for s, b, h, a in [(2048, 1, 4096, 32), (2048, 4, 12288, 96), (16, 2, 32, 4)]:
        got = layer_activation_bytes(s, b, h, a, recompute, t, sp, "bfloat16")
        assert got == pytest.approx(korthikanti(s, b, h, a, t, sp, recompute), rel=1e-12)
    # fp32 activations: twice the 16-bit figure
    assert layer_activation_bytes(16, 2, 32, 4, recompute, t, sp, "float32") == pytest.approx(
        2 * korthikanti(16, 2, 32, 4, t, sp, recompute), rel=1e-12)


def test_gpt3_layer_is_34_plus_5as_over_h():
    # GPT-3 175B (s 2048, h 12288, a 96): 5 a s / h = 80, so 114 s b h per layer without recomputation
    assert layer_activation_bytes(2048, 1, 12288, 96) == 2048 * 12288 * 114
    assert layer_activation_bytes(2048, 1, 12288, 96, "selective") == 2048 * 12288 * 34
    assert layer_activation_bytes(2048, 1, 12288, 96, "full") == 2048 * 12288 * 2


def test_attention_half_plus_mlp_half_is_the_layer():
    # Section 4.1: attention 11 sbh + 5 a s^2 b, two layer norms 2 sbh each, MLP 19 sbh
    s, b, h, a = 64, 2, 128, 8
    att = layer_activation_bytes(s, b, h, a, part="attention")
    assert att == pytest.approx(s * b * h * (11 + 2) + 5 * a * s * s * b, rel=1e-12)
    assert layer_activation_bytes(s, b, h, a) - att == pytest.approx(s * b * h * (19 + 2), rel=1e-12)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"recompute": "some"}, "recompute must be one of"),
    ({"tensor_parallel": 0}, "tensor_parallel must be an integer >= 1"),
    ({"dtype": "int8"}, "dtype must be one of"),
    ({"part": "mlp"}, "part must be one of"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        layer_activation_bytes(16, 1, 32, 4, **kwargs)
    if "part" not in kwargs:
        with pytest.raises(ValueError, match=match):
            dg.workloads.build("pipeline", stages=2, microbatches=2, layers=2, **SMALL, **kwargs)


# ---------------------------------------------------------------------------- pipeline stashes
def build(schedule: str, p: int, m: int, v: int = 1, layers_per_chunk: int = 1, **kw) -> dg.workloads.Workload:
    return dg.workloads.build("pipeline", stages=p, microbatches=m, schedule=schedule, chunks=v,
                              layers=p * v * layers_per_chunk, **SMALL, **kw)


def stash_peaks(w: dg.workloads.Workload) -> tuple[np.ndarray, np.ndarray, dg.Trace]:
    """``(stash peak per device [B], activation peak per device [B], trace)``: the simulated memory profile
    of the stashes alone (the same trace, every other byte set to 0), and the whole profile less the
    persistent training state."""
    p = int(w.assignment.max()) + 1
    config = dataclasses.replace(w.config, memory="track")
    tr = dg.simulate(w.graph, w.assignment, topology=dg.Topology.uniform(p), priorities=w.priorities, config=config)
    kinds = np.array(w.graph.kinds)
    stash_only = dataclasses.replace(w.graph, out_bytes=np.where(kinds == "forward", w.graph.out_bytes, 0.0),
                                     persistent_bytes=None)
    return memory_profile(stash_only, tr).peak, tr.memory.peak - tr.memory.persistent, tr


def chunk_stash() -> float:
    """One layer's stash for one microbatch [B], from the paper's formula: s b h (34 + 5 a s / h)."""
    s, b, h, a = SMALL["seq"], SMALL["micro_batch"], SMALL["d_model"], SMALL["n_heads"]
    return s * b * h * (34 + 5 * a * s / h)


def expected_count(schedule: str, p: int, m: int, v: int, s: int) -> int:
    """Peak stashed chunk-microbatches on stage ``s`` (module docstring)."""
    if schedule == "gpipe":
        return m
    if schedule == "1f1b":
        return min(p - s, m)
    if schedule == "zb-h1":
        return min(p, m)
    return v * m if m == p else 2 * (p - s - 1) + (v - 1) * p + 1


def check(schedule: str, p: int, m: int, v: int = 1) -> np.ndarray:
    w = build(schedule, p, m, v)
    stash, activation, _ = stash_peaks(w)
    a = chunk_stash()
    counts = np.array([expected_count(schedule, p, m, v, s) for s in range(p)])
    np.testing.assert_allclose(stash, counts * a, rtol=1e-12)
    # the whole profile adds to the stashes only boundary activations and gradients (2 s b h each) in flight
    # or waiting for their consumer: a whole number of them, at most one F and one B output per chunk-microbatch
    boundary = 2 * SMALL["seq"] * SMALL["micro_batch"] * SMALL["d_model"]
    extra = (activation - counts * a) / boundary
    np.testing.assert_allclose(extra, np.round(extra), atol=1e-9)
    assert np.all(extra >= 0) and np.all(extra <= 2 * m * v)
    return stash


PM = [(p, m) for p in (2, 4, 8) for m in (p, 2 * p, 4 * p)]
FEW = [(4, 2), (8, 5), (3, 1)]  # fewer microbatches than stages: the min(., m) of the counts


@pytest.mark.parametrize(("p", "m"), PM + FEW)
def test_gpipe_and_1f1b_peaks(p, m):
    check("gpipe", p, m)
    one = check("1f1b", p, m)
    assert one[0] == min(p, m) * chunk_stash()  # the first stage holds p microbatches (m when m < p)


@pytest.mark.parametrize(("p", "m"), PM + FEW)
def test_zb_h1_holds_at_most_1f1b_peak(p, m):
    zb = check("zb-h1", p, m)
    one, _, _ = stash_peaks(build("1f1b", p, m))
    assert zb.max() <= one.max()


@pytest.mark.parametrize("v", [2, 3])
@pytest.mark.parametrize(("p", "m"), PM)
def test_interleaved_peaks(p, m, v):
    inter = check("interleaved", p, m, v)
    if m > p:  # Narayanan et al.: 1 + (p - 1) / (p v) times 1F1B's first-stage peak, the same model
        one, _, _ = stash_peaks(build("1f1b", p, m, layers_per_chunk=v))
        assert inter[0] / one[0] == pytest.approx(1 + (p - 1) / (p * v), rel=1e-12)


def test_stash_is_held_from_its_forward_to_its_backward():
    w = build("zb-h1", 3, 6)
    _, _, tr = stash_peaks(w)
    idx = {n: i for i, n in enumerate(w.graph.names)}
    boundary = 2 * SMALL["seq"] * SMALL["micro_batch"] * SMALL["d_model"]
    for c in range(3):
        for j in range(6):
            f, b, wg = (idx[f"{ph}[{c},{j}]"] for ph in "FBW")
            local = {b, wg}
            if c < 2:  # the send op: no FLOPs, right after F, the boundary activation to the next stage
                send = idx[f"S[{c},{j}]"]
                assert tr.end[send] == tr.end[f] and w.graph.out_bytes[send] == boundary
                assert w.graph.successors(send).tolist() == [idx[f"F[{c + 1},{j}]"]]
                local.add(send)
            assert set(w.graph.successors(f).tolist()) == local  # so the stash is freed when W ends
            assert (w.assignment[sorted(local)] == w.assignment[f]).all()


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize(("t", "sp"), [(1, False), (2, False), (2, True)])
def test_pipeline_options_follow_the_formula(recompute, t, sp):
    w = build("1f1b", 2, 4, layers_per_chunk=3, recompute=recompute, tensor_parallel=t, sequence_parallel=sp)
    kinds = np.array(w.graph.kinds)
    s, b, h, a = SMALL["seq"], SMALL["micro_batch"], SMALL["d_model"], SMALL["n_heads"]
    np.testing.assert_allclose(w.graph.out_bytes[kinds == "forward"], 3 * korthikanti(s, b, h, a, t, sp, recompute),
                               rtol=1e-12)
    forward = w.graph.flops[kinds == "forward"][0]
    backward = w.graph.flops[kinds == "backward"][0]
    if recompute == "full":
        assert backward == pytest.approx(3 * forward, rel=1e-12)  # the backward redoes the forward
    elif recompute == "none":
        assert backward == pytest.approx(2 * forward, rel=1e-12)
    else:  # the attention core: q k^T (2 b a s^2 (h / a)), softmax, probs v, over t
        assert 2 * forward < backward < 2.5 * forward
    np.testing.assert_allclose(w.graph.out_bytes[kinds == "send"], s * b * h * 2 / (t if sp else 1))


def test_stash_dwarfs_the_boundary_activation_at_llama_sizes():
    # Llama 7B sizes (s 2048, h 4096, a 32, 32 layers over 4 stages): the stash of a stage is 8 layers of
    # s b h (34 + 80) bytes, 456x the boundary activation (2 s b h) that was all stages kept before
    w = dg.workloads.build("pipeline", stages=4, microbatches=8)
    kinds = np.array(w.graph.kinds)
    ratio = w.graph.out_bytes[kinds == "forward"][0] / w.graph.out_bytes[kinds == "send"][0]
    assert ratio == pytest.approx(8 * 114 / 2, rel=1e-12)


# ---------------------------------------------------------------------------- llama workloads
@pytest.mark.parametrize(("family", "part"), [("llama-layer", "layer"), ("llama-block", "attention")])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_llama_training_forward_holds_its_stash(family, part, recompute):
    params = dict(batch=4, seq=8, d_model=16, n_heads=4, blocks=2, dtype="bfloat16")
    if family == "llama-layer":
        params["ffn_hidden"] = 24
    plain = dg.workloads.make(family, **params)
    g = dg.workloads.make(family, recompute=recompute, **params)
    rows = 4 // 2
    per_row = layer_activation_bytes(8, rows, 16, 4, recompute, part=part)
    if part == "layer":
        assert per_row == pytest.approx(korthikanti(8, rows, 16, 4, recompute=recompute), rel=1e-12)
    extra = g.persistent_bytes - plain.persistent_bytes
    last = "resid2" if family == "llama-layer" else "resid1"
    holders = [g.names[i] for i in np.flatnonzero(extra)]
    assert holders == [f"{last}[0]", f"{last}[1]"]
    np.testing.assert_allclose(extra[np.flatnonzero(extra)], per_row, rtol=1e-12)
    # the simulated peak of a training forward holds both row blocks' stashes on top of the forward alone
    a = np.zeros(g.n_ops, np.int64)
    cfg = dg.SimConfig(memory="track")
    with_stash = dg.simulate(g, a, topology=1, config=cfg).memory.peak[0]
    without = dg.simulate(plain, a, topology=1, config=cfg).memory.peak[0]
    assert with_stash == pytest.approx(without + 2 * per_row, rel=1e-12)


def test_llama_io_bytes_and_precisions():
    g = dg.workloads.make("llama-layer", batch=2, seq=8, d_model=16, n_heads=4, ffn_hidden=24, blocks=2,
                          dtype="bfloat16")
    names = list(g.names)
    # q[0,0]: x tile (1, 8, 16) and Wq tile (16, 2, 4) in, (1, 2, 8, 4) out, 2 bytes each
    assert g.io_bytes[names.index("q[0,0]")] == (1 * 8 * 16 + 16 * 2 * 4 + 1 * 2 * 8 * 4) * 2
    # swiglu[0,1]: gate and up (1, 8, 12) in, (1, 8, 12) out
    assert g.io_bytes[names.index("swiglu[0,1]")] == 3 * 8 * 12 * 2
    assert g.precisions == ("bf16",) * g.n_ops
    assert dg.workloads.make("llama-block", dtype="float32", blocks=1, batch=1, seq=4, d_model=8,
                             n_heads=2).precisions[0] == "fp32"
    assert dg.workloads.make("llama-block", dtype="float64", blocks=1, batch=1, seq=4, d_model=8,
                             n_heads=2).precisions is None
