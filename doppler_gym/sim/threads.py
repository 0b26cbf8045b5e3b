"""How many threads the simulator's batched kernel uses, for a block of code."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numba


@contextmanager
def numba_threads(threads: int) -> Iterator[None]:
    """Run the block with ``threads`` Numba threads (at most ``numba.config.NUMBA_NUM_THREADS``), then
    restore the count before it.

    One thread suits many small batches (:func:`~doppler_gym.sim.api.simulate_batch` of a few dozen
    rows): each parallel launch then costs no fork and join, and on a CPU that other processes share
    the threads of a launch do not wait for each other (a 16-row local search of a 229-op graph ran
    4x faster with one thread than with two beside another such process, and 1.3x slower alone;
    ``docs/results/train_default.md``).
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"numba_threads: threads must be an integer >= 1, got {threads!r}")
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(before)


_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user, nice, system, irq, softirq, steal of a /proc/stat cpuN line
LOAD_WINDOW_S = 0.1  # the shortest wall clock [s] over which /proc/stat's ticks (10 ms) give a load to ~0.2 cores


def process_cores() -> int:
    """The number of CPU cores this process may run on (its affinity where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity call (macOS, Windows)
        return os.cpu_count() or 1


def busy_core_seconds() -> float | None:
    """CPU time [s] that all processes together have spent on this process's cores since boot.

    The sum of user, nice, system, irq, softirq and steal time (steal: a virtual machine's core
    taken by the host) of Linux's ``/proc/stat`` lines of the cores in ``os.sched_getaffinity(0)``.
    The difference of two readings, less the process's own CPU time between them, is what other
    processes took from its cores. ``None`` where ``/proc/stat`` or the affinity call is missing.
    """
    try:
        cores = os.sched_getaffinity(0)
        ticks = os.sysconf("SC_CLK_TCK")
        with open("/proc/stat", encoding="ascii") as stat:
            lines = [line.split() for line in stat if line.startswith("cpu") and not line.startswith("cpu ")]
        total = sum(int(fields[1 + i]) for fields in lines if int(fields[0][3:]) in cores
                    for i in _BUSY_FIELDS if 1 + i < len(fields))
    except (AttributeError, OSError, ValueError):  # no such file or call, or a format this does not know
        return None
    return total / ticks


class ThreadTuner:
    """Picks the Numba thread count of a loop of parallel calls by timing the calls themselves.

    Alone on a CPU, every thread Numba has is fastest; beside another busy process, one thread is
    (OpenMP's idle threads spin and take the cores the working ones need: a 16-row local search ran
    5x slower with two threads than with one beside a copy of itself, ``docs/results/train_default.md``).
    A call cannot see the machine's load, but a loop of calls can time itself. Each round of the
    tuner runs ``window`` calls with the most threads (by default the count set now) and reads the
    share of those threads' time they had the cores (:attr:`utilisation`), the lower of two readings:
    their CPU time against their wall clock, and, over at least ``LOAD_WINDOW_S`` of calls where
    ``/proc/stat`` exists, the cores that other processes left them (:func:`busy_core_seconds`).
    The second sees what the first cannot: threads that spin while they wait for a core count as
    CPU time. Only when the share is below ``busy`` (the cores are shared) does the tuner also run
    ``window`` calls with each other count (by default one thread) and keep the count with the
    lower seconds per unit of work. Then the kept count runs ``revisit`` calls, or more when the
    round's other counts cost more wall clock than the kept one would have: enough calls that this
    extra stays within ``overhead`` of their time (at most ``max_revisit``; a count that fights
    another process for the cores can take 6x as long per call, and slows that process too). Then a
    new round measures again (the load changes). The counts change only the wall clock, never a
    result.

    Use::

        tuner = ThreadTuner()
        while ...:
            with tuner.timed(rows):  # rows: the call's work (e.g. the batch's rows)
                simulate_batch(...)
    """

    def __init__(self, counts: Sequence[int] | None = None, window: int = 2, revisit: int = 64,
                 busy: float = 0.75, overhead: float = 0.05, max_revisit: int | None = None) -> None:
        """``counts``: the thread counts to choose from (each capped at ``numba.config.NUMBA_NUM_THREADS``);
        ``None``: the count set now (``numba.get_num_threads()``, so code run under ``numba_threads(1)``
        stays on one thread) and one; a single count: always that one. ``max_revisit``: ``None`` is
        ``16 * revisit``."""
        max_revisit = 16 * revisit if max_revisit is None else max_revisit
        if window < 1 or revisit < 1 or max_revisit < revisit or not 0.0 < busy <= 1.0 or not overhead > 0.0:
            raise ValueError(f"ThreadTuner: window and revisit must be >= 1, max_revisit >= revisit, busy in "
                             f"(0, 1] and overhead > 0, got window={window}, revisit={revisit}, "
                             f"max_revisit={max_revisit}, busy={busy} and overhead={overhead}")
        top = numba.config.NUMBA_NUM_THREADS
        counts = (numba.get_num_threads(), 1) if counts is None else tuple(counts)
        if not counts or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in counts):
            raise ValueError(f"ThreadTuner: thread counts must be integers >= 1, got {counts!r}")
        self.candidates = sorted({min(c, top) for c in counts}, reverse=True)  # the most threads first
        self.window, self.revisit, self.busy = window, revisit, busy
        self.overhead, self.max_revisit = overhead, max_revisit
        self.chosen = self.candidates[0]
        self.cores = process_cores()
        self.utilisation: float | None = None  # the share of the cores the last round's first calls had
        self._start_round()

    def _start_round(self) -> None:
        self._plan = [self.candidates[0]] * self.window if len(self.candidates) > 1 else []
        self._compared = False
        self._seconds = dict.fromkeys(self.candidates, 0.0)
        self._work = dict.fromkeys(self.candidates, 0.0)
        self._cpu = 0.0
        self._others: float | None = 0.0
        self._left = self.revisit

    def threads(self) -> int:
        """The thread count for the next call."""
        return self._plan[0] if self._plan else self.chosen

    def record(self, threads: int, seconds: float, work: float, cpu_seconds: float | None = None,
               others_seconds: float | None = None) -> None:
        """Count one call that ran ``work`` units in ``seconds`` of wall clock and ``cpu_seconds`` of
        the process's CPU time (``None``: unknown, taken as all threads busy) with ``threads`` threads,
        while other processes took ``others_seconds`` of CPU time on the process's cores (``None``:
        unknown)."""
        if not self._plan:
            self._left -= 1
            if self._left <= 0:
                self._start_round()
            return
        self._plan.pop(0)
        self._seconds[threads] += seconds
        self._work[threads] += work
        self._cpu += seconds * threads if cpu_seconds is None else cpu_seconds
        self._others = None if self._others is None or others_seconds is None else self._others + others_seconds
        if self._plan:
            return
        if not self._compared:
            top = self.candidates[0]
            wall = self._seconds[top]
            self.utilisation = self._cpu / max(wall * top, 1e-12)
            if self._others is not None and wall >= LOAD_WINDOW_S:  # the cores the others left, per thread
                self.utilisation = min(self.utilisation, (self.cores - self._others / wall) / top)
            if self.utilisation < self.busy:  # the cores are shared: try the other counts too
                self._compared = True
                self._plan = [k for k in self.candidates[1:] for _ in range(self.window)]
                return
        per_work = {k: self._seconds[k] / self._work[k] for k in self.candidates if self._work[k] > 0}
        self.chosen = min(per_work, key=per_work.get)
        self._left = self._calls_until_next_round(per_work)

    def _calls_until_next_round(self, per_work: dict[int, float]) -> int:
        """The kept count's calls before the next round: enough that the round's extra wall clock (the
        other counts' time beyond what the kept count would have taken for their work) is at most
        ``overhead`` of their time, within ``[revisit, max_revisit]``."""
        rate = per_work[self.chosen]  # [s per unit of work]
        extra = sum(self._seconds[k] - self._work[k] * rate for k in per_work if k != self.chosen)  # [s]
        per_call = self._seconds[self.chosen] / self.window  # [s] a kept call, as measured
        if extra <= 0.0 or per_call <= 0.0:
            return self.revisit
        return int(min(max(self.revisit, math.ceil(extra / (self.overhead * per_call))), self.max_revisit))

    @contextmanager
    def timed(self, work: float) -> Iterator[None]:
        """Run the block with :meth:`threads` threads and :meth:`record` its wall clock, CPU time and,
        while the tuner measures, the CPU time other processes took on its cores."""
        k = self.threads()
        measuring = bool(self._plan)
        busy = busy_core_seconds() if measuring else None
        began, cpu = time.perf_counter(), time.process_time()
        with numba_threads(k):
            yield
        seconds, own = time.perf_counter() - began, time.process_time() - cpu
        after = busy_core_seconds() if busy is not None else None
        others = None if after is None else max(after - busy - own, 0.0)
        self.record(k, seconds, work, own, others)
