"""Which of ``Doppler-Sim-v0``'s keyword arguments the native vector env takes, checked once at construction.

The keywords and their defaults are :meth:`PlacementEnv.default_config` (the single env's signature), so
the two stay in step: a keyword the single env does not know is a ``TypeError``; one the vector env does
not implement (stragglers, memory tracking, another backend, rendering, or a keyword added to the single
env later) is a ``ValueError`` naming the single-env path, unless it is left at its default.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from doppler_gym.envs.backend import SimBackend
from doppler_gym.envs.placement import OBSERVATIONS, PlacementEnv
from doppler_gym.sim.config import SimConfig

# the keywords the vector env implements (the others must keep their defaults)
SUPPORTED = frozenset({
    "graph", "topology", "sim_config", "reward", "max_ops", "max_edges", "max_devices", "invalid_action",
    "invalid_penalty", "max_invalid_streak", "backend", "copy_obs", "observation", "oom_penalty",
})
SINGLE_ENV_PATH = ("gym.make_vec('Doppler-Sim-v0', num_envs=N, vectorization_mode='sync', ...) (a SyncVectorEnv of "
                   "single envs)")


def unsupported(what: str) -> ValueError:
    """The error for an option the native vector env does not implement."""
    return ValueError(f"the native Doppler-Sim-v0 vector env does not support {what}; use {SINGLE_ENV_PATH}")


def check_config(config: SimConfig, where: str) -> None:
    """ValueError for a sim config the vector env cannot run (memory tracking, stragglers)."""
    if config.memory != "off":
        raise unsupported(f"memory tracking ({where}: SimConfig(memory={config.memory!r}))")
    if config.stragglers:
        raise unsupported(f"stragglers ({where}: SimConfig(stragglers=...))")


def env_options(num_envs: object, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Every keyword of the single env, ``kwargs`` over the defaults, checked.

    Raises:
        TypeError: a keyword the single env does not take, or ``num_envs`` not an integer.
        ValueError: ``num_envs < 1``, or an option the vector env does not implement (see the module docstring).
    """
    if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)):
        raise TypeError(f"num_envs must be an integer >= 1, got {num_envs!r}")
    if num_envs < 1:
        raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
    defaults = PlacementEnv.default_config()
    unknown = sorted(set(kwargs) - set(defaults))
    if unknown:
        raise TypeError(f"Doppler-Sim-v0 takes no keyword(s) {unknown}; valid: {', '.join(defaults)}")
    options = {**defaults, **kwargs}
    for name, value in options.items():
        if name not in SUPPORTED and value is not defaults[name] and value != defaults[name]:
            raise unsupported(f"{name}={value!r}")
    backend = options["backend"]
    if backend is not None and type(backend) is not SimBackend:
        raise unsupported(f"a custom backend ({type(backend).__name__}); only the simulator (backend=None)")
    if options["observation"] not in OBSERVATIONS:
        raise ValueError(f"observation must be one of {OBSERVATIONS} ('graph': the arrays a GNN reads, 'flat': "
                         f"one normalised vector for an MLP), got {options['observation']!r}")
    oom = options["oom_penalty"]
    if not isinstance(oom, (int, float, np.floating)) or not np.isfinite(oom):
        raise ValueError(f"oom_penalty must be a finite number, got {oom!r}")
    if not isinstance(options["copy_obs"], (bool, np.bool_)):
        raise TypeError(f"copy_obs must be a bool (True: fresh observation arrays each step, False: the live "
                        f"batch buffers), got {options['copy_obs']!r}")
    config = options["sim_config"]
    if config is not None:
        if not isinstance(config, SimConfig):
            raise TypeError(f"sim_config must be a SimConfig or None, got {type(config).__name__}")
        check_config(config, "sim_config")
    return options
