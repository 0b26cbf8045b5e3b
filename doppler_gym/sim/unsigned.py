"""Unsigned array indices for the Numba kernels: an index cast with ``U(i)`` is known to be >= 0, so
Numba emits no negative-index wraparound on the access (measured: ``benchmarks/bench_sim.py``)."""

from __future__ import annotations

import numpy as np

U = np.uint64  # U(i): an index known to be >= 0 (no wraparound code)
U0 = np.uint64(0)
U1 = np.uint64(1)
