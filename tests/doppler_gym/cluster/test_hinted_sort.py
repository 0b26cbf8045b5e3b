"""LAS's sort started from its last order (:class:`HintedSort`) against the definition, a stable sort of the
active jobs by their key (ties by job index), over random sequences of calls: jobs come and go, keys grow
(some by the same amount, so that ties stay), ties form anew between jobs, and the number of jobs changes."""

from __future__ import annotations

import numpy as np
import pytest

from doppler_gym.cluster.schedulers import HintedSort


def _definition(jobs: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Python's ``sorted`` on (key, job index): the order as LAS defines it."""
    return np.array(sorted(jobs.tolist(), key=lambda j: (key[j], j)), dtype=np.int64)


@pytest.mark.parametrize("seed", range(5))
def test_hinted_sort_is_the_stable_sort(seed):
    rng = np.random.default_rng(seed)
    sort = HintedSort()
    for n in (300, 300, 50):  # (a new n renews its state)
        key = np.zeros(n)
        active = rng.random(n) < 0.3
        for _ in range(150):
            active ^= rng.random(n) < 0.05  # jobs come and go
            running = active & (rng.random(n) < 0.6)
            key[running] += rng.choice([1.0, 2.0, 4.0], size=int(running.sum())) * float(rng.integers(1, 4))
            if rng.random() < 0.2:  # ties form between jobs with unrelated histories
                a, b = rng.integers(n, size=2)
                key[a] = key[b]
            jobs = np.flatnonzero(active)
            got = sort(jobs, key)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, _definition(jobs, key))
