"""How many threads the simulator's batched kernel uses, for a block of code."""

from __future__ import annotations

from collections.abc import Iterator
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
