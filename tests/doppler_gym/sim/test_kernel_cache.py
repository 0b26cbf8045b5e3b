"""The kernels' Numba cache (``doppler_gym.sim.kernel_cache``): its digest covers every file a kernel
compiles in; importing the simulator writes nothing; the first pack of a process checks the cache; a
folder the digest cannot be written to still simulates, and a writable one refreshes."""

from __future__ import annotations

import ast
import hashlib
import importlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from numba.core.dispatcher import Dispatcher

import doppler_gym as dg
from doppler_gym.sim import kernel_cache

SIM = Path(dg.sim.__file__).parent
RAW = dg.SimConfig(cost_model="raw")


def _sim_imports(path: Path) -> dict[str, str]:
    """Names a module imports from ``doppler_gym.sim.<module>``, and that module's name."""
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("doppler_gym.sim."):
            for alias in node.names:
                out[alias.asname or alias.name] = node.module
        if isinstance(node, ast.ImportFrom) and node.module == "doppler_gym.sim":
            for alias in node.names:
                out[alias.asname or alias.name] = f"doppler_gym.sim.{alias.name}"
    return out


def test_the_digest_covers_every_file_a_kernel_compiles_in():
    """Numba checks a cached kernel against its own file only: every other simulator file whose
    functions or constants a kernel reads must be in the digest, and so must the kernel's own file."""
    covered = {m.__name__ for m in kernel_cache.KERNEL_MODULES}
    needed = set()
    for path in sorted(SIM.glob("*.py")):
        module = importlib.import_module(f"doppler_gym.sim.{path.stem}")
        imported = _sim_imports(path)
        for value in vars(module).values():
            if not (isinstance(value, Dispatcher) and value.py_func.__module__ == module.__name__):
                continue
            for name in value.py_func.__code__.co_names:
                if name in imported:  # a kernel reads another simulator file's function or constant
                    needed |= {module.__name__, imported[name]}
    assert "doppler_gym.sim.list_kernel" in needed and "doppler_gym.sim.unsigned" in needed
    assert needed == covered, (sorted(needed - covered), sorted(covered - needed))
    digest = hashlib.sha256(b"".join(Path(m.__file__).read_bytes() for m in kernel_cache.KERNEL_MODULES))
    assert kernel_cache.kernel_sources_digest() == digest.hexdigest()


def test_the_cached_kernels_are_the_compiled_entry_points_not_the_inlined_helpers():
    names = {k.__name__ for k in kernel_cache.cached_kernels()}
    assert {"run_packed", "run_many", "value_range", "run", "run_list", "alloc_workspace", "advance"} <= names
    assert not names & {"heap_push", "heap_pop", "less", "segment", "hop_end", "start_op", "on_arrived"}


FRESH_PROCESS = """
import sys
from pathlib import Path

cache = Path(sys.argv[1])
import doppler_gym as dg
from doppler_gym.sim import kernel_cache
from doppler_gym.sim.packing import pack

written = sorted(str(p) for p in cache.rglob("*") if p.is_file())
assert not written, written  # importing wrote nothing
assert not kernel_cache.fresh_cache_checked()
g = dg.DataflowGraph(src=[0], dst=[1], flops=[1.0, 2.0], out_bytes=[3.0, 0.0])
pack(g, None, 2, dg.SimConfig(cost_model="raw"))
assert kernel_cache.fresh_cache_checked()  # the first pack checked the cache
print(kernel_cache.digest_path())
"""

SECOND_PROCESS = """
from doppler_gym.sim import kernel_cache

assert kernel_cache.refresh_stale_cache() is False  # the kept digest matches: nothing dropped
kernel_cache.digest_path().write_text("an older kernel")
assert kernel_cache.refresh_stale_cache() is True  # a kernel file changed: the cache is dropped
assert kernel_cache.digest_path().read_text() == kernel_cache.kernel_sources_digest()
"""


def test_import_writes_nothing_and_the_first_pack_refreshes_a_writable_cache(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(tmp_path)], capture_output=True, text=True,
                          env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    marker = Path(proc.stdout.strip().splitlines()[-1])
    assert marker.is_relative_to(tmp_path) and marker.name == kernel_cache.DIGEST_FILE
    assert marker.read_text() == kernel_cache.kernel_sources_digest()
    proc = subprocess.run([sys.executable, "-c", SECOND_PROCESS], capture_output=True, text=True, env=env,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr


def test_a_digest_folder_that_cannot_be_written_still_simulates(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")  # a file, not a folder: nothing can be written under it, even by root
    monkeypatch.setattr(kernel_cache, "digest_path", lambda: blocker / kernel_cache.DIGEST_FILE)
    dropped = []
    monkeypatch.setattr(kernel_cache, "drop_cached_kernels", lambda: dropped.append(True))
    assert kernel_cache.refresh_stale_cache() is True
    assert kernel_cache.refresh_stale_cache() is True  # no digest kept: each check drops, as a cold cache would
    assert dropped == [True, True]
    # op 0 (1 unit) on device 0, its 3-unit output to op 1 (2 units) on device 1
    g = dg.DataflowGraph(src=[0], dst=[1], flops=[1.0, 2.0], out_bytes=[3.0, 0.0])
    trace = dg.simulate(g, np.array([0, 1]), config=RAW)
    assert trace.makespan == 6.0
    assert trace.start.tolist() == [0.0, 4.0] and trace.end.tolist() == [1.0, 6.0]


def test_a_writable_digest_folder_refreshes_once_per_change(monkeypatch, tmp_path):
    marker = tmp_path / kernel_cache.DIGEST_FILE
    monkeypatch.setattr(kernel_cache, "digest_path", lambda: marker)
    dropped = []
    monkeypatch.setattr(kernel_cache, "drop_cached_kernels", lambda: dropped.append(True))
    assert kernel_cache.refresh_stale_cache() is True and dropped == [True]
    assert marker.read_text() == kernel_cache.kernel_sources_digest()
    assert kernel_cache.refresh_stale_cache() is False and dropped == [True]
    marker.write_text("an older kernel")
    assert kernel_cache.refresh_stale_cache() is True and dropped == [True, True]
    assert marker.read_text() == kernel_cache.kernel_sources_digest()


def test_dropping_skips_a_kernel_whose_cache_folder_cannot_be_written(monkeypatch):
    class Kernel:
        def __init__(self, fails: bool) -> None:
            self.fails = fails
            self.recompiled = False

        def recompile(self) -> None:
            self.recompiled = True
            if self.fails:
                raise PermissionError("read-only cache folder")

    kernels = (Kernel(False), Kernel(True), Kernel(False))
    monkeypatch.setattr(kernel_cache, "cached_kernels", lambda: kernels)
    kernel_cache.drop_cached_kernels()
    assert [k.recompiled for k in kernels] == [True, True, True]
