"""The simulator RL stage with its rollouts on Ray (``doppler train --ray [ADDRESS]``).

:class:`RayPPOStage` is :class:`~agents.training.rl.PPOStage` whose ``episodes_per_update``
simulator envs are Ray actors (:class:`~agents.distributed.ray_vec_env.RayVecEnv`, one env per
actor) instead of a ``DummyVecEnv`` in this process; the policy and its updates stay here. The envs
are made in the actors from the same function the local stage uses
(:func:`agents.training.instance.make_stage_env`) and get the same reset seeds, so a run with
``--ray`` collects the same episodes and learns the same weights as one without.
"""

from __future__ import annotations

import functools
from typing import Any

from agents.distributed.ray_vec_env import RayVecEnv
from agents.training.context import TrainContext
from agents.training.instance import make_stage_env
from agents.training.rl import PPOStage

RAY_STAGES = ("sim",)  # stages whose rollouts --ray moves to Ray (real runs on this host's devices)


class RayPPOStage(PPOStage):
    """:class:`PPOStage` with ``self.venv`` a :class:`RayVecEnv` on ``args.ray_address``."""

    def setup(self, ctx: TrainContext, resumed: dict[str, Any] | None) -> None:
        super().setup(ctx, resumed)
        make = functools.partial(make_stage_env, ctx.args, ctx.inst, self.name)
        venv = RayVecEnv([make] * self.venv.num_envs, ray_address=ctx.args.ray_address)
        venv.seed(ctx.model_seed(self.name))  # what SB3 did to the local vector env when it made the model
        self.model.set_env(venv)  # checks the spaces and the number of envs
        self.venv.close()
        self.venv = venv
