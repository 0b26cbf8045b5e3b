"""``gym.make_vec("Doppler-ClusterVec-v0", num_envs=N, ...)``: a native Gymnasium vector env of ``N`` cluster envs.

:class:`ClusterVectorEnv` returns what ``gymnasium.vector.SyncVectorEnv`` over ``N`` ``Doppler-Cluster-v0`` envs
(``gym.make``) with the same keywords returns (observations, rewards, terminations, truncations and infos,
equal for the same seeds and actions), in Gymnasium's default next-step autoreset mode, with the observations
written into preallocated ``(N, ...)`` arrays. Speed: ``docs/results/bench_cluster_vector.md``. The batched core is
:class:`~doppler_gym.envs.cluster_vector.batch.ClusterBatch`; seeding, autoreset and infos are
:class:`~doppler_gym.envs.batched.BatchVectorEnv`'s.

>>> envs = ClusterVectorEnv(num_envs=8, trace="generated:30", cluster="2x8")  # doctest: +SKIP
>>> obs, infos = envs.reset(seed=0)                                           # env i seeded with 0 + i
>>> obs, rewards, terminated, truncated, infos = envs.step(actions)           # obs["jobs"]: (8, 30, 12)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from doppler_gym.envs.batched import BatchVectorEnv
from doppler_gym.envs.cluster_vector.batch import ClusterBatch


class ClusterVectorEnv(BatchVectorEnv):
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

    def __init__(self, num_envs: int = 1, copy_obs: bool = True, **kwargs: Any) -> None:
        super().__init__(ClusterBatch(num_envs, copy_obs=copy_obs, **kwargs))

    @property
    def envs(self) -> tuple:
        """The ``N`` single :class:`~doppler_gym.envs.cluster.ClusterEnv` objects (read their public state between
        steps, e.g. ``job_view`` for a heuristic policy; stepping them directly desynchronises the batch)."""
        return self.core.envs

    def _check_options(self, options: dict[str, Any]) -> None:
        """``Doppler-Cluster-v0``'s reset takes no options: any but ``reset_mask`` is a ``ValueError``."""
        if options:
            raise ValueError(f"ClusterVectorEnv.reset: unknown option(s) {sorted(options)}; the only option is "
                             f"'reset_mask' (Doppler-Cluster-v0's reset takes none)")

    def _reset_envs(self, rows: np.ndarray, seeds: list[int | None], options: dict[str, Any] | None,
                    autoreset: bool) -> list[dict[str, Any]]:
        """An autoreset leaves the rows' observations to the step that follows (written with the others)."""
        return self.core.reset(rows, seeds, write=not autoreset)
