"""What every benchmark shares: its command line, the machine line, timing and the results it writes; and the
env-steps-per-second loop of the vector env benchmarks (random valid actions, best rounds, rates, a cProfile
breakdown).

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
import cProfile
import datetime
import json
import math
import os
import platform
import pstats
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

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


# ---------------------------------------------------------------------- env steps per second (random valid actions)
StepsRun = Callable[[int], tuple[float, float]]
"""``run(steps) -> (seconds, policy seconds)``: ``steps`` env steps (all envs together) and the policy's share."""


@njit(cache=True)
def _pick_valid(mask, u, out):
    for i in range(mask.shape[0]):
        valid = 0
        for a in range(mask.shape[1]):
            valid += mask[i, a] != 0
        target = int(u[i] * valid)  # the target-th valid action, counted from 0
        out[i] = -1
        for a in range(mask.shape[1]):
            if mask[i, a] != 0:
                if target == 0:
                    out[i] = a
                    break
                target -= 1


def pick_valid(mask: np.ndarray, u: np.ndarray, out: np.ndarray) -> None:
    """The random policy of the env-steps loops: ``out[i]`` = valid action number ``floor(u[i] * k_i)`` of row ``i``
    (``k_i`` valid actions, in index order), uniform over the valid actions for ``u`` uniform in ``[0, 1)``; -1 for a
    row without one. Compiled, so that the loops time the envs rather than the policy.

    Args:
        mask: ``(N, A)`` int8 or bool, nonzero where an action is valid.
        u: ``(N,) float64`` in ``[0, 1)``; out: ``(N,) int64``, written.
    """
    _pick_valid(mask.view(np.int8) if mask.dtype == np.bool_ else mask, u, out)


def random_env_run(env: Any, seed: int) -> StepsRun:
    """One env (with ``action_masks()``) taking uniformly random valid actions (:func:`pick_valid`), reset as its
    episodes end."""
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    action = np.zeros(1, np.int64)

    def run(steps: int) -> tuple[float, float]:
        policy = 0.0
        start = time.perf_counter()
        for _ in range(steps):
            t0 = time.perf_counter()
            pick_valid(env.action_masks()[None, :], rng.random(1), action)
            policy += time.perf_counter() - t0
            _, _, terminated, truncated, _ = env.step(int(action[0]))
            if terminated or truncated:
                env.reset()
        return time.perf_counter() - start, policy

    return run


def random_vector_run(envs: Any, seed: int) -> StepsRun:
    """A Gymnasium vector env taking uniformly random valid actions (:func:`pick_valid` on ``obs["action_mask"]``);
    ``steps`` counts the steps of all its envs (``steps // N`` vector steps, at least one)."""
    obs, _ = envs.reset(seed=seed)
    rng = np.random.default_rng(seed)
    state = {"obs": obs}
    actions = np.zeros(envs.num_envs, np.int64)

    def run(steps: int) -> tuple[float, float]:
        policy = 0.0
        start = time.perf_counter()
        for _ in range(max(1, steps // envs.num_envs)):
            t0 = time.perf_counter()
            pick_valid(state["obs"]["action_mask"], rng.random(envs.num_envs), actions)
            policy += time.perf_counter() - t0
            state["obs"], *_ = envs.step(actions)
        return time.perf_counter() - start, policy

    return run


def best_rounds(runs: dict[str, StepsRun], steps: int, rounds: int) -> dict[str, tuple[float, float]]:
    """Each run's fastest round of ``steps`` env steps over ``rounds`` rounds, the runs taking turns in every round
    (:func:`side_by_side`): ``{label: (seconds, policy seconds)}`` of that round."""
    seconds: dict[str, tuple[float, float]] = {}

    def measure(label: str) -> Callable[[], float]:
        def once() -> float:
            total, policy = runs[label](steps)
            best = seconds.get(label)
            if best is None or total < best[0]:
                seconds[label] = (total, policy)
            return total
        return once

    side_by_side({label: measure(label) for label in runs}, rounds)
    return seconds


def step_rates(seconds: dict[str, tuple[float, float]], width: dict[str, int], steps: int) -> dict[str, dict]:
    """Env steps per second of each run of :func:`best_rounds` (``width[label]`` envs stepped together, so a round
    did ``max(1, steps // width) * width`` steps): ``{label: {"steps_per_s", "env_steps_per_s" (without the
    policy's time), "vs_single" (over the first label's steps_per_s)}}``."""
    rates: dict[str, dict] = {}
    base = None
    for label, (total, policy) in seconds.items():
        done = max(1, steps // width[label]) * width[label]
        rate = done / finite_positive(total, f"{label}: seconds")
        env_rate = done / finite_positive(total - policy, f"{label}: env seconds")
        base = rate if base is None else base
        rates[label] = {"steps_per_s": rate, "env_steps_per_s": env_rate, "vs_single": rate / base}
    return rates


def rates_table(rates: dict[str, dict], digits: int = 1) -> str:
    """The markdown table of :func:`step_rates` (the ratio to one env with ``digits`` decimals)."""
    rows = [[label, f"{r['steps_per_s']:,.0f}", f"{r['env_steps_per_s']:,.0f}", f"{r['vs_single']:.{digits}f}x"]
            for label, r in rates.items()]
    return markdown_table(["case", "total steps/s", "steps/s without the policy", "vs one env"], rows)


def profiled(run: StepsRun, steps: int) -> tuple[float, float, dict]:
    """``run(steps)`` under cProfile: ``(seconds, policy seconds, stats)``, ``stats`` as ``pstats.Stats.stats``
    (``(file, line, function) -> (calls, primitive calls, own seconds, cumulative seconds, callers)``)."""
    profile = cProfile.Profile()
    profile.enable()
    total, policy = run(steps)
    profile.disable()
    return total, policy, pstats.Stats(profile).stats


def cumulative_seconds(stats: dict, parts: dict[tuple[str, str], str]) -> dict[str, float]:
    """``{label: cumulative seconds}`` of the functions of ``parts`` (``(file suffix, function name) -> label``;
    labels may repeat, their seconds add up) in cProfile ``stats`` (:func:`profiled`)."""
    out = dict.fromkeys(parts.values(), 0.0)
    for (file, _, name), (*_, cumtime, _) in stats.items():
        for (suffix, function), label in parts.items():
            if file.endswith(suffix) and name == function:
                out[label] += cumtime
    return out


def loop_shares(total: float, policy: float, parts: dict[str, float], rest: str) -> dict[str, float]:
    """Shares of a loop's ``total`` seconds: the ``parts`` (seconds each), ``"random policy"`` and what is left
    under the label ``rest``; they add up to 1."""
    seconds = {**parts, "random policy": policy}
    seconds[rest] = total - sum(seconds.values())
    return {label: s / total for label, s in seconds.items()}


def check_shares(shares: dict[str, float]) -> None:
    """Smoke check of :func:`loop_shares`: they add up to 1 and all but the rest (``rest...``) are >= 0."""
    check(abs(sum(shares.values()) - 1.0) < 1e-9 and all(v >= 0 for k, v in shares.items() if not k.startswith("rest")),
          f"breakdown shares {shares} do not add up to 1")


def check_rates(rates: dict[str, dict]) -> None:
    """Smoke check of :func:`step_rates`: every figure a finite number > 0."""
    for label, figures in rates.items():
        for key, value in figures.items():
            finite_positive(value, f"{label}: {key}")
