"""The training instance (graph or graph mix, topology, simulator config) and the env of each stage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

import doppler_gym  # noqa: F401  (registers the env ids)
from agents.training.ablation import agent_steps, wrap_learn
from agents.training.args import TrainArgs
from agents.training.graphs import MIX, GraphMix, held_out_graphs, padding_for, parse_specs
from doppler_gym.envs.registration import REAL_ENV_ID
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.instances import default_config, resolve_graph, resolve_topology
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology

# The stages' PPO and REINFORCE take the episode's return as one terminal reward (gamma = lambda = 1;
# imitation fits the critic to it), so their envs use the sparse reward, not the env's per-step default.
TRAINER_REWARD = "sparse"


@dataclass(frozen=True)
class Instance:
    """What every stage and the evaluation run on.

    Attributes:
        graph: the main graph: the one graph trained on, or with ``graph="mix"`` the first held-out
            graph (else the mix's first draw): periodic evaluations, the summary's placement, Gantt.
        topology: the devices.
        config: the simulator config of ``graph`` (``args.sim_config``, else its default: the
            reference model for paper graphs).
        learn: ``both`` / ``sel`` / ``plc`` (the env wrapper of :mod:`agents.training.ablation`).
        mix: the per-episode graph generator of the training envs (``None``: train on ``graph``).
        held_out: ``args.evaluation.held_out`` built (fixed graphs).
        padding: ``{"max_ops": .., "max_edges": ..}`` shared by every env of a mix (so one policy's
            observation space fits all of them); empty for one graph (its own sizes).
        mix_config: the SimConfig every mix env uses (``None``: each graph's default).
        topologies: with ``args.mix.topologies``: the topologies drawn per training episode (the
            padding's ``max_devices`` covers them and ``topology``); empty = ``topology`` only.
    """

    graph: DataflowGraph
    topology: Topology
    config: SimConfig
    learn: str = "both"
    mix: GraphMix | None = None
    held_out: tuple[DataflowGraph, ...] = ()
    padding: dict[str, int] = field(default_factory=dict)
    mix_config: SimConfig | None = None
    topologies: tuple[Topology, ...] = ()

    @classmethod
    def from_args(cls, args: TrainArgs) -> Instance:
        topology = resolve_topology(args.topology or args.devices or 4)
        given = SimConfig(**args.sim_config) if args.sim_config is not None else None
        held_out = tuple(held_out_graphs(parse_specs(args.evaluation.held_out, "evaluation.held_out"), args.seed))
        if args.graph == MIX:
            specs = parse_specs(args.mix.graphs, "mix.graphs")
            max_ops, max_edges = padding_for(specs, held_out, args.seed, args.mix.max_ops, args.mix.max_edges)
            mix = GraphMix(specs, max_ops, max_edges, args.mix.pool, args.seed)
            graph = held_out[0] if held_out else mix(np.random.default_rng(args.seed))
            config = given or default_config(graph, topology)
            padding = {"max_ops": max_ops, "max_edges": max_edges}
            topologies = tuple(resolve_topology(_topology_spec(t)) for t in args.mix.topologies)
            if topologies:
                padding["max_devices"] = max(t.n_devices for t in (topology, *topologies))
            return cls(graph, topology, config, args.learn, mix, held_out, padding, given, topologies)
        graph = resolve_graph(args.graph, args.graph_params)
        config = given or default_config(graph, topology)
        padding = {}
        if held_out:  # the held-out graphs are decoded by the same policy: one padding for all
            padding = {"max_ops": max(g.n_ops for g in (graph, *held_out)),
                       "max_edges": max(max(g.n_edges for g in (graph, *held_out)), 1)}
        return cls(graph, topology, config, args.learn, None, held_out, padding, given)

    def sim_env(self, graph: DataflowGraph | None = None, learned: bool = True, **kwargs: Any) -> gym.Env:
        """A ``Doppler-Sim-v0`` env on ``graph`` (default the main graph), with this instance's
        padding, wrapped for the ablation (``learned=False``: the raw two-phase env)."""
        graph = self.graph if graph is None else graph
        config = self.config if graph is self.graph else (self.mix_config or default_config(graph, self.topology))
        kwargs.setdefault("reward", TRAINER_REWARD)
        env = gym.make("Doppler-Sim-v0", graph=graph, topology=self.topology, sim_config=config,
                       disable_env_checker=True, **self.padding, **kwargs)
        return wrap_learn(env, self.learn) if learned else env

    def train_env(self) -> gym.Env:
        """The env of the ``il``/``sim`` stages: the mix (a new graph per reset) or the main graph."""
        if self.mix is None:
            return self.sim_env()
        env = gym.make("Doppler-Sim-v0", graph=self.mix, topology=list(self.topologies) or self.topology,
                       sim_config=self.mix_config, reward=TRAINER_REWARD, disable_env_checker=True,
                       **self.padding)
        return wrap_learn(env, self.learn)

    def episode_steps(self) -> int:
        """Agent steps of one training episode (the mean over the mix's sizes is estimated from the
        padding sample: ``max_ops / 1.25``)."""
        if self.mix is None:
            return agent_steps(self.graph.n_ops, self.learn)
        return agent_steps(max(1, round(self.padding["max_ops"] / 1.25)), self.learn)


def _topology_spec(text: str) -> int | str:
    """A ``mix.topologies`` entry: a device count (``"8"``) or a preset name."""
    text = str(text).strip()
    return int(text) if text.isdigit() else text


def make_stage_env(args: TrainArgs, inst: Instance, stage: str) -> gym.Env:
    """The env of a stage: the simulator (or the mix) for ``il``/``sim``, ``args.real.env_id`` for ``real``."""
    if stage != "real":
        return inst.train_env()
    kwargs = dict(args.real.env_kwargs)
    if isinstance(kwargs.get("sim_config"), dict):  # JSON form of a SimConfig
        kwargs["sim_config"] = SimConfig(**kwargs["sim_config"])
    if args.real.env_id == REAL_ENV_ID:
        kwargs.setdefault("topology", inst.topology.n_devices)
    else:
        kwargs.setdefault("topology", inst.topology)
        kwargs.setdefault("sim_config", inst.config)
    kwargs = {**inst.padding, "reward": TRAINER_REWARD, **kwargs}
    env = gym.make(args.real.env_id, graph=inst.graph, disable_env_checker=True, **kwargs)
    return wrap_learn(env, inst.learn)
