"""The simulator RL stage with its rollouts on Ray (``doppler train --ray [ADDRESS]``).

:class:`RayPPOStage` is :class:`~agents.training.rl.PPOStage` whose ``rl.episodes_per_update``
simulator envs live in Ray actors (:class:`~agents.distributed.ray_vec_env.RayVecEnv`; as many
actors as the cluster has CPUs, at most one per env) instead of a ``DummyVecEnv`` in this process;
the policy and its updates stay here. The envs are made in the actors from the same function the
local stage uses (:func:`agents.training.instance.make_stage_env`) and get the same reset seeds, so
a run with ``--ray`` collects the same episodes and learns the same weights as one without.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from agents.distributed.ray_vec_env import RayVecEnv
from agents.training.context import TrainContext
from agents.training.instance import make_stage_env
from agents.training.rl import PPOStage
from doppler_gym.parallel.tasks import connect

RAY_STAGES = ("sim",)  # stages whose rollouts --ray moves to Ray (real runs on this host's devices)


class RayPPOStage(PPOStage):
    """:class:`PPOStage` with ``self.venv`` a :class:`RayVecEnv` on ``args.ray_address``."""

    def setup(self, ctx: TrainContext, resumed: dict[str, Any] | None) -> None:
        super().setup(ctx, resumed)
        make = functools.partial(make_stage_env, ctx.args, ctx.inst, self.name)
        n = self.venv.num_envs
        ray = connect(ctx.args.ray_address)
        per_actor = math.ceil(n / max(1, int(ray.cluster_resources().get("CPU", 1))))  # no more actors than CPUs
        venv = RayVecEnv([make] * n, envs_per_actor=per_actor, ray_address=ctx.args.ray_address)
        venv.seed(ctx.model_seed(self.name))  # what SB3 did to the local vector env when it made the model
        self.model.set_env(venv)  # checks the spaces and the number of envs
        self.venv.close()
        self.venv = venv
