""":class:`RayVecEnv`: an SB3 ``VecEnv`` whose envs live in Ray actors, for any SB3 algorithm.

Each actor holds a batch of ``envs_per_actor`` envs (an :class:`~agents.distributed.env_batch.EnvBatch`)
and steps them in sequence; the actors step in parallel, on this machine or across a Ray cluster.
The observations, rewards, dones and infos are those of SB3's ``DummyVecEnv`` on the same env
functions and seeds, step for step (the envs run the same code; only where differs).

``action_masks`` (sb3-contrib's ``MaskablePPO`` asks for them before every step) come back with each
step's results, so a masked algorithm pays one round trip per step, not two.

>>> from agents.distributed import RayVecEnv, make_env_fn
>>> venv = RayVecEnv([make_env_fn("Doppler-Sim-v0", graph="chainmm")] * 4, envs_per_actor=2)  # doctest: +SKIP
>>> MaskablePPO("MultiInputPolicy", venv).learn(10_000)                                       # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn
from stable_baselines3.common.vec_env.util import dict_to_obs, obs_space_info

from agents.distributed.env_batch import MASK_METHOD, EnvBatch, make_env_fn  # noqa: F401  (make_env_fn re-exported)
from doppler_gym.parallel.tasks import LOCAL, connect


class RayVecEnv(VecEnv):
    """``len(env_fns)`` envs in ``ceil(len / envs_per_actor)`` Ray actors.

    Args:
        env_fns: functions returning a new env each; they are pickled to the actors (module-level
            functions or partials of them, e.g. :func:`make_env_fn`).
        envs_per_actor: envs stepped in sequence by one actor (more per actor: fewer round trips,
            less parallelism).
        ray_address: the cluster (:func:`doppler_gym.parallel.connect`; default ``"local"``; an
            initialised Ray session is used as it is).
        num_cpus: CPUs each actor reserves (``None``: Ray's actor default, which lets any number of
            actors share a node).
        spread: place the actors on as many nodes as possible (Ray's ``"SPREAD"`` strategy).

    Env ``i`` is env ``i % envs_per_actor`` of actor ``i // envs_per_actor``. :meth:`seed` gives env
    ``i`` the seed ``seed + i`` at the next :meth:`reset`, as every SB3 vector env does.
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], envs_per_actor: int = 1,
                 ray_address: str | None = LOCAL, num_cpus: float | None = None, spread: bool = True) -> None:
        if not env_fns:
            raise ValueError("RayVecEnv: give at least one env function")
        if isinstance(envs_per_actor, bool) or not isinstance(envs_per_actor, int) or envs_per_actor < 1:
            raise ValueError(f"RayVecEnv: envs_per_actor must be an integer >= 1, got {envs_per_actor!r}")
        self._ray = ray = connect(ray_address)
        options: dict[str, Any] = {"scheduling_strategy": "SPREAD"} if spread else {}
        if num_cpus is not None:
            options["num_cpus"] = num_cpus
        actor_class = ray.remote(EnvBatch).options(**options) if options else ray.remote(EnvBatch)
        n = len(env_fns)
        self.bounds = [(lo, min(lo + envs_per_actor, n)) for lo in range(0, n, envs_per_actor)]
        self.actors = [actor_class.remote(list(env_fns[lo:hi])) for lo, hi in self.bounds]
        obs_space, action_space, metadata = ray.get(self.actors[0].spaces.remote())
        super().__init__(n, obs_space, action_space)
        self.metadata = metadata
        self.keys, self._shapes, self._dtypes = obs_space_info(obs_space)
        self._pending: list[Any] | None = None
        self.closed = False
        self._masks: list[np.ndarray] | None = None  # action masks of the current observations

    # ------------------------------------------------------------------ stepping
    def reset(self) -> VecEnvObs:
        refs = [a.reset.remote(self._seeds[lo:hi], self._options[lo:hi])
                for a, (lo, hi) in zip(self.actors, self.bounds)]
        obs, masks = [], []
        for (lo, _), (o, infos, m) in zip(self.bounds, self._ray.get(refs)):
            obs += o
            self.reset_infos[lo:lo + len(infos)] = infos
            masks.append(m)
        self._keep_masks(masks)
        self._reset_seeds()
        self._reset_options()
        return self._stack(obs)

    def step_async(self, actions: np.ndarray) -> None:
        self._masks = None
        self._pending = [a.step.remote(actions[lo:hi]) for a, (lo, hi) in zip(self.actors, self.bounds)]

    def step_wait(self) -> VecEnvStepReturn:
        if self._pending is None:
            raise RuntimeError("RayVecEnv.step_wait without step_async; call step(actions)")
        results = self._ray.get(self._pending)
        self._pending = None
        obs, infos, rewards, dones, masks = [], [], [], [], []
        for (lo, _), (o, r, d, info, reset_infos, m) in zip(self.bounds, results):
            obs += o
            infos += info
            rewards.append(r)
            dones.append(d)
            masks.append(m)
            for i, ri in reset_infos.items():
                self.reset_infos[lo + i] = ri
        self._keep_masks(masks)
        return self._stack(obs), np.concatenate(rewards), np.concatenate(dones), infos

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._ray.get([a.close.remote() for a in self.actors])
        finally:
            for a in self.actors:
                self._ray.kill(a)
            self.closed = True

    # ------------------------------------------------------------------ attributes and methods of the envs
    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return self._per_actor("get_attr", indices, attr_name)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        self._masks = None
        self._per_actor("set_attr", indices, attr_name, value, gather=False)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        if method_name == MASK_METHOD and not method_args and not method_kwargs and self._masks is not None:
            return [self._masks[i] for i in self._get_indices(indices)]
        self._masks = None  # any other call may change an env's state
        return self._per_actor("env_method", indices, method_name, method_args, method_kwargs)

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return self._per_actor("env_is_wrapped", indices, wrapper_class)

    # ------------------------------------------------------------------ helpers
    def _per_actor(self, method: str, indices: VecEnvIndices, *args: Any, gather: bool = True) -> list[Any]:
        """Call ``EnvBatch.method(*args[:1], local indices, *args[1:])`` on the actors holding ``indices``;
        the results in the order of ``indices``."""
        wanted = list(self._get_indices(indices))
        calls = []
        for k, (lo, hi) in enumerate(self.bounds):
            local = [i - lo for i in wanted if lo <= i < hi]
            if local:
                calls.append((k, local, getattr(self.actors[k], method).remote(args[0], local, *args[1:])))
        results = self._ray.get([ref for _, _, ref in calls])
        if not gather:
            return []
        by_env = {self.bounds[k][0] + i: v for (k, local, _), values in zip(calls, results)
                  for i, v in zip(local, values)}
        return [by_env[i] for i in wanted]

    def _keep_masks(self, masks: list[Any]) -> None:
        self._masks = None if any(m is None for m in masks) else [m for part in masks for m in part]

    def _stack(self, obs: list[Any]) -> VecEnvObs:
        """The per-env observations stacked as ``DummyVecEnv`` returns them (same keys and dtypes)."""
        buf = {}
        for key in self.keys:
            parts = [o if key is None else o[key] for o in obs]
            buf[key] = np.stack(parts).astype(self._dtypes[key], copy=False).reshape(
                (self.num_envs, *self._shapes[key]))
        return dict_to_obs(self.observation_space, buf)
