"""DOPPLER's ablations: the policy learns one of the two decisions, the critical-path teacher plays the other.

``TrainArgs.learn``:

- ``"both"``: the policy takes every SEL and PLC decision (DOPPLER);
- ``"sel"``: the policy selects the next op, the teacher places it (PLC = the device where the op
  could start first under the env's earliest-start estimate, ties to the lowest device id);
- ``"plc"``: the policy places each op, the teacher selects them (SEL = the ready op of highest
  b-level, ties to the lowest op id).

:class:`TeacherPhase` implements both by playing the teacher's decision inside ``step``: the agent
only ever sees states of its own phase, so every stage (imitation buffer, PPO rollouts and
updates, REINFORCE, the final decodes) trains and reports on the learned head's decisions only,
with no change to the policy. Unlike ``doppler_gym.envs.wrappers.PlaceOnly`` / ``SelectOnly``
(which cut the action space to one head), the action space and ``obs["action_mask"]`` stay the
full ``Discrete(max_ops + max_devices)``, so a checkpoint of an ablation loads into the full
DOPPLER policy and back.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from doppler_gym.envs.observation import PLC, SEL
from doppler_gym.envs.placement import PlacementEnv

LEARN = ("both", "sel", "plc")


class TeacherPhase(gym.Wrapper):
    """Plays the critical-path teacher's action whenever the inner env is in ``auto_phase``.

    Args:
        env: a ``Doppler-Sim-v0``-style env whose ``unwrapped`` is a :class:`PlacementEnv`.
        learn: ``"sel"`` (the teacher plays PLC) or ``"plc"`` (the teacher plays SEL).

    An agent step is its own decision followed by the teacher's; the rewards of both are summed
    (a teacher step played at ``reset`` adds its reward to the first agent step), so an episode has
    ``n_ops`` agent steps and the same return as the inner episode. An invalid agent action is
    passed on unchanged (penalised or raised by the inner env) and no teacher step follows it.
    """

    def __init__(self, env: gym.Env, learn: str) -> None:
        super().__init__(env)
        if learn not in ("sel", "plc"):
            raise ValueError(f"TeacherPhase: learn must be 'sel' or 'plc', got {learn!r} ('both' needs no wrapper)")
        base = env.unwrapped
        if not isinstance(base, PlacementEnv):
            raise TypeError("TeacherPhase wraps a PlacementEnv (Doppler-Sim-v0 or -Real-v0), "
                            f"got {type(base).__name__}")
        self.learn = learn
        self.auto_phase = PLC if learn == "sel" else SEL
        self._pending = 0.0

    def teacher_action(self) -> int:
        """The teacher's action in the inner env's current phase (the lowest id among its ties)."""
        return int(np.argmax(self.env.unwrapped.teacher_mask()))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._pending = 0.0
        if self.env.unwrapped.phase == self.auto_phase:
            obs, reward, _, _, _ = self.env.step(self.teacher_action())
            self._pending = float(reward)
        return obs, info

    def step(self, action: object) -> tuple[dict, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        reward = float(reward) + self._pending
        self._pending = 0.0
        while (not (terminated or truncated or info.get("invalid_action"))
               and self.env.unwrapped.phase == self.auto_phase):
            obs, extra, terminated, truncated, info = self.env.step(self.teacher_action())
            reward += float(extra)
        return obs, reward, terminated, truncated, info


def wrap_learn(env: gym.Env, learn: str) -> gym.Env:
    """``env`` itself for ``learn="both"``, else ``TeacherPhase(env, learn)``."""
    if learn not in LEARN:
        raise ValueError(f"learn must be one of {', '.join(LEARN)}, got {learn!r}")
    return env if learn == "both" else TeacherPhase(env, learn)


def agent_steps(n_ops: int, learn: str) -> int:
    """Agent steps of one episode on an ``n_ops``-op graph: ``2 n_ops``, or ``n_ops`` in an ablation."""
    return 2 * n_ops if learn == "both" else n_ops
