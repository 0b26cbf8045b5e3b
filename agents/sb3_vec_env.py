""":class:`PlacementVecEnv`: an SB3 ``VecEnv`` of ``N`` ``Doppler-Sim-v0`` envs stepped in one batched call.

It returns what SB3's ``DummyVecEnv`` over ``N`` single envs with the same keywords returns (observations,
rewards, dones, infos, ``reset_infos``), step for step for the same seeds and actions, from the batched core
of the native Gymnasium vector env (:class:`~doppler_gym.envs.vector.core.PlacementBatch`): SB3's same-step
autoreset, ``infos[i]["terminal_observation"]`` and ``infos[i]["TimeLimit.truncated"]``, seeds ``seed + i``
from :meth:`seed` at the next :meth:`reset`. sb3-contrib's ``MaskablePPO`` reads the masks through
``env_method("action_masks")`` (``get_action_masks``), answered from one ``(N, A)`` array.

>>> from sb3_contrib import MaskablePPO                                                        # doctest: +SKIP
>>> venv = PlacementVecEnv(16, graph="paper/ffnn", topology=4, observation="flat")            # doctest: +SKIP
>>> MaskablePPO("MultiInputPolicy", venv, gamma=0.99).learn(100_000)                          # doctest: +SKIP
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn
from stable_baselines3.common.vec_env.util import dict_to_obs

from doppler_gym.envs.vector.core import PlacementBatch

MASK_METHOD = "action_masks"  # the method sb3-contrib's MaskablePPO calls on every env


class PlacementVecEnv(VecEnv):
    """``num_envs`` placement envs behind SB3's ``VecEnv`` interface.

    Args:
        num_envs: number of envs ``N``.
        sim_threads: Numba threads of the batched simulator calls (default 1; ``None``: tuned while stepping).
        **kwargs: ``Doppler-Sim-v0``'s keywords, the same for every env (see
            :class:`~doppler_gym.envs.vector.env.PlacementVectorEnv` for the ones refused).

    Attributes of the envs (:meth:`get_attr`) are the batch's (:class:`PlacementBatch`: ``reward``,
    ``max_ops``, ``observation_form``, ...), the same for every env; ``render_mode`` is ``None``.
    :meth:`env_method` serves ``"action_masks"`` (each env's ``(A,) int8`` mask); :meth:`action_masks`
    gives them all as one ``(N, A)`` array.
    """

    def __init__(self, num_envs: int, sim_threads: int | None = 1, **kwargs: Any) -> None:
        self.core = PlacementBatch(num_envs, sim_threads=sim_threads, **kwargs)
        super().__init__(self.core.num_envs, self.core.single_observation_space, self.core.single_action_space)
        self._actions: np.ndarray | None = None
        self._started = False

    # ------------------------------------------------------------------ stepping
    def reset(self) -> VecEnvObs:
        rows = np.arange(self.num_envs)
        infos = self.core.reset(rows, self._seeds, [opts or None for opts in self._options])
        self.reset_infos = infos
        self._reset_seeds()
        self._reset_options()
        self._started = True
        return dict_to_obs(self.observation_space, self.core.observation(copy=True))

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("PlacementVecEnv.step_wait without step_async; call step(actions)")
        if not self._started:
            raise RuntimeError("PlacementVecEnv.step: call reset() first")
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
            for i, info in zip(ended.tolist(), self.core.reset(ended, [None] * ended.size, [None] * ended.size)):
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
        if attr_name.startswith("_") or not hasattr(self.core, attr_name):
            raise AttributeError(f"PlacementVecEnv: the envs have no public attribute {attr_name!r}")
        return [getattr(self.core, attr_name)] * len(wanted)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        raise AttributeError(f"PlacementVecEnv.set_attr({attr_name!r}): the envs share one batch; make a new "
                             f"PlacementVecEnv with the keyword instead")

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        wanted = list(self._get_indices(indices))
        if method_name != MASK_METHOD or method_args or method_kwargs:
            raise AttributeError(f"PlacementVecEnv.env_method({method_name!r}): the envs have only "
                                 f"{MASK_METHOD}() (no arguments)")
        masks = self.core.action_masks()
        return [masks[i] for i in wanted]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False] * len(list(self._get_indices(indices)))

    def _env_mask(self, i: int) -> np.ndarray:
        return self.core.action_masks()[i]

