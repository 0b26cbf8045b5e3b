"""Immutable inputs of the cluster simulator: a cluster of GPU nodes, jobs, and a trace of jobs.

Units: times in seconds [s], bandwidths in bytes per second [B/s], GPU counts as integers.
Every constructor validates its fields and raises ``ValueError`` naming the field, so the engine can
trust its inputs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np


@dataclass(frozen=True)
class Node:
    """One server of identical GPUs.

    Args:
        gpus: number of GPUs on the node (>= 1).
        gpu_type: GPU type label (``"v100"``, ``"h100"``, ...); the interference model and a job's
            iteration-time profile are looked up by it.
        preset: the topology preset (``doppler_gym.Topology.preset`` name) of one node: the devices
            and intra-node links a job's graph is simulated on. ``None``: ``Topology.uniform``.
    """

    gpus: int
    gpu_type: str = "v100"
    preset: str | None = "v100x8-dgx1"

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", checked_int(self.gpus, "Node.gpus", 1))
        if not isinstance(self.gpu_type, str):
            raise ValueError(f"Node.gpu_type must be a GPU type name (a string), got {self.gpu_type!r}")


@dataclass(frozen=True)
class Cluster:
    """GPU nodes joined by a network.

    Args:
        nodes: the servers; GPU ids run node by node (node 0's GPUs first).
        inter_node_bandwidth: per-GPU bandwidth between two nodes [B/s] (default 25 GB/s, one
            200 Gb/s InfiniBand HDR rail per GPU), used when a job's graph spans several nodes.
        inter_node_latency: per-transfer latency between nodes [s].
        node_uplink_bandwidth: capacity of each node's link to its rack's switch [B/s], shared max-min
            fairly by the jobs whose traffic crosses it (``inf``: no contention between jobs).
        rack_size: nodes per rack (consecutive nodes; ``None``: one rack holds every node).
        rack_uplink_bandwidth: capacity of each rack's link to the network core [B/s], shared max-min
            fairly by the jobs spanning racks (``inf``: no contention); see :mod:`~.bandwidth`.
        name: a label for reports.
    """

    nodes: tuple[Node, ...]
    inter_node_bandwidth: float = 25e9  # [B/s]
    inter_node_latency: float = 5e-6  # [s]
    node_uplink_bandwidth: float = math.inf  # [B/s]
    name: str = "cluster"
    rack_size: int | None = None
    rack_uplink_bandwidth: float = math.inf  # [B/s]

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        if not self.nodes or not all(isinstance(n, Node) for n in self.nodes):
            raise ValueError("Cluster.nodes must be a non-empty sequence of Node")
        for label in ("inter_node_bandwidth", "node_uplink_bandwidth", "rack_uplink_bandwidth"):
            value = checked_number(getattr(self, label), f"Cluster.{label}", "a number > 0 [B/s] (inf: unlimited)",
                                   low=0.0, strict=True, finite=False)
            object.__setattr__(self, label, value)
        latency = checked_number(self.inter_node_latency, "Cluster.inter_node_latency", "a finite time >= 0 [s]", 0.0)
        object.__setattr__(self, "inter_node_latency", latency)
        if self.rack_size is not None and (not isinstance(self.rack_size, int) or isinstance(self.rack_size, bool)
                                           or self.rack_size < 1):
            raise ValueError(f"Cluster.rack_size must be None or an integer >= 1 (nodes per rack), "
                             f"got {self.rack_size!r}")

    @classmethod
    def uniform(cls, n_nodes: int, gpus_per_node: int = 8, gpu_type: str = "v100",
                preset: str | None = "v100x8-dgx1", **kwargs: object) -> Cluster:
        """``n_nodes`` identical nodes (e.g. ``Cluster.uniform(32, 8)`` = 256 V100 in DGX-1 servers)."""
        if not isinstance(n_nodes, int) or n_nodes < 1:
            raise ValueError(f"Cluster.uniform: n_nodes must be an integer >= 1, got {n_nodes!r}")
        node = Node(gpus_per_node, gpu_type, preset)
        return cls(nodes=(node,) * n_nodes, name=kwargs.pop("name", f"{n_nodes}x{gpus_per_node}{gpu_type}"),
                   **kwargs)  # type: ignore[arg-type]

    @property
    def n_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def node_rack(self) -> tuple[int, ...]:
        """The rack of each node (``rack_size`` consecutive nodes per rack)."""
        size = self.rack_size or len(self.nodes)
        return tuple(k // size for k in range(len(self.nodes)))


@dataclass(frozen=True)
class Job:
    """One training job.

    Its iteration time on ``gpus`` GPUs comes from ``profile`` when given, else from simulating the
    ``workload`` graph with :func:`doppler_gym.simulate` on a sub-topology of that many GPUs.

    Args:
        job_id: unique id within a trace.
        arrival: submission time [s], >= 0.
        iterations: iterations to train (>= 1).
        gpus: GPUs the job runs on (gang-scheduled; >= 1).
        workload: a ``doppler_gym.workloads`` family name whose graph is one training iteration.
        workload_params: keyword arguments of the workload generator.
        profile: ``{gpu_type or "*": {gpu_count: iteration time [s]}}``; wins over ``workload``. A GPU
            count may be given as its decimal text (``"4"``, as JSON object keys are). ``inf`` marks a
            count the job cannot run at on that type (Gavel's zero throughputs); a cluster type missing
            from the profile (and no ``"*"``) is one the job cannot run on. The scheduler keeps the job
            off such types; a job no type of the cluster can run is refused before the run (``ValueError``).
        checkpoint_every: checkpoint after every this many iterations (``None``: never).
        checkpoint_cost: time one checkpoint takes [s].
        job_type: label for the GPU-sharing interference model (a Gavel job type, or anything).
        max_gpus: the most GPUs the job could use, an integer >= ``gpus`` (for elastic schedulers;
            default ``gpus``).
        cross_node_bytes: bytes per iteration that cross between its nodes when it spans several
            [B] (``None``: from its graph's placement; 0 for a profile job).
    """

    job_id: int
    arrival: float  # [s]
    iterations: int
    gpus: int = 1
    workload: str | None = "ffnn"
    workload_params: Mapping[str, object] = field(default_factory=dict)
    profile: Mapping[str, Mapping[int, float]] | None = None  # [s] per iteration
    checkpoint_every: int | None = None
    checkpoint_cost: float = 0.0  # [s]
    job_type: str = "generic"
    max_gpus: int | None = None
    cross_node_bytes: float | None = None  # [B] per iteration

    def __post_init__(self) -> None:
        where = f"Job {self.job_id!r}"
        set_field = object.__setattr__
        set_field(self, "arrival", checked_number(self.arrival, f"{where}: arrival", "a finite time >= 0 [s]", 0.0))
        set_field(self, "iterations", checked_int(self.iterations, f"{where}: iterations", 1))
        set_field(self, "gpus", checked_int(self.gpus, f"{where}: gpus", 1))
        if self.checkpoint_every is not None:
            every = checked_int(self.checkpoint_every, f"{where}: checkpoint_every", 1, "None or an integer >= 1")
            set_field(self, "checkpoint_every", every)
        cost = checked_number(self.checkpoint_cost, f"{where}: checkpoint_cost", "a finite time >= 0 [s]", 0.0)
        set_field(self, "checkpoint_cost", cost)
        if self.cross_node_bytes is not None:
            set_field(self, "cross_node_bytes", checked_number(
                self.cross_node_bytes, f"{where}: cross_node_bytes", "None or a finite number >= 0 [B]", 0.0))
        if self.max_gpus is None:
            set_field(self, "max_gpus", self.gpus)
        else:
            set_field(self, "max_gpus", checked_int(self.max_gpus, f"{where}: max_gpus", self.gpus,
                                                    f"None or an integer >= gpus ({self.gpus})"))
        if not isinstance(self.job_type, str):
            raise ValueError(f"{where}: job_type must be a string (an interference label), got {self.job_type!r}")
        if not isinstance(self.workload_params, Mapping):
            raise ValueError(f"{where}: workload_params must be a mapping of parameter names to values, "
                             f"got {self.workload_params!r}")
        set_field(self, "workload_params", MappingProxyType(dict(self.workload_params)))
        if self.profile is not None:
            set_field(self, "profile", _checked_profile(self.profile, where))
        elif not isinstance(self.workload, str):
            raise ValueError(f"{where}: give a workload name or a profile of iteration times, got "
                             f"workload={self.workload!r}")


def checked_number(value: object, label: str, what: str, low: float = -math.inf, strict: bool = False,
                   finite: bool = True) -> float:
    """``value`` as a float: a real number >= ``low`` (> ``low`` if ``strict``), finite unless ``finite`` is
    False (``inf`` allowed, never NaN); else ValueError ``"{label} must be {what}, got ..."``."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
    x = float(value) if ok else math.nan  # type: ignore[arg-type]
    if not ((math.isfinite(x) or (not finite and x == math.inf)) and (x > low if strict else x >= low)):
        raise ValueError(f"{label} must be {what}, got {value!r}")
    return x


def checked_int(value: object, label: str, low: int, what: str | None = None) -> int:
    """``value`` as an int >= ``low`` (a Python or NumPy integer, not a bool); else ValueError naming ``label``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{label} must be {what or f'an integer >= {low}'}, got {value!r}")
    return int(value)


def _gpu_count(key: object, label: str) -> int:
    """A profile's GPU count: an integer >= 1, or its decimal text (JSON object keys are strings)."""
    if isinstance(key, str) and key.strip().isdecimal():
        key = int(key)
    return checked_int(key, label, 1, "a GPU count (an integer >= 1, or its decimal text)")


def _checked_profile(profile: object, where: str) -> MappingProxyType:
    """``{gpu_type: {gpu_count: iteration time [s]}}`` checked and frozen; ValueError naming the bad entry."""
    usage = "{gpu_type or '*': {gpu_count: iteration time [s]}}"
    if not isinstance(profile, Mapping):
        raise ValueError(f"{where}: profile must be a mapping {usage}, got {profile!r}")
    out = {}
    for gpu_type, row in profile.items():
        label = f"{where}: profile[{gpu_type!r}]"
        if not isinstance(gpu_type, str):
            raise ValueError(f"{where}: profile keys must be GPU type names (strings) or '*', got {gpu_type!r}")
        if not isinstance(row, Mapping):
            raise ValueError(f"{label} must be a mapping {{gpu_count: iteration time [s]}}, got {row!r}")
        out[gpu_type] = MappingProxyType({
            _gpu_count(k, f"{label} key {k!r}"):
                checked_number(v, f"{label}[{k!r}]", "a finite iteration time > 0 [s] or inf (the job cannot run "
                               "on this GPU type at this count)", 0.0, strict=True, finite=False)
            for k, v in row.items()})
    return MappingProxyType(out)


@dataclass(frozen=True)
class JobTrace:
    """Jobs in arrival order (sorted here; ties by ``job_id``).

    Args:
        jobs: the jobs; ``job_id`` values must be unique.
        name: a label for reports.
    """

    jobs: tuple[Job, ...]
    name: str = "trace"

    def __post_init__(self) -> None:
        jobs = tuple(sorted(self.jobs, key=lambda j: (j.arrival, j.job_id)))
        if not jobs:
            raise ValueError("JobTrace.jobs must not be empty")
        ids = [j.job_id for j in jobs]
        if len(set(ids)) != len(ids):
            raise ValueError("JobTrace.jobs: job_id values must be unique")
        object.__setattr__(self, "jobs", jobs)

    def __len__(self) -> int:
        return len(self.jobs)
