"""A batch of envs stepped in sequence with SB3's vector-env conventions: the body of one Ray actor
of :class:`~agents.distributed.ray_vec_env.RayVecEnv` (a plain class, so it also runs in-process).
It imports gymnasium and numpy only, so an actor starts without loading torch or SB3.

It does per env what SB3's ``DummyVecEnv`` does: ``done = terminated or truncated``,
``info["TimeLimit.truncated"] = truncated and not terminated``, and at the end of an episode
``info["terminal_observation"]`` and an immediate reset (without a seed: the env's generator goes on).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

MASK_METHOD = "action_masks"  # the method sb3-contrib's MaskablePPO calls on every env


def _make_env(env_id: str, kwargs: dict[str, Any]) -> gym.Env:
    import doppler_gym  # noqa: F401  (registers the Doppler env ids in this worker process)

    return gym.make(env_id, **kwargs)


def make_env_fn(env_id: str, **kwargs: Any) -> Callable[[], gym.Env]:
    """A picklable function that makes ``gym.make(env_id, **kwargs)`` in whichever process calls it
    (the Doppler env ids are registered there first; nothing heavier than gymnasium is imported)."""
    return functools.partial(_make_env, env_id, dict(kwargs))


class EnvBatch:
    """``len(env_fns)`` envs, each made by calling its function once (in the process that holds the batch).

    Args:
        env_fns: functions returning a new env each (they must pickle when the batch is a Ray actor).
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]) -> None:
        if not env_fns:
            raise ValueError("EnvBatch: give at least one env function")
        self.envs = [fn() for fn in env_fns]
        if len({id(e.unwrapped) for e in self.envs}) != len(self.envs):
            raise ValueError("EnvBatch: the env functions returned the same env object twice; each call must make a "
                             "new env (e.g. functools.partial(gym.make, ENV_ID, ...), not lambda: env)")
        self.has_masks = all(_has_method(e, MASK_METHOD) for e in self.envs)

    def spaces(self) -> tuple[gym.Space, gym.Space, dict[str, Any]]:
        """The first env's observation space, action space and metadata."""
        env = self.envs[0]
        return env.observation_space, env.action_space, dict(env.metadata)

    def masks(self) -> list[np.ndarray] | None:
        """Each env's ``action_masks()`` now, or ``None`` when the envs have none."""
        if not self.has_masks:
            return None
        return [np.asarray(e.get_wrapper_attr(MASK_METHOD)()) for e in self.envs]

    def reset(self, seeds: Sequence[int | None], options: Sequence[dict | None]) -> tuple[list, list[dict], Any]:
        """Reset every env with its seed and options; returns ``(observations, reset infos, masks)``."""
        obs, infos = [], []
        for env, seed, opts in zip(self.envs, seeds, options):
            o, info = env.reset(seed=seed, **({"options": opts} if opts else {}))
            obs.append(o)
            infos.append(info)
        return obs, infos, self.masks()

    def step(self, actions: np.ndarray) -> tuple[list, np.ndarray, np.ndarray, list[dict], dict[int, dict], Any]:
        """One step of every env (``actions``: ``(n_envs, ...)``), resetting those whose episode ended.

        Returns:
            ``(observations, rewards (n,) float32, dones (n,) bool, infos, reset infos by env index, masks)``.
        """
        obs, infos = [], []
        rewards = np.zeros(len(self.envs), np.float32)
        dones = np.zeros(len(self.envs), bool)
        reset_infos: dict[int, dict] = {}
        for i, (env, action) in enumerate(zip(self.envs, actions)):
            o, rewards[i], terminated, truncated, info = env.step(action)
            dones[i] = terminated or truncated
            info["TimeLimit.truncated"] = truncated and not terminated
            if dones[i]:
                info["terminal_observation"] = o
                o, reset_infos[i] = env.reset()
            obs.append(o)
            infos.append(info)
        return obs, rewards, dones, infos, reset_infos, self.masks()

    def get_attr(self, name: str, indices: Sequence[int]) -> list[Any]:
        return [self.envs[i].get_wrapper_attr(name) for i in indices]

    def set_attr(self, name: str, value: Any, indices: Sequence[int]) -> None:
        for i in indices:
            setattr(self.envs[i], name, value)

    def env_method(self, name: str, indices: Sequence[int], args: tuple, kwargs: dict) -> list[Any]:
        return [self.envs[i].get_wrapper_attr(name)(*args, **kwargs) for i in indices]

    def env_is_wrapped(self, wrapper_class: type, indices: Sequence[int]) -> list[bool]:
        from stable_baselines3.common.env_util import is_wrapped

        return [is_wrapped(self.envs[i], wrapper_class) for i in indices]

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _has_method(env: gym.Env, name: str) -> bool:
    try:
        return callable(env.get_wrapper_attr(name))
    except AttributeError:
        return False
