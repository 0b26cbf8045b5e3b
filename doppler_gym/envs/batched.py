"""The Gymnasium side shared by the native vector envs: a ``VectorEnv`` over a batched core of ``N`` envs.

A batched core (:class:`~doppler_gym.envs.vector.core.PlacementBatch`,
:class:`~doppler_gym.envs.cluster_vector.batch.ClusterBatch`) resets and steps the envs it is told to and keeps
their observations in ``(N, ...)`` arrays; :class:`BatchVectorEnv` adds what ``gymnasium.vector.SyncVectorEnv``
does around single envs: per-env seeds, ``options["reset_mask"]``, Gymnasium's next-step autoreset and the vector
info dicts. A subclass says how its core resets rows (:meth:`BatchVectorEnv._reset_envs`) and which reset options
it takes (:meth:`BatchVectorEnv._check_options`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space


class StepResult(NamedTuple):
    """What a batched core's ``step`` returns: ``(N,)`` arrays and the infos of the envs that have one."""

    rewards: np.ndarray  # (N,) float64 (0 for an env not stepped)
    terminated: np.ndarray  # (N,) bool
    truncated: np.ndarray  # (N,) bool
    infos: dict[int, dict[str, Any]]  # env index -> its info (the single env's); an env may have none


class BatchCore(Protocol):
    """What :class:`BatchVectorEnv` and ``agents.sb3_batch_vec_env.BatchVecEnv`` use of a batched core."""

    num_envs: int
    single_observation_space: spaces.Space
    single_action_space: spaces.Space

    def step(self, actions: object, active: np.ndarray | None = None) -> StepResult:
        """One step of the envs with ``active[i]`` (default: all), env ``i`` taking ``actions[i]``."""

    def observation(self, copy: bool | None = None) -> dict[str, np.ndarray]:
        """``{key: (N, ...) array}``: copies, or the live arrays."""

    def row(self, i: int) -> dict[str, np.ndarray]:
        """Env ``i``'s observation (copies)."""

    def action_masks(self) -> np.ndarray:
        """``(N, A) int8``: 1 where an action is valid."""


def env_seeds(seed: int | Sequence[int | None] | None, num_envs: int, where: str) -> list[int | None]:
    """One seed per env, as ``SyncVectorEnv.reset`` reads ``seed``: ``None`` (every env ``None``), an int ``s``
    (env ``i`` gets ``s + i``) or a sequence of ``num_envs`` seeds. ``where`` names the caller in the error.

    Raises:
        ValueError: a sequence of another length.
    """
    if seed is None:
        return [None] * num_envs
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return [int(seed) + i for i in range(num_envs)]
    seeds = list(seed)
    if len(seeds) != num_envs:
        raise ValueError(f"{where}: seed must be None, an int or {num_envs} seeds (one per env), got {len(seeds)}")
    return seeds


def masked_rows(mask: object, num_envs: int, where: str) -> np.ndarray:
    """The env indices to reset: all (``mask`` ``None``) or those where the ``(num_envs,) bool`` ``mask`` is True.

    Raises:
        ValueError: ``mask`` not a ``(num_envs,)`` bool array with at least one True (``where`` names the caller).
    """
    if mask is None:
        return np.arange(num_envs)
    mask = np.asarray(mask)
    if mask.dtype != np.bool_ or mask.shape != (num_envs,) or not mask.any():
        raise ValueError(f"{where}: options['reset_mask'] must be a ({num_envs},) bool array with at least one True, "
                         f"got {mask!r:.80}")
    return np.flatnonzero(mask)


class BatchVectorEnv(VectorEnv, ABC):
    """A ``gymnasium.vector.VectorEnv`` of the ``N`` envs of a batched core, with next-step autoreset.

    Args:
        core: the batched core (:class:`BatchCore`); kept as ``self.core``.

    Spaces: ``single_observation_space`` / ``single_action_space`` are the core's (one env's);
    ``observation_space`` / ``action_space`` their batched forms (``Dict`` of ``(N, ...)`` boxes,
    ``MultiDiscrete([A] * N)``).

    Seeding: ``reset(seed=s)`` seeds env ``i`` with ``s + i`` (a list: one seed per env), as ``SyncVectorEnv``.
    Autoreset (``metadata["autoreset_mode"]``, next step): the step after an env terminates or truncates resets it
    (its action ignored), with reward 0, ``terminated = truncated = False`` and the reset info.
    ``reset(options={"reset_mask": (N,) bool})`` resets only the envs marked. Infos are Gymnasium's vector info
    dicts (:meth:`_add_info`).
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(self, core: BatchCore) -> None:
        self.core = core
        self.num_envs = core.num_envs
        self.metadata = dict(type(self).metadata)
        self.render_mode = None
        self.single_observation_space = core.single_observation_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.single_action_space = core.single_action_space
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._autoreset = np.zeros(self.num_envs, bool)  # (N,) the envs to reset at the next step

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Reset every env (or those of ``options["reset_mask"]``); ``seed``: ``None``, an int (env ``i`` gets
        ``seed + i``) or one seed per env. The other ``options`` go to the envs' resets (:meth:`_check_options`)."""
        where = f"{type(self).__name__}.reset"
        seeds = env_seeds(seed, self.num_envs, where)
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        self._check_options(options)
        rows = masked_rows(mask, self.num_envs, where)
        reset_infos = self._reset_envs(rows, [seeds[i] for i in rows], options or None, autoreset=False)
        self._autoreset[rows] = False
        return self.core.observation(), self._merge_infos(zip(rows.tolist(), reset_infos))

    def step(self, actions: object) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict]:
        """One step of every env (the envs that ended at the last step are reset instead)."""
        auto = self._autoreset
        infos_by_env: dict[int, dict[str, Any]] = {}
        resetting = np.count_nonzero(auto) > 0  # (a quarter of auto.any()'s time on (N,) bools)
        if resetting:
            rows = np.flatnonzero(auto)
            infos_by_env.update(zip(rows.tolist(), self._reset_envs(rows, [None] * rows.size, None, autoreset=True)))
        result = self.core.step(actions, ~auto if resetting else None)  # None: every env
        infos_by_env.update(result.infos)
        infos = self._merge_infos((i, infos_by_env[i]) for i in sorted(infos_by_env)) if infos_by_env else {}
        self._autoreset = result.terminated | result.truncated
        return self.core.observation(), result.rewards, result.terminated, result.truncated, infos

    def action_masks(self) -> np.ndarray:
        """``(N, A) int8``: each env's valid actions now (== ``obs["action_mask"]``)."""
        return self.core.action_masks()

    # ------------------------------------------------------------------ what a subclass says
    def _check_options(self, options: dict[str, Any]) -> None:
        """Refuse reset ``options`` (``reset_mask`` taken out) the envs do not take; by default all go through."""

    @abstractmethod
    def _reset_envs(self, rows: np.ndarray, seeds: list[int | None], options: dict[str, Any] | None,
                    autoreset: bool) -> list[dict[str, Any]]:
        """Reset the envs of ``rows`` in the core (env ``rows[j]`` seeded with ``seeds[j]``, each given ``options``);
        ``autoreset``: called by :meth:`step` before it steps the others. Returns the reset infos, in row order."""

    # ------------------------------------------------------------------ infos
    def _merge_infos(self, env_infos: Iterable[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
        """Gymnasium's vector info dict of ``(env index, info)`` pairs, merged in the order given. A run of envs
        whose infos have the same keys (every env ending in one step) is merged key by key
        (:meth:`_add_same_keys`) after its first env: the same dict as merging env by env."""
        infos: dict[str, Any] = {}
        pairs = list(env_infos)
        start = 0
        while start < len(pairs):
            keys = pairs[start][1].keys()
            stop = start + 1
            while stop < len(pairs) and pairs[stop][1].keys() == keys:
                stop += 1
            infos = self._add_info(infos, pairs[start][1], pairs[start][0])
            if stop - start > 1:
                infos = self._add_same_keys(infos, pairs[start + 1 : stop])
            start = stop
        return infos

    def _add_same_keys(self, vector_infos: dict[str, Any], pairs: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
        """:meth:`_add_info` of each ``(env index, info)`` pair, all infos with keys already in ``vector_infos``:
        each key's values go into its array at once where that array is numeric and every value is a number or an
        array of its row shape (the element-wise assignments' result), entry by entry into an object array; nested
        infos, final observations and rows of another shape env by env through :meth:`_add_info`."""
        rows = [i for i, _ in pairs]
        for key in pairs[0][1]:
            array = vector_infos.get(key)
            values = [info[key] for _, info in pairs]
            if not isinstance(array, np.ndarray) or key == "final_obs" or any(isinstance(v, dict) for v in values):
                bulk = None
            elif array.dtype == object:
                bulk = "entries"
            else:
                bulk = "rows" if all(_fits_row(v, array.shape[1:]) for v in values) else None
            if bulk is None:  # nested infos, final observations, rows of another shape: Gymnasium's way
                for i, info in pairs:
                    vector_infos = self._add_info(vector_infos, {key: info[key]}, i)
                continue
            if bulk == "rows":
                array[rows] = values
            else:
                for i, value in zip(rows, values):
                    array[i] = value  # one object entry each, as the merge sets it
            vector_infos[f"_{key}"][rows] = True
        return vector_infos

    def _add_info(self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int) -> dict[str, Any]:
        """Gymnasium's vector info merge (``VectorEnv._add_info``) with two changes. An array entry whose shape
        differs from the other envs' (graphs of different sizes) turns the key's array into an object array
        instead of failing. A key already present whose value is not a dict (the per-step keys of every env)
        takes a fast path: the value goes into the existing array, as Gymnasium's merge puts it there."""
        rest = {}
        for key, value in env_info.items():
            array = vector_infos.get(key)
            if not isinstance(array, np.ndarray) or isinstance(value, dict) or key == "final_obs":
                rest[key] = value
                continue
            if isinstance(value, np.ndarray) and array.dtype != object and array.shape[1:] != value.shape:
                array = vector_infos[key] = self._as_objects(array, vector_infos[f"_{key}"])
            array[env_num] = value
            vector_infos[f"_{key}"][env_num] = True
        return super()._add_info(vector_infos, rest, env_num) if rest else vector_infos

    def _as_objects(self, array: np.ndarray, had: np.ndarray) -> np.ndarray:
        """``(N,)`` object array holding ``array[j]`` for the envs ``j`` marked in ``had``, ``None`` elsewhere."""
        mixed = np.full(self.num_envs, None, dtype=object)
        for j in np.flatnonzero(had).tolist():
            mixed[j] = array[j]
        return mixed


def _fits_row(value: object, row_shape: tuple[int, ...]) -> bool:
    """Whether ``value`` is what Gymnasium's merge puts into one row of a numeric info array of rows ``row_shape``
    as is: an array of that shape, or a number (a bool, an int, a float, a NumPy number or bool) for rows of ``()``."""
    if isinstance(value, np.ndarray):
        return value.shape == row_shape
    return not row_shape and isinstance(value, (int, float, np.number, np.bool_))


# ---------------------------------------------------------------------- shared by the batched cores
class BatchObservations:
    """The observation views of a batched core whose observations are the ``(N, ...)`` arrays of ``self.obs``.

    A subclass sets ``obs`` (``{key: (N, ...) array}``, the live arrays) and ``copy_obs`` (whether
    :meth:`observation` copies by default).
    """

    obs: dict[str, np.ndarray]
    copy_obs: bool

    def observation(self, copy: bool | None = None) -> dict[str, np.ndarray]:
        """``{key: (N, ...) array}``: fresh copies (``copy``, default ``copy_obs``) or the live arrays."""
        copy = self.copy_obs if copy is None else copy
        return {k: v.copy() for k, v in self.obs.items()} if copy else dict(self.obs)

    def row(self, i: int) -> dict[str, np.ndarray]:
        """Env ``i``'s observation (fresh copies), as the single env returns it."""
        return {k: v[i].copy() for k, v in self.obs.items()}


def batch_actions(actions: object, num_envs: int, where: str, meaning: str) -> np.ndarray:
    """``actions`` as ``(num_envs,) int64``, one action per env.

    Args:
        actions: array-like of integers.
        num_envs: ``N``.
        where: the caller, first in the error (``"PlacementVectorEnv.step"``).
        meaning: what an action is, in the error's parentheses.

    Raises:
        TypeError: not integers. ValueError: not of shape ``(num_envs,)``.
    """
    arr = np.asarray(actions)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{where}: actions must be integers ({meaning}), one per env; got dtype {arr.dtype}")
    if arr.shape != (num_envs,):
        raise ValueError(f"{where}: actions must have shape ({num_envs},) (one per env), got shape {arr.shape}")
    return arr.astype(np.int64, copy=False)


def shown_actions(mask_row: np.ndarray, most: int = 20) -> str:
    """The valid actions of one env's ``(A,)`` mask for an error message: the first ``most``, then ``...``."""
    valid = np.flatnonzero(mask_row)
    return ", ".join(str(int(x)) for x in valid[:most]) + (", ..." if valid.size > most else "")
