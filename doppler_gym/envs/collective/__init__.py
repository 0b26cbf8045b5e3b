"""``Doppler-Collective-v0``: TE-CCL chunk scheduling as an MDP, with the MILP optimum as teacher.

- :mod:`.types`: :class:`CollectiveInstance` (topology, demand, epoch timing; static);
- :mod:`.env`: :class:`CollectiveEnv` (the MDP; its docstring documents the spaces and rewards);
- :mod:`.teacher`: the MILP schedule, cleaned for epoch-by-epoch replay.
"""

from __future__ import annotations

from doppler_gym.envs.collective.env import CollectiveEnv
from doppler_gym.envs.collective.types import CollectiveInstance, build_instance

__all__ = ["CollectiveEnv", "CollectiveInstance", "build_instance"]
