"""GPU datasheet specs (``doppler_gym.topology.gpus``) and the presets' GPU models, against the datasheets'
figures and ratios published independently of this code (reference note ``gpu-physics.md`` §1)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.topology.gpus import gpu_names, gpu_spec
from doppler_gym.topology.presets import preset_names

# Datasheet rows (dense TFLOP/s: fp32 CUDA core, tf32, bf16, fp16, fp8 tensor core; HBM TB/s; GB).
DATASHEET = {
    "v100-sxm2": (15.7, None, None, 125, None, 0.90, 16),
    "a100-sxm-40gb": (19.5, 156, 312, 312, None, 1.555, 40),
    "a100-sxm-80gb": (19.5, 156, 312, 312, None, 2.039, 80),
    "h100-sxm": (67, 494.7, 989.4, 989.4, 1979, 3.35, 80),
    "h200-sxm": (67, 494.7, 989.4, 989.4, 1979, 4.8, 141),
    "b200": (75, 1100, 2250, 2250, 4500, 7.7, 180),
}


@pytest.mark.parametrize("name", list(DATASHEET))
def test_specs_match_the_datasheets(name):
    fp32, tf32, bf16, fp16, fp8, bw, mem = DATASHEET[name]
    gpu = gpu_spec(name)
    tensor = dict(gpu.tensor)
    for precision, want in (("fp32", fp32), ("tf32", tf32), ("bf16", bf16), ("fp16", fp16), ("fp8", fp8)):
        assert tensor.get(precision) == (None if want is None else pytest.approx(want * 1e12, rel=1e-12))
    assert gpu.hbm_bandwidth == pytest.approx(bw * 1e12, rel=1e-12)
    assert gpu.hbm_capacity == mem * 1e9
    assert 1e-6 <= gpu.launch_overhead <= 5e-6  # the reference note's per-kernel floor, 2-5 us


@pytest.mark.parametrize(("name", "ridge"), [("v100-sxm2", 139), ("a100-sxm-40gb", 201), ("a100-sxm-80gb", 153),
                                              ("h100-sxm", 295), ("h200-sxm", 206)])
def test_ridge_points_match_the_published_ones(name, ridge):
    """16-bit tensor peak over HBM bandwidth [FLOP/B], as the reference note and Modal's GPU glossary give it."""
    gpu = gpu_spec(name)
    assert gpu.peak("fp16", tensor_core=True) / gpu.hbm_bandwidth == pytest.approx(ridge, abs=1)


def test_missing_precisions_fall_back_to_a_wider_format():
    v100, a100, h100 = gpu_spec("v100-sxm2"), gpu_spec("a100-sxm-80gb"), gpu_spec("h100-sxm")
    assert v100.peak("bf16", tensor_core=True) == 15.7e12  # no bf16 tensor cores: the fp32 rate
    assert v100.peak("tf32", tensor_core=True) == 15.7e12
    assert a100.peak("fp8", tensor_core=True) == 312e12  # no fp8: bf16
    assert h100.peak("fp8", tensor_core=False) == 120e12  # no fp8 vector units: bf16's
    assert a100.peak("bf16", tensor_core=False) == 39e12 and a100.peak("fp16", tensor_core=False) == 78e12
    with pytest.raises(ValueError, match="unknown precision 'int4'"):
        h100.peak("int4", tensor_core=True)


def test_unknown_gpu_lists_the_known_ones():
    with pytest.raises(ValueError, match="known models: p100-pcie, v100-sxm2"):
        gpu_spec("h100")
    assert set(DATASHEET) < set(gpu_names())


def test_every_preset_names_its_gpus():
    for name in preset_names():
        topo = dg.Topology.preset(name)
        assert topo.gpus is not None and len(topo.gpus) == topo.n_devices, name
        for d, model in enumerate(topo.gpus):  # fp32 speed and memory as before: the model's
            assert topo.speed[d] == gpu_spec(model).peak("fp32", tensor_core=False), (name, d)
            assert topo.memory[d] == gpu_spec(model).hbm_capacity, (name, d)
    assert dg.Topology.preset("dc3-wan").gpus == ("h100-sxm",) * 4 + ("a100-sxm-80gb",) * 4 + ("v100-sxm2",) * 4


def test_topology_rejects_unknown_or_miscounted_gpus():
    topo = dg.Topology.uniform(2)
    assert topo.gpus is None
    with pytest.raises(ValueError, match="one GPU model per device"):
        dataclasses.replace(topo, gpus=("h100-sxm",))
    with pytest.raises(ValueError, match=r"unknown: \['h100'\]"):
        dataclasses.replace(topo, gpus=("h100", "h100-sxm"))


def test_dgx_a100_presets_have_the_published_links():
    """DGX A100: NVSwitch 600 GB/s per GPU in total = 300 GB/s per direction; 8x HDR 200 Gb/s per node."""
    node, two = dg.Topology.preset("a100x8-dgx"), dg.Topology.preset("a100x16-2node")
    off = ~np.eye(8, dtype=bool)
    assert np.all(node.bandwidth[off] == 300e9) and node.memory.tolist() == [80e9] * 8
    assert node.gpus == ("a100-sxm-80gb",) * 8
    ib = [two.bandwidth[g, 8 + g] for g in range(8)]
    assert sum(ib) == 8 * 200e9 / 8  # 1.6 Tb/s per node, per direction
    assert np.all(two.bandwidth[:8, :8][off] == 300e9) and np.all(two.bandwidth[8:, 8:][off] == 300e9)
    assert two.route(0, 9) in ([0, 1, 9], [0, 8, 9])  # cross-rail: NVSwitch then the rail's IB link
    h100 = dg.Topology.preset("h100x16-2node")  # DGX H100: 8x NDR 400 Gb/s per node
    assert sum(h100.bandwidth[g, 8 + g] for g in range(8)) == 8 * 400e9 / 8
    assert h100.gpus == ("h100-sxm",) * 16
