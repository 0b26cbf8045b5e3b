"""What every benchmark shares: its command line, the machine line, timing and the results it writes.

A benchmark is a module of this package, run from the repository root::

    python -m benchmarks.bench_sim                # the full measurement
    python -m benchmarks.bench_sim --smoke        # seconds: tiny sizes, the whole path, outputs checked

Every benchmark takes ``--smoke`` (tiny sizes; :func:`check` raises when an output is not sane); one
with random draws takes ``--seed`` (the seed of its graphs, assignments and searches), one that writes
its results ``--out`` (a folder for ``results.json``). A benchmark that needs an optional package
names its import names in a module constant ``REQUIRES`` (the smoke test skips it, with the reason,
where one is missing).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
"""The repository root (the folder holding ``benchmarks/``)."""


class SmokeCheckFailed(AssertionError):
    """A benchmark's ``--smoke`` run produced an output that is not sane (the message says which)."""


def parser(doc: str | None, *, seed: int | None = 0, writes: bool = True,
           out: str | None = None) -> argparse.ArgumentParser:
    """The benchmark's argument parser with ``--smoke``, ``--seed`` and (when it writes results) ``--out``.

    Args:
        doc: the benchmark module's docstring; its first paragraph becomes the description.
        seed: the default of ``--seed``; ``None`` for a benchmark with nothing random (no ``--seed``).
        writes: whether the benchmark writes ``OUT/results.json`` (adds ``--out``); one that only
            prints its tables passes ``False``.
        out: the default of ``--out`` (a folder), or ``None`` for no results file unless asked.
    """
    p = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true",
                   help="a run of seconds on tiny sizes that exercises the whole path and checks its outputs")
    if seed is not None:
        p.add_argument("--seed", type=int, default=seed,
                       help=f"seed of graphs, assignments and searches (default {seed})")
    if writes:
        p.add_argument("--out", default=out, metavar="DIR",
                       help="folder for results.json" + (f" (default {out})" if out else " (default: none written)"))
    return p


def git_commit() -> str:
    """The short hash of the checked-out commit (``+`` when the tree has changes), or ``"unknown"``."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+" if dirty else "")


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what :mod:`platform` reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """The figures of the machine line: CPU, cores, load average, date, git commit, Python, numba threads."""
    info: dict[str, Any] = {"cpu": cpu_name(), "cores": os.cpu_count(),
                            "load_average": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
                            "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "commit": git_commit(),
                            "python": platform.python_version()}
    try:
        import numba

        info["numba_threads"] = numba.get_num_threads()
    except ImportError:
        pass
    return info


def machine_line() -> str:
    """One line naming the machine and the code measured, printed first by every benchmark."""
    m = machine()
    threads = f", {m['numba_threads']} numba threads" if "numba_threads" in m else ""
    return (f"{m['date']} | commit {m['commit']} | {m['cpu']}, {m['cores']} cores, load average "
            f"{m['load_average']} | Python {m['python']}{threads}")


def start(name: str, args: argparse.Namespace) -> None:
    """Print the benchmark's first lines: its name, the machine line and, in a smoke run, that it is one."""
    print(f"# {name}{' --smoke (tiny sizes: figures are not measurements)' if args.smoke else ''}")
    print(machine_line(), flush=True)


def best_time(fn: Callable[[], Any], repeats: int = 1) -> tuple[float, Any]:
    """``(seconds, result)``: the fastest of ``repeats`` calls of ``fn()`` [s] and the last call's result."""
    best, out = math.inf, None
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def median_block(fn: Callable[[], Any], reps: int, blocks: int = 5) -> float:
    """Median over ``blocks`` blocks of ``reps`` calls of ``fn()`` of the time per call [us]."""
    per_call = []
    for _ in range(blocks):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        per_call.append((time.perf_counter() - t0) / reps * 1e6)
    return float(statistics.median(per_call))


def side_by_side(cases: dict[str, Callable[[], float]], rounds: int) -> dict[str, float]:
    """Each case's smallest figure over ``rounds`` rounds, the cases taking turns within every round.

    ``cases`` maps a label to a callable returning one timing (any unit); alternating them round by
    round makes a change in machine load hit every case alike. Returns ``{label: min over rounds}``.
    """
    best = dict.fromkeys(cases, math.inf)
    for _ in range(max(1, rounds)):
        for label, measure in cases.items():
            best[label] = min(best[label], measure())
    return best


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> str:
    """A markdown table: ``header`` cells, then ``rows`` (each cell through ``str``).

    ``align``: one letter per column, ``l`` or ``r`` (default: the first column left, the rest right).
    """
    align = align or "l" + "r" * (len(header) - 1)
    if len(align) != len(header):
        raise ValueError(f"markdown_table: align {align!r} has {len(align)} letters for {len(header)} columns")
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(str(c) for c in header) + " |", "|" + "|".join(rule) + "|"]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"markdown_table: a row has {len(row)} cells for {len(header)} columns: {row!r}")
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def write_results(out: str | Path | None, name: str, args: argparse.Namespace, results: Any) -> Path | None:
    """Write ``OUT/results.json`` (``{"benchmark", "machine", "args", "results"}``) atomically.

    Returns the path written, or ``None`` when ``out`` is ``None``. ``results`` must be JSON-serialisable.
    """
    if out is None:
        return None
    path = Path(out) / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"benchmark": name, "machine": machine(), "args": vars(args), "results": results},
                              indent=1, default=str) + "\n")
    os.replace(tmp, path)
    print(f"wrote {path}")
    return path


def check(condition: bool, what: str) -> None:
    """Raise :class:`SmokeCheckFailed` with ``what`` (the output and the value it should have) unless ``condition``."""
    if not condition:
        raise SmokeCheckFailed(what)


def finite_positive(value: float, what: str) -> float:
    """``value`` when it is a finite number > 0; else :class:`SmokeCheckFailed` naming ``what``."""
    check(isinstance(value, (int, float)) and math.isfinite(value) and value > 0,
          f"{what} is {value!r}; expected a finite number > 0")
    return value
