"""The contract every doppler-gym env keeps with its agent: action indices, masks, invalid actions, episode ends.

- :func:`action_index`: a discrete action as a Python ``int`` (Python ints, numpy integers,
  one-element integer arrays); anything else (a float, a bool, a longer array) raises ``TypeError``.
  :func:`action_array` is its counterpart for a ``MultiDiscrete`` action (one integer per entry).
- :data:`MASK_DTYPE` and :func:`mask_space`: valid-action masks are ``int8`` (1 = valid) in
  ``obs["action_mask"]`` and from ``action_masks()`` alike: Gymnasium's convention, so
  ``env.action_space.sample(mask=obs["action_mask"])`` works, and what sb3-contrib's ``MaskablePPO``
  takes; torchrl's ``MaskedCategorical`` and tianshou want bools: ``mask.astype(bool)``.
- :class:`InvalidActions`: what an env does with an action its mask rules out, chosen by the env's
  ``invalid_action``, ``invalid_penalty`` and ``max_invalid_streak`` keywords; in ``"penalize"`` mode the
  first invalid action of an env instance warns (:class:`InvalidActionWarning`), later ones are silent.
- :class:`ActionMasks`: the wrapper ``gym.make`` puts outermost on every doppler-gym id (the ids'
  ``additional_wrappers``, :mod:`doppler_gym.envs.registration`), so that
  ``gym.make(env_id).action_masks()`` works through Gymnasium's own wrappers, which forward no attribute.
- :func:`episode_over_error`: the error of ``step()`` once the episode has ended (or before the
  first ``reset()``); :data:`TERMINAL_ACTION`: the action a terminal observation's mask marks where
  no action is left, so that no mask is ever all zero.
- :func:`reset_options`: the ``reset(options=...)`` an env accepts; an unknown key is a ``ValueError``
  that names it and the valid keys.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium import spaces

INVALID_ACTION_MODES = ("penalize", "raise")
# The action a terminal observation's mask marks (the Discrete envs whose last state has no valid action): no
# mask is ever all zero, since Gymnasium's vector envs hand the terminal observation to the policy, whose
# masked distribution needs one valid action; stepping after the end raises all the same (call reset()).
TERMINAL_ACTION = 0
MASK_DTYPE = np.int8  # the dtype of every valid-action mask (1 = valid), as Gymnasium's Discrete.sample(mask=)


def mask_space(n_actions: int) -> spaces.Box:
    """The space of ``obs["action_mask"]``: ``(n_actions,) int8``, 1 = valid."""
    return spaces.Box(0, 1, (n_actions,), MASK_DTYPE)


def action_index(action: object, where: str, meaning: str) -> int:
    """``action`` as a Python ``int``: a Python int, a numpy integer or a one-element integer array.

    Args:
        action: what the agent passed to ``step()``.
        where: the caller, for the error (``"PlacementEnv.step"``).
        meaning: what an action index names, for the error (``"an op id in SEL, max_ops + device in PLC"``).

    Raises:
        TypeError: ``action`` is not one integer (a float, a bool, a string, an array of several entries).
    """
    if not isinstance(action, (bool, np.bool_)):
        try:
            return operator.index(action)
        except TypeError:
            arr = np.asarray(action)
            if arr.size == 1 and arr.dtype.kind in "iu":
                return int(arr.reshape(-1)[0])
    raise TypeError(f"{where}: the action must be one integer ({meaning}), got {action!r:.60}")


def action_array(action: object, shape: tuple[int, ...], where: str, meaning: str) -> np.ndarray:
    """``action`` as a fresh ``int64`` array of ``shape`` (an integer array or a nested list of ints).

    Args:
        action: what the agent passed to ``step()``.
        shape: the action space's shape.
        where: the caller, for the error (``"AssignEnv.step"``).
        meaning: what an entry names, for the error (``"one device per op"``).

    Raises:
        TypeError: the entries are not integers (floats, bools, strings).
        ValueError: the shape is not ``shape``.
    """
    arr = np.asarray(action)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{where}: the action must be an integer array ({meaning}), got a {arr.dtype} array")
    if arr.shape != tuple(shape):
        raise ValueError(f"{where}: the action must be an integer array of shape {tuple(shape)} ({meaning}), "
                         f"got shape {arr.shape}")
    return arr.astype(np.int64)


def episode_over_error(where: str) -> RuntimeError:
    """The error of ``step()`` after the episode ended (terminated or truncated) or before any ``reset()``."""
    return RuntimeError(f"{where}: the episode has ended (or never started); call reset()")


def reset_options(options: object, valid: tuple[str, ...], where: str) -> dict[str, Any]:
    """``reset(options=...)`` as a dict (``None``: empty), refusing any key outside ``valid``.

    Args:
        options: what the agent passed to ``reset(options=...)``.
        valid: the option keys the env reads (empty: it reads none).
        where: the caller, for the error (``"ClusterEnv.reset"``).

    Raises:
        TypeError: ``options`` is neither ``None`` nor a mapping.
        ValueError: a key outside ``valid`` (the message names the unknown and the valid keys).
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(f"{where}: options must be a dict or None, got {type(options).__name__}")
    unknown = sorted(map(repr, set(options) - set(valid)))
    if unknown:
        accepted = ", ".join(map(repr, valid)) if valid else "none (this env takes no reset options; pass None)"
        raise ValueError(f"{where}: unknown option(s) {', '.join(unknown)}; valid: {accepted}")
    return dict(options)


class InvalidActionWarning(UserWarning):
    """An env penalised an action its mask rules out (once per env instance; silence it with
    ``warnings.simplefilter("ignore", InvalidActionWarning)``)."""


class Rejection(NamedTuple):
    """The outcome of an invalid action in ``"penalize"`` mode."""

    reward: float  # invalid_penalty
    truncated: bool  # the streak reached max_invalid_streak
    info: dict[str, Any]  # {"invalid_action": True, "invalid_streak": consecutive invalid actions}


class InvalidActions:
    """What an env does with an action its mask rules out, and the streak of such actions.

    With ``mode="penalize"`` the env leaves its state unchanged and returns :meth:`reject`'s
    reward (``penalty``), ``info`` (``invalid_action=True``, ``invalid_streak``) and truncation
    (after ``max_streak`` consecutive invalid actions; ``None``: never). The first rejection of an
    instance (so of the env that owns it) warns with :class:`InvalidActionWarning`: what happened,
    the penalty, and how to avoid it (masks, or ``invalid_action="raise"``); later ones are silent.
    The text depends only on ``penalty`` and ``max_streak``, so Python's default warning filter
    shows it once per process for many envs of one class (a vector of them). With ``mode="raise"``
    :meth:`reject` raises ``ValueError`` with the env's message, which says which actions are valid.

    Args:
        mode: ``"penalize"`` or ``"raise"`` (the env's ``invalid_action`` keyword).
        penalty: reward of an invalid action (``invalid_penalty``), a finite number.
        max_streak: consecutive invalid actions that truncate the episode (``max_invalid_streak``),
            an integer >= 1, or ``None`` for no limit [steps].

    Raises:
        ValueError: an argument out of its range, named by the env keyword that sets it.
    """

    def __init__(self, mode: str = "penalize", penalty: float = -0.01, max_streak: int | None = 100) -> None:
        if mode not in INVALID_ACTION_MODES:
            raise ValueError(f"invalid_action must be one of {INVALID_ACTION_MODES}, got {mode!r}")
        if isinstance(penalty, bool) or not isinstance(penalty, (int, float, np.integer, np.floating)) \
                or not np.isfinite(penalty):
            raise ValueError(f"invalid_penalty must be a finite number, got {penalty!r}")
        if max_streak is not None and (
            isinstance(max_streak, bool) or not isinstance(max_streak, (int, np.integer)) or max_streak < 1
        ):
            raise ValueError(f"max_invalid_streak must be an integer >= 1 or None, got {max_streak!r}")
        self.mode = mode
        self.penalty = float(penalty)
        self.max_streak = None if max_streak is None else int(max_streak)
        self.streak = 0  # consecutive invalid actions up to now [steps]
        self.warned = False  # the first rejection warned (once per instance, across episodes)

    def reset(self) -> None:
        """Start an episode: no invalid action yet."""
        self.streak = 0

    def accept(self) -> None:
        """A valid action: the streak ends."""
        self.streak = 0

    def reject(self, message: Callable[[], str]) -> Rejection:
        """An invalid action: raise ``ValueError(message())`` in ``"raise"`` mode (the streak unchanged),
        else count it and return the penalty, the truncation and the ``info`` entries."""
        if self.mode == "raise":
            raise ValueError(message())
        if not self.warned:
            self.warned = True
            warnings.warn(self.warning_text(), InvalidActionWarning, stacklevel=3)
        self.streak += 1
        truncated = self.max_streak is not None and self.streak >= self.max_streak
        return Rejection(self.penalty, truncated, {"invalid_action": True, "invalid_streak": self.streak})

    def warning_text(self) -> str:
        """The text of the first rejection's :class:`InvalidActionWarning`."""
        ends = ("" if self.max_streak is None
                else f"; {self.max_streak} in a row truncate the episode (max_invalid_streak)")
        return (f"doppler-gym: an action the action mask rules out was penalised: reward {self.penalty:g} "
                f"(invalid_penalty), state unchanged, info['invalid_action'] = True{ends}. Choose actions "
                "with the mask (obs['action_mask'] or env.action_masks(): sb3-contrib's MaskablePPO, "
                "action_space.sample(mask=obs['action_mask'])), or pass invalid_action='raise' to make "
                "it an error. Warned once per env.")


class ActionMasks(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Puts the env's ``action_masks()`` on the outermost wrapper.

    Gymnasium 1.x wrappers forward no attribute, so ``gym.make(env_id)`` (an ``OrderEnforcing``
    over a ``PassiveEnvChecker`` over the env) has no ``action_masks``; every doppler-gym id names
    this wrapper in its ``additional_wrappers``, which ``gym.make`` applies last (outside
    ``TimeLimit``), so ``gym.make(env_id).action_masks()`` works, as does sb3-contrib's
    ``get_action_masks(env)``. It changes nothing else (observations, rewards and spaces pass
    through) and records no arguments, so ``gym.make(env.spec)`` rebuilds it.

    Args:
        env: an env, or a wrapper of one, that has ``action_masks`` somewhere in its chain.

    Raises:
        TypeError: no env in the chain has ``action_masks``.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        if not env.has_wrapper_attr("action_masks"):
            raise TypeError(f"ActionMasks: {env} has no action_masks() method to expose "
                            "(wrap a doppler-gym env, or an env that defines one)")

    def action_masks(self) -> np.ndarray:
        """The wrapped env's ``action_masks()`` (``int8``, 1 = valid; its shape is the env's)."""
        return self.env.get_wrapper_attr("action_masks")()
