"""What a learned baseline (Placeto, GDP) returns: :class:`LearnedResult`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, eq=False)
class LearnedResult:
    """The outcome of one training run of a learned placement baseline.

    Attributes:
        name: the method, ``"placeto"`` or ``"gdp"``.
        makespan: simulated makespan of :attr:`assignment` [the sim config's reported unit, e.g.
            paper units under ``SimConfig.reference()``]: the best placement the trained agent
            decoded (greedy decodes at every evaluation and ``K`` sampled decodes of the final
            policy; training episodes excluded, see ``info``).
        assignment: ``(n_ops,) int64`` device of each op of that placement.
        episodes: training episodes run (one episode = one complete assignment sampled).
        seconds: wall-clock time of the whole call [s], final evaluation included.
        curve: ``[(episode, makespan), ...]``: the greedy decode's makespan after ``episode``
            training episodes, at every evaluation (the first at episode 0: the untrained policy).
        order: ``(n_ops,) int64`` the op order that goes with the assignment (priorities of the
            simulator under ``queue_order="priority"``; ignored by FIFO configs).
        info: method-specific figures: ``final_greedy`` (greedy decode of the final policy),
            ``best_sampled`` and ``sampled_mean`` (best and mean of the final sampled decodes:
            the mean measures the policy itself), ``training_best`` (best
            training episode), ``reference_makespan`` (critical-path heuristic), ``lower_bound``,
            ``updates``, ``seconds_per_episode``.
    """

    name: str
    makespan: float
    assignment: np.ndarray
    episodes: int
    seconds: float
    curve: list[tuple[int, float]]
    order: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"LearnedResult {self.name!r}"
        assignment = np.array(self.assignment, dtype=np.int64)
        if assignment.ndim != 1 or (assignment.size and assignment.min() < 0):
            raise ValueError(f"{where}: assignment must be a 1-D array of device ids >= 0, got {assignment!r}")
        if not (isinstance(self.makespan, (int, float, np.floating)) and math.isfinite(self.makespan)):
            raise ValueError(f"{where}: makespan must be a finite number, got {self.makespan!r}")
        assignment.setflags(write=False)
        object.__setattr__(self, "assignment", assignment)
        object.__setattr__(self, "makespan", float(self.makespan))
        object.__setattr__(self, "episodes", int(self.episodes))
        object.__setattr__(self, "seconds", float(self.seconds))
        object.__setattr__(self, "curve", [(int(e), float(m)) for e, m in self.curve])
        if self.order is not None:
            order = np.array(self.order, dtype=np.int64)
            if order.shape != assignment.shape:
                raise ValueError(f"{where}: order has shape {order.shape}, expected {assignment.shape}")
            order.setflags(write=False)
            object.__setattr__(self, "order", order)

    def to_dict(self) -> dict:
        """JSON-ready form (lists instead of arrays)."""
        return {
            "name": self.name, "makespan": self.makespan, "assignment": self.assignment.tolist(),
            "episodes": self.episodes, "seconds": self.seconds, "curve": [list(p) for p in self.curve],
            "order": None if self.order is None else self.order.tolist(), "info": dict(self.info),
        }
