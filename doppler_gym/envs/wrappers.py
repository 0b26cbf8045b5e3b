"""Single-decision views of :class:`~doppler_gym.envs.placement.PlacementEnv` (DOPPLER's ablations).

- :class:`PlaceOnly`: the SEL decisions are taken by the critical-path heuristic (the ready op
  of highest b-level, ties to the lowest id); the agent only places. Action ``Discrete(max_devices)``.
- :class:`SelectOnly`: the PLC decisions are taken by the earliest-start heuristic (the device
  where the selected op could start first, ties to the lowest id); the agent only orders. Action
  ``Discrete(max_ops)``.

Each agent step is one inner decision plus the automatic one that follows it, so an episode has
``n_ops`` agent steps; their rewards are summed (an automatic step played at ``reset`` adds its
reward to the first agent step). ``obs["action_mask"]`` and :meth:`action_masks` are cut to the
wrapper's action space; every other observation key is the inner env's. An invalid agent action
is passed on (penalised or raised by the inner env) and no automatic step follows it.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from doppler_gym.envs.masked import action_index, mask_space
from doppler_gym.envs.observation import PLC, SEL
from doppler_gym.envs.placement import PlacementEnv


class _OneDecision(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Shared machinery: the inner env must be a PlacementEnv (possibly behind gym.make's wrappers)."""

    _agent_phase: int  # the phase the agent acts in

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        base = env.unwrapped
        if not isinstance(base, PlacementEnv):
            raise TypeError(
                f"{type(self).__name__} wraps a PlacementEnv (Doppler-Sim-v0), got {type(base).__name__}"
            )
        self._base = base
        n, d = base.max_ops, base.max_devices
        self._cut = slice(0, n) if self._agent_phase == SEL else slice(n, n + d)
        size = self._cut.stop - self._cut.start
        obs_spaces = dict(env.observation_space.spaces)
        obs_spaces["action_mask"] = mask_space(size)
        self.observation_space = spaces.Dict(obs_spaces)
        self.action_space = spaces.Discrete(size)
        self._pending_reward = 0.0

    def _to_inner(self, action: int) -> int:
        return action + self._cut.start

    def _cut_obs(self, obs: dict) -> dict:
        obs["action_mask"] = obs["action_mask"][self._cut]
        return obs

    def _auto_action(self) -> int:
        """The heuristic's action in the inner env's current (automatic) phase."""
        return int(np.argmax(self._base.teacher_mask()))

    def action_masks(self) -> np.ndarray:
        """``(action_space.n,) int8``: 1 for the valid agent actions."""
        return self._base.action_masks()[self._cut]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._pending_reward = 0.0
        if self._base.phase != self._agent_phase:
            obs, reward, _, _, _ = self.env.step(self._auto_action())
            self._pending_reward = float(reward)
        return self._cut_obs(obs), info

    def step(self, action: object) -> tuple[dict, float, bool, bool, dict]:
        a = action_index(action, f"{type(self).__name__}.step", f"an index of {self.action_space}")
        obs, reward, terminated, truncated, info = self.env.step(self._to_inner(a))
        reward = float(reward) + self._pending_reward
        self._pending_reward = 0.0
        if not (terminated or truncated or info.get("invalid_action")):
            obs, auto_reward, terminated, truncated, info = self.env.step(self._auto_action())
            reward += float(auto_reward)
        return self._cut_obs(obs), reward, terminated, truncated, info


class PlaceOnly(_OneDecision):
    """The agent places; the critical-path heuristic selects (highest b-level ready op).

    Action: ``Discrete(max_devices)``, a device ``d < n_devices``. Observations are always in the
    PLC phase (``selected_op`` is the op to place) until the end.
    """

    _agent_phase = PLC


class SelectOnly(_OneDecision):
    """The agent selects; the earliest-start heuristic places (device where the op starts first).

    Action: ``Discrete(max_ops)``, a ready op id. Observations are always in the SEL phase.
    """

    _agent_phase = SEL
