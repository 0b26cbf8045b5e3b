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
        if not isinstance(self.gpus, int) or isinstance(self.gpus, bool) or self.gpus < 1:
            raise ValueError(f"Node.gpus must be an integer >= 1, got {self.gpus!r}")


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
        if not (self.inter_node_bandwidth > 0):
            raise ValueError(f"Cluster.inter_node_bandwidth must be > 0 [B/s], got {self.inter_node_bandwidth!r}")
        if not (self.inter_node_latency >= 0):
            raise ValueError(f"Cluster.inter_node_latency must be >= 0 [s], got {self.inter_node_latency!r}")
        if not (self.node_uplink_bandwidth > 0):
            raise ValueError(f"Cluster.node_uplink_bandwidth must be > 0 [B/s], got {self.node_uplink_bandwidth!r}")
        if self.rack_size is not None and (not isinstance(self.rack_size, int) or isinstance(self.rack_size, bool)
                                           or self.rack_size < 1):
            raise ValueError(f"Cluster.rack_size must be None or an integer >= 1 (nodes per rack), "
                             f"got {self.rack_size!r}")
        if not (self.rack_uplink_bandwidth > 0):
            raise ValueError(f"Cluster.rack_uplink_bandwidth must be > 0 [B/s], got {self.rack_uplink_bandwidth!r}")

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
        profile: ``{gpu_type or "*": {gpu_count: iteration time [s]}}``; wins over ``workload``.
        checkpoint_every: checkpoint after every this many iterations (``None``: never).
        checkpoint_cost: time one checkpoint takes [s].
        job_type: label for the GPU-sharing interference model (a Gavel job type, or anything).
        max_gpus: the most GPUs the job could use (kept for elastic schedulers; default ``gpus``).
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
        if self.cross_node_bytes is not None and not (0 <= self.cross_node_bytes < math.inf):
            raise ValueError(f"{where}: cross_node_bytes must be None or finite and >= 0 [B], "
                             f"got {self.cross_node_bytes!r}")
        if not (isinstance(self.arrival, (int, float)) and math.isfinite(self.arrival) and self.arrival >= 0):
            raise ValueError(f"{where}: arrival must be a finite time >= 0 [s], got {self.arrival!r}")
        if not isinstance(self.iterations, int) or self.iterations < 1:
            raise ValueError(f"{where}: iterations must be an integer >= 1, got {self.iterations!r}")
        if not isinstance(self.gpus, int) or isinstance(self.gpus, bool) or self.gpus < 1:
            raise ValueError(f"{where}: gpus must be an integer >= 1, got {self.gpus!r}")
        if self.checkpoint_every is not None and (not isinstance(self.checkpoint_every, int)
                                                  or self.checkpoint_every < 1):
            raise ValueError(f"{where}: checkpoint_every must be None or an int >= 1, got {self.checkpoint_every!r}")
        if not (self.checkpoint_cost >= 0 and math.isfinite(self.checkpoint_cost)):
            raise ValueError(f"{where}: checkpoint_cost must be a finite time >= 0 [s], got {self.checkpoint_cost!r}")
        if self.max_gpus is None:
            object.__setattr__(self, "max_gpus", self.gpus)
        elif self.max_gpus < self.gpus:
            raise ValueError(f"{where}: max_gpus ({self.max_gpus}) must be >= gpus ({self.gpus})")
        object.__setattr__(self, "workload_params", MappingProxyType(dict(self.workload_params)))
        if self.profile is not None:
            prof = {}
            for gpu_type, times in self.profile.items():
                row = {int(k): float(v) for k, v in times.items()}
                bad = [k for k, v in row.items() if not (v > 0 and math.isfinite(v))]
                if bad:
                    raise ValueError(f"{where}: profile[{gpu_type!r}] iteration times must be finite and > 0 [s]; "
                                     f"bad at GPU counts {bad}")
                prof[str(gpu_type)] = MappingProxyType(row)
            object.__setattr__(self, "profile", MappingProxyType(prof))
        elif self.workload is None:
            raise ValueError(f"{where}: give a workload name or a profile of iteration times")


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
