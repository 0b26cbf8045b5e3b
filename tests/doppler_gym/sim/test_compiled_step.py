"""``compiled_step`` (Numba without reference counting): a step that reads and writes its arguments computes what
the plain function computes, and a step that allocates an array is refused at compile time (its docstring's rule)."""

from __future__ import annotations

import numpy as np
import pytest
from numba.core.errors import NumbaError

from doppler_gym.sim.compiled_step import compiled_step


def _scale_rows(x, rows, factor, out):
    for i in range(rows.shape[0]):
        row = x[rows[i]]  # a view: no allocation
        for j in range(row.shape[0]):
            out[i, j] = row[j] * factor
    return out.shape[0]


def _allocating(n):
    return np.zeros(n).sum()


def test_a_step_computes_what_the_plain_function_does() -> None:
    rng = np.random.default_rng(0)
    x = rng.random((7, 5))
    rows = np.array([3, 0, 6], np.int64)
    out = np.empty((3, 5))
    assert compiled_step(_scale_rows)(x, rows, 2.5, out) == 3
    np.testing.assert_array_equal(out, x[rows] * 2.5)


def test_a_step_that_allocates_does_not_compile() -> None:
    with pytest.raises(NumbaError):  # (the message depends on where the allocation is: "NRT required", ...)
        compiled_step(_allocating)(4)
