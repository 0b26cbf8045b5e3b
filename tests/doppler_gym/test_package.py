"""Package-level contract: public names, and no heavy imports at import time (docs/architecture.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import doppler_gym


def test_import_does_not_load_torch_or_pynvml():
    code = (
        "import sys, doppler_gym\n"
        "heavy = sorted(m for m in ('torch', 'pynvml', 'gymnasium') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "torch" not in out.stdout and "pynvml" not in out.stdout, out.stdout


def test_public_api_names():
    import doppler_gym as dg

    for name in (
        "DataflowGraph", "OpSpec", "Topology", "SimConfig", "Trace", "load_graph", "save_graph",
        "simulate", "simulate_batch", "makespan_lower_bound", "instances", "b_level", "t_level", "workloads",
        "baselines", "cluster",
    ):
        assert hasattr(dg, name), name
    assert callable(dg.workloads.make)
    assert "paper/ffnn" in dg.paper_graph_names()
    assert callable(dg.cluster.run)


UPPER = ("agents", "envs_real")  # the layers above doppler_gym (docs/architecture.md)


def test_no_doppler_gym_module_imports_an_upper_layer():
    code = (
        "import pkgutil, sys\n"
        "import doppler_gym, doppler_gym.cli.main\n"
        "failed = []\n"
        "for m in pkgutil.walk_packages(doppler_gym.__path__, 'doppler_gym.', onerror=failed.append):\n"
        "    __import__(m.name)\n"
        f"upper = sorted(m for m in sys.modules if m.split('.')[0] in {UPPER!r})\n"
        "print(len([m for m in sys.modules if m.startswith('doppler_gym.')]), upper, failed)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    count, rest = proc.stdout.split(" ", 1)
    assert int(count) > 50, proc.stdout  # the walk reached the subpackages
    assert rest.strip() == "[] []", f"importing doppler_gym loaded an upper layer (or failed): {rest}"


def test_no_doppler_gym_source_names_an_upper_layer_in_an_import():
    """Static check: no ``import agents`` / ``from envs_real ...`` / ``import_module("agents...")``
    anywhere in doppler_gym, also inside functions (a string entry point is fine)."""
    root = Path(doppler_gym.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if node.level == 0 else []
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                    "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
                names = [str(node.args[0].value)]
            else:
                continue
            found += [f"{path.relative_to(root.parent)}:{node.lineno}: {n}" for n in names if n.split(".")[0] in UPPER]
    assert not found, "doppler_gym imports an upper layer:\n" + "\n".join(found)
