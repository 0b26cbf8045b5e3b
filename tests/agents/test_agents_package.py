"""The ``agents`` package: lazy public names, no torch at import."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_import_agents_does_not_import_torch():
    code = "import sys, agents; assert 'torch' not in sys.modules, 'agents imported torch eagerly'"
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_every_public_name_resolves_to_its_module():
    import agents

    for name in agents.__all__:
        obj = getattr(agents, name)
        assert obj.__name__ == name and obj.__module__.startswith("agents."), name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        agents.nope  # noqa: B018
