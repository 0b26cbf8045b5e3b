"""Run independent tasks locally or as Ray tasks: :func:`map_tasks` and :func:`connect`.

Ray is optional (``pip install 'doppler-gym[ray]'``) and imported only when a Ray address is given,
so ``import doppler_gym`` never loads it. The results of :func:`map_tasks` are in the order of the
items and do not depend on where the tasks ran: a task that depends only on its item (and seeds it
carries) gives the same result locally and on any cluster.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

LOCAL = "local"  # the --ray value that starts (or joins, with RAY_ADDRESS set) a Ray instance on this machine
INSTALL_HINT = "pip install 'doppler-gym[ray]' (or pip install 'ray[default]')"


def import_ray(where: str = "--ray") -> Any:
    """The ``ray`` module, or an ImportError that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ImportError(f"{where} needs Ray, which is not installed: {INSTALL_HINT}; "
                          "or run without --ray (everything then runs in this process)") from None
    return ray


def connect(address: str | None = LOCAL, **init_kwargs: Any) -> Any:
    """Join (or start) a Ray cluster and return the ``ray`` module.

    Args:
        address: ``"local"``: ``ray.init()`` (a new instance on this machine, or the cluster named by
            the ``RAY_ADDRESS`` environment variable); ``"auto"``: the cluster that ``ray start --head``
            started on this machine; ``"HOST:6379"`` or ``"ray://HOST:10001"``: that cluster.
            When Ray is already initialised in this process (a test fixture, a script that called
            ``ray.init``), that session is used whatever the address.
        init_kwargs: more ``ray.init`` arguments (``num_cpus=2`` for a local instance, ...); the
            default ``runtime_env`` gives every worker one Numba thread (``NUMBA_NUM_THREADS=1``).

    Raises:
        ImportError: Ray is not installed (with the install command).
        ValueError: ``address`` is empty.
        ConnectionError: no cluster answers at ``address`` (with what to check).
    """
    ray = import_ray()
    if ray.is_initialized():
        return ray
    if address is None or not str(address).strip():
        raise ValueError(f"Ray address is empty; give {LOCAL!r}, 'auto', HOST:6379 or ray://HOST:10001")
    # one Numba thread per worker: Ray runs one task per CPU, and simulate_batch's threads would
    # otherwise compete for the node's cores (results do not depend on the thread count)
    runtime_env = {"env_vars": {"NUMBA_NUM_THREADS": "1"}}
    kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": "warning", "runtime_env": runtime_env,
                              **init_kwargs}
    try:
        if address == LOCAL:
            ray.init(**kwargs)
        else:
            ray.init(address=str(address), **kwargs)
    except ConnectionError as exc:
        raise ConnectionError(f"--ray {address}: no Ray cluster answered ({exc}); start one with `ray start --head` "
                              "on the head node, then pass its address (`--ray auto` on that node, "
                              "`--ray HEAD_IP:6379` elsewhere)") from None
    return ray


@functools.lru_cache(maxsize=8)
def _remote_chunk(ray: Any, num_cpus: float) -> Any:
    """The Ray remote version of :func:`_run_chunk` (made once per CPU request)."""
    return ray.remote(num_cpus=num_cpus)(_run_chunk)


def _run_chunk(fn: Callable[[Any], Any], chunk: list[Any]) -> list[Any]:
    return [fn(item) for item in chunk]


def map_tasks(fn: Callable[[T], R], items: Iterable[T], ray_address: str | None = None, *,
              num_cpus: float = 1.0, chunk_size: int = 1) -> list[R]:
    """``[fn(item) for item in items]``, locally or as Ray tasks.

    Args:
        fn: a function of one item; with Ray it must pickle (a module-level function, or a
            ``functools.partial`` of one; it is shipped once with ``ray.put``).
        items: the task arguments (each pickled to its task).
        ray_address: ``None``: run here, one after another; else a :func:`connect` address.
        num_cpus: CPUs each Ray task reserves (the scheduler runs ``cluster CPUs / num_cpus`` at once).
        chunk_size: items per Ray task (several short items per task amortise the per-task overhead).

    Returns:
        The results in the order of ``items``. A task's exception is raised here (with Ray, as a
        ``RayTaskError`` that is also an instance of the original exception's class).
    """
    if chunk_size < 1:
        raise ValueError(f"map_tasks: chunk_size must be >= 1, got {chunk_size}")
    if not num_cpus > 0:
        raise ValueError(f"map_tasks: num_cpus must be > 0, got {num_cpus}")
    items = list(items)
    if ray_address is None:
        return [fn(item) for item in items]
    ray = connect(ray_address)
    remote = _remote_chunk(ray, float(num_cpus))
    fn_ref = ray.put(fn)
    refs = [remote.remote(fn_ref, items[i:i + chunk_size]) for i in range(0, len(items), chunk_size)]
    return [result for chunk in ray.get(refs) for result in chunk]
