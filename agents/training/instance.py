"""The training instance (graph, topology, simulator config) and the env of each stage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym

import doppler_gym  # noqa: F401  (registers the env ids)
from agents.training.args import TrainArgs
from doppler_gym.envs.registration import REAL_ENV_ID
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology


# ============================================================================ the instance
@dataclass(frozen=True)
class Instance:
    """The graph, topology and simulator config every stage and the evaluation use."""

    graph: DataflowGraph
    topology: Topology
    config: SimConfig

    @classmethod
    def from_args(cls, args: TrainArgs) -> Instance:
        from doppler_gym import workloads
        from doppler_gym.envs.context import default_sim_config, resolve_graph

        if args.graph_params:
            if args.graph not in workloads.names():
                raise ValueError(f"graph_params only apply to workloads ({', '.join(workloads.names())}), "
                                 f"not to {args.graph!r}")
            graph = workloads.make(args.graph, **args.graph_params)
        else:
            graph = resolve_graph(args.graph)
        topology = Topology.preset(args.topology) if args.topology else Topology.uniform(args.devices or 4)
        config = SimConfig(**args.sim_config) if args.sim_config is not None else default_sim_config(graph)
        return cls(graph, topology, config)

    def sim_env(self, **kwargs: Any) -> gym.Env:
        """A ``Doppler-Sim-v0`` env on this instance."""
        return gym.make("Doppler-Sim-v0", graph=self.graph, topology=self.topology, sim_config=self.config,
                        disable_env_checker=True, **kwargs)


def make_stage_env(args: TrainArgs, inst: Instance, stage: str) -> gym.Env:
    """The env of a stage: the simulator for ``il``/``sim``, ``args.real_env_id`` for ``real``."""
    if stage != "real":
        return inst.sim_env()
    kwargs = dict(args.real_env_kwargs)
    if isinstance(kwargs.get("sim_config"), dict):  # JSON form of a SimConfig
        kwargs["sim_config"] = SimConfig(**kwargs["sim_config"])
    if args.real_env_id == REAL_ENV_ID:
        kwargs.setdefault("topology", inst.topology.n_devices)
        return gym.make(args.real_env_id, graph=inst.graph, disable_env_checker=True, **kwargs)
    kwargs.setdefault("topology", inst.topology)
    kwargs.setdefault("sim_config", inst.config)
    return gym.make(args.real_env_id, graph=inst.graph, disable_env_checker=True, **kwargs)
