"""Fixtures of the env tests (helpers live in env_helpers.py; import them by that name)."""

from __future__ import annotations

import pytest

import doppler_gym as dg
import tests.doppler_gym.envs.env_helpers as helpers


@pytest.fixture
def toy() -> dg.DataflowGraph:
    return helpers.make_toy()
