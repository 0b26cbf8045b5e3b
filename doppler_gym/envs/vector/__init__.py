"""Native vector envs of ``Doppler-Sim-v0``: ``N`` placement envs stepped in one batched call.

- :class:`~doppler_gym.envs.vector.env.PlacementVectorEnv`: the ``gymnasium.vector.VectorEnv``
  (``gym.make_vec("Doppler-Sim-v0", num_envs=N, vectorization_mode="vector_entry_point", ...)``), next-step
  autoreset, equal to a ``SyncVectorEnv`` of single envs.
- :class:`~doppler_gym.envs.vector.core.PlacementBatch`: the batched core it and ``agents.sb3_vec_env`` share.

Modules: :mod:`.options` (which keywords are supported), :mod:`.tables` (each env's instance rows),
:mod:`.buffers` (state and observation arrays), :mod:`.kernel` (the Numba step), :mod:`.simulate` (the
batched simulator calls), :mod:`.rewards` (rewards over arrays), :mod:`.core`, :mod:`.env`. Seeding, autoreset
and the vector infos are :class:`~doppler_gym.envs.batched.BatchVectorEnv`'s, shared with ``cluster_vector``.
"""

from __future__ import annotations

from doppler_gym.envs.vector.core import PlacementBatch
from doppler_gym.envs.vector.env import PlacementVectorEnv

__all__ = ["PlacementBatch", "PlacementVectorEnv"]
