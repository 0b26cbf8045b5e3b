"""The env-steps loops' compiled random policy (``benchmarks.common.pick_valid``) against the NumPy rule it
replaces: valid action number ``floor(u * k)`` of each row, from ``np.flatnonzero``."""

from __future__ import annotations

import numpy as np

from benchmarks.common import pick_valid


def test_pick_valid_equals_flatnonzero_rule() -> None:
    rng = np.random.default_rng(3)
    mask = (rng.random((200, 37)) < 0.2).astype(np.int8)
    mask[5] = 0  # a row without a valid action
    u = rng.random(200)
    out = np.zeros(200, np.int64)
    pick_valid(mask, u, out)
    for i in range(200):
        valid = np.flatnonzero(mask[i])
        assert out[i] == (valid[int(u[i] * valid.size)] if valid.size else -1)
    bools = np.zeros(200, np.int64)
    pick_valid(mask.astype(bool), u, bools)
    np.testing.assert_array_equal(bools, out)


def test_pick_valid_is_uniform_over_the_valid() -> None:
    mask = np.zeros((20_000, 9), np.int8)
    mask[:, [1, 4, 8]] = 1
    out = np.zeros(20_000, np.int64)
    pick_valid(mask, np.random.default_rng(0).random(20_000), out)
    counts = np.bincount(out, minlength=9)
    assert counts[[0, 2, 3, 5, 6, 7]].sum() == 0
    np.testing.assert_allclose(counts[[1, 4, 8]] / 20_000, 1 / 3, atol=0.015)  # 4.6 sigma of a binomial share
