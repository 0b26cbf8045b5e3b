"""Gymnasium ids of the doppler-gym envs (string entry points: nothing heavy is imported here).

``import doppler_gym`` runs this module, after which ``gym.make("Doppler-Sim-v0", ...)`` works;
``gym.make("doppler_gym:Doppler-Sim-v0")`` imports the package first. ``Doppler-Real-v0`` points
into ``envs_real`` (the real backend), which is imported only when that env is made, so a
CPU-only install never touches torch or CUDA here.
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

ENV_IDS = ("Doppler-Sim-v0", "Doppler-SimAssign-v0")  # simulator-backed ids
REAL_ENV_ID = "Doppler-Real-v0"
COLLECTIVE_ENV_ID = "Doppler-Collective-v0"  # TE-CCL chunk scheduling (doppler_gym.envs.collective)
CLUSTER_ENV_ID = "Doppler-Cluster-v0"  # online job scheduling on the cluster simulator (doppler_gym.envs.cluster)

_ENTRY_POINTS = {
    "Doppler-Sim-v0": "doppler_gym.envs.placement:PlacementEnv",
    "Doppler-SimAssign-v0": "doppler_gym.envs.assign:AssignEnv",
    REAL_ENV_ID: "envs_real.env:make_real_env",
    COLLECTIVE_ENV_ID: "doppler_gym.envs.collective.env:CollectiveEnv",
    CLUSTER_ENV_ID: "doppler_gym.envs.cluster:ClusterEnv",
}

for _env_id, _entry_point in _ENTRY_POINTS.items():
    if _env_id not in registry:  # importing twice (e.g. after a module reload) must not warn
        register(id=_env_id, entry_point=_entry_point)
