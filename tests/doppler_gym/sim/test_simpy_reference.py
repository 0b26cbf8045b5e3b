"""``doppler_gym.sim.simpy_reference`` imports ``simpy`` only when it runs, and says how to install it."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.sim.simpy_reference import simpy_makespan, simpy_trace


def test_a_missing_simpy_is_an_import_error_naming_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = dg.load_graph("paper/chainmm")
    monkeypatch.setitem(sys.modules, "simpy", None)  # as if simpy were not installed
    with pytest.raises(ImportError, match=r"pip install simpy.*dev"):
        simpy_trace(graph, np.zeros(graph.n_ops, dtype=np.int64))


def test_one_device_makespan_is_the_total_work() -> None:
    pytest.importorskip("simpy", reason="the SimPy reference needs simpy, from the dev extra: pip install -e '.[dev]'")
    graph = dg.load_graph("paper/chainmm")
    expected = float(np.asarray(graph.flops).sum()) / 1e10
    assert simpy_makespan(graph, np.zeros(graph.n_ops, dtype=np.int64)) == pytest.approx(expected, rel=1e-12)
