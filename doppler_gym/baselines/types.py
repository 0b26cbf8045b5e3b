"""The result every baseline returns: a :class:`Placement`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from doppler_gym.sim.memory import MemoryProfile, MemoryViolation


@dataclass(frozen=True, eq=False)
class Placement:
    """An assignment of ops to devices, the op order it came with, and how well it ran.

    Attributes:
        assignment: ``(n_ops,) int64`` device of each op.
        order: ``(n_ops,) int64`` a topological order of the ops: the SEL / list order the
            baseline placed them in, or ``topological_order(graph)`` when it has none. Under
            ``SimConfig(queue_order="priority")`` the op at position ``k`` gets priority ``k``.
        name: the baseline that produced it, e.g. ``"heft"``.
        makespan: ``simulate(graph, assignment, topology, priorities, config).makespan`` under
            the config it was computed for, in that config's reported unit (``config.time_unit``).
        seconds: wall-clock run time of the baseline [s], the final simulation included.
        info: baseline-specific figures (e.g. a solver's bound and status, evaluations used).
        memory: the final run's :class:`~doppler_gym.sim.memory.MemoryProfile` under
            ``SimConfig(memory="track"/"enforce")`` (``Trace.memory``), else ``None``. Baselines
            ignore memory when they place ops; under ``"enforce"`` :attr:`feasible` says whether
            the placement fits.
    """

    assignment: np.ndarray
    order: np.ndarray
    name: str
    makespan: float
    seconds: float
    info: dict = field(default_factory=dict)
    memory: MemoryProfile | None = None

    def __post_init__(self) -> None:
        where = f"Placement {self.name!r}"
        assignment = np.array(self.assignment, dtype=np.int64)
        order = np.array(self.order, dtype=np.int64)
        if assignment.ndim != 1:
            raise ValueError(f"{where}: assignment must be 1-D (one device per op), got shape {assignment.shape}")
        n = assignment.shape[0]
        if order.shape != (n,):
            raise ValueError(f"{where}: order has shape {order.shape}; expected ({n},), one entry per op")
        if n and assignment.min() < 0:
            raise ValueError(f"{where}: assignment holds a negative device id ({assignment.min()})")
        if n and (order.min() < 0 or order.max() >= n or np.any(np.bincount(order, minlength=n) != 1)):
            raise ValueError(f"{where}: order must be a permutation of the op ids 0..{n - 1}")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Placement: name must be a non-empty string, got {self.name!r}")
        if not (
            isinstance(self.makespan, (int, float, np.floating))
            and math.isfinite(self.makespan)
            and self.makespan >= 0
        ):
            raise ValueError(f"{where}: makespan must be a finite number >= 0, got {self.makespan!r}")
        if not (isinstance(self.seconds, (int, float, np.floating)) and self.seconds >= 0):
            raise ValueError(f"{where}: seconds must be a number >= 0, got {self.seconds!r}")
        if not isinstance(self.info, dict):
            raise TypeError(f"{where}: info must be a dict, got {type(self.info).__name__}")
        for arr in (assignment, order):
            arr.setflags(write=False)
        object.__setattr__(self, "assignment", assignment)
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "makespan", float(self.makespan))
        object.__setattr__(self, "seconds", float(self.seconds))

    @property
    def feasible(self) -> bool:
        """False when it ran under ``SimConfig(memory="enforce")`` and ran out of memory on some device."""
        return self.memory is None or self.memory.feasible

    @property
    def memory_violation(self) -> MemoryViolation | None:
        """Which device first runs out of memory, when, and by how much (``None``: fits, or memory off)."""
        return None if self.memory is None else self.memory.violation

    @property
    def n_ops(self) -> int:
        """Number of ops."""
        return int(self.assignment.shape[0])

    def priorities(self) -> np.ndarray:
        """``(n_ops,) float64`` the rank of each op in :attr:`order` (lower runs first), as
        ``simulate(..., priorities=...)`` takes them under ``queue_order="priority"``."""
        return rank_of(self.order)


def rank_of(order: np.ndarray) -> np.ndarray:
    """``(n,) float64``: ``out[order[k]] = k``, the position of each op in ``order``."""
    order = np.asarray(order, dtype=np.int64)
    out = np.empty(order.shape[0], dtype=np.float64)
    out[order] = np.arange(order.shape[0], dtype=np.float64)
    return out


def jsonable(value: object) -> object:
    """``value`` (a :attr:`Placement.info` dict, say) with numpy scalars and arrays turned into plain
    Python, recursively through dicts, lists and tuples, for ``json.dumps``."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value
