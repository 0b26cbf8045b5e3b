"""``observation="flat"``: ``Doppler-Sim-v0``'s state as one fixed-size vector a generic MLP can read.

The graph form (:mod:`doppler_gym.envs.observation`) keeps ids and indices for GNNs; a plain MLP (SB3's
``MultiInputPolicy``, a CleanRL network) needs every input scaled to O(1) and nothing that is an id. The
flat form is ``{"features": (F,) float32 in [-1, CLIP], "action_mask": (N + D,) int8}`` with
``F = N * (8 + D) + D * 11 + 4`` (``N = max_ops``, ``D = max_devices``), built from the graph form's arrays
and a one-step lookahead:

=====================  ==============  =========================================================================
block                  shape           content (zeros for padded ops and devices)
=====================  ==============  =========================================================================
op flags               (N, 3)          placed, ready, selected (0/1)
op costs               (N, 5)          the graph form's ``op_features`` each divided by its largest value in
                                       the graph (compute, b-level, t-level, input, output transfer) -> [0, 1]
op device              (N, D)          one-hot device of a placed op
device features        (D, 7)          the graph form's ``device_features`` (times / the graph's compute-only
                                       critical path, speed and memory relative), clipped to ``CLIP``
device earliest start  (D, 1)          PLC phase: the selected op's earliest start on the device minus its
                                       earliest start on the best device, / critical path (0 = best)
device increase        (D, 2)          PLC phase: how much the simulated makespan of the placed ops grows if
                                       the selected op goes on the device (:class:`~doppler_gym.sim.partial.
                                       PartialMakespan`, HEFT's finish time made exact), / reference
                                       makespan; and the same minus its smallest value over the devices
device valid           (D, 1)          1 for a device of the topology
globals                (4,)            phase (0 SEL, 1 PLC), fraction of ops placed, makespan of the partial
                                       placement / reference makespan (the reward's measure), devices / D
=====================  ==============  =========================================================================

Layout: the op blocks row by row (op 0's 8 + D values, then op 1's, ...), then the device rows, then the
globals. :func:`write_flat` works on any leading batch shape (the vector env fills ``(B, F)`` in one call).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from doppler_gym.envs.context import N_OP_FEATURES
from doppler_gym.envs.masked import mask_space

CLIP = 16.0  # largest feature value [times the graph's compute-only critical path for the time features]
N_OP_FLAGS = 3
N_DEVICE_FEATURES = 7  # the graph form's device_features columns
EARLIEST_START = 4  # column of the earliest start in device_features
N_DEVICE_COLUMNS = N_DEVICE_FEATURES + 4
N_GLOBALS = 4
FEATURES_KEY = "features"


def flat_size(max_ops: int, max_devices: int) -> int:
    """``F``: length of the ``features`` vector."""
    return max_ops * (N_OP_FLAGS + N_OP_FEATURES + max_devices) + max_devices * N_DEVICE_COLUMNS + N_GLOBALS


def flat_space(max_ops: int, max_devices: int) -> spaces.Dict:
    """The flat observation space."""
    size = flat_size(max_ops, max_devices)
    return spaces.Dict({
        FEATURES_KEY: spaces.Box(-1.0, CLIP, (size,), np.float32),
        "action_mask": mask_space(max_ops + max_devices),
    })


def normalised_op_costs(op_features: np.ndarray) -> np.ndarray:
    """``(n_ops, 5) float32``: each column of a graph's ``op_features`` over its largest value (0 if all 0)."""
    top = op_features.max(axis=0) if op_features.size else np.zeros(N_OP_FEATURES)
    return (op_features / np.where(top > 0, top, 1.0)).astype(np.float32)


def write_op_costs(out: np.ndarray, op_features: np.ndarray) -> np.ndarray:
    """Fill ``out`` ``(max_ops, 5) float32`` with :func:`normalised_op_costs` of a graph's ``(n_ops, 5)``
    ``op_features`` in its first ``n_ops`` rows and zeros below (the padding); returns ``out``."""
    if op_features.shape[0] > out.shape[0]:
        raise ValueError(f"write_op_costs: the graph has {op_features.shape[0]} ops but the buffer holds "
                         f"max_ops={out.shape[0]}; build the observation with a larger max_ops")
    out.fill(0.0)
    out[: op_features.shape[0]] = normalised_op_costs(op_features)
    return out


def write_flat(
    out: np.ndarray,
    op_state: np.ndarray,
    op_costs: np.ndarray,
    op_device: np.ndarray,
    device_features: np.ndarray,
    increase: np.ndarray,
    n_devices: np.ndarray,
    globals_: np.ndarray,
) -> np.ndarray:
    """Fill ``out`` with the flat features; every argument carries the same leading batch shape ``S``.

    Args:
        out: ``S + (F,) float32``, written in place and returned.
        op_state: ``S + (N, 3)`` placed / ready / selected flags.
        op_costs: ``S + (N, 5)`` normalised op costs (:func:`normalised_op_costs`, zero padded).
        op_device: ``S + (N,)`` device of each placed op, -1 otherwise.
        device_features: ``S + (D, 7)`` the graph form's device features (zeros in the SEL phase).
        increase: ``S + (D,)`` growth of the placed ops' simulated makespan with the selected op on each
            device, / reference makespan (PLC phase; ignored in the SEL phase).
        n_devices: ``S`` devices of each instance [count].
        globals_: ``S + (4,)`` phase, fraction placed, partial makespan / reference, n_devices / D (unclipped).
    """
    n, d = op_state.shape[-2], device_features.shape[-2]
    batch = out.shape[:-1]
    ops = out[..., : n * (N_OP_FLAGS + N_OP_FEATURES + d)].reshape(*batch, n, N_OP_FLAGS + N_OP_FEATURES + d)
    ops[..., :N_OP_FLAGS] = op_state
    ops[..., N_OP_FLAGS : N_OP_FLAGS + N_OP_FEATURES] = op_costs
    ops[..., N_OP_FLAGS + N_OP_FEATURES :] = op_device[..., None] == np.arange(d)
    start = n * (N_OP_FLAGS + N_OP_FEATURES + d)
    dev = out[..., start : start + d * N_DEVICE_COLUMNS].reshape(*batch, d, N_DEVICE_COLUMNS)
    np.clip(device_features, 0.0, CLIP, out=dev[..., :N_DEVICE_FEATURES])
    valid = np.arange(d) < np.asarray(n_devices)[..., None]
    earliest = np.where(valid, device_features[..., EARLIEST_START], np.inf)
    best = earliest.min(axis=-1, keepdims=True)
    placing = np.asarray(globals_)[..., :1] == 1.0  # PLC phase
    dev[..., N_DEVICE_FEATURES] = np.where(valid & placing, np.minimum(earliest - best, CLIP), 0.0)
    grow = np.where(valid, increase, np.inf)
    least = grow.min(axis=-1, keepdims=True)
    dev[..., N_DEVICE_FEATURES + 1] = np.where(valid & placing, np.clip(grow, -1.0, CLIP), 0.0)
    dev[..., N_DEVICE_FEATURES + 2] = np.where(valid & placing, np.minimum(grow - least, CLIP), 0.0)
    dev[..., N_DEVICE_FEATURES + 3] = valid
    np.clip(globals_, -1.0, CLIP, out=out[..., -N_GLOBALS:])
    return out


class FlatObservation:
    """The flat observation of one env: its buffer and the per-graph normalised op costs.

    Args:
        max_ops, max_devices: padding sizes [count].
    """

    def __init__(self, max_ops: int, max_devices: int) -> None:
        self.max_ops, self.max_devices = max_ops, max_devices
        self.space = flat_space(max_ops, max_devices)
        self.features = np.zeros(flat_size(max_ops, max_devices), np.float32)
        self.op_costs = np.zeros((max_ops, N_OP_FEATURES), np.float32)
        self.increase = np.zeros(max_devices, np.float64)  # written by the env when an op is selected
        self._globals = np.zeros(N_GLOBALS, np.float64)

    def set_costs(self, op_features: np.ndarray) -> None:
        """Use a new graph's ``(n_ops, 5)`` op features (the graph form's, before padding)."""
        write_op_costs(self.op_costs, op_features)

    def observation(
        self, builder: object, n_ops: int, n_devices: int, partial_makespan: float, reference: float
    ) -> dict[str, np.ndarray]:
        """A fresh flat observation from an :class:`~doppler_gym.envs.observation.ObservationBuilder`'s
        arrays; ``partial_makespan`` and ``reference`` in the same time unit."""
        g = self._globals
        g[0] = builder.phase[0]
        g[1] = float(np.count_nonzero(builder.op_device[:n_ops] >= 0)) / n_ops
        g[2] = partial_makespan / reference if reference > 0 else 0.0
        g[3] = n_devices / self.max_devices
        write_flat(self.features, builder.op_state, self.op_costs, builder.op_device, builder.device_features,
                   self.increase, np.asarray(n_devices), g)
        return {FEATURES_KEY: self.features.copy(), "action_mask": builder.action_mask.copy()}
