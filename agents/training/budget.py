"""When a stage ends: its episode target and its share of the wall-clock budget."""

from __future__ import annotations

from agents.training.args import DEFAULT_EPISODES, STAGE_WEIGHTS, TrainArgs
from agents.training.metrics import StageProgress


class StageBudget:
    """The episode targets and time shares of a run's stages, read from (and fixed in) their counters.

    A stage ends when it has run its episodes or its share of ``args.budget_minutes``, whichever
    comes first. The shares follow :data:`~agents.training.args.STAGE_WEIGHTS` over the stages still
    to run, computed at each stage start from the time left (:meth:`allot`).

    Args:
        args: the run's arguments (read only).
        progress: the counters of every stage of ``args.stages``; :meth:`allot` writes the share
            into them (so a checkpoint keeps it).
    """

    def __init__(self, args: TrainArgs, progress: dict[str, StageProgress]) -> None:
        self.args = args
        self.progress = progress

    def target(self, stage: str) -> int | None:
        """The stage's episode count: the one set, else :data:`DEFAULT_EPISODES` without a budget,
        else ``None`` (the budget alone ends it)."""
        n = self.args.episodes.count(stage)
        if n is None and self.args.budget_minutes is None:
            n = DEFAULT_EPISODES[stage]
        return n

    def episodes_left(self, stage: str) -> int | None:
        """Episodes still to run in the stage under its episode count, or ``None`` without one."""
        n = self.target(stage)
        return None if n is None else max(0, n - self.progress[stage].episodes)

    def allot(self, stage: str) -> None:
        """Mark the stage started and fix its share of the budget [s] (kept on resume unless the
        budget changed): ``left x weight / sum of the weights of the stages still to run``."""
        prog = self.progress[stage]
        prog.started = True
        budget = self.args.budget_minutes
        if budget is None:
            prog.allotted_seconds = prog.allotted_for_budget = None
            return
        if prog.allotted_seconds is not None and prog.allotted_for_budget == budget:
            return
        stages = self.args.stages
        rest = stages[stages.index(stage):]
        used_before = sum(self.progress[s].seconds for s in stages if s not in rest)
        left = max(budget * 60.0 - used_before, 0.0)
        prog.allotted_seconds = left * STAGE_WEIGHTS[stage] / sum(STAGE_WEIGHTS[s] for s in rest)
        prog.allotted_for_budget = budget

    def fraction(self, stage: str) -> float:
        """How far the stage is, in [0, 1]: the larger of its episode and time fractions."""
        prog = self.progress[stage]
        f = 0.0
        target = self.target(stage)
        if target is not None:
            f = max(f, prog.episodes / target if target > 0 else 1.0)
        if prog.allotted_seconds is not None:
            f = max(f, prog.seconds / prog.allotted_seconds if prog.allotted_seconds > 0 else 1.0)
        return min(f, 1.0)

    def over(self, stage: str) -> bool:
        """Whether the stage has run its episodes or its time."""
        return self.fraction(stage) >= 1.0

    def out_of_time(self, stage: str, running: float = 0.0) -> bool:
        """Whether the stage's time share is spent, counting ``running`` seconds [s] not yet booked."""
        prog = self.progress[stage]
        return prog.allotted_seconds is not None and prog.seconds + running >= prog.allotted_seconds

    def to_run(self, stage: str) -> bool:
        """Whether the stage still has to run: it is not done, or (on resume) it is the last stage
        of the run, the last one started, and its targets grew (more episodes, or a larger budget,
        whose new share :meth:`allot` then computes)."""
        prog = self.progress[stage]
        if not prog.done:
            return True
        stages = self.args.stages
        started = [s for s in stages if self.progress[s].started]
        if not started or started[-1] != stage or stage != stages[-1]:
            return False
        target = self.target(stage)
        more_episodes = target is not None and prog.episodes < target
        more_time = (self.args.budget_minutes is not None and prog.allotted_for_budget is not None
                     and self.args.budget_minutes > prog.allotted_for_budget)
        if more_time:
            prog.allotted_seconds = None
        return more_episodes or more_time
