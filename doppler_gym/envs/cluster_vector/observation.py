"""The observations of ``N`` cluster envs, written into preallocated ``(N, ...)`` arrays in one batched pass.

:class:`ObservationBatch` computes what :class:`~doppler_gym.envs.cluster_obs.ClusterObservation` computes per env
(the same float64 arithmetic, then the same float32 cast, so the arrays are equal bit for bit), but with one
NumPy call per feature for all envs instead of one per feature and env: the single env's ``build`` makes some 40
NumPy calls on arrays of a few dozen entries, which is about a third of a step. Per env only the Python that
reads its state remains (:class:`_Gathered`). A write of one row calls the single env's ``build`` instead (the
batched pass's fixed cost is more than one ``build``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from doppler_gym.envs.cluster import ObservationInputs
from doppler_gym.envs.cluster_obs import CLUSTER_FEATURES, JOB_FEATURES, NODE_FEATURES, ClusterObservation, squash
from doppler_gym.envs.masked import MASK_DTYPE

_PRESENT, _WAITING, _RUNNING, _SHARED, _GPUS, _NODES, _ATTAINED, _AGE, _SPEED, _REMAINING, _ATT_RANK, _REM_RANK = (
    range(len(JOB_FEATURES)))


def segment_rank(key: np.ndarray, segment: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per segment, the fraction of the other entries of the segment strictly below each entry.

    Args:
        key: ``(m,) float64`` the values.
        segment: ``(m,) int64`` the segment of each entry (nondecreasing: segments are contiguous).
        sizes: ``(m,)`` the size ``k`` of each entry's segment.

    Returns:
        ``(m,) float64``: ``#{j in segment: key[j] < key[i]} / (k - 1)``, 0 where ``k < 2`` (NaN counts above every
        number and equal to NaN, as ``np.sort`` and ``np.searchsorted`` order it).
    """
    m = key.size
    out = np.zeros(m)
    if m == 0:
        return out
    order = np.lexsort((key, segment))  # by segment, then by key (NaN last)
    k_sorted, s_sorted = key[order], segment[order]
    same = (k_sorted[1:] == k_sorted[:-1]) | (np.isnan(k_sorted[1:]) & np.isnan(k_sorted[:-1]))
    new_run = np.ones(m, bool)
    new_run[1:] = ~(same & (s_sorted[1:] == s_sorted[:-1]))
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(m), 0))  # first sorted position of equal keys
    seg_new = np.ones(m, bool)
    seg_new[1:] = s_sorted[1:] != s_sorted[:-1]
    seg_start = np.maximum.accumulate(np.where(seg_new, np.arange(m), 0))
    below = np.empty(m)
    below[order] = run_start - seg_start
    many = sizes >= 2
    out[many] = below[many] / (sizes[many] - 1)
    return out


class _Gathered:
    """The per-env reads of one batched write: per env, per visible job, per GPU of a visible running job."""

    def __init__(self, known_durations: bool) -> None:
        self.known_durations = known_durations  # read each view's ``remaining`` (computed on first read)
        self.envs: list[int] = []  # env index of each env written with a live view
        self.rows: list[np.ndarray] = []  # per env: (k,) int64 the trace index of each visible job
        self.offsets: list[int] = []  # per env: its first job in the concatenated trace arrays
        self.n_jobs = 0  # jobs in the concatenated trace arrays so far
        self.running: list[bool] = []  # per visible job: it runs in the edited allocation
        self.unchanged: list[np.ndarray] = []  # per env: (k,) bool
        self.gpu_job: list[int] = []  # per GPU held by a visible running job: that job's flat index
        self.gpu_id: list[int] = []  # per such GPU: its id
        self.occupied: list[int] = []  # per env and GPU: the jobs on it
        self.now: list[float] = []  # per env: the event's time [s]
        self.in_system: list[int] = []  # per env: jobs arrived and unfinished (active or restarting)
        self.hidden: list[int] = []  # per env: active jobs outside the window
        self.sizes: list[int] = []  # per env: visible jobs k
        self.arrays: list[tuple[np.ndarray, ...]] = []  # per env: (gpus, attained, arrival, speed)
        self.remaining: list[np.ndarray] = []  # per env, with known_durations: remaining [s]
        self.head_speed: list[dict[str, float]] = []  # per env: {GPU type: head job's speed}
        self.terminal: list[int] = []  # env indices past their last completion

    def add(self, i: int, inputs: ObservationInputs) -> None:
        """Read env ``i``'s state (:meth:`~doppler_gym.envs.cluster.ClusterEnv.observation_inputs`)."""
        view = inputs.view
        if view is None:
            self.terminal.append(i)
            return
        self.envs.append(i)
        self.arrays.append((view.gpus, view.attained, view.arrival, view.speed))
        if self.known_durations:
            self.remaining.append(view.remaining)
        self.offsets.append(self.n_jobs)
        self.n_jobs += len(view.gpus)
        self.rows.append(inputs.rows)
        jobs = inputs.rows.tolist()
        plan = inputs.plan
        base = len(self.running)
        running = [j in plan for j in jobs]
        self.running.extend(running)
        for r, j in enumerate(jobs):
            if running[r]:
                gpus = plan[j]
                self.gpu_job.extend([base + r] * len(gpus))
                self.gpu_id.extend(gpus)
        self.unchanged.append(inputs.unchanged)
        self.occupied.extend(map(len, inputs.occupants))
        restarting = view.restarting
        in_system = view.active_array().size + (int(np.count_nonzero(restarting)) if restarting is not None else 0)
        self.in_system.append(in_system)
        self.now.append(view.now)
        self.hidden.append(inputs.hidden)
        self.sizes.append(len(jobs))
        self.head_speed.append(inputs.head_speed)


class ObservationBatch:
    """The ``Dict`` observations of ``num_envs`` cluster envs of one configuration, as ``(N, ...)`` arrays.

    Args:
        single: the :class:`ClusterObservation` of the envs' configuration (cluster, ``max_jobs``, ``time_scale``,
            ``known_durations``, ``n_actions``); its ``space`` is the single observation space.
        num_envs: ``N``.

    Attributes:
        jobs: ``(N, max_jobs, 12) float32``; nodes: ``(N, n_nodes, F) float32``; cluster: ``(N, 4) float32``;
        action_mask: ``(N, n_actions) int8`` (the single env's keys, shapes and dtypes, with a leading ``N``).
        arrays: ``{key: array}`` in the single space's key order.
    """

    def __init__(self, single: ClusterObservation, num_envs: int) -> None:
        self.single = single
        space = single.space
        self.jobs = np.zeros((num_envs, *space["jobs"].shape), np.float32)
        self.nodes = np.zeros((num_envs, *space["nodes"].shape), np.float32)
        self.cluster = np.zeros((num_envs, len(CLUSTER_FEATURES)), np.float32)
        self.action_mask = np.zeros((num_envs, *space["action_mask"].shape), MASK_DTYPE)
        self.arrays = {key: getattr(self, key) for key in space.spaces}
        # (G, n_nodes) 1 where the GPU is on the node: per-node counts of GPU flags as one product
        self._node_of = (single.gpu_node[:, None] == np.arange(single.n_nodes)[None, :]).astype(np.float64)
        self._terminal = single.terminal(np.zeros(space["action_mask"].shape, MASK_DTYPE))

    def write(self, rows: Sequence[int], inputs: Sequence[ObservationInputs]) -> None:
        """Write env ``rows[j]``'s observation from ``inputs[j]`` (its ``observation_inputs()``) into row
        ``rows[j]`` of every array; the other rows are left as they are."""
        if len(rows) == 0:
            return
        if len(rows) == 1:  # one row: the single env's build is cheaper than the batched pass's fixed cost
            self._write_one(int(rows[0]), inputs[0])
            return
        got = _Gathered(self.single.known_durations)
        for i, parts in zip(rows, inputs):
            got.add(int(i), parts)
            self.action_mask[i] = parts.mask
        if got.terminal:
            t = np.asarray(got.terminal)
            self.jobs[t] = self._terminal["jobs"]
            self.nodes[t] = self._terminal["nodes"]
            self.cluster[t] = self._terminal["cluster"]
        if got.envs:
            self._write_live(got)

    def _write_one(self, i: int, parts: ObservationInputs) -> None:
        """Row ``i`` from :meth:`ClusterObservation.build` (or ``terminal``), the single env's own observation."""
        single = self.single
        obs = single.terminal(parts.mask) if parts.view is None else single.build(*parts)
        for key, value in obs.items():
            self.arrays[key][i] = value

    def _write_live(self, got: _Gathered) -> None:
        """The rows of the envs with a live view (an event in progress)."""
        obs = self.single
        envs = np.asarray(got.envs, np.int64)
        n_gpus, max_jobs = obs.n_gpus, obs.max_jobs
        occ = np.asarray(got.occupied, np.int64).reshape(len(envs), n_gpus)  # (E, G) jobs on each GPU
        free = (occ == 0).astype(np.float64) @ self._node_of  # (E, n_nodes) free GPUs per node
        single = (occ == 1).astype(np.float64) @ self._node_of
        nodes = np.zeros((len(envs), *self.nodes.shape[1:]), np.float32)
        nodes[:, :, 0] = free / obs.node_gpus
        nodes[:, :, 1] = single / obs.node_gpus
        if obs.gpu_types:
            t = len(NODE_FEATURES)
            nodes[:, :, t:t + len(obs.gpu_types)] = obs.type_onehot
            speed = np.array([[hs.get(typ, 0.0) for typ in obs.node_type] for hs in got.head_speed], np.float32)
            nodes[:, :, -1] = np.clip(speed, 0.0, 1.0)
        self.nodes[envs] = nodes
        in_system = np.asarray(got.in_system, np.float64)
        hidden = np.asarray(got.hidden, np.float64)
        clus = np.empty((len(envs), len(CLUSTER_FEATURES)), np.float32)
        clus[:, 0] = free.sum(axis=1) / n_gpus
        clus[:, 1] = single.sum(axis=1) / n_gpus
        clus[:, 2] = in_system / (in_system + max_jobs)
        clus[:, 3] = hidden / (hidden + max_jobs)
        self.cluster[envs] = clus
        self.jobs[envs] = 0.0
        if got.running:
            self._write_jobs(got, envs, occ)

    def _write_jobs(self, got: _Gathered, envs: np.ndarray, occ: np.ndarray) -> None:
        """The rows of ``obs["jobs"]`` of the visible jobs (padding rows stay 0)."""
        obs = self.single
        sizes_env = np.asarray(got.sizes, np.int64)  # (E,) visible jobs of each env
        env_of = np.repeat(np.arange(len(envs)), sizes_env)  # (m,) position in envs of each visible job
        first = np.cumsum(sizes_env) - sizes_env  # (E,) flat index of each env's first visible job
        dest = (envs[env_of], np.arange(env_of.size) - first[env_of])  # (m,) env and row of each visible job
        flat = np.concatenate(got.rows) + np.repeat(np.asarray(got.offsets, np.int64), sizes_env)
        gpus, attained, arrival, speed = (np.concatenate(a)[flat] for a in zip(*got.arrays))
        running = np.asarray(got.running, bool)
        unchanged = np.concatenate(got.unchanged)
        sizes = sizes_env[env_of]
        m = flat.size
        rows = np.zeros((m, len(JOB_FEATURES)), np.float32)
        rows[:, _PRESENT] = 1.0
        rows[:, _WAITING] = ~running
        rows[:, _RUNNING] = running
        if got.gpu_job:
            holder = np.asarray(got.gpu_job, np.int64)  # (h,) flat row of the job holding each listed GPU
            gpu = np.asarray(got.gpu_id, np.int64)  # (h,) its GPU id
            shared = np.bincount(holder, weights=occ[env_of[holder], gpu] > 1, minlength=m) > 0
            on_node = np.bincount(holder * obs.n_nodes + obs.gpu_node[gpu], minlength=m * obs.n_nodes)
            spans = (on_node.reshape(m, obs.n_nodes) > 0).sum(axis=1)  # (m,) nodes each job's GPUs are on
            rows[:, _SHARED] = shared
            rows[running, _NODES] = spans[running] / obs.n_nodes
        rows[:, _GPUS] = gpus / obs.n_gpus
        now = np.asarray(got.now)[env_of]
        times = np.zeros((m, 3))  # [GPU s] attained, [s] age, [s] remaining solo time
        times[:, 0] = attained
        times[:, 1] = now - arrival
        if obs.known_durations:
            times[:, 2] = np.concatenate(got.remaining)[flat]
        rows[:, _ATTAINED:_AGE + 1] = squash(times[:, :2], obs.time_scale)
        rows[:, _REMAINING] = squash(times[:, 2], obs.time_scale)
        rows[:, _SPEED] = np.where(unchanged, np.clip(speed, 0.0, 1.0), 0.0)
        rows[:, _ATT_RANK] = segment_rank(times[:, 0], env_of, sizes)
        if obs.known_durations:
            rows[:, _REM_RANK] = segment_rank(times[:, 2] * gpus, env_of, sizes)
        self.jobs[dest] = rows
