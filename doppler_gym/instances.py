"""Instances: where a graph, a topology and the default sim config come from, and assignment checks.

One module turns what a user writes (a name, a path, a device count) into the objects the
simulator takes, for every caller: the ``doppler`` command, the Gymnasium envs, the baselines, the
agents and the real backend. It sits at the top of the core (below ``envs``, ``cli`` and
``baselines``), so each rule lives here once:

- :func:`resolve_graph`: a :class:`DataflowGraph`, a paper graph name (``"paper/ffnn"``), a
  workload name (``"ffnn"``, built with ``params``, or ``"pipeline:stages=4,microbatches=8"`` with
  them in the string, :mod:`doppler_gym.specs`) or a ``.txt``/``.json`` path.
- :func:`resolve_topology`: a :class:`Topology`, a preset name (``"p100x4"``, ``"uniform8"``) or a
  device count (``Topology.uniform(n)``).
- :func:`resolve_workload`: the same, as a :class:`~doppler_gym.workloads.Workload`, which a
  pipeline schedule comes with (its own ``assignment``, ``priorities`` and ``config``);
  :func:`workload_of` finds the workload a graph resolved here was built as.
- :func:`default_config`: the runtime model a graph gets on a topology when none is given: the reference
  model (``SimConfig.reference()``, paper time units) for the paper files, the workload's own config for a
  graph resolved here from a workload that carries one (a pipeline: ``queue_order="fixed"``, raw costs
  with ``unit_costs``), ``SimConfig()`` otherwise; a FLOP-rate model among these becomes the roofline
  (``cost_model="roofline"``) for a graph in physical units on a topology whose devices all have GPU models
  (the GPU presets). So ``doppler simulate``/``whatif``/``place`` and the envs run a pipeline as built, and
  a workload at its GPUs' roofline, unless the user gives a config.
- :func:`check_assignment`: an assignment as int32 device ids, checked against the graph and
  topology (the check ``simulate`` and the real backend apply).

>>> import doppler_gym as dg
>>> g = dg.instances.resolve_graph("ffnn", {"layers": 2})
>>> topo = dg.instances.resolve_topology(4)
>>> dg.instances.default_config(dg.instances.resolve_graph("paper/ffnn")) == dg.SimConfig.reference()
True
>>> dg.instances.default_config(g, topo).cost_model, dg.instances.default_config(g, "h100x8-nvswitch").cost_model
('topology', 'roofline')
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import weakref
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from doppler_gym import workloads
from doppler_gym.graph.io import SUFFIXES, load_graph, paper_graph_names
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.assignment import check_assignment
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.roofline import roofline_applies
from doppler_gym.specs import Range, parse_spec, spec_name
from doppler_gym.topology.presets import preset_names
from doppler_gym.topology.types import Topology

__all__ = ["check_assignment", "default_config", "graph_names", "resolve_graph", "resolve_topology",
           "resolve_workload", "workload_of"]

_WORKLOADS: weakref.WeakKeyDictionary[DataflowGraph, dict[str, object]] = weakref.WeakKeyDictionary()
"""The fields of the workload each graph that :func:`resolve_graph` built came from, all but the graph
(which a value must not hold, or the graph would never be collected), while the graph lives."""


def graph_names() -> tuple[str, ...]:
    """Every graph name :func:`resolve_graph` accepts: the paper graphs, then the workloads."""
    return (*paper_graph_names(), *workloads.names())


def resolve_graph(
    spec: object, params: Mapping[str, object] | None = None, where: str = "graph"
) -> DataflowGraph:
    """The :class:`DataflowGraph` that ``spec`` names.

    Args:
        spec: a :class:`DataflowGraph` (returned as is), a workload name (``"ffnn"``; see
            ``doppler_gym.workloads.names()``), optionally with its parameters after a colon
            (``"pipeline:stages=4,microbatches=8,unit_costs=true"``; values typed by
            :func:`doppler_gym.specs.parse_value`), a paper graph name (``"paper/ffnn"``; see
            ``doppler_gym.paper_graph_names()``), or the path of a ``.txt`` (paper format) or
            ``.json`` graph file.
        params: keyword arguments of the workload generator (``{"layers": 4}``); only for
            workload names.
        where: how the caller names ``spec`` in error messages (e.g. ``"options['graph']"``).

    Raises:
        ValueError: an unknown name (with the closest known name, if any), a missing file,
            ``params`` for something that is not a workload, a malformed spec string, a parameter
            given both in the string and in ``params``, or a range ``LO..HI`` as a value.
        TypeError: ``spec`` is none of the forms above.
    """
    at = "" if where == "graph" else f" ({where})"
    if isinstance(spec, DataflowGraph):
        if params:
            raise ValueError(f"{where}: params {sorted(params)} only apply to workload names, not to a DataflowGraph")
        return spec
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(
            f"{where} must be a DataflowGraph, a graph or workload name (e.g. 'paper/ffnn', 'ffnn') or the "
            f"path of a .txt/.json graph file; got {type(spec).__name__}"
        )
    if isinstance(spec, str) and spec_name(spec) in workloads.names():
        return _workload_graph(spec, params, where)
    if params:
        raise ValueError(
            f"{where}: params {sorted(params)} only apply to workload generators "
            f"({', '.join(workloads.names())}), not to {str(spec)!r}"
        )
    if (isinstance(spec, str) and spec in paper_graph_names()) or os.path.isfile(spec):
        return load_graph(spec)
    if Path(spec).suffix.lower() in SUFFIXES:
        raise ValueError(f"graph file {str(spec)!r}{at} does not exist")
    close = difflib.get_close_matches(str(spec), graph_names(), n=1)
    hint = f"did you mean {close[0]!r}? It is " if close else ""
    raise ValueError(
        f"unknown graph {str(spec)!r}{at}: {hint}not an existing .txt/.json file, not a paper graph name "
        f"({', '.join(paper_graph_names())}) and not a workload name ({', '.join(workloads.names())}); "
        f"`doppler graph list` shows them"
    )


def _workload_graph(text: str, params: Mapping[str, object] | None, where: str) -> DataflowGraph:
    """The workload that ``text`` (``"NAME"`` or ``"NAME:KEY=VALUE,..."``, :mod:`doppler_gym.specs`) and
    ``params`` name; each parameter given once, no ranges."""
    spec = parse_spec(text, where, usage="NAME:KEY=VALUE,KEY=VALUE, e.g. pipeline:stages=4")
    both = sorted(set(spec.params) & set(params or {}))
    if both:
        raise ValueError(f"{where}: {both} given both in {text!r} and in params; give each once")
    merged = {**spec.params, **dict(params or {})}
    ranges = sorted(k for k, v in merged.items() if isinstance(v, Range))
    if ranges:
        raise ValueError(f"{where} {text!r}: {ranges} is a range LO..HI; one graph takes one value per parameter "
                         f"(ranges are drawn by a training mix, TrainArgs.graph_mix)")
    workload = workloads.build(spec.name, **merged)
    _WORKLOADS[workload.graph] = {f.name: getattr(workload, f.name) for f in dataclasses.fields(workload)
                                  if f.name != "graph"}
    return workload.graph


def resolve_workload(
    spec: object, params: Mapping[str, object] | None = None, where: str = "graph"
) -> workloads.Workload:
    """The :class:`~doppler_gym.workloads.Workload` that ``spec`` names (arguments as :func:`resolve_graph`):
    a workload's own (with a pipeline's ``assignment``, ``priorities`` and ``config``), or ``Workload(graph)``
    (none of them) for a paper graph, a file or a graph that was not built from a workload here."""
    graph = resolve_graph(spec, params, where)
    return workload_of(graph) or workloads.Workload(graph)


def workload_of(graph: DataflowGraph) -> workloads.Workload | None:
    """The workload ``graph`` was built as by :func:`resolve_graph` (from a workload name), else ``None``."""
    fields = _WORKLOADS.get(graph)
    return None if fields is None else workloads.Workload(graph, **fields)


def resolve_topology(spec: object, where: str = "topology") -> Topology:
    """The :class:`Topology` that ``spec`` names.

    Args:
        spec: a :class:`Topology` (returned as is), a preset name (``"p100x4"``, ``"v100x8-dgx1"``,
            ``"uniform8"``; see :func:`doppler_gym.topology.presets.preset_names`) or a device count
            ``n >= 1`` (``Topology.uniform(n)``: identical, fully linked devices).
        where: how the caller names ``spec`` in error messages.

    Raises:
        ValueError: an unknown preset name (the message lists the valid ones) or a count below 1.
        TypeError: ``spec`` is none of the forms above.
    """
    if isinstance(spec, Topology):
        return spec
    if isinstance(spec, str):
        return Topology.preset(spec)
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        if spec < 1:
            raise ValueError(f"{where}={int(spec)!r}: a device count must be >= 1")
        return Topology.uniform(int(spec))
    raise TypeError(
        f"{where} must be a Topology, a preset name ({', '.join(preset_names())}, uniform<N>) or a device "
        f"count, got {type(spec).__name__}"
    )


def default_config(graph: DataflowGraph, topology: object = None) -> SimConfig:
    """The runtime model of ``graph`` on ``topology`` (a :class:`Topology`, a preset name or a device count,
    :func:`resolve_topology`; ``None``: hardware unknown) when the user gives none.

    - ``SimConfig.reference()`` for the paper files (``graph.units == "paper"``: their costs are
      times, reported in the paper's units), whatever the topology.
    - Otherwise the config of the workload ``graph`` was resolved from (:func:`workload_of`) when it carries
      one (a pipeline schedule's ``queue_order="fixed"``, raw costs with ``unit_costs``), else ``SimConfig()``;
    - and where that config uses the FLOP-rate model (``cost_model="topology"``) and the graph can run under
      the roofline on this topology (:func:`~doppler_gym.sim.roofline.roofline_applies`: physical units, every
      device with a GPU model, as on the GPU presets), ``cost_model="roofline"`` instead, its other fields
      kept. A workload's raw costs stay raw.

    So ``llama-layer`` on ``"h100x8-nvswitch"`` runs under the roofline, the same graph on 8 (a
    ``Topology.uniform``) or with ``topology=None`` (hardware unknown) under the FLOP-rate model, and a paper
    graph under the reference model everywhere. A config the user gives is never replaced: every caller
    (the CLI, the envs, the baselines, the agents) uses this only when none is given.
    """
    if graph.units == "paper":
        return SimConfig.reference()
    workload = workload_of(graph)
    config = workload.config if workload is not None and isinstance(workload.config, SimConfig) else SimConfig()
    topo = None if topology is None else resolve_topology(topology, "default_config: topology")
    if config.cost_model == "topology" and roofline_applies(graph, topo):
        return _under_roofline(config)
    return config


@functools.lru_cache(maxsize=32)
def _under_roofline(config: SimConfig) -> SimConfig:
    """``config`` with ``cost_model="roofline"``; one object per config, so repeated defaults are the same object
    (``simulate`` keys its fastest path on the config's identity)."""
    return dataclasses.replace(config, cost_model="roofline")
