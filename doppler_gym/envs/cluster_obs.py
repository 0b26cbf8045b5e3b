"""The observation of ``Doppler-Cluster-v0`` (:class:`~doppler_gym.envs.cluster.ClusterEnv`): O(1) features, bounded.

Every float feature lies in ``[0, 1]``: flags, fractions of the cluster, and times squashed by
:func:`squash` (``x / (x + scale)``: 0 at 0, 0.5 at ``scale``, below 1 for any finite ``x``, and
monotone, so a policy can still rank jobs by it). No id, count or absolute time enters raw, so the
``Dict`` can go straight into an MLP (SB3's ``MultiInputPolicy`` flattens it). The keys and their
columns are documented in :class:`~doppler_gym.envs.cluster.ClusterEnv`'s docstring and in the
tuples below.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from gymnasium import spaces

from doppler_gym.cluster.schedulers import JobView
from doppler_gym.cluster.types import Cluster
from doppler_gym.envs.masked import mask_space

# the columns of obs["jobs"] (one row per visible job), obs["nodes"] (one row per node) and obs["cluster"]
JOB_FEATURES = ("present", "waiting", "running", "shared", "gpus", "nodes", "attained", "age", "speed", "remaining",
                "attained_rank", "remaining_rank")
NODE_FEATURES = ("free_gpus", "shareable_gpus")  # on a cluster of several GPU types, then "type:T" and "head_speed"
CLUSTER_FEATURES = ("free_gpus", "shareable_gpus", "jobs_in_system", "hidden_jobs")


def squash(x: np.ndarray | float, scale: float) -> np.ndarray:
    """``x / (x + scale)`` for ``x >= 0`` (negative ``x`` count as 0): in ``[0, 1)``, 0.5 at ``x = scale``."""
    x = np.maximum(x, 0.0)
    return x / (x + scale)


def _rank(key: np.ndarray) -> np.ndarray:
    """``(k,)``: the fraction of the other ``k - 1`` entries of ``key`` strictly below each entry (0 for k = 1)."""
    k = len(key)
    if k < 2:
        return np.zeros(k)
    below = np.searchsorted(np.sort(key), key, side="left")
    return below / (k - 1)


class ClusterObservation:
    """Builds the ``Dict`` observation of the cluster env from the engine's view and the env's edited plan.

    Args:
        cluster: the simulated :class:`Cluster` (its nodes give the ``nodes`` rows).
        max_jobs: rows of ``obs["jobs"]``.
        time_scale: [s] the scale of the squashed times (attained service in GPU s, age, remaining time).
        known_durations: fill the ``remaining`` column (else it stays 0).
        n_actions: the length of ``obs["action_mask"]``.
    """

    def __init__(self, cluster: Cluster, max_jobs: int, time_scale: float, known_durations: bool,
                 n_actions: int) -> None:
        self.max_jobs, self.time_scale, self.known_durations = max_jobs, time_scale, known_durations
        self.n_gpus, self.n_nodes = cluster.n_gpus, len(cluster.nodes)
        self.gpu_node = np.repeat(np.arange(self.n_nodes), [nd.gpus for nd in cluster.nodes])  # (G,) node of GPU
        self.node_gpus = np.array([nd.gpus for nd in cluster.nodes], dtype=np.float64)  # (n_nodes,)
        types = tuple(sorted({nd.gpu_type for nd in cluster.nodes}))
        self.gpu_types = types if len(types) > 1 else ()
        self.node_type = [nd.gpu_type for nd in cluster.nodes]
        # (n_nodes, T) one-hot GPU type of each node, on a cluster of T > 1 types
        self.type_onehot = np.array([[float(nd.gpu_type == t) for t in self.gpu_types] for nd in cluster.nodes],
                                    dtype=np.float32).reshape(self.n_nodes, len(self.gpu_types))
        self.node_features = NODE_FEATURES + ((*(f"type:{t}" for t in self.gpu_types), "head_speed")
                                              if self.gpu_types else ())
        self.space = spaces.Dict({
            "jobs": spaces.Box(0.0, 1.0, (max_jobs, len(JOB_FEATURES)), np.float32),
            "nodes": spaces.Box(0.0, 1.0, (self.n_nodes, len(self.node_features)), np.float32),
            "cluster": spaces.Box(0.0, 1.0, (len(CLUSTER_FEATURES),), np.float32),
            "action_mask": mask_space(n_actions),
        })

    def build(self, view: JobView, rows: np.ndarray, plan: dict[int, list[int]], occupants: Sequence[Sequence[int]],
              unchanged: np.ndarray, hidden: int, mask: np.ndarray,
              head_speed: dict[str, float] | None = None) -> dict[str, np.ndarray]:
        """The observation at an event, with the allocation edited so far in it.

        Args:
            view: the engine's :class:`JobView` at this event.
            rows: ``(k,) int64``, ``k <= max_jobs``: the trace index of the job in each row.
            plan: ``{job: GPU ids}`` of the jobs that run in the edited allocation.
            occupants: ``G`` lists of the jobs on each GPU in the edited allocation.
            unchanged: ``(k,) bool``: the row's job runs as it ran when the event began (its ``speed``
                is the engine's; a job started or preempted in this event shows 0).
            hidden: active jobs outside the window.
            mask: ``(n_actions,) int8`` the valid actions.
            head_speed: ``{GPU type: speed in [0, 1]}`` of the head waiting job (``{}``/None: none waits; the
                ``head_speed`` column is then 0). Used on a cluster of several types only.
        """
        jobs = np.zeros((self.max_jobs, len(JOB_FEATURES)), np.float32)
        k = len(rows)
        occ_n = np.fromiter(map(len, occupants), np.int64, len(occupants))  # (G,) jobs on each GPU
        if k:
            running = np.fromiter((i in plan for i in rows.tolist()), bool, k)
            jobs[:k, 0] = 1.0
            jobs[:k, 1] = ~running
            jobs[:k, 2] = running
            for r in np.flatnonzero(running).tolist():
                gs = plan[int(rows[r])]
                jobs[r, 3] = float((occ_n[gs] > 1).any())
                jobs[r, 5] = len(set(self.gpu_node[gs].tolist())) / self.n_nodes
            jobs[:k, 4] = view.gpus[rows] / self.n_gpus
            times = np.zeros((k, 3))  # [GPU s] attained, [s] age, [s] remaining solo time
            times[:, 0] = view.attained[rows]
            times[:, 1] = view.now - view.arrival[rows]
            if self.known_durations:
                times[:, 2] = view.remaining[rows]
            jobs[:k, 6:8] = squash(times[:, :2], self.time_scale)
            jobs[:k, 9] = squash(times[:, 2], self.time_scale)
            jobs[:k, 8] = np.where(unchanged, np.clip(view.speed[rows], 0.0, 1.0), 0.0)
            jobs[:k, 10] = _rank(times[:, 0])
            if self.known_durations:
                jobs[:k, 11] = _rank(times[:, 2] * view.gpus[rows])
        free = np.bincount(self.gpu_node[occ_n == 0], minlength=self.n_nodes)
        single = np.bincount(self.gpu_node[occ_n == 1], minlength=self.n_nodes)
        nodes = np.stack([free / self.node_gpus, single / self.node_gpus], axis=1).astype(np.float32)
        if self.gpu_types:
            speed = np.array([[(head_speed or {}).get(t, 0.0)] for t in self.node_type], np.float32)
            nodes = np.concatenate([nodes, self.type_onehot, np.clip(speed, 0.0, 1.0)], axis=1)
        in_system = len(view.active) + (int(np.count_nonzero(view.restarting)) if view.restarting is not None else 0)
        clus = np.array([free.sum() / self.n_gpus, single.sum() / self.n_gpus,
                         in_system / (in_system + self.max_jobs), hidden / (hidden + self.max_jobs)], np.float32)
        return {"jobs": jobs, "nodes": nodes, "cluster": clus, "action_mask": mask.copy()}

    def terminal(self, mask: np.ndarray) -> dict[str, np.ndarray]:
        """The observation after the last completion: no job, every GPU free."""
        nodes = np.zeros((self.n_nodes, len(self.node_features)), np.float32)
        nodes[:, 0] = 1.0
        nodes[:, len(NODE_FEATURES):len(NODE_FEATURES) + len(self.gpu_types)] = self.type_onehot
        clus = np.array([1.0, 0.0, 0.0, 0.0], np.float32)
        return {"jobs": np.zeros((self.max_jobs, len(JOB_FEATURES)), np.float32), "nodes": nodes, "cluster": clus,
                "action_mask": mask.copy()}
