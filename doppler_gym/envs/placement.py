"""``Doppler-Sim-v0``: DOPPLER's two-phase placement MDP (SEL an op, then PLC its device)."""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from doppler_gym.envs.backend import Backend, as_backend
from doppler_gym.envs.context import FEATURE_MAX, GraphContext, Instances, check_render_mode
from doppler_gym.envs.flat_observation import FlatObservation
from doppler_gym.envs.masked import TERMINAL_ACTION, InvalidActions, action_index, episode_over_error
from doppler_gym.envs.memory_obs import MemoryFeatures, oom_info
from doppler_gym.envs.observation import PLC, SEL, ObservationBuilder
from doppler_gym.envs.rewards import Reward, make_reward
from doppler_gym.envs.stragglers_option import as_straggler_option, draw_stragglers
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.estimate import EstimatedSchedule
from doppler_gym.sim.partial_incremental import IncrementalPartialMakespan
from doppler_gym.sim.placement_state import PlacementState
from doppler_gym.sim.stragglers import Straggler
from doppler_gym.sim.trace import Trace
from doppler_gym.topology.types import Topology

_PLACED_ROW = np.array([1.0, 0.0, 0.0], np.float32)  # op_state row of a placed op
_TIE_RTOL = 1e-9  # relative tolerance of the teacher's ties (b-levels, earliest starts)
OBSERVATIONS = ("graph", "flat")


class PlacementEnv(gym.Env):
    """Place the ops of a dataflow graph on devices, one op at a time, in DOPPLER's two phases.

    ## Description

    A dataflow graph (a DAG of ops with compute costs and output sizes) runs on a set of devices
    under a work-conserving runtime; the goal is an assignment of ops to devices with a small
    makespan. As in DOPPLER (Yao et al., ICLR 2026), each op takes two decisions: **SEL** picks a
    *ready* op (all its predecessors placed, itself not placed), then **PLC** picks its device.
    The SEL order also drives an estimated schedule (each op starts at its earliest start on its
    device, :class:`~doppler_gym.sim.estimate.EstimatedSchedule` with ``time_model="fixed"``) from
    which the device features are read. When every op is placed, the backend (the simulator by
    default) runs the assignment, with the SEL order as priorities when the runtime model uses
    priorities, and the makespan decides the reward.

    ## Action Space

    ``Discrete(max_ops + max_devices)``. In the SEL phase a valid action is the id ``v`` of a
    ready op (``v < n_ops``); in the PLC phase it is ``max_ops + d`` for a device ``d < n_devices``.
    :meth:`action_masks` (the method sb3-contrib's MaskablePPO calls) and ``obs["action_mask"]``
    give the valid actions. An invalid action leaves the state unchanged and, with
    ``invalid_action="penalize"``, is rewarded ``invalid_penalty`` and flagged
    ``info["invalid_action"] = True``; ``max_invalid_streak`` of them in a row truncate the episode.
    With ``invalid_action="raise"`` it raises ``ValueError`` listing the valid actions.

    ## Observation Space

    ``observation="graph"`` (default, for GNNs): a ``Dict`` of fixed-shape ``Box`` arrays padded to
    ``max_ops``/``max_edges``/``max_devices`` (see :mod:`doppler_gym.envs.observation` for the full table):
    static op features (compute, b-level, t-level, input and output transfer, as times under the sim config
    divided once per graph by its compute-only critical path), dynamic op flags (placed, ready, selected)
    and devices, the edge list with transfer times, counts, the selected op's device features (PLC phase),
    ``phase``, ``selected_op``, ``graph_id`` and ``action_mask``. Observations are safe to keep
    (``copy_obs=True``, the default). When ``sim_config`` tracks memory
    (``SimConfig(memory="track"/"enforce")``) a ``device_memory`` key adds each device's memory in use (the
    persistent bytes placed on it so far, and with the selected op there) and capacity, normalised
    (:mod:`doppler_gym.envs.memory_obs`). Float features are O(1) (times divided by the graph's compute-only
    critical path), in finite boxes ``[0, 1e4]`` (larger values clipped); ``edge_index``, ``op_device``,
    ``selected_op``, ``phase``, the counts and ``graph_id`` are integers (indices, ids), not features to
    feed an MLP.
    ``observation="flat"`` (for MLPs, e.g. SB3's ``MultiInputPolicy``): ``{"features": (F,) float32,
    "action_mask"}``, every entry in [-1, 16] and nothing that is an id, with a one-step lookahead (the
    simulated makespan's growth on each device); see :mod:`doppler_gym.envs.flat_observation`.

    ## Rewards

    Chosen by ``reward`` (:mod:`doppler_gym.envs.rewards`). The default ``"incremental"`` gives, at
    each placement, minus the time it adds to the simulated makespan of the ops placed so far, divided by
    the reference makespan (Placeto's per-step reward), and 0 for a selection; the final step adds the
    backend's correction, so an episode's rewards sum to ``-makespan / reference_makespan`` exactly: the
    sparse reward, which standard discounting (gamma 0.99) does not hide. The reference is the
    critical-path heuristic's simulated makespan on the same graph, topology and config (so the return
    is about -1 for the heuristic, above -1 when better). ``"sparse"`` (that sum, on the final step
    only), ``"makespan"``, ``"improvement"`` and the potential-based ``"shaped"`` (on the estimated
    schedule) are the alternatives. Invalid actions get
    ``invalid_penalty`` (default -0.01). Under ``SimConfig(memory="enforce")`` a final placement
    that runs out of memory on some device (:mod:`doppler_gym.sim.memory`) gets ``oom_penalty``
    (default -1) added to its final reward.

    ## Starting State

    A graph (and topology) from the configured source (fixed, drawn from a sequence, or generated
    with the env's ``np_random``), nothing placed, SEL phase: the ready ops are the graph's sources.

    ## Episode End

    Terminates after ``2 * n_ops`` valid steps, when the last op is placed (the terminal observation's
    mask marks action 0 alone, so a masked policy handed it stays defined; stepping raises until
    ``reset()``); ``info`` then holds
    ``makespan``, ``assignment`` (``(n_ops,) int64``), ``order`` (the SEL order, ``(n_ops,) int64``),
    ``reference_makespan``, ``lower_bound`` (:func:`~doppler_gym.sim.makespan_lower_bound`),
    ``estimated_makespan``, ``backend`` (``"sim"``), ``graph_id``, ``graph_name``, ``time_unit`` and
    ``feasible`` (False when it ran out of memory under ``memory="enforce"``); when memory is
    tracked also ``peak_memory`` (``(n_devices,)`` [B]) and ``oom`` (``None``, or the reason:
    ``device``, ``time``, ``peak_bytes``, ``capacity_bytes``, ``excess_bytes``); every time is in
    the simulator's reported unit (``trace.time_unit``). Truncates after
    ``max_invalid_streak`` consecutive invalid actions (penalize mode).

    ## Arguments

    ```python
    gym.make("Doppler-Sim-v0", graph="paper/ffnn", topology=4)
    ```

    See :meth:`default_config` for every keyword, its default and its unit.

    ## Version History

    * v0: initial version.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    @classmethod
    def default_config(cls) -> dict[str, Any]:
        """The keyword arguments of the constructor and their defaults, read from its signature
        (the one place the defaults are written).

        - ``graph``: a :class:`DataflowGraph`, a paper graph name (``"paper/ffnn"``), a workload
          name (``"ffnn"``), a ``.txt``/``.json`` path, a sequence of those (one drawn uniformly
          per reset), a callable ``rng -> graph`` called per reset with the env's ``np_random``
          (multi-graph training), or an iterator of graphs (``next`` per reset).
        - ``topology``: a :class:`Topology`, a preset name (``"p100x4"``, ``"uniform8"``), a device
          count (``Topology.uniform(n)``), or a sequence/callable/iterator of those.
        - ``sim_config``: the runtime model; ``None`` = the graph's
          :func:`~doppler_gym.instances.default_config` on the episode's topology
          (``SimConfig.reference()`` for paper graphs, the roofline for other graphs on a topology with
          GPU models, ``SimConfig()`` otherwise), decided per episode.
        - ``reward``: a name from :func:`~doppler_gym.envs.rewards.reward_names` or a ``Reward``.
        - ``max_ops``, ``max_edges``, ``max_devices``: padding sizes [count]; default: the largest
          of the known graphs/topologies; required for generated ones.
        - ``invalid_action``: ``"penalize"`` or ``"raise"``.
        - ``invalid_penalty``: reward of an invalid action (penalize mode) [same scale as the
          sparse reward, about -1 per episode].
        - ``max_invalid_streak``: consecutive invalid actions that truncate the episode [steps].
        - ``backend``: a :class:`~doppler_gym.envs.backend.Backend`; ``None`` = ``SimBackend()``.
        - ``copy_obs``: return copies of the dynamic observation arrays (safe to keep); ``False``
          returns the live arrays (valid until the next step; SB3 vector envs copy them anyway).
        - ``render_mode``: ``None``, ``"ansi"`` or ``"rgb_array"``.
        - ``oom_penalty``: added to the final reward when the placement runs out of memory under
          ``SimConfig(memory="enforce")`` [same scale as the sparse reward].
        - ``observation``: ``"graph"`` (the arrays a GNN reads) or ``"flat"`` (one normalised vector
          and the mask, for an MLP; :mod:`doppler_gym.envs.flat_observation`).
        - ``stragglers``: slowdowns the final run meets (:mod:`doppler_gym.sim.stragglers`; the
          simulator only): ``None``; a ``StragglerModel`` (or a dict of its fields) drawn afresh at each
          reset with the env's ``np_random`` over the model's horizon, else the instance's reference
          makespan, so a policy learns placements robust in expectation (it never observes them); or a
          fixed sequence of ``Straggler``. ``info["stragglers"]`` holds the episode's at its end.
        """
        params = inspect.signature(cls.__init__).parameters
        return {name: p.default for name, p in params.items() if name != "self"}

    def __init__(
        self,
        graph: object = "paper/ffnn",
        topology: object = 4,
        sim_config: SimConfig | None = None,
        reward: str | Reward = "incremental",
        max_ops: int | None = None,
        max_edges: int | None = None,
        max_devices: int | None = None,
        invalid_action: str = "penalize",
        invalid_penalty: float = -0.01,
        max_invalid_streak: int = 100,
        backend: Backend | None = None,
        copy_obs: bool = True,
        render_mode: str | None = None,
        oom_penalty: float = -1.0,
        stragglers: object = None,
        observation: str = "graph",
    ) -> None:
        check_render_mode(render_mode, self.metadata["render_modes"])
        if observation not in OBSERVATIONS:
            raise ValueError(f"observation must be one of {OBSERVATIONS} ('graph': the arrays a GNN reads, 'flat': "
                             f"one normalised vector for an MLP), got {observation!r}")
        self.observation_form = observation
        if not isinstance(oom_penalty, (int, float, np.floating)) or not np.isfinite(oom_penalty):
            raise ValueError(f"oom_penalty must be a finite number (added to the final reward of a placement "
                             f"that runs out of memory), got {oom_penalty!r}")
        self.oom_penalty = float(oom_penalty)
        self.stragglers = as_straggler_option(stragglers)
        self._episode_stragglers: tuple[Straggler, ...] = ()
        # what an action the mask rules out does (penalty and truncation, or ValueError)
        self.invalid_actions = InvalidActions(invalid_action, invalid_penalty, max_invalid_streak)
        self.render_mode = render_mode
        self.reward = make_reward(reward)
        self.backend = as_backend(backend)
        self._instances = Instances(graph, topology, sim_config, max_ops, max_edges, max_devices)
        self.max_ops = self._instances.max_ops
        self.max_edges = self._instances.max_edges
        self.max_devices = self._instances.max_devices
        n, d = self.max_ops, self.max_devices
        # the episode's observation arrays (the env writes them; callers read, e.g. to time the copies)
        track_memory = sim_config is not None and sim_config.memory != "off"
        self.observation_builder = ObservationBuilder(n, self.max_edges, d, copy=copy_obs, memory=track_memory)
        self._memory = MemoryFeatures(self.observation_builder.device_memory) if track_memory else None
        self._flat = FlatObservation(n, d) if observation == "flat" else None
        self.observation_space = self._flat.space if self._flat is not None else self.observation_builder.space
        self.action_space = spaces.Discrete(n + d)
        # episode state (set by reset)
        self.graph: DataflowGraph | None = None
        self.topology: Topology | None = None
        self.sim_config: SimConfig | None = None
        self.trace: Trace | None = None  # the backend's trace of the last finished episode
        self._ctx: GraphContext | None = None
        self._state: PlacementState | None = None  # the MDP's state: ready ops, selection, order, estimate
        self._state_ctx: GraphContext | None = None  # the context self._state was built for
        self._ready = np.zeros(n, np.int8)  # (max_ops,) 1 = ready op (the SEL mask, padded)
        self._est_makespan = 0.0  # estimated makespan of the placement so far [reported unit]
        self._measured = 0.0  # the reward's partial makespan (reward.measure) so far [reported unit]
        self._partial: IncrementalPartialMakespan | None = None  # simulates the placed ops ("simulated" measure)
        self._partial_ctx: GraphContext | None = None
        self._done = True

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        """Start an episode. ``options`` may fix this episode's ``graph`` and/or ``topology``
        (same forms as the constructor's single-instance arguments)."""
        super().reset(seed=seed)
        self._start(self._instances.sample(self.np_random, options))
        self._episode_stragglers = draw_stragglers(
            self.stragglers, self._ctx.topology, self.np_random, self._ctx.reference_makespan
        )
        graph = self._ctx.graph
        info = {
            "graph_id": self._ctx.graph_id, "graph_name": graph.name, "n_ops": graph.n_ops,
            "reference_makespan": self._ctx.reference_makespan, "lower_bound": self._ctx.lower_bound,
        }
        return self._observation(), info

    def step(self, action: object) -> tuple[dict, float, bool, bool, dict]:
        if self._done:
            raise episode_over_error("PlacementEnv.step")
        a = action_index(action, "PlacementEnv.step", "an op id in SEL, max_ops + device in PLC")
        ctx = self._ctx
        ref = ctx.reference_makespan or 1.0  # 0 only for a graph without any cost
        if self._state.phase == SEL:
            if not (0 <= a < ctx.n_ops and self._ready[a]):
                return self._invalid(a)
            self._select(a)
            reward = self.reward.step(self._measured, self._measured, ref)
            self.invalid_actions.accept()
            return self._observation(), float(reward), False, False, {}
        d = a - self.max_ops
        if not 0 <= d < ctx.n_devices:
            return self._invalid(a)
        self.invalid_actions.accept()
        before = self._measured
        self._place(d)
        if not self._state.done:
            self._measured = self._measure()
            reward = self.reward.step(before, self._measured, ref)
            return self._observation(), float(reward), False, False, {}
        info = self._finish()
        reward = self.reward.final(before, info["makespan"], ref)
        if not info["feasible"]:  # out of memory under SimConfig(memory="enforce")
            reward += self.oom_penalty
        self._measured = info["makespan"]
        self.observation_builder.action_mask[TERMINAL_ACTION] = 1  # never an all-zero mask (masked.TERMINAL_ACTION)
        return self._observation(), float(reward), True, False, info

    def action_masks(self) -> np.ndarray:
        """``(max_ops + max_devices,) int8``: 1 where the action is valid (== ``obs["action_mask"]``)."""
        return self.observation_builder.action_mask.copy()

    def teacher_mask(self) -> np.ndarray:
        """``(max_ops + max_devices,) int8`` mask of the critical-path teacher's action(s) now.

        SEL: the ready ops of maximal b-level; PLC: the devices where the selected op could start
        earliest (the estimated schedule). Ties (relative 1e-9) are all marked. All zeros once
        the episode has ended.
        """
        mask = np.zeros(self.max_ops + self.max_devices, np.int8)
        if self._done:
            return mask
        state = self._state
        if state.phase == SEL:
            ready = np.flatnonzero(self._ready)
            level = self._ctx.b_level[ready]
            best = level.max()
            mask[ready[level >= best - _TIE_RTOL * abs(best)]] = 1
        else:
            est = state.selected_features[:, 4]  # earliest start on each device [internal time]
            best = est.min()
            mask[self.max_ops + np.flatnonzero(est <= best + _TIE_RTOL * abs(best))] = 1
        return mask

    def render(self) -> str | np.ndarray | None:
        """``"ansi"``: a text summary; ``"rgb_array"``: a Gantt chart of the final trace (of the
        estimated schedule of the ops placed so far before the end)."""
        if self.render_mode is None:
            gym.logger.warn("PlacementEnv.render() without a render_mode; use render_mode='ansi'/'rgb_array'")
            return None
        from doppler_gym.envs import render as _render

        if self.render_mode == "ansi":
            return _render.render_ansi(self)
        return _render.render_rgb_array(self)

    # ------------------------------------------------------------------ read-only views
    @property
    def context(self) -> GraphContext | None:
        """Static data of the current episode's instance."""
        return self._ctx

    @property
    def phase(self) -> int:
        """0 (SEL) or 1 (PLC)."""
        return SEL if self._state is None else self._state.phase

    @property
    def selected_op(self) -> int:
        """The op being placed (PLC phase), -1 in the SEL phase."""
        return -1 if self._state is None else self._state.selected

    @property
    def assignment(self) -> np.ndarray:
        """``(n_ops,) int64`` the device of each op placed so far, -1 for the others (a copy)."""
        n = 0 if self._ctx is None else self._ctx.n_ops
        return self.observation_builder.op_device[:n].copy()

    @property
    def state(self) -> PlacementState | None:
        """The MDP's state of the current episode (do not modify; step the env instead)."""
        return self._state

    @property
    def estimate(self) -> EstimatedSchedule | None:
        """The estimated schedule of the ops placed so far (do not modify)."""
        return None if self._state is None else self._state.schedule

    @property
    def order(self) -> np.ndarray:
        """``(k,) int64`` the ops placed so far, in SEL order."""
        return np.zeros(0, np.int64) if self._state is None else self._state.order

    @property
    def estimated_makespan(self) -> float:
        """Estimated makespan of the placement so far [reported unit]."""
        return self._est_makespan

    @property
    def episode_over(self) -> bool:
        """Whether the episode has ended (terminated or truncated) or not started."""
        return self._done

    # ------------------------------------------------------------------ internals
    def _start(self, ctx: GraphContext) -> None:
        self._ctx = ctx
        self.graph, self.topology, self.sim_config = ctx.graph, ctx.topology, ctx.config
        if self._state is not None and self._state_ctx is ctx:
            self._state.reset()
        else:
            self._state = PlacementState(ctx.graph, ctx.topology, ctx.config, time_model="fixed")
            self._state_ctx = ctx
        self._ready.fill(0)
        self._ready[: ctx.n_ops] = ctx.in_degree == 0
        self._est_makespan = 0.0
        self._measured = 0.0
        self.invalid_actions.reset()
        self._done = False
        self.trace = None
        ob = self.observation_builder
        ob.set_context(ctx)
        ob.op_state[:, 1] = self._ready
        ob.action_mask[: self.max_ops] = self._ready
        if self._flat is not None:
            self._flat.set_costs(ctx.op_features)
        if self._memory is not None:
            self._memory.reset(ctx.graph.persistent_bytes, ctx.topology.memory)

    def _select(self, v: int) -> None:
        ctx, ob = self._ctx, self.observation_builder
        feats = self._state.select(v)  # (D, 5) [internal time]
        ob.op_state[v, 2] = 1.0
        ob.selected_op[0] = v
        ob.phase[0] = PLC
        d = ctx.n_devices
        np.minimum(feats * (1.0 / ctx.scale), FEATURE_MAX, out=ob.device_features[:d, :5])
        ob.device_features[:d, 5:] = ctx.device_static
        if self._memory is not None:
            self._memory.select(v)
        if self._flat is not None:
            self._flat.increase[:d] = self._increase_by_device(v)
        mask = ob.action_mask
        mask[: self.max_ops] = 0
        mask[self.max_ops : self.max_ops + d] = 1

    def _place(self, d: int) -> None:
        ctx, ob, state = self._ctx, self.observation_builder, self._state
        v = state.selected
        newly_ready = state.place(d)
        if self._memory is not None:
            self._memory.place(v, d)
        self._est_makespan = float(state.makespan) / ctx.time_divisor
        ob.op_state[v] = _PLACED_ROW
        ob.op_device[v] = d
        ready, op_state = self._ready, ob.op_state
        ready[v] = 0
        for s in newly_ready:
            ready[s] = 1
            op_state[s, 1] = 1.0
        ob.selected_op[0] = -1
        ob.phase[0] = SEL
        ob.device_features.fill(0.0)
        mask = ob.action_mask
        mask[: self.max_ops] = ready
        mask[self.max_ops :] = 0

    def _finish(self) -> dict[str, Any]:
        ctx, state = self._ctx, self._state
        n = ctx.n_ops
        assignment = state.assignment
        order = state.order
        priorities = np.empty(n, np.float64)
        priorities[order] = np.arange(n, dtype=np.float64)
        config = replace(ctx.config, stragglers=self._episode_stragglers) if self._episode_stragglers else ctx.config
        self.trace = self.backend.execute(ctx.graph, ctx.topology, assignment, priorities, config)
        self._done = True
        info = {
            "makespan": float(self.trace.makespan),
            "assignment": assignment,
            "order": order,
            "reference_makespan": ctx.reference_makespan,
            "lower_bound": ctx.lower_bound,
            "estimated_makespan": self._est_makespan,
            "backend": self.backend.name,
            "graph_id": ctx.graph_id,
            "graph_name": ctx.graph.name,
            "time_unit": self.trace.time_unit,
            **oom_info(self.trace),
            "stragglers": self._episode_stragglers,
        }
        return info

    def _measure(self) -> float:
        """The reward's partial makespan (``reward.measure``) of the ops placed so far [reported unit]."""
        if getattr(self.reward, "measure", "estimate") != "simulated":
            return self._est_makespan
        return float(self._simulate_placed(self.observation_builder.op_device[: self._ctx.n_ops], episode=True))

    def _simulate_placed(self, assignments: np.ndarray, episode: bool = False) -> np.ndarray | float:
        """Partial makespans of ``(n_ops,)`` or ``(B, n_ops)`` assignments (-1 = unplaced), with the SEL positions so
        far as priorities [reported unit]. ``episode``: the episode's own placement (one row), simulated against
        the previous one by :class:`IncrementalPartialMakespan`; else every row whole (its ``PartialMakespan``)."""
        ctx = self._ctx
        if self._partial_ctx is not ctx:
            self._partial = IncrementalPartialMakespan(ctx.graph, ctx.topology, ctx.config, n_slots=1)
            self._partial_ctx = ctx
        priorities = None
        if ctx.config.queue_order != "fifo":
            state = self._state
            priorities = np.zeros(ctx.n_ops)
            priorities[state.order] = np.arange(state.n_placed)
            if state.selected >= 0:
                priorities[state.selected] = state.n_placed
        if episode:
            return self._partial(assignments, 0, priorities)
        return self._partial.whole(assignments, priorities)

    def _increase_by_device(self, op: int) -> np.ndarray:
        """``(n_devices,)``: growth of the placed ops' simulated makespan with ``op`` placed on each device,
        / reference makespan (the flat observation's lookahead)."""
        ctx = self._ctx
        current = self.observation_builder.op_device[: ctx.n_ops]
        candidates = np.repeat(current[None, :], ctx.n_devices, axis=0)
        candidates[:, op] = np.arange(ctx.n_devices)
        now = self._measured if getattr(self.reward, "measure", "estimate") == "simulated" else \
            self._simulate_placed(current)
        return (self._simulate_placed(candidates) - now) / (ctx.reference_makespan or 1.0)

    def _observation(self) -> dict[str, np.ndarray]:
        if self._flat is None:
            return self.observation_builder.observation()
        ctx = self._ctx
        return self._flat.observation(self.observation_builder, ctx.n_ops, ctx.n_devices, self._measured,
                                      ctx.reference_makespan)

    def _invalid(self, a: int) -> tuple[dict, float, bool, bool, dict]:
        reward, truncated, info = self.invalid_actions.reject(lambda: self._invalid_message(a))
        if truncated:
            self._done = True
        return self._observation(), reward, False, truncated, info

    def _invalid_message(self, a: int) -> str:
        valid = np.flatnonzero(self.observation_builder.action_mask)
        shown = ", ".join(str(int(x)) for x in valid[:20]) + (", ..." if valid.size > 20 else "")
        if self.phase == SEL:
            return (
                f"SEL phase: action {a} is not a ready op; valid actions are the ready op ids "
                f"[{shown}] (ops whose inputs are all placed)"
            )
        return (
            f"PLC phase (placing op {self.selected_op}): action {a} is not a device action; valid actions are "
            f"max_ops + d = {self.max_ops} + d for devices d < {self._ctx.n_devices}: [{shown}]"
        )

