"""A job's iteration time on an allocation: from its profile, or by simulating its graph (cached).

For a graph workload on ``k`` GPUs of a node type, the graph is placed on a sub-topology of ``k``
GPUs by the :class:`IterationTimes` object's ``placement`` (default the critical-path heuristic,
:func:`doppler_gym.baselines.critical_path`; any baseline name, or a callable through which a policy
plugs in) and timed with :func:`doppler_gym.simulate`; the makespan [s] is the iteration time. The
sub-topology is the first ``k`` devices of the node's preset, or, past one node, copies of the node
joined by the cluster's inter-node links. Results are cached per (workload, parameters, GPU count, GPU type, preset).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from doppler_gym import baselines, workloads
from doppler_gym.cluster.types import Cluster, Job, Node
from doppler_gym.sim.api import simulate
from doppler_gym.topology.types import Topology


def sub_topology(node: Node, k: int, cluster: Cluster) -> Topology:
    """``k`` GPUs of ``node``'s type: a slice of its preset, tiled over nodes past one node."""
    base = Topology.preset(node.preset) if node.preset else Topology.uniform(node.gpus)
    n = min(base.n_devices, node.gpus)
    if k <= n:
        return Topology(speed=base.speed[:k].copy(), memory=base.memory[:k].copy(),
                        bandwidth=base.bandwidth[:k, :k].copy(), latency=base.latency[:k, :k].copy(),
                        name=f"{base.name}[:{k}]")
    copies = math.ceil(k / n)
    bw = np.full((copies * n, copies * n), cluster.inter_node_bandwidth)
    lat = np.full((copies * n, copies * n), cluster.inter_node_latency)
    for c in range(copies):
        s = slice(c * n, (c + 1) * n)
        bw[s, s] = base.bandwidth[:n, :n]
        lat[s, s] = base.latency[:n, :n]
    return Topology(speed=np.tile(base.speed[:n], copies)[:k], memory=np.tile(base.memory[:n], copies)[:k],
                    bandwidth=bw[:k, :k].copy(), latency=lat[:k, :k].copy(), name=f"{copies}x{base.name}[:{k}]")


class IterationTimes:
    """Iteration time [s] of a job on ``k`` GPUs of a type, cached across jobs and runs of one object.

    Calling it, ``times(job, gpu_type, k)``, gives ``inf`` where the job cannot run: its profile marks
    that count ``inf`` on that type (Gavel's zero throughputs), leaves the type out (with no ``"*"``), or
    scales an unprofiled count from an ``inf`` one.

    Args:
        cluster: the cluster whose node presets and inter-node links the sub-topologies come from.
        placement: how a graph job's operations are placed on its ``k`` GPUs: a baseline name
            (``doppler_gym.baselines.names()``, run with its defaults) or a callable
            ``(graph, topology) -> assignment`` (an ``(n_ops,)`` int array of device ids, or an object
            with an ``assignment``), e.g. a trained policy wrapped by the caller (this module imports no agent).
    """

    def __init__(self, cluster: Cluster, placement: str | Callable = "critical_path") -> None:
        if isinstance(placement, str):
            baselines.get(placement)  # ValueError naming the known baselines
        elif not callable(placement):
            raise TypeError(f"placement must be a baseline name or a callable (graph, topology) -> assignment, "
                            f"got {placement!r}")
        self.placement = placement
        self.cluster = cluster
        self._nodes = {n.gpu_type: n for n in cluster.nodes}
        self._cache: dict[tuple, tuple[float, float]] = {}  # -> (iteration time [s], cross-node bytes [B])

    def __call__(self, job: Job, gpu_type: str, k: int) -> float:
        if job.profile is not None:
            row = job.profile.get(gpu_type, job.profile.get("*"))
            if row is None:  # a type the profile leaves out: the job cannot run on it
                return math.inf
            if k in row:
                return row[k]
            known = sorted(row)
            if not known:
                raise ValueError(f"Job {job.job_id}: profile[{gpu_type!r}] is empty")
            # Unprofiled count: linear scaling from the nearest profiled count below (or the smallest).
            below = [c for c in known if c <= k]
            c = below[-1] if below else known[0]
            return row[c] * c / k
        return self._graph(job, gpu_type, k)[0]

    def cross_bytes(self, job: Job, gpu_type: str, k: int) -> float:
        """Bytes per iteration [B] that cross between nodes when the job spans several: its
        ``cross_node_bytes``, else 0 for a profile job, else the outputs its graph's placement on the
        tiled sub-topology sends from one node's GPUs to another's (once per destination GPU)."""
        if job.cross_node_bytes is not None:
            return job.cross_node_bytes
        if job.profile is not None:
            return 0.0
        return self._graph(job, gpu_type, k)[1]

    def _place(self, graph, topo: Topology) -> np.ndarray:
        """The graph's assignment on ``topo`` by ``self.placement``, checked: ``(n_ops,)`` ids in [0, k)."""
        out = (baselines.run(self.placement, graph, topo) if isinstance(self.placement, str)
               else self.placement(graph, topo))
        a = np.asarray(getattr(out, "assignment", out))
        if a.shape != (graph.n_ops,) or not np.issubdtype(a.dtype, np.integer) or a.min() < 0 \
                or a.max() >= topo.n_devices:
            raise ValueError(f"placement {self.placement!r} returned an assignment of shape {a.shape}, "
                             f"dtype {a.dtype}; need ({graph.n_ops},) integer device ids in [0, {topo.n_devices})")
        return a

    def _graph(self, job: Job, gpu_type: str, k: int) -> tuple[float, float]:
        node = self._nodes[gpu_type]
        key = (job.workload, tuple(sorted(job.workload_params.items())), k, gpu_type, node.preset)
        if key not in self._cache:
            graph = workloads.make(job.workload, **dict(job.workload_params))
            topo = sub_topology(node, k, self.cluster)
            a = self._place(graph, topo)
            per_node = min(node.gpus, Topology.preset(node.preset).n_devices if node.preset else node.gpus)
            tile = np.asarray(a) // per_node
            src, dst = np.asarray(graph.src), np.asarray(graph.dst)
            cross = tile[src] != tile[dst]
            pairs = np.unique(np.stack([src[cross], np.asarray(a)[dst[cross]]]), axis=1)
            nbytes = float(np.asarray(graph.out_bytes, dtype=np.float64)[pairs[0]].sum()) if pairs.size else 0.0
            self._cache[key] = (float(simulate(graph, a, topology=topo).makespan), nbytes)
        return self._cache[key]
