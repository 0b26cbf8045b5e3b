"""Assignments at the boundary: device ids checked once, for the simulator and the real backend.

An assignment is a ``(n_ops,)`` (or ``(B, n_ops)`` for a batch) array of integer device ids. Both
backends take it through :func:`check_assignment`, so the same input is accepted or refused, with
the same message, by ``simulate``, ``simulate_batch`` and ``RealBackend.execute``.
"""

from __future__ import annotations

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.dispatch import value_range
from doppler_gym.topology.types import Topology

MAX_IMPLICIT_DEVICES = 256  # topology=None: devices 0..max(assignment) form a uniform topology


def check_assignment(
    graph: DataflowGraph,
    assignment: object,
    topology: Topology | None = None,
    where: str = "assignment",
    batch: bool = False,
) -> np.ndarray:
    """``assignment`` as a contiguous int32 array of device ids, ``(n_ops,)`` (or ``(B, n_ops)`` with
    ``batch=True``), each whole and inside ``topology`` (below :data:`MAX_IMPLICIT_DEVICES` when None).

    Raises:
        ValueError: wrong shape, non-integer ids, or ids outside the topology's devices.
    """
    if not batch and np.ndim(assignment) != 1:
        raise ValueError(
            f"{where} must have shape ({graph.n_ops},), one device per op; got shape {np.shape(assignment)}"
        )
    assign = as_device_ids(graph, assignment, where)
    device_count(topology, assign)
    return assign


def as_device_ids(graph: DataflowGraph, values: object, label: str = "assignment") -> np.ndarray:
    """``values`` (``(n_ops,)`` or ``(B, n_ops)``) as a contiguous, writable int32 array of device ids,
    checked to be whole numbers in ``[0, 2**31)``; ``label`` names the argument in error messages.

    Writable because Numba types a read-only array apart: passing one would compile (about a minute)
    and cache a second copy of every kernel it reaches."""
    arr = values if isinstance(values, np.ndarray) else np.asarray(values)
    if arr.shape[-1:] != (graph.n_ops,) or arr.ndim not in (1, 2):
        raise ValueError(
            f"{label} has shape {arr.shape} but graph {graph.name!r} has {graph.n_ops} ops; "
            f"give one device per op"
        )
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"{label} must hold integer device ids, got dtype {arr.dtype}")
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if bad.any():
            pos = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"{label}{list(pos)} = {float(arr[pos])!r} is not an integer device id")
        if arr.size and (arr.min() < 0 or arr.max() > np.iinfo(np.int32).max):
            pos = tuple(int(i) for i in np.argwhere((arr < 0) | (arr > np.iinfo(np.int32).max))[0])
            raise ValueError(f"{label}{list(pos)} = {arr[pos]} is not a device id (0 <= id < 2**31)")
    elif arr.dtype.itemsize > 4 or arr.dtype.kind == "u":
        flat = arr.reshape(-1)
        low, high = value_range(flat if flat.flags.writeable else flat.copy())
        if low < 0 or high > np.iinfo(np.int32).max:
            pos = tuple(int(i) for i in np.argwhere((arr < 0) | (arr > np.iinfo(np.int32).max))[0])
            raise ValueError(f"{label}{list(pos)} = {arr[pos]} is not a device id (0 <= id < 2**31)")
    out = np.ascontiguousarray(arr, dtype=np.int32)
    return out if out.flags.writeable else out.copy()


def device_count(topology: Topology | None, assign: np.ndarray) -> int:
    """Device count of a run of the int32 ``assign``: the topology's (every id must be below it), or,
    with ``topology=None``, the highest device used + 1 (at most :data:`MAX_IMPLICIT_DEVICES`)."""
    low, high = value_range(assign.reshape(-1))
    if low < 0:
        pos = tuple(int(i) for i in np.argwhere(assign < 0)[0])
        raise ValueError(f"assignment{list(pos)} = {assign[pos]} is negative; device ids start at 0")
    used = int(high) + 1 if assign.size else 1
    if topology is None:
        if used > MAX_IMPLICIT_DEVICES:
            raise ValueError(
                f"assignment uses device {used - 1} but no topology was given; device ids above "
                f"{MAX_IMPLICIT_DEVICES - 1} need an explicit Topology (e.g. Topology.uniform({used}))"
            )
        return used
    if not isinstance(topology, Topology):
        raise TypeError(
            f"topology must be a Topology or None, got {type(topology).__name__}; "
            f"use Topology.preset(name) or Topology.uniform(n)"
        )
    if used > topology.n_devices:
        pos = tuple(int(i) for i in np.argwhere(assign >= topology.n_devices)[0])
        raise ValueError(
            f"assignment{list(pos)} = {assign[pos]} but topology {topology.name!r} has "
            f"{topology.n_devices} devices (ids 0..{topology.n_devices - 1})"
        )
    return topology.n_devices


