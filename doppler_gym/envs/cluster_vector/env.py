"""``gym.make_vec("Doppler-ClusterVec-v0", num_envs=N, ...)``: a native Gymnasium vector env of ``N`` cluster envs.

:class:`ClusterVectorEnv` returns what ``gymnasium.vector.SyncVectorEnv`` over ``N`` ``Doppler-Cluster-v0`` envs
(``gym.make``) with the same keywords returns (observations, rewards, terminations, truncations and infos,
equal for the same seeds and actions), in Gymnasium's default next-step autoreset mode, with the observations
written into preallocated ``(N, ...)`` arrays. Speed: ``docs/results/bench_cluster_vector.md``.

>>> envs = ClusterVectorEnv(num_envs=8, trace="generated:30", cluster="2x8")  # doctest: +SKIP
>>> obs, infos = envs.reset(seed=0)                                           # env i seeded with 0 + i
>>> obs, rewards, terminated, truncated, infos = envs.step(actions)           # obs["jobs"]: (8, 30, 12)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from doppler_gym.envs.cluster_vector.batch import ClusterBatch


class ClusterVectorEnv(VectorEnv):
    """``num_envs`` ``Doppler-Cluster-v0`` envs in one batch (a ``gymnasium.vector.VectorEnv``).

    Args:
        num_envs: number of envs ``N``.
        copy_obs: return fresh observation arrays (default) or the live batch arrays (valid until the next step or
            reset).
        **kwargs: :class:`~doppler_gym.envs.cluster.ClusterEnv`'s keywords, the same for every env (``trace``,
            ``cluster``, ``max_jobs``, ``reward``, ...). A ``render_mode`` is refused with a ``ValueError`` that
            names the ``SyncVectorEnv`` path.

    Spaces: ``single_observation_space`` / ``single_action_space`` are the single env's; ``observation_space`` /
    ``action_space`` their batched forms (``Dict`` of ``(N, ...)`` boxes, ``MultiDiscrete([A] * N)``).

    Seeding: ``reset(seed=s)`` seeds env ``i`` with ``s + i`` (a list: one seed per env), as ``SyncVectorEnv``.
    Autoreset (``metadata["autoreset_mode"]``, next step): the step after an env terminates or truncates resets it
    (its action ignored), with reward 0, ``terminated = truncated = False`` and the reset info.
    ``reset(options={"reset_mask": (N,) bool})`` resets only the envs marked (the single env takes no other
    option). Infos are Gymnasium's vector info dicts: ``infos["now"]`` ``(N,)`` [s] with the mask ``infos["_now"]``;
    at an episode's end ``avg_jct`` and the other metrics, and ``result`` as an object array.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(self, num_envs: int = 1, copy_obs: bool = True, **kwargs: Any) -> None:
        self.core = ClusterBatch(num_envs, copy_obs=copy_obs, **kwargs)
        self.num_envs = self.core.num_envs
        self.metadata = dict(type(self).metadata)
        self.render_mode = None
        self.single_observation_space = self.core.single_observation_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.single_action_space = self.core.single_action_space
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._autoreset = np.zeros(self.num_envs, bool)

    @property
    def envs(self) -> tuple:
        """The ``N`` single :class:`~doppler_gym.envs.cluster.ClusterEnv` objects (read their public state between
        steps, e.g. ``job_view`` for a heuristic policy; stepping them directly desynchronises the batch)."""
        return self.core.envs

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Reset every env (or those of ``options["reset_mask"]``); ``seed``: ``None``, an int (env ``i`` gets
        ``seed + i``) or one seed per env."""
        n = self.num_envs
        if seed is None:
            seeds: list[int | None] = [None] * n
        elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            seeds = [int(seed) + i for i in range(n)]
        else:
            seeds = list(seed)
            if len(seeds) != n:
                raise ValueError(f"ClusterVectorEnv.reset: seed must be None, an int or {n} seeds (one per env), "
                                 f"got {len(seeds)}")
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if options:
            raise ValueError(f"ClusterVectorEnv.reset: unknown option(s) {sorted(options)}; the only option is "
                             f"'reset_mask' (Doppler-Cluster-v0's reset takes none)")
        if mask is None:
            rows = np.arange(n)
        else:
            mask = np.asarray(mask)
            if mask.dtype != np.bool_ or mask.shape != (n,) or not mask.any():
                raise ValueError(f"ClusterVectorEnv.reset: options['reset_mask'] must be a ({n},) bool array with at "
                                 f"least one True, got {mask!r:.80}")
            rows = np.flatnonzero(mask)
        reset_infos = self.core.reset(rows, [seeds[i] for i in rows])
        self._autoreset[rows] = False
        infos: dict[str, Any] = {}
        for i, info in zip(rows.tolist(), reset_infos):
            infos = self._add_info(infos, info, i)
        return self.core.observation(), infos

    def step(self, actions: object) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict]:
        """One step of every env (the envs that ended at the last step are reset instead)."""
        auto = self._autoreset
        infos_by_env: dict[int, dict[str, Any]] = {}
        if auto.any():
            rows = np.flatnonzero(auto)
            for i, info in zip(rows.tolist(), self.core.reset(rows, [None] * rows.size, write=False)):
                infos_by_env[i] = info
        result = self.core.step(actions, ~auto)
        infos_by_env.update(result.infos)
        infos: dict[str, Any] = {}
        for i in sorted(infos_by_env):
            infos = self._add_info(infos, infos_by_env[i], i)
        self._autoreset = result.terminated | result.truncated
        return self.core.observation(), result.rewards, result.terminated, result.truncated, infos

    def action_masks(self) -> np.ndarray:
        """``(N, n_actions) int8``: each env's valid actions now (== ``obs["action_mask"]``)."""
        return self.core.action_masks()

    # ------------------------------------------------------------------ infos
    def _add_info(self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int) -> dict[str, Any]:
        """Gymnasium's vector info merge (``VectorEnv._add_info``), with a fast path for a key already present
        whose value is not a dict (the per-step keys of every env): the value goes into the existing array, as
        Gymnasium's merge puts it there."""
        rest = {}
        for key, value in env_info.items():
            array = vector_infos.get(key)
            if array is None or isinstance(value, dict) or isinstance(array, dict) or key == "final_obs":
                rest[key] = value
            else:
                array[env_num] = value
                vector_infos[f"_{key}"][env_num] = True
        return super()._add_info(vector_infos, rest, env_num) if rest else vector_infos
