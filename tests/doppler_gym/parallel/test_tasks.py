"""map_tasks and connect: locally and as Ray tasks on a local instance (tests/.../ray_fixture.py)."""

from __future__ import annotations

import functools
import sys

import numpy as np
import pytest

from doppler_gym.parallel import connect, map_tasks
from tests.doppler_gym.parallel.ray_fixture import RAY_ADDRESS, ray_local  # noqa: F401  (fixture)


def _draw(seed: int, n: int = 5) -> list[float]:
    """A seeded task: its result depends only on its argument."""
    return np.random.default_rng(seed).random(n).tolist()


def _fail_on(x: int, bad: int) -> int:
    if x == bad:
        raise ValueError(f"item {x} is bad")
    return x


def test_local_is_a_plain_loop():
    assert map_tasks(_draw, [3, 1, 2]) == [_draw(3), _draw(1), _draw(2)]
    assert map_tasks(_draw, []) == []


@pytest.mark.slow
@pytest.mark.parametrize("chunk_size", [1, 3, 10])
def test_ray_results_equal_local_in_order(ray_local, chunk_size):  # noqa: F811
    items = list(range(7))
    local = map_tasks(_draw, items)
    remote = map_tasks(_draw, items, RAY_ADDRESS, chunk_size=chunk_size)
    assert remote == local
    assert remote[4] == np.random.default_rng(4).random(5).tolist()  # independent of the order tasks ran in


@pytest.mark.slow
def test_ray_partial_and_exception(ray_local):  # noqa: F811
    assert map_tasks(functools.partial(_draw, n=2), [9], RAY_ADDRESS) == [_draw(9, 2)]
    with pytest.raises(ValueError, match="item 2 is bad"):
        map_tasks(functools.partial(_fail_on, bad=2), [0, 1, 2, 3], RAY_ADDRESS)


@pytest.mark.slow
def test_ray_tasks_run_in_other_processes(ray_local):  # noqa: F811
    import os

    pids = map_tasks(lambda _: os.getpid(), range(4), RAY_ADDRESS)
    assert os.getpid() not in pids


def test_bad_arguments():
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        map_tasks(_draw, [1], None, chunk_size=0)
    with pytest.raises(ValueError, match="num_cpus must be > 0"):
        map_tasks(_draw, [1], None, num_cpus=0)


def test_without_ray_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'doppler-gym\[ray\]'"):
        connect("local")
    assert map_tasks(_draw, [1]) == [_draw(1)]  # without an address Ray is never imported


@pytest.mark.slow
def test_empty_address(ray_local, monkeypatch):  # noqa: F811
    monkeypatch.setattr(ray_local, "is_initialized", lambda: False)
    with pytest.raises(ValueError, match="Ray address is empty"):
        connect("  ")
