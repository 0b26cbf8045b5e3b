"""simulate_batch leaves torch's thread count as it found it (Numba's OpenMP layer would change it)."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import numpy as np, torch, doppler_gym as dg
torch.set_num_threads(1)
x = torch.randn(64, 64); x @ x  # torch's OpenMP pool is up
g = dg.load_graph("paper/chainmm")
a = np.random.default_rng(0).integers(0, 4, (32, g.n_ops))
for _ in range(2):
    dg.simulate_batch(g, a, config=dg.SimConfig.reference())
    assert torch.get_num_threads() == 1, torch.get_num_threads()
"""


def test_simulate_batch_keeps_torch_threads():
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_simulate_batch_does_not_import_torch():
    code = ("import sys, numpy as np, doppler_gym as dg; g = dg.load_graph('paper/chainmm'); "
            "dg.simulate_batch(g, np.zeros((2, g.n_ops), np.int64)); assert 'torch' not in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
