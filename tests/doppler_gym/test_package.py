"""Package-level contract: public names, and no heavy imports at import time (docs/architecture.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

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


# What the extras of pyproject.toml install (agents, real, plot, solvers, ray, dev): the core must import,
# simulate and run its envs without any of them (docs/architecture.md).
NOT_CORE = ("torch", "torch_geometric", "stable_baselines3", "sb3_contrib", "pynvml", "tensorboard", "tqdm",
            "matplotlib", "scipy", "highspy", "ortools", "pymetis", "ray", "simpy", "networkx")
REFUSE_EXTRAS = (
    "import importlib.abc, sys\n"
    f"NOT_CORE = {NOT_CORE!r}\n"
    "class Refuse(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in NOT_CORE:\n"
    "            raise ModuleNotFoundError(f'{name} is refused: not a core dependency', name=name)\n"
    "sys.meta_path.insert(0, Refuse())\n"
)


@pytest.mark.slow  # a fresh process: every module imported, Numba kernels loaded
def test_the_core_imports_simulates_and_steps_its_env_without_the_extras():
    code = REFUSE_EXTRAS + (
        "import gymnasium as gym, numpy as np, pkgutil\n"
        "import doppler_gym as dg, doppler_gym.cli.main\n"
        "for m in pkgutil.walk_packages(dg.__path__, 'doppler_gym.'):\n"
        "    __import__(m.name)\n"
        "g = dg.workloads.make('chainmm')\n"
        "tr = dg.simulate(g, np.arange(g.n_ops) % 2, topology=2)\n"
        "cp = dg.baselines.critical_path(g, 2)\n"
        "env = gym.make('Doppler-Sim-v0', graph='chainmm', topology=2)\n"
        "obs, info = env.reset(seed=0)\n"
        "done = False\n"
        "while not done:\n"
        "    _, _, done, _, info = env.step(int(np.flatnonzero(env.unwrapped.action_masks())[0]))\n"
        "try:\n"
        "    dg.sim.gantt.gantt_figure(tr, g)\n"
        "except ImportError as exc:\n"
        "    print('gantt:', exc)\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in NOT_CORE)\n"
        "print(tr.makespan > 0, cp.makespan > 0, info['makespan'] > 0, loaded)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "True True True []", proc.stdout
    # a call that needs an extra says which one installs it
    assert any(line.startswith("gantt:") and "doppler-gym[plot]" in line for line in lines), proc.stdout
