"""Load the shipped hyperparameters (``hyperparams/<algo>.yml``) and build an sb3 / sb3-contrib model from them.

The files follow rl-baselines3-zoo's format (``hyperparams/ppo.yml`` there): the top-level keys are
env ids; each entry holds

- ``policy``: the policy name (``MultiInputPolicy`` for the Dict observations);
- ``n_timesteps``: the training budget [env steps] the recipe was measured with;
- ``n_envs`` (optional, default 1): envs in the ``DummyVecEnv``;
- ``env_kwargs`` (optional): keyword arguments of ``gym.make(env_id, ...)``, a YAML mapping;
- ``vec_env`` (optional, default ``dummy``): ``dummy`` (SB3's ``DummyVecEnv`` of ``Monitor``-wrapped
  ``gym.make`` envs) or ``doppler`` (``agents.sb3_vec_env.PlacementVecEnv`` for ``Doppler-Sim-v0``,
  ``agents.sb3_cluster_vec_env.ClusterVecEnv`` for ``Doppler-Cluster-v0``: every env in one batched call),
  under SB3's ``VecMonitor``;
- ``eval_every``, ``eval_episodes``, ``eval_metric`` (optional): the greedy evaluations of
  :func:`agents.recipes.run.train_recipe` (env steps between them, episodes each, the final ``info`` key
  scored, lower is better);
- ``policy_kwargs`` (optional): keyword arguments of the policy, a YAML mapping (never an evaluated
  string, unlike rl-zoo's ``"dict(...)"``); ``activation_fn`` is written as a ``torch.nn`` class name
  (``Tanh``, ``ReLU``);
- every other key is a keyword argument of the algorithm's constructor (``n_steps``, ``batch_size``,
  ``gamma``, ``gae_lambda``, ``ent_coef``, ``learning_rate``, ...). A ``learning_rate`` or
  ``clip_range`` written ``lin_<x>`` decays linearly from ``x`` to 0 over training, as in rl-zoo.

Each file is a plain mapping by env id: a new env's entry is appended as another top-level key.
"""

from __future__ import annotations

import copy
import importlib
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

HYPERPARAMS_DIR = Path(__file__).parent / "hyperparams"  # one <algo>.yml per algorithm
# algorithm name (the YAML file's stem) -> (module, class)
ALGOS: dict[str, tuple[str, str]] = {
    "maskable_ppo": ("sb3_contrib", "MaskablePPO"),
    "ppo": ("stable_baselines3", "PPO"),
    "a2c": ("stable_baselines3", "A2C"),
}
# not the algorithm's kwargs: the run's (vec_env, and the evaluation keys agents.recipes.run reads)
_RESERVED = ("policy", "n_timesteps", "n_envs", "env_kwargs", "policy_kwargs", "vec_env", "eval_every",
             "eval_episodes", "eval_metric")
# vec_env values: "dummy" (SB3's DummyVecEnv of gym.make envs) or "doppler" (the batched PlacementVecEnv of
# agents.sb3_vec_env, for the env ids it serves)
VEC_ENVS = ("dummy", "doppler")
NATIVE_VEC_IDS = ("Doppler-Sim-v0", "Doppler-SimVec-v0", "Doppler-Cluster-v0", "Doppler-ClusterVec-v0")
_SCHEDULED = ("learning_rate", "clip_range")  # may be written lin_<x>


def algorithms() -> tuple[str, ...]:
    """The algorithms with a shipped hyperparameter file, sorted."""
    return tuple(sorted(a for a in ALGOS if (HYPERPARAMS_DIR / f"{a}.yml").is_file()))


def _read(algo: str) -> dict[str, Any]:
    if not isinstance(algo, str) or algo not in algorithms():
        raise ValueError(f"unknown algorithm {algo!r}: hyperparameters are shipped for {', '.join(algorithms())} "
                         f"(files {HYPERPARAMS_DIR}/<algo>.yml)")
    import yaml  # PyYAML, with the agents extra

    path = HYPERPARAMS_DIR / f"{algo}.yml"
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the top level must be a mapping from env id to its hyperparameters")
    return data


def env_ids(algo: str) -> tuple[str, ...]:
    """The env ids with an entry in ``algo``'s file, in file order."""
    return tuple(_read(algo))


def load_hyperparams(algo: str, env_id: str) -> dict[str, Any]:
    """The entry of ``env_id`` in ``hyperparams/<algo>.yml``, checked and with its defaults filled in.

    Returns a fresh dict with ``policy`` (str), ``n_timesteps`` (int), ``n_envs`` (int),
    ``env_kwargs`` and ``policy_kwargs`` (dicts, as written) and the algorithm's own keyword arguments.

    Raises:
        ValueError: ``algo`` has no file, ``env_id`` no entry in it (both name what there is), or the
            entry is malformed (a missing ``policy`` or ``n_timesteps``, a non-mapping ``env_kwargs``).
    """
    data = _read(algo)
    where = f"{HYPERPARAMS_DIR / (algo + '.yml')}, entry {env_id!r}"
    if env_id not in data:
        raise ValueError(f"no {algo} hyperparameters for env id {env_id!r}; the file has: {', '.join(map(str, data))}")
    entry = data[env_id]
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: must be a mapping of hyperparameters, got {type(entry).__name__}")
    hp = copy.deepcopy(entry)
    if not isinstance(hp.get("policy"), str):
        raise ValueError(f"{where}: 'policy' must name a policy (e.g. MultiInputPolicy), got {hp.get('policy')!r}")
    hp["n_timesteps"] = _positive_int(hp.get("n_timesteps"), "n_timesteps", where)
    hp["n_envs"] = _positive_int(hp.get("n_envs", 1), "n_envs", where)
    for key in ("env_kwargs", "policy_kwargs"):
        hp[key] = {} if hp.get(key) is None else hp[key]
        if not isinstance(hp[key], dict):
            raise ValueError(f"{where}: {key!r} must be a YAML mapping (key: value lines), got {hp[key]!r}")
    return hp


def make_model(algo: str, env_id: str, seed: int, env_kwargs_overrides: Mapping[str, Any] | None = None,
               n_envs: int | None = None):
    """Build ``algo``'s model for ``env_id`` from the shipped hyperparameters.

    Args:
        algo: a name of :data:`ALGOS` with a shipped file (:func:`algorithms`).
        env_id: a registered env id with an entry in that file.
        seed: seeds the model (torch, its action sampling) and the envs (``vec_env.seed(seed)``: env
            ``i`` resets with seed ``seed + i`` first).
        env_kwargs_overrides: entries replacing or adding to the recipe's ``env_kwargs``.
        n_envs: envs in the vector env (default: the recipe's ``n_envs``).

    Returns:
        ``(model, vec_env)``: the untrained model (``device="cpu"`` unless the recipe sets ``device``)
        and its vector env (the recipe's ``vec_env``: by default a ``DummyVecEnv`` of ``Monitor``-wrapped
        ``gym.make(env_id, **env_kwargs)`` envs). Train
        with ``model.learn(load_hyperparams(algo, env_id)["n_timesteps"])``.

    Raises:
        ValueError: unknown ``algo`` or ``env_id`` (see :func:`load_hyperparams`), a key that is not
            a keyword argument of the algorithm, or ``n_envs < 1``.
        TypeError: ``seed`` is not an int.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {seed!r}")
    hp = load_hyperparams(algo, env_id)
    where = f"{HYPERPARAMS_DIR / (algo + '.yml')}, entry {env_id!r}"
    module, name = ALGOS[algo]
    cls = getattr(importlib.import_module(module), name)
    kwargs = {k: v for k, v in hp.items() if k not in _RESERVED}
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "policy", "env"}
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise ValueError(f"{where}: {unknown} are not keyword arguments of {name}; valid: {sorted(accepted)}")
    for key in _SCHEDULED:
        if isinstance(kwargs.get(key), str):
            kwargs[key] = _schedule(kwargs[key], key, where)
    kwargs.setdefault("device", "cpu")  # small MLPs: the CPU is faster than moving batches to a GPU
    n = hp["n_envs"] if n_envs is None else _positive_int(n_envs, "n_envs", "make_model")
    kind = hp.get("vec_env", "dummy")
    if kind not in VEC_ENVS or (kind == "doppler" and env_id not in NATIVE_VEC_IDS):
        raise ValueError(f"{where}: vec_env must be one of {VEC_ENVS} ('doppler' only for {NATIVE_VEC_IDS}), "
                         f"got {kind!r}")
    vec_env = _vec_env(env_id, {**hp["env_kwargs"], **dict(env_kwargs_overrides or {})}, n, kind)
    vec_env.seed(seed)
    model = cls(hp["policy"], vec_env, seed=seed, policy_kwargs=_policy_kwargs(hp["policy_kwargs"], where),
                **kwargs)
    return model, vec_env


def _vec_env(env_id: str, env_kwargs: dict[str, Any], n: int, kind: str = "dummy"):
    import gymnasium as gym
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

    import doppler_gym  # noqa: F401  (registers the env ids)

    if kind == "doppler" and env_id.startswith("Doppler-Cluster"):  # agents.sb3_cluster_vec_env.ClusterVecEnv
        from agents.sb3_cluster_vec_env import ClusterVecEnv

        return VecMonitor(ClusterVecEnv(n, **env_kwargs))
    if kind == "doppler":
        from agents.sb3_vec_env import PlacementVecEnv

        return VecMonitor(PlacementVecEnv(n, **env_kwargs))

    def make() -> gym.Env:
        return Monitor(gym.make(env_id, **env_kwargs))

    return DummyVecEnv([make] * n)


def _policy_kwargs(policy_kwargs: dict[str, Any], where: str) -> dict[str, Any]:
    out = dict(policy_kwargs)
    act = out.get("activation_fn")
    if isinstance(act, str):
        import torch

        fn = getattr(torch.nn, act, None)
        if not (inspect.isclass(fn) and issubclass(fn, torch.nn.Module)):
            raise ValueError(f"{where}: policy_kwargs.activation_fn {act!r} is not a torch.nn module class "
                             "(e.g. Tanh, ReLU)")
        out["activation_fn"] = fn
    return out


def _schedule(text: str, key: str, where: str) -> Callable[[float], float]:
    """``lin_<x>``: ``progress_remaining * x`` (from ``x`` at the start of training to 0 at the end)."""
    value = None
    if text.startswith("lin_"):
        try:
            value = float(text[4:])
        except ValueError:
            value = None
    if value is None or value <= 0:
        raise ValueError(f"{where}: {key}={text!r}: write a number or lin_<x> with x > 0 (a linear decay to 0)")

    def schedule(progress_remaining: float) -> float:
        return progress_remaining * value

    return schedule


def _positive_int(value: Any, key: str, where: str) -> int:
    """``value`` as an int >= 1 (an integral float such as YAML's ``1.0e+5`` counts)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: {key!r} must be an integer >= 1, got {value!r}")
    return value
