"""Helpers of the native vector env tests (``test_vector_env.py``, ``test_cluster_vector_env.py``): random actions
and comparisons of observations and Gymnasium vector infos against a reference."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def random_actions(rng: np.random.Generator, masks: Sequence[np.ndarray] | np.ndarray, p_invalid: float) -> np.ndarray:
    """A uniformly random valid action per env (``masks``: one ``(A,)`` mask per env), or with probability
    ``p_invalid`` any action in ``[-1, A]``; ``(N,) int64``."""
    n_actions = len(masks[0])
    return np.array([int(rng.integers(-1, n_actions + 1)) if rng.random() < p_invalid
                     else int(rng.choice(np.flatnonzero(m))) for m in masks], np.int64)


def assert_same_value(got: object, want: object, where: str) -> None:
    """Equal values: an array by dtype and entries, a ``ClusterResult`` by its summary, anything else by ``==``."""
    if isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype, where
        np.testing.assert_array_equal(got, want, err_msg=where)
    elif hasattr(want, "summary"):
        assert got.summary() == want.summary(), where
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def assert_same_infos(got: dict, want: dict, where: str) -> None:
    """Equal Gymnasium vector info dicts: the same keys (masks included), dtypes and shapes, equal values (the
    entries of object arrays by :func:`assert_same_value`)."""
    assert got.keys() == want.keys(), f"{where}: keys {sorted(got)} != {sorted(want)}"
    for key, w in want.items():
        g = got[key]
        assert isinstance(g, np.ndarray) and g.dtype == w.dtype and g.shape == w.shape, f"{where}: {key}"
        if w.dtype != object:
            np.testing.assert_array_equal(g, w, err_msg=f"{where}: {key}")
            continue
        for j, (a, b) in enumerate(zip(g, w)):
            assert_same_value(a, b, f"{where}: {key}[{j}]")
