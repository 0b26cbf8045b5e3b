"""A job's iteration time on an allocation: from its profile, or by simulating its graph (cached).

For a graph workload on ``k`` GPUs of a node type, the graph is placed on a sub-topology of ``k``
GPUs by the critical-path heuristic (:func:`doppler_gym.baselines.critical_path`) and timed with
:func:`doppler_gym.simulate`; the makespan [s] is the iteration time. The sub-topology is the first
``k`` devices of the node's preset, or, past one node, copies of the node joined by the cluster's
inter-node links. Results are cached per (workload, parameters, GPU count, GPU type, preset).
"""

from __future__ import annotations

import math

import numpy as np

from doppler_gym import workloads
from doppler_gym.baselines.critical_path import critical_path
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
    """Iteration time [s] of a job on ``k`` GPUs of a type, cached across jobs and runs of one object."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._nodes = {n.gpu_type: n for n in cluster.nodes}
        self._cache: dict[tuple, tuple[float, float]] = {}  # -> (iteration time [s], cross-node bytes [B])

    def __call__(self, job: Job, gpu_type: str, k: int) -> float:
        if job.profile is not None:
            row = job.profile.get(gpu_type, job.profile.get("*"))
            if row is None:
                raise ValueError(f"Job {job.job_id}: profile has no entry for GPU type {gpu_type!r} (nor '*')")
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

    def _graph(self, job: Job, gpu_type: str, k: int) -> tuple[float, float]:
        node = self._nodes[gpu_type]
        key = (job.workload, tuple(sorted(job.workload_params.items())), k, gpu_type, node.preset)
        if key not in self._cache:
            graph = workloads.make(job.workload, **dict(job.workload_params))
            topo = sub_topology(node, k, self.cluster)
            a = critical_path(graph, topo).assignment
            per_node = min(node.gpus, Topology.preset(node.preset).n_devices if node.preset else node.gpus)
            tile = np.asarray(a) // per_node
            src, dst = np.asarray(graph.src), np.asarray(graph.dst)
            cross = tile[src] != tile[dst]
            pairs = np.unique(np.stack([src[cross], np.asarray(a)[dst[cross]]]), axis=1)
            nbytes = float(np.asarray(graph.out_bytes, dtype=np.float64)[pairs[0]].sum()) if pairs.size else 0.0
            self._cache[key] = (float(simulate(graph, a, topology=topo).makespan), nbytes)
        return self._cache[key]
