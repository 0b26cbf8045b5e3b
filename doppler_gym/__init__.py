"""doppler-gym: learn where the ops of a dataflow graph run on a work-conserving multi-GPU runtime.

The core package: graphs and their file formats, workloads, topologies, the simulator
(:func:`simulate`, :func:`simulate_batch`), baselines, collective scheduling (:mod:`~doppler_gym.comm`),
job-level cluster simulation (:mod:`~doppler_gym.cluster`) and the Gymnasium envs. Neither torch nor
pynvml is imported here; the agents (``agents``) and the real backend (``envs_real``) load them when used.

Importing the package registers the Gymnasium ids ``Doppler-Sim-v0``, ``Doppler-SimAssign-v0``,
``Doppler-Collective-v0`` and ``Doppler-Real-v0`` (the last loads ``envs_real`` only when made);
see :mod:`doppler_gym.envs`.
"""

from doppler_gym import baselines, cluster, comm, instances, workloads
from doppler_gym.envs import registration as _env_registration  # noqa: F401  registers the env ids
from doppler_gym.graph.analysis import b_level, t_level, topological_order
from doppler_gym.graph.collective import COLLECTIVE_KINDS, collective_ops
from doppler_gym.graph.io import load_graph, paper_graph_names, save_graph
from doppler_gym.graph.spec import OpSpec
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim import SimConfig, Trace, makespan_lower_bound, simulate, simulate_batch
from doppler_gym.topology.types import Topology

__version__ = "0.1.0"

__all__ = [
    "COLLECTIVE_KINDS", "DataflowGraph", "OpSpec", "SimConfig", "Topology", "Trace", "__version__", "b_level",
    "baselines", "cluster", "collective_ops", "comm", "instances", "load_graph", "makespan_lower_bound",
    "paper_graph_names", "save_graph", "simulate", "simulate_batch", "t_level", "topological_order", "workloads",
]
