""":class:`ClusterVecEnv`: an SB3 ``VecEnv`` of ``N`` ``Doppler-Cluster-v0`` envs behind one step call.

It returns what SB3's ``DummyVecEnv`` over ``N`` single envs with the same keywords returns (observations,
rewards, dones, infos, ``reset_infos``), step for step for the same seeds and actions, from the batched core of
the native Gymnasium vector env (:class:`~doppler_gym.envs.cluster_vector.batch.ClusterBatch`: the observations
of all envs written into ``(N, ...)`` arrays in one pass): SB3's same-step autoreset,
``infos[i]["terminal_observation"]`` and ``infos[i]["TimeLimit.truncated"]``, seeds ``seed + i`` from
:meth:`seed` at the next :meth:`reset` (:class:`~agents.sb3_batch_vec_env.BatchVecEnv`). sb3-contrib's
``MaskablePPO`` reads the masks through ``env_method("action_masks")`` (``get_action_masks``), answered from one
``(N, A)`` array. The recipe key ``vec_env: doppler`` (``agents/recipes/hyperparams.py``) builds it.

>>> from sb3_contrib import MaskablePPO                                          # doctest: +SKIP
>>> venv = ClusterVecEnv(8, trace="generated:30", cluster="2x8", max_jobs=16)   # doctest: +SKIP
>>> MaskablePPO("MultiInputPolicy", venv, gamma=1.0).learn(100_000)             # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.sb3_batch_vec_env import MASK_METHOD, BatchVecEnv
from doppler_gym.envs.cluster_vector.batch import ClusterBatch

__all__ = ["MASK_METHOD", "ClusterVecEnv"]


class ClusterVecEnv(BatchVecEnv):
    """``num_envs`` cluster envs behind SB3's ``VecEnv`` interface.

    Args:
        num_envs: number of envs ``N``.
        **kwargs: ``Doppler-Cluster-v0``'s keywords, the same for every env (see
            :class:`~doppler_gym.envs.cluster_vector.env.ClusterVectorEnv` for the one refused).

    :meth:`get_attr` reads each env's public attribute (``n_jobs``, ``trace_seed``, ``modes``, ...);
    ``render_mode`` is ``None``. :meth:`env_method` serves ``"action_masks"`` (each env's ``(A,) int8`` mask);
    :meth:`action_masks` gives them all as one ``(N, A)`` array. The single envs are ``venv.core.envs`` (read
    their state between steps; stepping them directly desynchronises the batch). :meth:`reset` refuses the options
    of :meth:`set_options` (``Doppler-Cluster-v0``'s reset takes none) with a ``ValueError``.
    """

    env_method_hint = "; read venv.core.envs[i] for the rest"

    def __init__(self, num_envs: int, **kwargs: Any) -> None:
        super().__init__(ClusterBatch(num_envs, **kwargs))

    def _reset_envs(self, rows: np.ndarray, seeds: list[int | None],
                    options: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if any(options):
            raise ValueError(f"ClusterVecEnv.reset: Doppler-Cluster-v0's reset takes no options, got "
                             f"{[o for o in options if o]} (from set_options)")
        return self.core.reset(rows, seeds)

    def _attr_owner(self, i: int) -> object:
        """Env ``i`` (the single ``ClusterEnv``)."""
        return self.core.envs[i]
