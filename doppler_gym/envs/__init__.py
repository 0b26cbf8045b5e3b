"""Gymnasium environments: DOPPLER's placement MDP, one-shot assignment, collective and cluster scheduling.

=========================  ==============================================  ====================================
id                         entry point                                     decision
=========================  ==============================================  ====================================
``Doppler-Sim-v0``         :class:`~.placement.PlacementEnv`                SEL an op, then PLC its device
``Doppler-SimAssign-v0``   :class:`~.assign.AssignEnv`                      the whole assignment at once
``Doppler-Collective-v0``  :class:`~.collective.env.CollectiveEnv`          TE-CCL chunk sends, epoch by epoch
``Doppler-Cluster-v0``     :class:`~.cluster.ClusterEnv`                    the next job to start on a GPU cluster
``Doppler-Real-v0``        ``envs_real.env:make_real_env``                  as ``Doppler-Sim-v0``, run for real
``Doppler-SimVec-v0``      :class:`~.vector.PlacementVectorEnv` (make_vec)  ``Doppler-Sim-v0``, N envs per call
=========================  ==============================================  ====================================

``ENV_IDS`` holds the graph-placement ids (made with ``graph=...``); ``Doppler-Collective-v0`` and
``Doppler-Cluster-v0`` (``registration.COLLECTIVE_ENV_ID``, ``registration.CLUSTER_ENV_ID``) take
other arguments. ``Doppler-Real-v0`` is a :class:`~.placement.PlacementEnv` whose backend is the real one
(``envs_real.RealBackend``); its string entry point loads ``envs_real`` only when the env is made.

Batches: ``gym.make_vec("Doppler-SimVec-v0", num_envs=N, ...)`` steps N placement envs in one Numba call
(:mod:`~.vector`; ``agents.sb3_vec_env.PlacementVecEnv`` is the same for SB3).

Wrappers: :class:`~.wrappers.PlaceOnly` (the agent only places) and :class:`~.wrappers.SelectOnly`
(the agent only orders). Rewards: :mod:`~.rewards`; backends: :mod:`~.backend`; the observation
layout: :mod:`~.observation`.

The ids are registered when ``doppler_gym`` is imported (:mod:`~.registration`). The classes
load lazily, so ``import doppler_gym`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

from doppler_gym.envs.registration import ENV_IDS

_LAZY = {
    "PlacementEnv": "doppler_gym.envs.placement",
    "AssignEnv": "doppler_gym.envs.assign",
    "CollectiveEnv": "doppler_gym.envs.collective.env",
    "ClusterEnv": "doppler_gym.envs.cluster",
    "PlacementVectorEnv": "doppler_gym.envs.vector",
    "PlaceOnly": "doppler_gym.envs.wrappers",
    "SelectOnly": "doppler_gym.envs.wrappers",
    "Backend": "doppler_gym.envs.backend",
    "SimBackend": "doppler_gym.envs.backend",
    "Reward": "doppler_gym.envs.rewards",
    "SparseReward": "doppler_gym.envs.rewards",
    "MakespanReward": "doppler_gym.envs.rewards",
    "ImprovementReward": "doppler_gym.envs.rewards",
    "ShapedReward": "doppler_gym.envs.rewards",
    "make_reward": "doppler_gym.envs.rewards",
    "reward_names": "doppler_gym.envs.rewards",
    "register_reward": "doppler_gym.envs.rewards",
    "unregister_reward": "doppler_gym.envs.rewards",
    "ObservationBuilder": "doppler_gym.envs.observation",
    "GraphContext": "doppler_gym.envs.context",
    "graph_id": "doppler_gym.envs.context",
}


__all__ = [
    "ENV_IDS", "AssignEnv", "Backend", "ClusterEnv", "CollectiveEnv", "GraphContext", "ImprovementReward",
    "MakespanReward", "ObservationBuilder", "PlaceOnly", "PlacementEnv", "PlacementVectorEnv", "Reward",
    "SelectOnly", "ShapedReward", "SimBackend", "SparseReward", "graph_id", "make_reward", "register_reward",
    "reward_names", "unregister_reward",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'doppler_gym.envs' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
