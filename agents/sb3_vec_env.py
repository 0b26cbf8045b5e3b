""":class:`PlacementVecEnv`: an SB3 ``VecEnv`` of ``N`` ``Doppler-Sim-v0`` envs stepped in one batched call.

It returns what SB3's ``DummyVecEnv`` over ``N`` single envs with the same keywords returns (observations,
rewards, dones, infos, ``reset_infos``), step for step for the same seeds and actions, from the batched core
of the native Gymnasium vector env (:class:`~doppler_gym.envs.vector.core.PlacementBatch`): SB3's same-step
autoreset, ``infos[i]["terminal_observation"]`` and ``infos[i]["TimeLimit.truncated"]``, seeds ``seed + i``
from :meth:`seed` at the next :meth:`reset` (:class:`~agents.sb3_batch_vec_env.BatchVecEnv`). sb3-contrib's
``MaskablePPO`` reads the masks through ``env_method("action_masks")`` (``get_action_masks``), answered from one
``(N, A)`` array.

>>> from sb3_contrib import MaskablePPO                                                        # doctest: +SKIP
>>> venv = PlacementVecEnv(16, graph="paper/ffnn", topology=4, observation="flat")            # doctest: +SKIP
>>> MaskablePPO("MultiInputPolicy", venv, gamma=0.99).learn(100_000)                          # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.sb3_batch_vec_env import MASK_METHOD, BatchVecEnv
from doppler_gym.envs.vector.core import PlacementBatch

__all__ = ["MASK_METHOD", "PlacementVecEnv"]


class PlacementVecEnv(BatchVecEnv):
    """``num_envs`` placement envs behind SB3's ``VecEnv`` interface.

    Args:
        num_envs: number of envs ``N``.
        sim_threads: Numba threads of the batched simulator calls (default 1; ``None``: tuned while stepping).
        **kwargs: ``Doppler-Sim-v0``'s keywords, the same for every env (see
            :class:`~doppler_gym.envs.vector.env.PlacementVectorEnv` for the ones refused).

    Attributes of the envs (:meth:`get_attr`) are the batch's (:class:`PlacementBatch`: ``reward``,
    ``max_ops``, ``observation_form``, ...), the same for every env; ``render_mode`` is ``None``.
    :meth:`env_method` serves ``"action_masks"`` (each env's ``(A,) int8`` mask); :meth:`action_masks`
    gives them all as one ``(N, A)`` array. The options of :meth:`set_options` (``graph``/``topology``, as
    ``PlacementEnv.reset``) go to the next :meth:`reset`.
    """

    def __init__(self, num_envs: int, sim_threads: int | None = 1, **kwargs: Any) -> None:
        super().__init__(PlacementBatch(num_envs, sim_threads=sim_threads, **kwargs))

    def _reset_envs(self, rows: np.ndarray, seeds: list[int | None],
                    options: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self.core.reset(rows, seeds, [opts or None for opts in options])

    def _attr_owner(self, i: int) -> object:
        """The batch: its attributes are every env's."""
        return self.core
