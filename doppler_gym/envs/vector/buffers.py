"""The preallocated arrays of a batch of placement envs: the MDP state and the observation rows.

``N`` envs, ``n = max_ops``, ``E = max_edges``, ``D = max_devices``, ``A = n + D``. The observation arrays
have the single env's keys, shapes and dtypes with a leading ``(N,)`` axis
(:mod:`doppler_gym.envs.observation`, :mod:`doppler_gym.envs.flat_observation`).
"""

from __future__ import annotations

import numpy as np

from doppler_gym.envs.context import N_OP_FEATURES
from doppler_gym.envs.flat_observation import FEATURES_KEY, N_GLOBALS, flat_size
from doppler_gym.envs.masked import MASK_DTYPE
from doppler_gym.envs.observation import N_DEVICE_FEATURES, OP_STATE


class BatchState:
    """The per-env state the kernel updates (:func:`~doppler_gym.envs.vector.kernel.step_rows`).

    Attributes (``(N, ...)`` rows; units as in the kernel's docstring):
        device32: ``(N, n) int32`` each op's device, -1 unplaced (the observation's ``op_device`` as the partial
            makespans read it).
        start, end: ``(N, n) float64`` estimated start and end of each placed op [internal time].
        avail, work: ``(N, D) float64`` when each device is free, compute placed on it [internal time].
        makespan: ``(N,)`` estimated makespan [internal time]; est_makespan: the same [reported unit].
        waiting: ``(N, n) int64`` unplaced inputs of each op; ready: ``(N, n) int8`` 1 = ready.
        position: ``(N, n) float64`` SEL position of each placed op (0 for the others).
        n_placed: ``(N,) int64``; sel_est: ``(N, D) float64`` the selected op's earliest start per device.
        measured: ``(N,) float64`` the reward's partial makespan so far [reported unit].
        streak: ``(N,) int64`` consecutive invalid actions.
        over: ``(N,) bool`` the episode ended (or never started): stepping it is an error until a reset.
        scratch, seen: ``(3, D) float64`` and ``(D,) bool``, the kernel's scratch of a SEL step.
    """

    def __init__(self, num_envs: int, max_ops: int, max_devices: int) -> None:
        b, n, d = num_envs, max_ops, max_devices
        self.device32 = np.full((b, n), -1, np.int32)
        self.start = np.zeros((b, n))
        self.end = np.zeros((b, n))
        self.avail = np.zeros((b, d))
        self.work = np.zeros((b, d))
        self.makespan = np.zeros(b)
        self.est_makespan = np.zeros(b)
        self.waiting = np.zeros((b, n), np.int64)
        self.ready = np.zeros((b, n), np.int8)
        self.position = np.zeros((b, n))
        self.n_placed = np.zeros(b, np.int64)
        self.sel_est = np.zeros((b, d))
        self.measured = np.zeros(b)
        self.streak = np.zeros(b, np.int64)
        self.over = np.ones(b, bool)
        self.scratch = np.zeros((3, d))  # the kernel's per-device scratch of a SEL step
        self.seen = np.zeros(d, bool)


class GraphBuffers:
    """The graph-form observation of every env (the kernel writes the dynamic rows, a reset the static ones).

    Attributes: one ``(N, ...)`` array per key of :mod:`doppler_gym.envs.observation`'s table:
    ``op_features``, ``edge_index``, ``edge_attr``, ``n_ops``, ``n_edges``, ``n_devices``, ``graph_id``
    (static per episode), ``op_state``, ``op_device``, ``device_features``, ``phase``, ``selected_op``,
    ``action_mask`` (dynamic); ``arrays`` maps the keys to them.
    """

    STATIC = ("op_features", "edge_index", "edge_attr", "n_ops", "n_edges", "n_devices", "graph_id")

    def __init__(self, num_envs: int, max_ops: int, max_edges: int, max_devices: int) -> None:
        b, n, e, d = num_envs, max_ops, max_edges, max_devices
        self.op_features = np.zeros((b, n, N_OP_FEATURES), np.float32)
        self.edge_index = np.full((b, 2, e), -1, np.int64)
        self.edge_attr = np.zeros((b, e, 1), np.float32)
        self.n_ops = np.zeros((b, 1), np.int64)
        self.n_edges = np.zeros((b, 1), np.int64)
        self.n_devices = np.ones((b, 1), np.int64)
        self.graph_id = np.zeros((b, 1), np.int64)
        self.op_state = np.zeros((b, n, len(OP_STATE)), np.float32)
        self.op_device = np.full((b, n), -1, np.int64)
        self.device_features = np.zeros((b, d, N_DEVICE_FEATURES), np.float32)
        self.phase = np.zeros((b, 1), np.int64)
        self.selected_op = np.full((b, 1), -1, np.int64)
        self.action_mask = np.zeros((b, n + d), MASK_DTYPE)
        self.arrays = {k: getattr(self, k) for k in (
            *self.STATIC, "op_state", "op_device", "device_features", "phase", "selected_op", "action_mask")}

    def set_static(self, i: int, static: dict[str, np.ndarray]) -> None:
        """Row ``i`` of the static arrays from one env's padded static observation."""
        for key in self.STATIC:
            getattr(self, key)[i] = static[key]


class FlatBuffers:
    """The flat-form observation of every env and the inputs of :func:`~doppler_gym.envs.flat_observation.write_flat`.

    Attributes:
        features: ``(N, F) float32``; op_costs: ``(N, n, 5) float32`` (per episode); globals_: ``(N, 4) float64``;
        increase: ``(N, D) float64`` the lookahead of the op selected last (``write_flat``'s ``increase``).
        arrays: ``{"features": features, "action_mask": the graph buffers' action_mask}``.
    """

    def __init__(self, num_envs: int, max_ops: int, max_devices: int, action_mask: np.ndarray) -> None:
        self.features = np.zeros((num_envs, flat_size(max_ops, max_devices)), np.float32)
        self.op_costs = np.zeros((num_envs, max_ops, N_OP_FEATURES), np.float32)
        self.globals_ = np.zeros((num_envs, N_GLOBALS))
        self.increase = np.zeros((num_envs, max_devices))
        self.arrays = {FEATURES_KEY: self.features, "action_mask": action_mask}
