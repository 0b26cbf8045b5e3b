"""Training and evaluation beyond one process, on Ray (optional: ``pip install 'doppler-gym[ray]'``).

- :class:`RayVecEnv` (``agents.distributed.ray_vec_env``): an SB3 ``VecEnv`` whose envs live in Ray
  actors (``doppler train --ray``); :func:`make_env_fn` a picklable env function for it;
- :class:`EnvBatch` (``agents.distributed.env_batch``): the envs of one actor;
- :mod:`agents.distributed.ray_train`: the training stages with their rollouts on Ray.

Names load lazily (an actor that imports :class:`EnvBatch` loads neither torch nor SB3), and Ray is
imported only when a :class:`RayVecEnv` is made. Searches and sweeps as Ray tasks are in
:mod:`doppler_gym.parallel`.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "EnvBatch": "agents.distributed.env_batch",
    "make_env_fn": "agents.distributed.env_batch",
    "RayVecEnv": "agents.distributed.ray_vec_env",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'agents.distributed' has no attribute {name!r}")
