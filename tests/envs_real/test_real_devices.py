"""Device specs: parsing, defaults, logical-to-physical mapping, and the lazy import of envs_real."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from envs_real.devices import DEFAULT_CPU_WORKERS, DeviceSet, parse_devices

NO_GPU = not torch.cuda.is_available()


def test_cpu_forms():
    assert parse_devices("cpu:3") == DeviceSet("cpu", ("cpu",) * 3, "cpu:3")
    assert parse_devices("cpu").n_default == DEFAULT_CPU_WORKERS
    assert parse_devices(["cpu", "cpu"]).n_default == 2
    ds = parse_devices("cpu:2")
    assert ds.mapping(5) == ("cpu",) * 5  # a topology may ask for more logical devices
    assert not ds.shares_devices(5)
    assert "not GPU timings" in ds.describe(2)


@pytest.mark.parametrize("bad", ["cpu:x", "cpu:0", "tpu", "cuda:a", ""])
def test_bad_strings(bad):
    with pytest.raises(ValueError, match="devices"):
        parse_devices(bad)


def test_bad_types():
    with pytest.raises(TypeError):
        parse_devices(3.5)
    with pytest.raises(ValueError, match="mixing"):
        parse_devices(["cpu", "cuda:0"])


@pytest.mark.skipif(not NO_GPU, reason="checks the behaviour without a GPU")
def test_auto_without_gpu_warns_and_uses_cpu():
    with pytest.warns(RuntimeWarning, match="no CUDA GPU"):
        ds = parse_devices("auto")
    assert ds.kind == "cpu" and ds.n_default == DEFAULT_CPU_WORKERS


@pytest.mark.skipif(not NO_GPU, reason="checks the behaviour without a GPU")
@pytest.mark.parametrize("spec", ["cuda", "cuda:0", ["cuda:0"]])
def test_cuda_without_gpu_is_a_clear_error(spec):
    with pytest.raises(ValueError, match="no CUDA GPU"):
        parse_devices(spec)


def test_streams_stand_in_for_gpus_when_one_gpu_serves_several_devices():
    one = DeviceSet("cuda", ("cuda:0",), "cuda:0")
    assert one.mapping(4) == ("cuda:0",) * 4
    assert one.shares_devices(4) and "streams stand in" in one.describe(4)
    two = DeviceSet("cuda", ("cuda:0", "cuda:1"), "cuda:0,1")
    assert two.mapping(4) == ("cuda:0", "cuda:1", "cuda:0", "cuda:1")
    assert not two.shares_devices(2)


def test_import_is_lazy():
    code = (
        "import sys, envs_real; assert 'torch' not in sys.modules and 'pynvml' not in sys.modules; "
        "envs_real.RealBackend; assert 'pynvml' not in sys.modules; print('ok')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert "ok" in out.stdout
