"""Random DAGs shared by the simulator's multicast and collective-op tests."""

from __future__ import annotations

import numpy as np


def random_edges(n: int, seed: int) -> tuple[np.random.Generator, np.ndarray, np.ndarray]:
    """The edges ``(src, dst)`` of a random DAG on ``n`` ops (op ``v`` draws 1 to 3 distinct producers
    among ``0..v-1``), listed by consumer, and the generator that drew them (for the caller's costs)."""
    rng = np.random.default_rng(seed)
    src, dst = [], []
    for v in range(1, n):
        for u in rng.choice(v, size=min(v, int(rng.integers(1, 4))), replace=False):
            src.append(int(u))
            dst.append(v)
    return rng, np.array(src), np.array(dst)
