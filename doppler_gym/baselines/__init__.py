"""Placement baselines: heuristics, partitioning, search and exact methods.

Every baseline takes ``(graph, topology, config=None, **options)`` (an int topology means
``Topology.uniform(n)``; ``config=None`` :func:`doppler_gym.instances.default_config` of the graph on
that topology: the reference simulator for paper graphs, the roofline on GPU presets, else ``SimConfig()``)
and returns a :class:`Placement` whose ``makespan`` is the simulated
makespan of its assignment under that config. :func:`run` calls one by name.

==================  ==================================================================
``random``          uniformly random devices (:func:`random_placement`)
``round_robin``     op ``i`` on device ``i mod D``
``single_device``   everything on the fastest device
``metis``           balanced min-cut partition (pymetis)
``critical_path``   DOPPLER's teacher: highest b-level ready op, earliest-start device
``heft``            HEFT (Topcuoglu et al. 2002)
``cpop``            CPOP (Topcuoglu et al. 2002)
``peft``            PEFT (Arabnejad & Barbosa 2014)
``local_search``    batched local search over assignments, scored by the simulator
``brute_force``     every assignment (a dozen ops at most)
``cp_sat``          CP-SAT schedule model (ortools); its optimum bounds the WC optimum below
==================  ==================================================================
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from doppler_gym.baselines.brute_force import brute_force, count_assignments
from doppler_gym.baselines.cp_sat import cp_sat
from doppler_gym.baselines.critical_path import critical_path
from doppler_gym.baselines.heft import cpop, heft
from doppler_gym.baselines.local_search import LocalSearchResearch, local_search
from doppler_gym.baselines.metis import metis_partition
from doppler_gym.baselines.peft import peft
from doppler_gym.baselines.simple import random_placement, round_robin, single_device
from doppler_gym.baselines.types import Placement
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology

_REGISTRY: dict[str, Callable[..., Placement]] = {
    "random": random_placement,
    "round_robin": round_robin,
    "single_device": single_device,
    "metis": metis_partition,
    "critical_path": critical_path,
    "heft": heft,
    "cpop": cpop,
    "peft": peft,
    "local_search": local_search,
    "brute_force": brute_force,
    "cp_sat": cp_sat,
}


def names() -> tuple[str, ...]:
    """Registered baseline names, cheapest first."""
    return tuple(_REGISTRY)


def get(name: str) -> Callable[..., Placement]:
    """The baseline function registered as ``name`` (``-`` and ``_`` are interchangeable)."""
    key = name.strip().replace("-", "_")
    if key not in _REGISTRY:
        raise ValueError(f"unknown baseline {name!r}; known baselines: {', '.join(names())}")
    return _REGISTRY[key]


def options(name: str) -> tuple[str, ...]:
    """The keyword options baseline ``name`` accepts (besides graph, topology and config)."""
    params = inspect.signature(get(name)).parameters.values()
    return tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)


def run(
    name: str, graph: DataflowGraph, topology: Topology | int, config: SimConfig | None = None, **opts: object
) -> Placement:
    """Run baseline ``name`` (see :func:`names`) with keyword ``opts``.

    Raises:
        ValueError: unknown name.
        TypeError: an option the baseline does not take (the message lists those it does).
    """
    fn = get(name)
    unknown = sorted(set(opts) - set(options(name)))
    if unknown:
        accepted = ", ".join(options(name)) or "none"
        raise TypeError(f"baseline {name!r} takes no option {', '.join(map(repr, unknown))}; its options: {accepted}")
    return fn(graph, topology, config, **opts)


__all__ = [
    "LocalSearchResearch", "Placement", "brute_force", "count_assignments", "cp_sat", "cpop", "critical_path", "get",
    "heft", "local_search", "metis_partition", "names", "options", "peft", "random_placement", "round_robin", "run",
    "single_device",
]
