""":class:`ClusterVecEnv`: an SB3 ``VecEnv`` of ``N`` ``Doppler-Cluster-v0`` envs behind one step call.

It returns what SB3's ``DummyVecEnv`` over ``N`` single envs with the same keywords returns (observations,
rewards, dones, infos, ``reset_infos``), step for step for the same seeds and actions, from the batched core of
the native Gymnasium vector env (:class:`~doppler_gym.envs.cluster_vector.batch.ClusterBatch`: the observations
of all envs written into ``(N, ...)`` arrays in one pass): SB3's same-step autoreset,
``infos[i]["terminal_observation"]`` and ``infos[i]["TimeLimit.truncated"]``, seeds ``seed + i`` from
:meth:`seed` at the next :meth:`reset`. sb3-contrib's ``MaskablePPO`` reads the masks through
``env_method("action_masks")`` (``get_action_masks``), answered from one ``(N, A)`` array. The recipe key
``vec_env: cluster`` (``agents/recipes/hyperparams.py``) builds it.

>>> from sb3_contrib import MaskablePPO                                          # doctest: +SKIP
>>> venv = ClusterVecEnv(8, trace="generated:30", cluster="2x8", max_jobs=16)   # doctest: +SKIP
>>> MaskablePPO("MultiInputPolicy", venv, gamma=1.0).learn(100_000)             # doctest: +SKIP
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn
from stable_baselines3.common.vec_env.util import dict_to_obs

from doppler_gym.envs.cluster_vector.batch import ClusterBatch

MASK_METHOD = "action_masks"  # the method sb3-contrib's MaskablePPO calls on every env


class ClusterVecEnv(VecEnv):
    """``num_envs`` cluster envs behind SB3's ``VecEnv`` interface.

    Args:
        num_envs: number of envs ``N``.
        **kwargs: ``Doppler-Cluster-v0``'s keywords, the same for every env (see
            :class:`~doppler_gym.envs.cluster_vector.env.ClusterVectorEnv` for the one refused).

    :meth:`get_attr` reads each env's public attribute (``n_jobs``, ``trace_seed``, ``modes``, ...);
    ``render_mode`` is ``None``. :meth:`env_method` serves ``"action_masks"`` (each env's ``(A,) int8`` mask);
    :meth:`action_masks` gives them all as one ``(N, A)`` array. The single envs are ``venv.core.envs`` (read
    their state between steps; stepping them directly desynchronises the batch).
    """

    def __init__(self, num_envs: int, **kwargs: Any) -> None:
        self.core = ClusterBatch(num_envs, **kwargs)
        super().__init__(self.core.num_envs, self.core.single_observation_space, self.core.single_action_space)
        self._actions: np.ndarray | None = None
        self._started = False

    # ------------------------------------------------------------------ stepping
    def reset(self) -> VecEnvObs:
        if any(self._options):
            raise ValueError(f"ClusterVecEnv.reset: Doppler-Cluster-v0's reset takes no options, got "
                             f"{[o for o in self._options if o]} (from set_options)")
        self.reset_infos = self.core.reset(range(self.num_envs), self._seeds)
        self._reset_seeds()
        self._reset_options()
        self._started = True
        return dict_to_obs(self.observation_space, self.core.observation(copy=True))

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("ClusterVecEnv.step_wait without step_async; call step(actions)")
        if not self._started:
            raise RuntimeError("ClusterVecEnv.step: call reset() first")
        actions, self._actions = self._actions, None
        result = self.core.step(actions.reshape(self.num_envs))
        dones = result.terminated | result.truncated
        infos: list[dict[str, Any]] = [result.infos[i] for i in range(self.num_envs)]  # fresh dicts from each env
        for i in range(self.num_envs):
            infos[i]["TimeLimit.truncated"] = bool(result.truncated[i] and not result.terminated[i])
        ended = np.flatnonzero(dones).tolist()
        if ended:
            for i in ended:
                infos[i]["terminal_observation"] = self.core.row(i)
            for i, info in zip(ended, self.core.reset(ended, [None] * len(ended))):
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
        envs = self.core.envs
        if attr_name.startswith("_") or not hasattr(envs[0], attr_name):
            raise AttributeError(f"ClusterVecEnv: the envs have no public attribute {attr_name!r}")
        return [getattr(envs[i], attr_name) for i in wanted]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        raise AttributeError(f"ClusterVecEnv.set_attr({attr_name!r}): the batch's observations follow the envs' "
                             f"keywords; make a new ClusterVecEnv with the keyword instead")

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        wanted = list(self._get_indices(indices))
        if method_name != MASK_METHOD or method_args or method_kwargs:
            raise AttributeError(f"ClusterVecEnv.env_method({method_name!r}): the envs serve only {MASK_METHOD}() "
                                 f"(no arguments) through the batch; read venv.core.envs[i] for the rest")
        masks = self.core.action_masks()
        return [masks[i] for i in wanted]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False] * len(list(self._get_indices(indices)))

    def _env_mask(self, i: int) -> np.ndarray:
        return self.core.action_masks()[i]
