"""Gymnasium ids of the doppler-gym envs (string entry points: nothing heavy is imported here).

``import doppler_gym`` runs this module, after which ``gym.make("Doppler-Sim-v0", ...)`` works;
``gym.make("doppler_gym:Doppler-Sim-v0")`` imports the package first. ``Doppler-Real-v0`` points
into ``envs_real`` (the real backend), which is imported only when that env is made, so a
CPU-only install never touches torch or CUDA here.

Every id lists :class:`~doppler_gym.envs.masked.ActionMasks` as its last ``additional_wrappers``
entry: ``gym.make`` applies it outermost, so ``gym.make(env_id).action_masks()`` works through
Gymnasium's ``OrderEnforcing`` / ``PassiveEnvChecker`` / ``TimeLimit``, which forward no attribute.
An entry point that returns a wrapped env (``make_real_env`` returns ``RealInfo(PlacementEnv)``)
lists its own wrapper first, as Gymnasium requires of an id whose entry point wraps
(:data:`PRIOR_WRAPPERS`). Gymnasium 1.2 refuses ``gym.make_vec(..., vectorization_mode=
"vector_entry_point")`` for an id with ``additional_wrappers``, so the native vector env of the placement
MDP has an id of its own, :data:`VECTOR_ENV_ID` (``"Doppler-SimVec-v0"``)::

    envs = gym.make_vec("Doppler-SimVec-v0", num_envs=64, graph="paper/ffnn", observation="flat")

gives a :class:`~doppler_gym.envs.vector.PlacementVectorEnv` (one batched Numba step for all envs;
``vectorization_mode="vector_entry_point"`` is that id's default), while ``gym.make("Doppler-SimVec-v0")``
gives the single :class:`~doppler_gym.envs.placement.PlacementEnv` itself, unwrapped (no order enforcing, no
passive checker), so its ``action_masks()`` is reachable without a wrapper. The cluster env has the same
pair, :data:`CLUSTER_VECTOR_ENV_ID` (``"Doppler-ClusterVec-v0"``): ``gym.make_vec`` gives a
:class:`~doppler_gym.envs.cluster_vector.ClusterVectorEnv`, ``gym.make`` the unwrapped
:class:`~doppler_gym.envs.cluster.ClusterEnv`.
"""

from __future__ import annotations

from gymnasium.envs.registration import WrapperSpec, register, registry

ENV_IDS = ("Doppler-Sim-v0", "Doppler-SimAssign-v0")  # simulator-backed ids
REAL_ENV_ID = "Doppler-Real-v0"
COLLECTIVE_ENV_ID = "Doppler-Collective-v0"  # TE-CCL chunk scheduling (doppler_gym.envs.collective)
CLUSTER_ENV_ID = "Doppler-Cluster-v0"  # online job scheduling on the cluster simulator (doppler_gym.envs.cluster)
VECTOR_ENV_ID = "Doppler-SimVec-v0"  # Doppler-Sim-v0 with a native vector entry point (doppler_gym.envs.vector)
# Doppler-Cluster-v0 with a native vector entry point (doppler_gym.envs.cluster_vector)
CLUSTER_VECTOR_ENV_ID = "Doppler-ClusterVec-v0"

_ENTRY_POINTS = {
    "Doppler-Sim-v0": "doppler_gym.envs.placement:PlacementEnv",
    "Doppler-SimAssign-v0": "doppler_gym.envs.assign:AssignEnv",
    REAL_ENV_ID: "envs_real.env:make_real_env",
    COLLECTIVE_ENV_ID: "doppler_gym.envs.collective.env:CollectiveEnv",
    CLUSTER_ENV_ID: "doppler_gym.envs.cluster:ClusterEnv",
}
# the wrapper gym.make puts outermost (as Wrapper.spec names it: no recorded arguments)
ACTION_MASKS = WrapperSpec(name="ActionMasks", entry_point="doppler_gym.envs.masked:ActionMasks", kwargs={})
# wrappers an entry point applies itself, as Wrapper.spec names them (RealInfo records no arguments: kwargs None)
PRIOR_WRAPPERS: dict[str, tuple[WrapperSpec, ...]] = {
    REAL_ENV_ID: (WrapperSpec(name="RealInfo", entry_point="envs_real.env:RealInfo", kwargs=None),),
}

for _env_id, _entry_point in _ENTRY_POINTS.items():
    if _env_id not in registry:  # importing twice (e.g. after a module reload) must not warn
        register(id=_env_id, entry_point=_entry_point,
                 additional_wrappers=(*PRIOR_WRAPPERS.get(_env_id, ()), ACTION_MASKS))

if VECTOR_ENV_ID not in registry:
    register(id=VECTOR_ENV_ID, entry_point=_ENTRY_POINTS["Doppler-Sim-v0"],
             vector_entry_point="doppler_gym.envs.vector.env:PlacementVectorEnv",
             order_enforce=False, disable_env_checker=True)

if CLUSTER_VECTOR_ENV_ID not in registry:
    register(id=CLUSTER_VECTOR_ENV_ID, entry_point=_ENTRY_POINTS[CLUSTER_ENV_ID],
             vector_entry_point="doppler_gym.envs.cluster_vector.env:ClusterVectorEnv",
             order_enforce=False, disable_env_checker=True)
