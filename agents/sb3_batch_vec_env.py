""":class:`BatchVecEnv`: an SB3 ``VecEnv`` over the batched core of a native vector env (``N`` envs, one step call).

The core (:class:`~doppler_gym.envs.batched.BatchCore`: ``PlacementBatch``, ``ClusterBatch``) resets and steps the
envs; this class adds what SB3's ``DummyVecEnv`` does around single envs: SB3's same-step autoreset,
``infos[i]["terminal_observation"]`` and ``infos[i]["TimeLimit.truncated"]``, ``reset_infos``, seeds ``seed + i``
from :meth:`seed` and the options of :meth:`set_options` at the next :meth:`reset`. sb3-contrib's ``MaskablePPO``
reads the masks through ``env_method("action_masks")`` (``get_action_masks``), answered from one ``(N, A)``
array. A subclass makes its core and says how it resets rows (:meth:`BatchVecEnv._reset_envs`) and whose
attributes :meth:`get_attr` reads (:meth:`BatchVecEnv._attr_owner`).
"""

from __future__ import annotations

import functools
from abc import abstractmethod
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn
from stable_baselines3.common.vec_env.util import dict_to_obs

from doppler_gym.envs.batched import BatchCore

MASK_METHOD = "action_masks"  # the method sb3-contrib's MaskablePPO calls on every env


class BatchVecEnv(VecEnv):
    """The ``N`` envs of a batched core behind SB3's ``VecEnv`` interface.

    Args:
        core: the batched core; kept as ``self.core``.

    :meth:`get_attr` answers ``render_mode`` (``None``) and ``action_masks`` (a callable per env) itself and reads
    the rest from :meth:`_attr_owner`; :meth:`set_attr` is refused (the envs share one batch);
    :meth:`env_method` serves only ``"action_masks"`` (each env's ``(A,) int8`` mask); :meth:`action_masks` gives
    them all as one ``(N, A)`` array.
    """

    env_method_hint = ""  # what env_method's error adds after naming the one method served

    def __init__(self, core: BatchCore) -> None:
        self.core = core
        super().__init__(core.num_envs, core.single_observation_space, core.single_action_space)
        self._actions: np.ndarray | None = None
        self._started = False

    # ------------------------------------------------------------------ stepping
    def reset(self) -> VecEnvObs:
        self.reset_infos = self._reset_envs(np.arange(self.num_envs), self._seeds, self._options)
        self._reset_seeds()
        self._reset_options()
        self._started = True
        return dict_to_obs(self.observation_space, self.core.observation(copy=True))

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self) -> VecEnvStepReturn:
        name = type(self).__name__
        if self._actions is None:
            raise RuntimeError(f"{name}.step_wait without step_async; call step(actions)")
        if not self._started:
            raise RuntimeError(f"{name}.step: call reset() first")
        actions, self._actions = self._actions, None
        result = self.core.step(actions.reshape(self.num_envs))
        dones = result.terminated | result.truncated
        infos: list[dict[str, Any]] = [dict(result.infos.get(i, {})) for i in range(self.num_envs)]
        for i in range(self.num_envs):
            infos[i]["TimeLimit.truncated"] = bool(result.truncated[i] and not result.terminated[i])
        ended = np.flatnonzero(dones)
        if ended.size:
            for i in ended.tolist():
                infos[i]["terminal_observation"] = self.core.row(i)
            for i, info in zip(ended.tolist(), self._reset_envs(ended, [None] * ended.size, [{}] * ended.size)):
                self.reset_infos[i] = info
        obs = dict_to_obs(self.observation_space, self.core.observation(copy=True))
        return obs, result.rewards.astype(np.float32), dones, infos

    def close(self) -> None:
        self.closed = True

    # ------------------------------------------------------------------ masks, attributes and methods
    def action_masks(self) -> np.ndarray:
        """``(N, A) int8``: every env's valid actions now."""
        return self.core.action_masks()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        wanted = list(self._get_indices(indices))
        if attr_name == "render_mode":
            return [None] * len(wanted)
        if attr_name == MASK_METHOD:
            return [functools.partial(self._env_mask, i) for i in wanted]
        if attr_name.startswith("_") or not hasattr(self._attr_owner(0), attr_name):
            raise AttributeError(f"{type(self).__name__}: the envs have no public attribute {attr_name!r}")
        return [getattr(self._attr_owner(i), attr_name) for i in wanted]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        name = type(self).__name__
        raise AttributeError(f"{name}.set_attr({attr_name!r}): the envs share one batch built from their keywords; "
                             f"make a new {name} with the keyword instead")

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        wanted = list(self._get_indices(indices))
        if method_name != MASK_METHOD or method_args or method_kwargs:
            raise AttributeError(f"{type(self).__name__}.env_method({method_name!r}): the envs serve only "
                                 f"{MASK_METHOD}() (no arguments) through the batch{self.env_method_hint}")
        masks = self.core.action_masks()
        return [masks[i] for i in wanted]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False] * len(list(self._get_indices(indices)))

    # ------------------------------------------------------------------ what a subclass says
    @abstractmethod
    def _reset_envs(self, rows: np.ndarray, seeds: list[int | None],
                    options: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Reset the envs of ``rows`` in the core, env ``rows[j]`` with ``seeds[j]`` and ``options[j]`` (``{}``:
        none); returns the reset infos, in row order."""

    @abstractmethod
    def _attr_owner(self, i: int) -> object:
        """The object whose public attributes are env ``i``'s for :meth:`get_attr`."""

    def _env_mask(self, i: int) -> np.ndarray:
        return self.core.action_masks()[i]
