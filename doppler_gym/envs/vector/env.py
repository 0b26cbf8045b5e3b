"""``gym.make_vec("Doppler-Sim-v0", num_envs=N, vectorization_mode="vector_entry_point", ...)``: a native
Gymnasium vector env of ``N`` placement envs, stepped in one batched call.

:class:`PlacementVectorEnv` returns what ``gymnasium.vector.SyncVectorEnv`` over ``N`` single
``Doppler-Sim-v0`` envs with the same keywords returns (observations, rewards, terminations, truncations
and infos, equal for the same seeds and actions), in Gymnasium's default next-step autoreset mode, at a
fraction of the cost (``docs/results/bench_vector.md``). The batched core is
:class:`~doppler_gym.envs.vector.core.PlacementBatch`.

>>> envs = PlacementVectorEnv(num_envs=8, graph="paper/ffnn", topology=4)  # doctest: +SKIP
>>> obs, infos = envs.reset(seed=0)                                         # env i seeded with 0 + i
>>> obs, rewards, terminated, truncated, infos = envs.step(actions)         # (8,) arrays; obs["op_state"]: (8, 180, 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from doppler_gym.envs.vector.core import PlacementBatch


class PlacementVectorEnv(VectorEnv):
    """``num_envs`` ``Doppler-Sim-v0`` envs in one batch (a ``gymnasium.vector.VectorEnv``).

    Args:
        num_envs: number of envs ``N``.
        sim_threads: Numba threads of the batched simulator calls (default 1; ``None``: tuned while stepping; see
            :class:`~doppler_gym.envs.vector.core.PlacementBatch`).
        **kwargs: :class:`~doppler_gym.envs.placement.PlacementEnv`'s keywords, the same for every env
            (``graph``, ``topology``, ``sim_config``, ``reward``, ``observation``, ``invalid_action``, ...).
            Refused with a ``ValueError`` that names the ``SyncVectorEnv`` path: ``stragglers``, memory
            tracking (``SimConfig(memory=...)``), a backend other than the simulator, a ``render_mode``.
            ``copy_obs=False`` returns the live batch arrays (valid until the next step or reset) instead
            of copies.

    Spaces: ``single_observation_space`` / ``single_action_space`` are the single env's;
    ``observation_space`` / ``action_space`` their batched forms (``Dict`` of ``(N, ...)`` boxes,
    ``MultiDiscrete([A] * N)`` with ``A = max_ops + max_devices``).

    Seeding: ``reset(seed=s)`` seeds env ``i`` with ``s + i`` (a list: one seed per env), as ``SyncVectorEnv``.
    Autoreset (``metadata["autoreset_mode"]``, next step): the step after an env terminates or truncates
    resets it (its action ignored), with reward 0, ``terminated = truncated = False`` and the reset info.
    ``reset(options={"reset_mask": (N,) bool})`` resets only the envs marked. Infos are Gymnasium's vector
    info dicts (``infos["makespan"]`` ``(N,)`` with the mask ``infos["_makespan"]``); where envs on graphs of
    different sizes finish in one step, the per-op entries (``assignment``, ``order``) are object arrays.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(self, num_envs: int = 1, sim_threads: int | None = 1, **kwargs: Any) -> None:
        self.core = PlacementBatch(num_envs, sim_threads=sim_threads, **kwargs)
        self.num_envs = self.core.num_envs
        self.metadata = dict(type(self).metadata)
        self.render_mode = None
        self.single_observation_space = self.core.single_observation_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.single_action_space = self.core.single_action_space
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._autoreset = np.zeros(self.num_envs, bool)

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Reset every env (or those of ``options["reset_mask"]``); ``seed``: ``None``, an int (env ``i`` gets
        ``seed + i``) or one seed per env. The other ``options`` go to every env reset
        (``graph``/``topology``, as ``PlacementEnv.reset``)."""
        n = self.num_envs
        if seed is None:
            seeds: list[int | None] = [None] * n
        elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            seeds = [int(seed) + i for i in range(n)]
        else:
            seeds = list(seed)
            if len(seeds) != n:
                raise ValueError(f"PlacementVectorEnv.reset: seed must be None, an int or {n} seeds (one per env), "
                                 f"got {len(seeds)}")
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if mask is None:
            rows = np.arange(n)
        else:
            mask = np.asarray(mask)
            if mask.dtype != np.bool_ or mask.shape != (n,) or not mask.any():
                raise ValueError(f"PlacementVectorEnv.reset: options['reset_mask'] must be a ({n},) bool array with at "
                                 f"least one True, got {mask!r:.80}")
            rows = np.flatnonzero(mask)
        reset_infos = self.core.reset(rows, [seeds[i] for i in rows], [options or None] * rows.size)
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
            for i, info in zip(rows.tolist(), self.core.reset(rows, [None] * rows.size, [None] * rows.size)):
                infos_by_env[i] = info
        result = self.core.step(actions, ~auto)
        infos_by_env.update(result.infos)
        infos: dict[str, Any] = {}
        for i in sorted(infos_by_env):
            infos = self._add_info(infos, infos_by_env[i], i)
        self._autoreset = result.terminated | result.truncated
        return self.core.observation(), result.rewards, result.terminated, result.truncated, infos

    def action_masks(self) -> np.ndarray:
        """``(N, max_ops + max_devices) int8``: each env's valid actions now (== ``obs["action_mask"]``)."""
        return self.core.action_masks()

    # ------------------------------------------------------------------ infos
    def _add_info(self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int) -> dict[str, Any]:
        """Gymnasium's vector info merge, except that an array entry whose shape differs from the other envs'
        (graphs of different sizes) turns the key's array into an object array instead of failing."""
        for key, value in env_info.items():
            old = vector_infos.get(key)
            if (isinstance(value, np.ndarray) and isinstance(old, np.ndarray) and old.dtype != object
                    and old.shape[1:] != value.shape):
                had = vector_infos[f"_{key}"]
                mixed = np.full(self.num_envs, None, dtype=object)
                for j in np.flatnonzero(had).tolist():
                    mixed[j] = old[j]
                vector_infos[key] = mixed
            vector_infos = super()._add_info(vector_infos, {key: value}, env_num)
        return vector_infos
