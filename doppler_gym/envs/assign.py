"""``Doppler-SimAssign-v0``: place the whole graph in one step (a contextual bandit).

``observation="flat"`` (for MLPs, e.g. SB3's ``MultiInputPolicy``) is one fixed-size vector with every
entry in ``[0, 1]`` and no ids, edge indices or raw counts: ``{"features": (F,) float32, "action_mask":
(N * D,) int8}`` with ``F = N * 6 + D * 3 + 2`` (``N = max_ops``, ``D = max_devices``); ``action_mask``
equals :meth:`AssignEnv.action_masks`. ``features`` holds, in this order:

=====================  ==============  =========================================================================
block                  shape           content (zeros for padded ops and devices)
=====================  ==============  =========================================================================
op costs               (N, 5)          the graph form's ``op_features`` each divided by its largest value in
                                       the graph (compute, b-level, t-level, input, output transfer) -> [0, 1]
                                       (:func:`~doppler_gym.envs.flat_observation.write_op_costs`, as
                                       ``Doppler-Sim-v0``'s flat form)
op valid               (N, 1)          1 for an op of the graph, 0 for padding
device static          (D, 2)          the graph form's ``device_static``: speed / fastest speed, memory /
                                       largest memory -> [0, 1]
device valid           (D, 1)          1 for a device of the topology
globals                (2,)            n_ops / N, n_devices / D
=====================  ==============  =========================================================================

Layout: the op rows one after the other (op 0's 6 values, then op 1's, ...), then the device rows
(3 values each), then the globals. The observation depends on the graph's costs and the topology only, not
on the graph's name or id.
"""

from __future__ import annotations

import weakref
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from doppler_gym.envs.backend import Backend, as_backend
from doppler_gym.envs.context import N_DEVICE_STATIC, N_OP_FEATURES, GraphContext, Instances, check_render_mode
from doppler_gym.envs.flat_observation import FEATURES_KEY, write_op_costs
from doppler_gym.envs.masked import MASK_DTYPE, InvalidActions, action_array, episode_over_error, mask_space
from doppler_gym.envs.observation import static_observation, static_spaces
from doppler_gym.envs.rewards import Reward, make_reward
from doppler_gym.graph.analysis import topological_order
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.trace import Trace
from doppler_gym.topology.types import Topology

OBSERVATIONS = ("graph", "flat")
N_OP_COLUMNS = N_OP_FEATURES + 1  # normalised costs, valid flag
N_DEVICE_COLUMNS = N_DEVICE_STATIC + 1  # static features, valid flag
N_GLOBALS = 2


def assign_flat_size(max_ops: int, max_devices: int) -> int:
    """``F``: length of the flat ``features`` vector (see the module table)."""
    return max_ops * N_OP_COLUMNS + max_devices * N_DEVICE_COLUMNS + N_GLOBALS


def assign_flat_space(max_ops: int, max_devices: int) -> spaces.Dict:
    """The flat observation space: ``features`` ``(F,) float32`` in [0, 1], ``action_mask``
    ``(max_ops * max_devices,) int8``."""
    return spaces.Dict({
        FEATURES_KEY: spaces.Box(0.0, 1.0, (assign_flat_size(max_ops, max_devices),), np.float32),
        "action_mask": mask_space(max_ops * max_devices),
    })


def assign_flat_features(ctx: GraphContext, max_ops: int, max_devices: int) -> np.ndarray:
    """``(F,) float32`` flat features of ``ctx`` (layout: the module table), every entry in [0, 1].

    Args:
        ctx: the instance (its unclipped ``op_features`` ``(n_ops, 5)`` and ``device_static`` ``(n_devices, 2)``).
        max_ops, max_devices: padding sizes [count], at least ``ctx.n_ops`` and ``ctx.n_devices``.
    """
    out = np.zeros(assign_flat_size(max_ops, max_devices), np.float32)
    ops = out[: max_ops * N_OP_COLUMNS].reshape(max_ops, N_OP_COLUMNS)
    write_op_costs(ops[:, :N_OP_FEATURES], ctx.op_features)
    ops[: ctx.n_ops, N_OP_FEATURES] = 1.0
    start = max_ops * N_OP_COLUMNS
    dev = out[start : start + max_devices * N_DEVICE_COLUMNS].reshape(max_devices, N_DEVICE_COLUMNS)
    np.clip(ctx.device_static, 0.0, 1.0, out=dev[: ctx.n_devices, :N_DEVICE_STATIC], casting="unsafe")
    dev[: ctx.n_devices, N_DEVICE_STATIC] = 1.0
    out[-N_GLOBALS:] = (ctx.n_ops / max_ops if max_ops else 0.0, ctx.n_devices / max_devices)
    return out


def assign_action_mask(ctx: GraphContext | None, max_ops: int, max_devices: int) -> np.ndarray:
    """``(max_ops * max_devices,) int8``: per op (row-major) 1 for the allowed devices (devices
    ``< n_devices`` for a real op, device 0 for a padding op; device 0 for every op without ``ctx``)."""
    mask = np.zeros((max_ops, max_devices), MASK_DTYPE)
    if ctx is not None:
        mask[: ctx.n_ops, : ctx.n_devices] = True
        mask[ctx.n_ops :, 0] = True
    else:
        mask[:, 0] = True
    return mask.reshape(-1)


class AssignEnv(gym.Env):
    """Assign every op of a dataflow graph to a device in a single action.

    ## Description

    The one-shot counterpart of :class:`~doppler_gym.envs.placement.PlacementEnv`
    (``Doppler-Sim-v0``): the agent sees the static graph and answers with a whole assignment; the
    backend runs it and the episode ends. Suited to bandit-style methods and to policies that
    decode all ops at once (e.g. GDP).

    ## Action Space

    ``MultiDiscrete([max_devices] * max_ops)``: entry ``v`` is the device of op ``v``. Entries of
    padding ops (``v >= n_ops``) are ignored. A device ``>= n_devices`` (possible when the
    topology has fewer devices than ``max_devices``) is taken **modulo** ``n_devices``, so every
    action in the space is a valid assignment; ``info["remapped"]`` counts such entries.
    :meth:`action_masks` (flattened, ``max_ops * max_devices`` ``int8``, for MaskablePPO) allows only
    devices ``< n_devices`` for real ops and only device 0 for padding ops. An action outside the
    space (an entry ``< 0`` or ``>= max_devices``) is invalid: with ``invalid_action="raise"``
    (default) it raises ``ValueError``; with ``"penalize"`` it leaves the episode running, is
    rewarded ``invalid_penalty`` and flagged ``info["invalid_action"] = True``, and
    ``max_invalid_streak`` of them in a row truncate the episode. A non-integer action raises
    ``TypeError``.

    ## Observation Space

    ``observation="graph"`` (default): the static part of ``Doppler-Sim-v0``'s observation
    (``op_features``, ``edge_index``, ``edge_attr``, ``n_ops``, ``n_edges``, ``n_devices``, ``graph_id``;
    see :mod:`doppler_gym.envs.observation`) plus ``device_static`` ``(max_devices, 2) float32``:
    each device's speed / fastest speed and memory / largest memory (zeros for padding). It keeps the ids
    and raw counts a GNN reads (``graph_id`` is up to 2**24), which saturate a plain MLP.

    ``observation="flat"`` (for MLPs): ``{"features": (F,) float32 in [0, 1], "action_mask":
    (max_ops * max_devices,) int8}``, ``F = 6 * max_ops + 3 * max_devices + 2``: per op the normalised costs
    and a valid flag, per device ``device_static`` and a valid flag, then n_ops / max_ops and
    n_devices / max_devices (layout: the module docstring's table). No ids; ``action_mask`` equals
    :meth:`action_masks`.

    ## Rewards

    The same reward classes as ``Doppler-Sim-v0`` (:mod:`doppler_gym.envs.rewards`), evaluated
    once: default ``-makespan / reference_makespan``. ``"shaped"`` equals ``"sparse"`` here (there
    are no intermediate states).

    ## Starting State

    A graph (and topology) from the configured source, as in ``Doppler-Sim-v0``.

    ## Episode End

    After the first valid action (terminated). ``info``: ``makespan``, ``assignment``, ``order``,
    ``reference_makespan``, ``lower_bound``, ``backend``, ``graph_id``, ``graph_name``,
    ``time_unit``, ``remapped``. ``order`` is the ops by decreasing b-level (ties in topological
    order), which is a topological order; it is passed to the backend as priorities (position in
    the order), used when ``sim_config.queue_order == "priority"``.

    ## Arguments

    ``graph``, ``topology``, ``sim_config``, ``reward``, ``max_ops``, ``max_edges``,
    ``max_devices``, ``invalid_penalty``, ``max_invalid_streak``, ``backend``, ``render_mode``: as in
    :meth:`PlacementEnv.default_config <doppler_gym.envs.placement.PlacementEnv.default_config>`;
    ``invalid_action``: ``"raise"`` (default) or ``"penalize"``; ``observation``: ``"graph"`` (default) or
    ``"flat"``.

    ## Version History

    * v0: initial version.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 1}

    def __init__(
        self,
        graph: object = "paper/ffnn",
        topology: object = 4,
        sim_config: SimConfig | None = None,
        reward: str | Reward = "sparse",
        max_ops: int | None = None,
        max_edges: int | None = None,
        max_devices: int | None = None,
        backend: Backend | None = None,
        render_mode: str | None = None,
        invalid_action: str = "raise",
        invalid_penalty: float = -0.01,
        max_invalid_streak: int = 100,
        observation: str = "graph",
    ) -> None:
        check_render_mode(render_mode, self.metadata["render_modes"])
        if observation not in OBSERVATIONS:
            raise ValueError(f"AssignEnv: observation must be one of {OBSERVATIONS} ('graph': the arrays a GNN "
                             f"reads, 'flat': one vector in [0, 1] for an MLP), got {observation!r}")
        self.observation_form = observation
        # what an action outside the space does (ValueError, or penalty and truncation)
        self.invalid_actions = InvalidActions(invalid_action, invalid_penalty, max_invalid_streak)
        self.render_mode = render_mode
        self.reward = make_reward(reward)
        self.backend = as_backend(backend)
        self._instances = Instances(graph, topology, sim_config, max_ops, max_edges, max_devices)
        self.max_ops = self._instances.max_ops
        self.max_edges = self._instances.max_edges
        self.max_devices = self._instances.max_devices
        self.observation_space = self._observation_space()
        self.action_space = spaces.MultiDiscrete(np.full(self.max_ops, self.max_devices, dtype=np.int64))
        # per context: padded static observation and the b-level order (contexts are memoised)
        self._static: weakref.WeakKeyDictionary[GraphContext, tuple[dict, np.ndarray]]
        self._static = weakref.WeakKeyDictionary()
        self.graph: DataflowGraph | None = None
        self.topology: Topology | None = None
        self.sim_config: SimConfig | None = None
        self.trace: Trace | None = None
        self._ctx: GraphContext | None = None
        self._obs: dict[str, np.ndarray] = {}
        self._order = np.zeros(0, np.int64)
        self._done = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        """Draw this episode's instance; ``options`` may fix ``graph`` and/or ``topology``."""
        super().reset(seed=seed)
        ctx = self._instances.sample(self.np_random, options)
        graph, topology, config = ctx.graph, ctx.topology, ctx.config
        entry = self._static.get(ctx)
        if entry is None:
            obs = self._static_observation(ctx)
            topo = topological_order(graph)
            rank = np.empty(graph.n_ops, np.int64)
            rank[topo] = np.arange(graph.n_ops)
            order = np.lexsort((rank, -ctx.b_level)).astype(np.int64)
            order.setflags(write=False)
            entry = (obs, order)
            self._static[ctx] = entry
        self._ctx = ctx
        self._obs, self._order = entry
        self.graph, self.topology, self.sim_config = graph, topology, config
        self.trace = None
        self.invalid_actions.reset()
        self._done = False
        info = {
            "graph_id": self._ctx.graph_id, "graph_name": graph.name, "n_ops": graph.n_ops,
            "reference_makespan": self._ctx.reference_makespan, "lower_bound": self._ctx.lower_bound,
        }
        return self._observation(), info

    def step(self, action: object) -> tuple[dict, float, bool, bool, dict]:
        if self._done:
            raise episode_over_error("AssignEnv.step")
        ctx = self._ctx
        arr = action_array(action, (self.max_ops,), "AssignEnv.step", "one device per op, padding entries ignored")
        devices = arr[: ctx.n_ops]
        if devices.size and (devices.min() < 0 or devices.max() >= self.max_devices):
            return self._invalid(devices)
        self.invalid_actions.accept()
        remapped = int((devices >= ctx.n_devices).sum())
        if remapped:
            devices %= ctx.n_devices
        order = self._order.copy()
        priorities = np.empty(ctx.n_ops, np.float64)
        priorities[order] = np.arange(ctx.n_ops, dtype=np.float64)
        self.trace = self.backend.execute(ctx.graph, ctx.topology, devices, priorities, ctx.config)
        self._done = True
        makespan = float(self.trace.makespan)
        info = {
            "makespan": makespan,
            "assignment": devices,
            "order": order,
            "reference_makespan": ctx.reference_makespan,
            "lower_bound": ctx.lower_bound,
            "backend": self.backend.name,
            "graph_id": ctx.graph_id,
            "graph_name": ctx.graph.name,
            "time_unit": self.trace.time_unit,
            "remapped": remapped,
        }
        ref = ctx.reference_makespan or 1.0  # 0 only for a graph without any cost
        reward = float(self.reward.final(0.0, makespan, ref))
        return self._observation(), reward, True, False, info

    def _invalid(self, devices: np.ndarray) -> tuple[dict, float, bool, bool, dict]:
        """An action with a device outside ``[0, max_devices)``: ``ValueError`` or the penalty (state unchanged)."""
        bad = int(np.flatnonzero((devices < 0) | (devices >= self.max_devices))[0])
        message = f"AssignEnv.step: action[{bad}] = {devices[bad]} is outside [0, max_devices={self.max_devices})"
        reward, truncated, info = self.invalid_actions.reject(lambda: message)
        if truncated:
            self._done = True
        return self._observation(), reward, False, truncated, info

    def _observation_space(self) -> spaces.Dict:
        """The space of the chosen observation form."""
        if self.observation_form == "flat":
            return assign_flat_space(self.max_ops, self.max_devices)
        obs_spaces = static_spaces(self.max_ops, self.max_edges, self.max_devices)
        obs_spaces["device_static"] = spaces.Box(0.0, 1.0, (self.max_devices, N_DEVICE_STATIC), np.float32)
        return spaces.Dict(obs_spaces)

    def _static_observation(self, ctx: GraphContext) -> dict[str, np.ndarray]:
        """Read-only observation arrays of ``ctx`` in the chosen form (the same every step of an episode)."""
        if self.observation_form == "flat":
            obs = {
                FEATURES_KEY: assign_flat_features(ctx, self.max_ops, self.max_devices),
                "action_mask": assign_action_mask(ctx, self.max_ops, self.max_devices),
            }
        else:
            obs = static_observation(ctx, self.max_ops, self.max_edges)
            dev = np.zeros((self.max_devices, N_DEVICE_STATIC), np.float32)
            dev[: ctx.n_devices] = ctx.device_static
            obs["device_static"] = dev
        for arr in obs.values():
            arr.setflags(write=False)
        return obs

    def _observation(self) -> dict[str, np.ndarray]:
        """Fresh copies of the static arrays (callers may keep and modify them)."""
        return {k: v.copy() for k, v in self._obs.items()}

    def action_masks(self) -> np.ndarray:
        """``(max_ops * max_devices,) int8``: per op (row-major), 1 for the allowed devices
        (:func:`assign_action_mask`)."""
        return assign_action_mask(self._ctx, self.max_ops, self.max_devices)

    @property
    def context(self) -> GraphContext | None:
        """Static data of the current episode's instance."""
        return self._ctx

    def render(self) -> str | np.ndarray | None:
        """``"ansi"``: a text summary; ``"rgb_array"``: a Gantt chart of the last trace."""
        if self.render_mode is None:
            gym.logger.warn("AssignEnv.render() without a render_mode; use render_mode='ansi' or 'rgb_array'")
            return None
        from doppler_gym.envs import render as _render

        if self._ctx is None:
            raise RuntimeError("AssignEnv.render: no episode yet; call reset() first")
        if self.render_mode == "ansi":
            return _render.render_assign_ansi(self._ctx, self.trace)
        return _render.render_trace_rgb_array(self._ctx, self.trace)
