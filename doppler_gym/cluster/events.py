"""The cluster simulation's future events: their kinds and a time-ordered queue.

An event is ``(time [s], kind, seq, subject)``: ``subject`` is a job index (arrival, restart, resume),
a GPU id (end of a slow period) or -1 (failure, slowdown onset, round tick). ``seq`` counts pushes, so
events at the same time and of the same kind come out in the order they were pushed.
"""

from __future__ import annotations

import heapq
import math

ARRIVAL = 0  # a job is submitted (subject: job)
RESTART = 1  # a job's restart delay after a failure ends (subject: job)
ROUND = 2  # a scheduling round tick (subject: -1)
FAILURE = 3  # a GPU fails (which one is drawn when it happens; subject: -1)
SLOW_START = 4  # a GPU turns slow (drawn when it happens; subject: -1)
SLOW_END = 5  # a GPU's slow period ends (subject: GPU)
RESUME = 6  # a job's checkpoint restore ends (subject: job)


class EventQueue:
    """Future events, earliest first; ties broken by kind, then by push order."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, int]] = []  # (time [s], kind, seq, subject)
        self._pushed = 0

    def push(self, time: float, kind: int, subject: int = -1) -> None:
        """Queue an event of ``kind`` at ``time`` [s] about ``subject`` (a job, a GPU or -1)."""
        heapq.heappush(self._heap, (time, kind, self._pushed, subject))
        self._pushed += 1

    def next_time(self) -> float:
        """[s] of the earliest queued event (``inf`` when none is queued)."""
        return self._heap[0][0] if self._heap else math.inf

    def pop_due(self, now: float) -> tuple[int, int] | None:
        """``(kind, subject)`` of the earliest event at or before ``now`` [s], removed; ``None`` if there is none."""
        if self._heap and self._heap[0][0] <= now:
            _, kind, _, subject = heapq.heappop(self._heap)
            return kind, subject
        return None
