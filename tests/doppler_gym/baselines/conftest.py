"""Fixtures of the baseline tests (toy graphs live in baseline_graphs.py; import them by that name)."""

from __future__ import annotations

import pytest

import doppler_gym as dg


@pytest.fixture(scope="session")
def chainmm() -> dg.DataflowGraph:
    return dg.load_graph("paper/chainmm")
