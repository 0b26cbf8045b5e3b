"""Reward functions of the placement envs, chosen by object or by name.

A reward sees three numbers, all in the simulator's *reported* time unit (``Trace.makespan``'s):
a makespan of the partial placement before and after a step (0 before anything is placed), the
backend's makespan at the end, and the episode's *reference* makespan: the critical-path heuristic's
simulated makespan on the same graph, topology and config (``info["reference_makespan"]``). Which
partial makespan is the reward's ``measure``: ``"estimate"`` (the largest estimated end of the placed
ops, :class:`~doppler_gym.sim.estimate.EstimatedSchedule` with ``time_model="fixed"``: free to compute)
or ``"simulated"`` (the simulated run of the placed ops alone, :class:`~doppler_gym.sim.partial.PartialMakespan`:
one simulator call per placement).

===================  ==============================================  ==========================================
name                 final-step reward                               other steps
===================  ==============================================  ==========================================
``"incremental"``    ``-(makespan - before) / reference``            ``-(after - before) / reference``,
(default)                                                            simulated measure
``"sparse"``         ``-makespan / reference``                       0
``"makespan"``       ``-makespan``                                   0
``"improvement"``    ``(reference - makespan) / reference``          0
``"shaped"``         sparse + ``gamma * 0 - phi(before)``            ``gamma * phi(after) - phi(before)``
===================  ==============================================  ==========================================

``"incremental"`` is Placeto's per-step reward (Addanki et al., NeurIPS 2019: the change of the
simulated runtime after each placement). Its undiscounted sum is ``-makespan / reference``, the sparse
reward, exactly (a telescoping sum from 0), so it ranks placements by makespan as the sparse reward does;
and each placement is charged the time it adds at once, so discounting (SB3's gamma 0.99 over
``2 * n_ops`` steps) does not hide it. The estimate is a poor stand-in for the simulated run while the
SEL order is far from the runtime's (its correlation with the final makespan is 0.15 over random
placements of ``paper/ffnn``), which is why the default measures the simulated run.

``"shaped"`` is potential-based shaping (Ng, Harada & Russell 1999) with
``phi(s) = -estimated_makespan(s) / reference`` and ``phi(terminal) = 0``. With ``gamma = 1`` the
shaping telescopes: the sum of the rewards of an episode equals the sparse reward exactly
(``phi(initial) = 0`` since nothing is placed), so the optimal policy is unchanged and only the
credit is spread over the steps. Set ``gamma`` to the agent's discount factor to keep that
guarantee under discounting.

Invalid actions are not rewards' business: the env gives its ``invalid_penalty`` instead.
"""

from __future__ import annotations

from collections.abc import Callable


class Reward:
    """Base class. Subclasses set ``name`` (and ``measure``) and override :meth:`step` and/or :meth:`final`.

    Rewards are stateless: everything they need is passed in, so one object may serve many envs.
    ``measure`` says which partial makespan :meth:`step` and :meth:`final` get as ``before``/``after``:
    ``"estimate"`` or ``"simulated"`` (module docstring).
    """

    name: str = "reward"
    measure: str = "estimate"

    def step(self, before: float, after: float, reference: float) -> float:
        """Reward of a valid, non-final step; ``before``/``after``: partial makespans (``measure``)."""
        return 0.0

    def final(self, before: float, makespan: float, reference: float) -> float:
        """Reward of the final step; ``before``: the partial makespan before it (``measure``)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class SparseReward(Reward):
    """``-makespan / reference`` at the end (about -1 for the critical-path heuristic), 0 before."""

    name = "sparse"

    def final(self, before: float, makespan: float, reference: float) -> float:
        return -makespan / reference


class MakespanReward(Reward):
    """``-makespan`` at the end, in the reported time unit (not comparable across graphs)."""

    name = "makespan"

    def final(self, before: float, makespan: float, reference: float) -> float:
        return -makespan


class ImprovementReward(Reward):
    """``(reference - makespan) / reference`` at the end: > 0 when better than the heuristic."""

    name = "improvement"

    def final(self, before: float, makespan: float, reference: float) -> float:
        return (reference - makespan) / reference


class ShapedReward(Reward):
    """Sparse reward plus potential-based shaping with ``phi = -estimated makespan / reference``.

    Args:
        gamma: discount of the shaping term (``gamma * phi(s') - phi(s)``); 1 makes the episode's
            return equal the sparse reward.
    """

    name = "shaped"

    def __init__(self, gamma: float = 1.0) -> None:
        if not 0.0 < gamma <= 1.0:
            raise ValueError(f"ShapedReward: gamma must be in (0, 1], got {gamma!r}")
        self.gamma = float(gamma)

    def step(self, before: float, after: float, reference: float) -> float:
        return (before - self.gamma * after) / reference

    def final(self, before: float, makespan: float, reference: float) -> float:
        return (before - makespan) / reference  # sparse -makespan/ref, plus 0 - phi(before)

    def __repr__(self) -> str:
        return f"ShapedReward(gamma={self.gamma})"


class IncrementalReward(ShapedReward):
    """Placeto's per-step reward: minus the simulated time each placement adds, / reference.

    The undiscounted sum of an episode's rewards is ``-makespan / reference`` exactly (the sparse reward).
    """

    name = "incremental"
    measure = "simulated"

    def __init__(self) -> None:
        super().__init__(gamma=1.0)

    def __repr__(self) -> str:
        return "IncrementalReward()"


_BUILT_IN: dict[str, Callable[[], Reward]] = {
    "incremental": IncrementalReward,
    "sparse": SparseReward,
    "makespan": MakespanReward,
    "improvement": ImprovementReward,
    "shaped": ShapedReward,
}
_REWARDS: dict[str, Callable[[], Reward]] = dict(_BUILT_IN)


def reward_names() -> tuple[str, ...]:
    """Names accepted by :func:`make_reward`, sorted."""
    return tuple(sorted(_REWARDS))


def register_reward(name: str, factory: Callable[[], Reward]) -> None:
    """Make ``factory()`` available as ``reward=name`` (until :func:`unregister_reward`)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"register_reward: name must be a non-empty string, got {name!r}")
    _REWARDS[name] = factory


def unregister_reward(name: str) -> None:
    """Remove a reward added by :func:`register_reward`; the built-in names cannot be removed.

    Raises:
        ValueError: ``name`` is not registered, or is built in.
    """
    if name in _BUILT_IN:
        raise ValueError(f"unregister_reward: {name!r} is built in and cannot be removed")
    if name not in _REWARDS:
        raise ValueError(f"unregister_reward: {name!r} is not registered; registered: {', '.join(reward_names())}")
    del _REWARDS[name]


def make_reward(spec: str | Reward) -> Reward:
    """A :class:`Reward` from a name (see :func:`reward_names`) or a reward object (returned as is)."""
    if isinstance(spec, Reward):
        return spec
    if isinstance(spec, str):
        try:
            return _REWARDS[spec]()
        except KeyError:
            raise ValueError(f"unknown reward {spec!r}; valid names: {', '.join(reward_names())}") from None
    if callable(getattr(spec, "final", None)) and callable(getattr(spec, "step", None)):
        return spec  # duck-typed reward
    raise TypeError(
        f"reward must be a name ({', '.join(reward_names())}) or a Reward object, got {type(spec).__name__}"
    )
