"""Threads of the simulator: simulate_batch leaves torch's thread count as it found it (Numba's
OpenMP layer would change it); numba_threads sets Numba's for a block and restores it."""

from __future__ import annotations

import subprocess
import sys

import numba
import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.sim.threads import numba_threads

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


def test_the_block_runs_with_the_given_threads_and_the_count_comes_back() -> None:
    before = numba.get_num_threads()
    with numba_threads(1):
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == before
    with pytest.raises(RuntimeError, match="inside"), numba_threads(1):
        raise RuntimeError("inside")
    assert numba.get_num_threads() == before  # restored after an error too
    with numba_threads(10_000):  # capped at the threads Numba started with
        assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS


def test_one_thread_gives_the_makespans_of_the_default_threads() -> None:
    graph = dg.workloads.make("random", n_ops=60, levels=8, seed=2)
    rows = np.random.default_rng(0).integers(0, 3, (40, graph.n_ops))
    want = dg.simulate_batch(graph, rows, 3)
    with numba_threads(1):
        got = dg.simulate_batch(graph, rows, 3)
    np.testing.assert_array_equal(got, want)
    assert got[7] == dg.simulate(graph, rows[7], 3).makespan  # and each is the single run's


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_a_bad_thread_count_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="threads must be an integer >= 1"), numba_threads(bad):
        pass
