"""Observation builder: fixed-shape, padded ``Dict`` of ``Box`` arrays, updated in place.

Padding sizes ``N = max_ops``, ``E = max_edges``, ``D = max_devices``; the real sizes of the
current graph are in ``n_ops``, ``n_edges``, ``n_devices``. Padding rows are zeros (features),
-1 (indices) or 0 (mask). Float features lie in ``[0, FEATURE_MAX]`` (1e4; larger values are clipped).
The integer keys (``edge_index``, ``op_device``, the counts, ``graph_id``, ``phase``, ``selected_op``) are
indices and ids for a graph network, not features for an MLP: ``observation="flat"``
(:mod:`doppler_gym.envs.flat_observation`) gives an MLP a normalised vector instead.

======================  ==========  =======  ==================================================
key                     shape       dtype    content
======================  ==========  =======  ==================================================
``op_features``         (N, 5)      float32  static, per op: compute time, b-level, t-level,
                                             input transfer time, output transfer time
                                             (DOPPLER's definitions, times under the sim
                                             config, divided by the graph's compute-only
                                             critical path: see ``GraphContext``)
``op_state``            (N, 3)      float32  dynamic, per op: placed, ready (all inputs
                                             placed, op not placed), selected (0/1)
``op_device``           (N,)        int64    device of each placed op, -1 if unplaced/padding
``edge_index``          (2, E)      int64    producer (row 0) and consumer (row 1) of each
                                             edge; -1 in padding columns
``edge_attr``           (E, 1)      float32  transfer time of the producer's output / scale
``n_ops``               (1,)        int64    ops of the current graph
``n_edges``             (1,)        int64    edges of the current graph
``n_devices``           (1,)        int64    devices of the current topology
``device_features``     (D, 7)      float32  PLC phase: the 5 DOPPLER device features of the
                                             selected op (compute placed on the device, compute
                                             of its inputs there, first start and last end of
                                             those inputs, its earliest start there; / scale),
                                             relative speed, relative memory. Zeros in SEL.
``phase``               (1,)        int64    0 = SEL (pick an op), 1 = PLC (pick its device)
``selected_op``         (1,)        int64    the op being placed, -1 in SEL
``graph_id``            (1,)        int64    stable content hash of the graph, < 2**24
``action_mask``         (N + D,)    int8     1 where the action is valid (== ``action_masks()``)
``device_memory``       (D, 3)      float32  only when the sim config tracks memory: persistent
                                             bytes placed on each device / its memory, the
                                             same with the selected op there, memory / largest
                                             (:mod:`doppler_gym.envs.memory_obs`)
======================  ==========  =======  ==================================================

Static arrays (``op_features``, ``edge_index``, ``edge_attr``, the counts, ``graph_id``) are built
once per graph (read-only, never written again); dynamic arrays are preallocated and updated in
place by the env. :meth:`ObservationBuilder.observation` returns fresh copies of all of them
(``copy=True``, the default: safe to keep and to modify, as Gymnasium asks) or the builder's own
arrays (``copy=False``, faster: the dynamic ones change at the next ``step``/``reset``, which is
enough for SB3's vector envs, since they copy observations into their own buffers; Gymnasium's
passive checker then warns that observations share memory).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from doppler_gym.envs.context import FEATURE_MAX, GRAPH_ID_MODULUS, N_OP_FEATURES, GraphContext
from doppler_gym.envs.masked import MASK_DTYPE, mask_space
from doppler_gym.envs.memory_obs import MEMORY_KEY, N_MEMORY_FEATURES
from doppler_gym.sim.placement_state import PLC as PLC  # the observation's phase values (re-exported)
from doppler_gym.sim.placement_state import SEL as SEL

OP_FEATURES = ("compute", "b_level", "t_level", "input_transfer", "output_transfer")
OP_STATE = ("placed", "ready", "selected")
DEVICE_FEATURES = (
    "placed_compute", "input_compute", "input_first_start", "input_last_end", "earliest_start",
    "relative_speed", "relative_memory",
)
N_DEVICE_FEATURES = len(DEVICE_FEATURES)

STATIC_KEYS = ("op_features", "edge_index", "edge_attr", "n_ops", "n_edges", "n_devices", "graph_id")
DYNAMIC_KEYS = ("op_state", "op_device", "device_features", "phase", "selected_op", "action_mask")


def _box(low: float, high: float, shape: tuple[int, ...], dtype: type) -> spaces.Box:
    return spaces.Box(low=low, high=high, shape=shape, dtype=dtype)


def static_spaces(max_ops: int, max_edges: int, max_devices: int) -> dict[str, spaces.Box]:
    """Spaces of the static (per-graph) part of the observation."""
    n, e = max_ops, max_edges
    return {
        "op_features": _box(0.0, FEATURE_MAX, (n, N_OP_FEATURES), np.float32),
        "edge_index": _box(-1, max(n - 1, 0), (2, e), np.int64),
        "edge_attr": _box(0.0, FEATURE_MAX, (e, 1), np.float32),
        "n_ops": _box(0, n, (1,), np.int64),
        "n_edges": _box(0, e, (1,), np.int64),
        "n_devices": _box(1, max_devices, (1,), np.int64),
        "graph_id": _box(0, GRAPH_ID_MODULUS - 1, (1,), np.int64),
    }


def static_observation(ctx: GraphContext, max_ops: int, max_edges: int) -> dict[str, np.ndarray]:
    """Fresh read-only padded static arrays of ``ctx`` (see :func:`static_spaces`)."""
    n, e = ctx.n_ops, ctx.n_edges
    feats = np.zeros((max_ops, N_OP_FEATURES), np.float32)
    np.minimum(ctx.op_features, FEATURE_MAX, out=feats[:n])
    edge_index = np.full((2, max_edges), -1, np.int64)
    edge_index[0, :e] = ctx.graph.src
    edge_index[1, :e] = ctx.graph.dst
    edge_attr = np.zeros((max_edges, 1), np.float32)
    np.minimum(ctx.edge_attr, FEATURE_MAX, out=edge_attr[:e, 0])
    out = {
        "op_features": feats, "edge_index": edge_index, "edge_attr": edge_attr,
        "n_ops": np.array([n], np.int64), "n_edges": np.array([e], np.int64),
        "n_devices": np.array([ctx.n_devices], np.int64), "graph_id": np.array([ctx.graph_id], np.int64),
    }
    for arr in out.values():
        arr.setflags(write=False)
    return out


class ObservationBuilder:
    """Owns the observation arrays of :class:`~doppler_gym.envs.placement.PlacementEnv`.

    The env writes the dynamic arrays in place (O(1) or one vectorised slice per step); this class
    allocates them, holds the per-graph static arrays and assembles the observation dict.

    Attributes (dynamic, preallocated):
        op_state: ``(N, 3) float32`` placed / ready / selected flags.
        op_device: ``(N,) int64`` device of each placed op, -1 otherwise.
        device_features: ``(D, 7) float32`` see the module table.
        phase: ``(1,) int64`` 0 SEL, 1 PLC.
        selected_op: ``(1,) int64`` -1 in SEL.
        action_mask: ``(N + D,) int8``, 1 where the action is valid.
        device_memory: ``(D, 3) float32`` with ``memory=True`` (:mod:`doppler_gym.envs.memory_obs`), else ``None``.
    """

    def __init__(
        self, max_ops: int, max_edges: int, max_devices: int, copy: bool = True, memory: bool = False
    ) -> None:
        self.max_ops, self.max_edges, self.max_devices = max_ops, max_edges, max_devices
        self.copy = bool(copy)
        n, d = max_ops, max_devices
        dyn = {
            "op_state": _box(0.0, 1.0, (n, len(OP_STATE)), np.float32),
            "op_device": _box(-1, d - 1, (n,), np.int64),
            "device_features": _box(0.0, FEATURE_MAX, (d, N_DEVICE_FEATURES), np.float32),
            "phase": _box(0, 1, (1,), np.int64),
            "selected_op": _box(-1, n - 1, (1,), np.int64),
            "action_mask": mask_space(n + d),
        }
        if memory:
            dyn[MEMORY_KEY] = _box(0.0, FEATURE_MAX, (d, N_MEMORY_FEATURES), np.float32)
        self.space = spaces.Dict({**static_spaces(max_ops, max_edges, max_devices), **dyn})
        self.op_state = np.zeros((n, len(OP_STATE)), np.float32)
        self.op_device = np.full(n, -1, np.int64)
        self.device_features = np.zeros((d, N_DEVICE_FEATURES), np.float32)
        self.phase = np.zeros(1, np.int64)
        self.selected_op = np.full(1, -1, np.int64)
        self.action_mask = np.zeros(n + d, MASK_DTYPE)
        self.device_memory = np.zeros((d, N_MEMORY_FEATURES), np.float32) if memory else None
        self._static: dict[str, np.ndarray] = {}
        self._static_ctx: GraphContext | None = None

    def set_context(self, ctx: GraphContext) -> None:
        """Use ``ctx``'s static arrays (built on the first use of a context) and clear the rest."""
        if ctx is not self._static_ctx:
            self._static = static_observation(ctx, self.max_ops, self.max_edges)
            self._static_ctx = ctx
        self.op_state.fill(0.0)
        self.op_device.fill(-1)
        self.device_features.fill(0.0)
        self.phase[0] = SEL
        self.selected_op[0] = -1
        self.action_mask.fill(False)

    def observation(self) -> dict[str, np.ndarray]:
        """The current observation: fresh copies of every array when ``copy`` is on, else the
        builder's own arrays (static ones read-only, dynamic ones live)."""
        if self.copy:
            obs = {k: v.copy() for k, v in self._static.items()}
            obs["op_state"] = self.op_state.copy()
            obs["op_device"] = self.op_device.copy()
            obs["device_features"] = self.device_features.copy()
            obs["phase"] = self.phase.copy()
            obs["selected_op"] = self.selected_op.copy()
            obs["action_mask"] = self.action_mask.copy()
            if self.device_memory is not None:
                obs[MEMORY_KEY] = self.device_memory.copy()
            return obs
        obs = dict(self._static)
        obs["op_state"] = self.op_state
        obs["op_device"] = self.op_device
        obs["device_features"] = self.device_features
        obs["phase"] = self.phase
        obs["selected_op"] = self.selected_op
        obs["action_mask"] = self.action_mask
        if self.device_memory is not None:
            obs[MEMORY_KEY] = self.device_memory
        return obs
