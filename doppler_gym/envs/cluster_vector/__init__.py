"""Native vector envs of ``Doppler-Cluster-v0``: ``N`` cluster envs behind one step call.

- :class:`~doppler_gym.envs.cluster_vector.env.ClusterVectorEnv`: the ``gymnasium.vector.VectorEnv``
  (``gym.make_vec("Doppler-ClusterVec-v0", num_envs=N, ...)``), next-step autoreset, equal to a ``SyncVectorEnv``
  of ``Doppler-Cluster-v0`` envs.
- :class:`~doppler_gym.envs.cluster_vector.batch.ClusterBatch`: the batched core it and
  ``agents.sb3_cluster_vec_env`` share.

Modules: :mod:`.observation` (the observations of all envs in ``(N, ...)`` arrays, one batched pass),
:mod:`.batch` (the envs, their options, reset and step), :mod:`.env` (the Gymnasium API: seeding, autoreset and
the vector infos of :class:`~doppler_gym.envs.batched.BatchVectorEnv`, shared with ``vector``).
"""

from __future__ import annotations

from doppler_gym.envs.cluster_vector.batch import ClusterBatch
from doppler_gym.envs.cluster_vector.env import ClusterVectorEnv

__all__ = ["ClusterBatch", "ClusterVectorEnv"]
