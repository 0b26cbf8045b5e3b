"""Fixtures of the ``tests/agents`` tests (helpers without fixtures live in ``*_helpers.py``)."""

from __future__ import annotations

import pytest


@pytest.fixture
def one_thread():
    """Run a test on one torch thread, restored after (2 shared cores; more threads only add overhead
    at these sizes). Modules opt in with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    from agents.learned_common import torch_threads  # here: collecting tests/agents imports no torch

    with torch_threads(1):
        yield


@pytest.fixture
def seeded():
    """Seed torch's global generator (policy initialisation) so a test's weights do not depend on the
    tests that ran before it."""
    import torch

    torch.manual_seed(0)
