"""Persistent memory of the workload families: the training state of their parameters."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology
from doppler_gym.workloads.builder import parameter_bytes

# bytes per parameter, written out: weight + grad (dtype) + Adam m, v (fp32, or fp64) + fp32 master (16-bit)
ADAM = {"float32": 4 + 4 + 4 + 4, "bfloat16": 2 + 2 + 4 + 4 + 4, "float16": 2 + 2 + 4 + 4 + 4, "float64": 8 + 8 + 8 + 8}
SGD = {"float32": 8, "bfloat16": 4, "float16": 4, "float64": 16}
NONE = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8}


@pytest.mark.parametrize("dtype", sorted(ADAM))
def test_parameter_bytes_table(dtype):
    assert parameter_bytes(dtype, "adam") == ADAM[dtype]
    assert parameter_bytes(dtype, "sgd") == SGD[dtype]
    assert parameter_bytes(dtype, "none") == NONE[dtype]


def n_params(family: str, p: dict) -> int:
    """Parameter count from the model's definition (independent of the builder's tiling)."""
    if family == "ffnn":
        d, h, layers = p["d_in"], p["hidden"], p["layers"]
        return d * h + h + (layers - 1) * (h * h + h)
    if family == "chainmm":
        return p["k"] * p["n"] ** 2
    d, f = p["d_model"], p.get("ffn_hidden", 0)
    attention = d + 4 * d * d  # norm1, Wq, Wk, Wv, Wo
    return attention if family == "llama-block" else attention + d + 3 * d * f


CASES = [
    ("ffnn", dict(batch=8, d_in=12, hidden=16, layers=3, blocks=2)),
    ("chainmm", dict(n=12, k=2, blocks=3)),
    ("llama-block", dict(batch=2, seq=4, d_model=16, n_heads=4, blocks=2)),
    ("llama-layer", dict(batch=2, seq=4, d_model=16, n_heads=4, ffn_hidden=24, blocks=2)),
]


@pytest.mark.parametrize("family, params", CASES)
@pytest.mark.parametrize("dtype, optimizer", [("float32", "adam"), ("bfloat16", "adam"), ("float16", "sgd"),
                                              ("float64", "none")])
def test_total_persistent_is_one_copy_of_the_training_state(family, params, dtype, optimizer):
    g = dg.workloads.make(family, dtype=dtype, optimizer=optimizer, **params)
    per = {"adam": ADAM, "sgd": SGD, "none": NONE}[optimizer][dtype]
    assert g.persistent_bytes.sum() == pytest.approx(n_params(family, params) * per, rel=1e-12)
    assert not g.workspace_bytes.any()


def test_a_shared_tile_is_split_among_its_readers():
    # ffnn blocks=2: tile W1[c-block, j-block] (6 x 8) is read by mm1[0,j,c] and mm1[1,j,c]
    g = dg.workloads.make("ffnn", batch=8, d_in=12, hidden=16, layers=1, blocks=2)
    names = list(g.names)
    for i in range(2):
        op = names.index(f"mm1[{i},1,0]")
        assert g.persistent_bytes[op] == 6 * 8 * 16 / 2
        # bias tile b1[j-block] (8 elements) read by bias1[0,j] and bias1[1,j]
        assert g.persistent_bytes[names.index(f"bias1[{i},1]")] == 8 * 16 / 2
    assert g.persistent_bytes[names.index("relu1[0,0]")] == 0


def test_persistent_memory_counts_on_the_devices_of_the_readers():
    params = dict(batch=8, d_in=12, hidden=16, layers=2, blocks=2)
    g = dg.workloads.make("ffnn", **params)
    total = n_params("ffnn", params) * 16
    topo = Topology.uniform(2)
    one = dg.simulate(g, np.zeros(g.n_ops, np.int64), topology=topo, config=SimConfig(memory="track"))
    np.testing.assert_allclose(one.memory.persistent, [total, 0])
    assert one.peak_memory[0] >= total
    rr = dg.simulate(g, np.arange(g.n_ops) % 2, topology=topo, config=SimConfig(memory="track"))
    assert rr.memory.persistent.sum() == pytest.approx(total)
    assert (rr.memory.persistent > 0).all()


def test_bad_optimizer_is_a_clear_error():
    with pytest.raises(ValueError, match="optimizer must be one of"):
        dg.workloads.make("ffnn", optimizer="adamw")
