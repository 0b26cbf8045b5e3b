"""Every benchmark's ``--smoke`` run: tiny sizes through its whole path, its outputs checked.

Each benchmark runs as a user runs it (``python -m benchmarks.NAME --smoke``, from the repository
root, in its own process); its smoke mode raises :class:`benchmarks.common.SmokeCheckFailed` when an
output is not sane, so a non-zero exit fails the test with the benchmark's own message. A benchmark
that needs an optional package (its ``REQUIRES``) is skipped, with the reason, where one is missing.
Smoke runs that take more than about ten seconds on an idle CPU are marked ``slow``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAST = ("bench_cluster", "bench_cluster_types", "bench_cluster_vector", "bench_comm", "bench_env", "bench_gavel",
        "bench_memory", "bench_pipeline", "bench_sim", "bench_sim_rl", "bench_stragglers", "bench_vector")
SLOW = ("bench_baselines", "bench_cluster_rl", "bench_generalisation", "bench_learned_baselines", "bench_multicast",
        "bench_place", "bench_policy", "bench_quality", "bench_ray", "bench_real_dist", "gpu_check")
WRITES_OUT = ("bench_generalisation", "bench_learned_baselines", "bench_place", "bench_quality", "bench_real_dist")


def test_every_benchmark_has_a_smoke_run() -> None:
    on_disk = {p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem.startswith(("bench_", "gpu_"))}
    assert on_disk == set(FAST + SLOW), (
        f"benchmarks without a smoke run here: {sorted(on_disk - set(FAST + SLOW))}; gone from benchmarks/: "
        f"{sorted(set(FAST + SLOW) - on_disk)}. Add each new benchmark to FAST or SLOW in {__file__}")


@pytest.mark.parametrize("name", [*FAST, *(pytest.param(n, marks=pytest.mark.slow) for n in SLOW)])
def test_smoke(name: str, tmp_path: Path) -> None:
    module = importlib.import_module(f"benchmarks.{name}")
    missing = [m for m in getattr(module, "REQUIRES", ()) if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"benchmarks.{name} needs {', '.join(missing)} (an optional extra), which is not installed")
    cmd = [sys.executable, "-m", f"benchmarks.{name}", "--smoke"]
    if name in WRITES_OUT:
        cmd += ["--out", str(tmp_path / name)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, (
        f"{' '.join(cmd)} exited with {proc.returncode}\n--- stdout (end)\n{proc.stdout[-3000:]}\n"
        f"--- stderr (end)\n{proc.stderr[-3000:]}")
    assert proc.stdout.startswith(f"# {name} --smoke"), f"{name}: no smoke header first:\n{proc.stdout[:500]}"
