"""Numba's cache of the simulator's kernels, kept in step with every file the kernels are made of.

Numba checks a cached function against its own source file only, but the kernels compile code of
other files into themselves: :func:`~doppler_gym.sim.dispatch.run_packed` carries the event loop,
its events, heaps, finish times and packed layout, and the list kernel. After an edit of one of those
files, the cached machine code of the kernels that call into it would still run the old code. A
digest of every kernel file (:data:`KERNEL_MODULES`), kept beside the cache, tells: on a change,
every kernel of those files is recompiled (through Numba's ``Dispatcher.recompile``: with no
signature compiled yet in this process, that only empties its cache).

When: once per process, before the first kernel runs. :func:`ensure_fresh_cache` does it on its
first call, which :func:`doppler_gym.sim.packing.pack` makes (every kernel run reads a packed
problem; :func:`~doppler_gym.sim.dispatch.value_range`, which may run before, reads no other file).
It also installs :mod:`~doppler_gym.sim.compile_notice`, which says so on stderr while a kernel is
compiled rather than loaded from the cache.
Importing :mod:`doppler_gym.sim` writes nothing. :func:`refresh_stale_cache` is the same check as
an explicit step (e.g. after editing a kernel in a running session, before any kernel was loaded).

A cache folder that cannot be written is no error: Numba then caches in its user-wide folder (or
not at all) and the digest is kept there; where it cannot be kept, each process drops the cache and
compiles, as a cold cache would.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from pathlib import Path

from numba.core.dispatcher import Dispatcher

from doppler_gym.sim import (
    compile_notice,
    dispatch,
    event_loop,
    event_state,
    events,
    finish_times,
    heap,
    list_kernel,
    packed_layout,
    partial_incremental_kernel,
    partial_kernel,
    transfer_events,
    unsigned,
)

# Every module whose code or constants a kernel of another of them compiles in (a test checks this).
KERNEL_MODULES = (unsigned, heap, packed_layout, finish_times, events, transfer_events, event_state, event_loop,
                  list_kernel, dispatch, partial_kernel, partial_incremental_kernel)
DIGEST_FILE = "sim_kernels.sha256"  # beside the Numba cache of the kernels

_lock = threading.Lock()
_checked = False  # ensure_fresh_cache ran in this process


def kernel_sources_digest() -> str:
    """sha256 (hex) of the source files of :data:`KERNEL_MODULES`, in that order."""
    digest = hashlib.sha256()
    for module in KERNEL_MODULES:
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()


def digest_path() -> Path | None:
    """Where the digest of the kernel files is kept: beside the Numba cache of
    :func:`~doppler_gym.sim.dispatch.run_packed` (``None`` when Numba's JIT is disabled: nothing is cached)."""
    stats = getattr(dispatch.run_packed, "stats", None)  # a Numba dispatcher's public compile statistics
    return None if stats is None else Path(stats.cache_path) / DIGEST_FILE


def cached_kernels() -> tuple[Dispatcher, ...]:
    """The kernels of :data:`KERNEL_MODULES` that Numba caches on their own (every ``@njit`` function
    but those inlined at each call, ``inline="always"``), in module order."""
    found = []
    for module in KERNEL_MODULES:
        for value in vars(module).values():
            if (isinstance(value, Dispatcher) and value.py_func.__module__ == module.__name__
                    and value.targetoptions.get("inline") != "always"):
                found.append(value)
    return tuple(found)


def drop_cached_kernels() -> None:
    """Recompile every kernel of :func:`cached_kernels` (empty its cache, and compile again the
    signatures this process already compiled). A cache folder that cannot be written is skipped:
    Numba reads no cache from a folder it cannot write."""
    for kernel in cached_kernels():
        with contextlib.suppress(OSError):
            kernel.recompile()


def refresh_stale_cache() -> bool:
    """Drop the cached machine code of the kernels when a kernel file changed since the digest was
    kept (or no digest could be read), then keep the new digest; returns whether it dropped it."""
    marker = digest_path()
    if marker is None:
        return False
    digest = kernel_sources_digest()
    with contextlib.suppress(OSError):
        if marker.read_text() == digest:
            return False
    drop_cached_kernels()
    with contextlib.suppress(OSError):  # not kept: the next process drops the cache again
        marker.write_text(digest)
    return True


def ensure_fresh_cache() -> None:
    """On the first call in this process: install the compile notice
    (:func:`~doppler_gym.sim.compile_notice.install`), then :func:`refresh_stale_cache`; later calls
    return at once."""
    global _checked
    if _checked:
        return
    with _lock:
        if not _checked:
            compile_notice.install()
            refresh_stale_cache()
            _checked = True


def fresh_cache_checked() -> bool:
    """Whether :func:`ensure_fresh_cache` ran in this process."""
    return _checked
