"""Package-level contract: public names, and no heavy imports at import time (DESIGN.md §2)."""

from __future__ import annotations

import subprocess
import sys


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
        "baselines",
    ):
        assert hasattr(dg, name), name
    assert callable(dg.workloads.make)
    assert "paper/ffnn" in dg.paper_graph_names()
