"""The batched core of the native ``Doppler-Sim-v0`` vector envs: ``N`` placement envs stepped in one call.

:class:`PlacementBatch` resets and steps the envs it is told to and returns what each single env would
(:class:`~doppler_gym.envs.placement.PlacementEnv`: observations, rewards, ends, infos), equal to it for
the same seeds and actions; the autoreset policy is its callers' (Gymnasium's next-step autoreset in
:class:`~doppler_gym.envs.vector.env.PlacementVectorEnv`, SB3's same-step autoreset in
``agents.sb3_vec_env``). A step is one Numba call for the state transitions and observation writes of
every env (:mod:`~doppler_gym.envs.vector.kernel`), one partial-makespan simulation call for the envs that
placed an op and one simulation call for the envs that finished (per instance,
:mod:`~doppler_gym.envs.vector.simulate`), and array arithmetic for the rewards.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

from doppler_gym.envs.batched import BatchObservations, StepResult, batch_actions, shown_actions
from doppler_gym.envs.context import Instances
from doppler_gym.envs.flat_observation import flat_space, write_flat
from doppler_gym.envs.masked import TERMINAL_ACTION, InvalidActions, InvalidActionWarning, episode_over_error
from doppler_gym.envs.observation import SEL, ObservationBuilder
from doppler_gym.envs.rewards import make_reward
from doppler_gym.envs.vector import kernel
from doppler_gym.envs.vector.buffers import BatchState, FlatBuffers, GraphBuffers
from doppler_gym.envs.vector.options import check_config, env_options
from doppler_gym.envs.vector.rewards import final_rewards, measure, step_rewards
from doppler_gym.envs.vector.simulate import final_makespans, group_rows, lookahead_increase, partial_makespans
from doppler_gym.envs.vector.tables import InstanceTables
from doppler_gym.sim.partial import PARALLEL_ROWS
from doppler_gym.sim.threads import ThreadTuner

BACKEND_NAME = "sim"  # info["backend"] of the simulator backend (SimBackend.name)


class PlacementBatch(BatchObservations):
    """``num_envs`` ``Doppler-Sim-v0`` envs with the single env's keyword arguments, stepped together.

    Args:
        num_envs: number of envs ``N``.
        sim_threads: Numba threads of the batched simulator calls (default 1: a step's calls are a few dozen
            runs of tens of microseconds, where a parallel launch gains little alone on a CPU and, with OpenMP's
            spinning threads, loses up to 4x beside another busy process: ``docs/results/bench_vector.md``);
            ``None``: chosen while stepping between Numba's thread count and one
            (:class:`~doppler_gym.sim.threads.ThreadTuner`). Only the wall clock depends on it.
        **kwargs: the keywords of :class:`~doppler_gym.envs.placement.PlacementEnv` (all envs alike); see
            :mod:`~doppler_gym.envs.vector.options` for the ones it refuses.

    Attributes:
        num_envs, max_ops, max_edges, max_devices, n_actions (``max_ops + max_devices``) [count].
        single_observation_space, single_action_space: one env's spaces (the single env's).
        observation_form: ``"graph"`` or ``"flat"``; copy_obs: whether :meth:`observation` copies.
        reward: the :class:`~doppler_gym.envs.rewards.Reward`; invalid_actions: the invalid-action rule.
        obs: ``{key: (N, ...) array}``, the live observation rows (read only; :meth:`observation` to keep).
        tables: the per-env instance rows; state: the per-env MDP state; graph: the graph-form buffers.
    """

    def __init__(self, num_envs: int, sim_threads: int | None = 1, **kwargs: Any) -> None:
        opts = env_options(num_envs, kwargs)
        if sim_threads is not None and (isinstance(sim_threads, bool) or not isinstance(sim_threads, int)
                                        or sim_threads < 1):
            raise ValueError(f"sim_threads must be None (tuned while stepping) or an integer >= 1, got {sim_threads!r}")
        # the Numba threads of the simulator calls: sim_threads, or (None) the faster of Numba's count and one, re-timed
        counts = None if sim_threads is None else [sim_threads]
        self._tuners = {call: ThreadTuner(counts) for call in ("partial", "lookahead", "final")}
        self.num_envs = n_envs = int(num_envs)
        self.instances = Instances(opts["graph"], opts["topology"], opts["sim_config"], opts["max_ops"],
                                   opts["max_edges"], opts["max_devices"])
        self.max_ops, self.max_edges, self.max_devices = (
            self.instances.max_ops, self.instances.max_edges, self.instances.max_devices)
        n, e, d = self.max_ops, self.max_edges, self.max_devices
        self.n_actions = n + d
        self.reward = make_reward(opts["reward"])
        self._simulated = measure(self.reward) == "simulated"
        self.invalid_actions = InvalidActions(opts["invalid_action"], opts["invalid_penalty"],
                                              opts["max_invalid_streak"])
        self.observation_form = opts["observation"]
        self.copy_obs = bool(opts["copy_obs"])
        self.single_observation_space = (
            flat_space(n, d) if self.observation_form == "flat" else ObservationBuilder(n, e, d).space)
        self.single_action_space = spaces.Discrete(self.n_actions)
        self.tables = InstanceTables(n_envs, n, e, d)
        self.state = BatchState(n_envs, n, d)
        self.graph = GraphBuffers(n_envs, n, e, d)
        self._flat = FlatBuffers(n_envs, n, d, self.graph.action_mask) if self.observation_form == "flat" else None
        self.obs = {k: (self._flat.arrays if self._flat else self.graph.arrays)[k]
                    for k in self.single_observation_space.spaces}
        self._ref_raw = np.zeros(n_envs)  # each env's reference_makespan as the context has it [reported unit]
        self._rngs: list[np.random.Generator | None] = [None] * n_envs
        self._codes = np.zeros(n_envs, np.int8)  # the kernel's outcome of each env's step (kernel.SEL_OK, ...)
        self._rows = np.zeros((5, n_envs), np.int64)  # the envs of each outcome
        self._count = np.zeros(5, np.int64)
        self._all = np.ones(n_envs, bool)

    # ------------------------------------------------------------------ seeding
    def rng(self, i: int) -> np.random.Generator:
        """Env ``i``'s ``np_random`` (made from a random seed on first use, as ``gym.Env.np_random``)."""
        if self._rngs[i] is None:
            self._rngs[i], _ = seeding.np_random()
        return self._rngs[i]

    # ------------------------------------------------------------------ reset
    def reset(self, rows: Sequence[int], seeds: Sequence[int | None], options: Sequence[dict | None]) -> list[dict]:
        """Start a new episode in each env of ``rows``; env ``rows[j]`` is seeded with ``seeds[j]`` (``None``: its
        generator goes on) and gets ``options[j]`` (``graph``/``topology``, as ``PlacementEnv.reset``).
        Returns the reset infos, in the order of ``rows``."""
        rows = np.asarray(rows, np.int64)
        infos = []
        for i, seed, opts in zip(rows.tolist(), seeds, options):
            if seed is not None:
                self._rngs[i], _ = seeding.np_random(seed)
            ctx = self.instances.sample(self.rng(i), opts)
            check_config(ctx.config, f"the config of graph {ctx.graph.name!r}")
            if self.tables.load(i, ctx):
                data = self.tables.data[i]
                self.graph.set_static(i, data.static_obs)
                if self._flat is not None:
                    self._flat.op_costs[i] = data.op_costs
                self._ref_raw[i] = ctx.reference_makespan
            infos.append({"graph_id": ctx.graph_id, "graph_name": ctx.graph.name, "n_ops": ctx.n_ops,
                          "reference_makespan": ctx.reference_makespan, "lower_bound": ctx.lower_bound})
        st, t, g = self.state, self.tables, self.graph
        kernel.reset_rows(rows, t.n_ops, t.in_degree, self.max_ops, g.op_device, st.device32, st.start, st.end,
                          st.avail, st.work, st.makespan, st.est_makespan, st.waiting, st.ready, st.position,
                          st.n_placed, st.sel_est, g.op_state, g.device_features, g.phase, g.selected_op, g.action_mask)
        st.measured[rows] = 0.0
        st.streak[rows] = 0
        st.over[rows] = False
        self._write_flat()
        return infos

    # ------------------------------------------------------------------ step
    def step(self, actions: object, active: np.ndarray | None = None) -> StepResult:
        """One step of every env with ``active[i]`` (default: all), env ``i`` taking ``actions[i]``.

        Args:
            actions: ``(N,)`` integer actions (entries of inactive envs are ignored).
            active: ``(N,) bool`` the envs to step.

        Raises:
            TypeError / ValueError: ``actions`` not ``N`` integers; in ``invalid_action="raise"`` mode an
                invalid action (nothing is stepped then).
            RuntimeError: an active env whose episode is over (reset it first).
        """
        acts = batch_actions(actions, self.num_envs, "PlacementVectorEnv.step",
                             "an op id in SEL, max_ops + device in PLC")
        active = self._all if active is None else np.asarray(active, bool)
        st, t, g = self.state, self.tables, self.graph
        if self.invalid_actions.mode == "raise":  # before any env steps (the kernel checks the ended episodes too)
            stale = np.flatnonzero(st.over & active)
            if stale.size:
                raise episode_over_error(f"PlacementVectorEnv.step (env {int(stale[0])})")
            self._check_valid(acts, active)
        codes, rows, count = self._codes, self._rows, self._count
        stale = kernel.step_rows(
            acts, active, t.n_ops, t.n_devices, self.max_ops, TERMINAL_ACTION, t.pred_ptr, t.pred, t.succ_ptr, t.succ,
            t.comp, t.out_bytes, t.latency, t.inv_bw, t.inv_scale, t.device_static, t.time_divisor, g.op_device,
            st.device32, st.start, st.end, st.avail, st.work, st.makespan, st.est_makespan, st.waiting, st.ready,
            st.position, st.n_placed, st.sel_est, g.op_state, g.device_features, g.phase, g.selected_op, g.action_mask,
            st.over, codes, rows, count, st.scratch, st.seen)
        if stale >= 0:
            raise episode_over_error(f"PlacementVectorEnv.step (env {stale})")
        counts = count.tolist()
        n_sel, n_plc, n_final, n_invalid = (counts[kernel.SEL_OK + 1], counts[kernel.PLC_OK + 1],
                                            counts[kernel.FINAL + 1], counts[kernel.INVALID + 1])
        rewards = np.zeros(self.num_envs)
        terminated = np.zeros(self.num_envs, bool)
        truncated = np.zeros(self.num_envs, bool)
        infos: dict[int, dict[str, Any]] = {}
        before = st.measured.copy() if n_sel + n_plc + n_final else st.measured
        selected = rows[kernel.SEL_OK + 1, :n_sel]  # views: rows is rewritten by the next step only
        placed = rows[kernel.PLC_OK + 1, :n_plc]
        if n_plc:
            self._measure(placed)
        if n_sel and self._flat is not None:
            self._lookahead(selected)
        if n_sel + n_plc == self.num_envs:  # every env took a valid, not final step: whole arrays, no gathers
            rewards[:] = step_rewards(self.reward, before, st.measured, t.reference)
            st.streak[:] = 0
        elif n_sel + n_plc:
            valid = placed if not n_sel else selected if not n_plc else np.concatenate([selected, placed])
            rewards[valid] = step_rewards(self.reward, before[valid], st.measured[valid], t.reference[valid])
            st.streak[valid] = 0
        if n_final:
            final = rows[kernel.FINAL + 1, :n_final]
            self._finish(final, before, rewards, infos)
            terminated[final] = True
        if n_invalid:
            invalid = rows[kernel.INVALID + 1, :n_invalid]
            self._reject(invalid, rewards, truncated, infos)
        self._write_flat()
        return StepResult(rewards, terminated, truncated, infos)

    # ------------------------------------------------------------------ views
    def action_masks(self) -> np.ndarray:
        """``(N, max_ops + max_devices) int8``: 1 where an action is valid (``obs["action_mask"]``, a copy)."""
        return self.graph.action_mask.copy()

    # ------------------------------------------------------------------ internals
    def _check_valid(self, acts: np.ndarray, active: np.ndarray) -> None:
        """``invalid_action="raise"``: ValueError naming the first env whose action its mask rules out."""
        mask = self.graph.action_mask
        inside = (acts >= 0) & (acts < self.n_actions)
        ok = np.zeros(self.num_envs, bool)
        ok[inside] = mask[np.flatnonzero(inside), acts[inside]] == 1
        bad = np.flatnonzero(active & ~ok)
        if bad.size:
            i = int(bad[0])
            phase = "SEL phase: the ready op ids" if self.graph.phase[i, 0] == SEL else (
                f"PLC phase: max_ops + d = {self.max_ops} + d for devices d")
            raise ValueError(f"PlacementVectorEnv.step: env {i}: action {int(acts[i])} is invalid; valid actions are "
                             f"{phase}: [{shown_actions(mask[i])}] (nothing was stepped)")

    def _timed(self, call: str, rows: int) -> AbstractContextManager:
        """The thread tuner of a simulator call, or nothing where the call runs serially anyway."""
        return self._tuners[call].timed(rows) if rows >= PARALLEL_ROWS else nullcontext()

    def _measure(self, placed: np.ndarray) -> None:
        """The reward's partial makespan of the envs that placed a (not final) op."""
        st = self.state
        if self._simulated:
            partial_makespans(self.tables, placed, st.device32, st.position, st.measured,
                              lambda rows: self._timed("partial", rows))
        else:
            st.measured[placed] = st.est_makespan[placed]

    def _lookahead(self, chosen: np.ndarray) -> None:
        """The flat form's lookahead of the envs that selected an op."""
        st, g = self.state, self.graph
        with self._timed("lookahead", chosen.size * self.max_devices):
            lookahead_increase(self.tables, chosen, g.op_device, st.position, st.n_placed, g.selected_op[:, 0],
                               st.measured if self._simulated else None, self._flat.increase)

    def _finish(self, final: np.ndarray, before: np.ndarray, rewards: np.ndarray, infos: dict) -> None:
        """The final runs, rewards and infos of the envs that placed their last op."""
        st, t = self.state, self.tables
        makespan = np.empty(self.num_envs)
        with self._tuners["final"].timed(final.size):
            final_makespans(t, final, self.graph.op_device, st.position, makespan)
        rewards[final] = final_rewards(self.reward, before[final], makespan[final], t.reference[final])
        st.measured[final] = makespan[final]
        st.streak[final] = 0
        st.over[final] = True
        for data, group in group_rows(t, final):
            n = data.ctx.n_ops
            assignments = self.graph.op_device[group, :n]  # (k, n), a copy
            orders = np.empty((group.size, n), np.int64)  # orders[j, position of op o] = o: each env's SEL order
            orders[np.arange(group.size)[:, None], st.position[group, :n].astype(np.int64)] = np.arange(n)
            for j, i in enumerate(group.tolist()):
                infos[i] = self._final_info(i, float(makespan[i]), assignments[j], orders[j])

    def _reject(self, invalid: np.ndarray, rewards: np.ndarray, truncated: np.ndarray, infos: dict) -> None:
        """Penalty, streak and truncation of the envs whose action was invalid (penalize mode)."""
        st, rule = self.state, self.invalid_actions
        if not rule.warned:  # once per batch, as the single env warns once per env
            rule.warned = True
            warnings.warn(rule.warning_text(), InvalidActionWarning, stacklevel=4)
        st.streak[invalid] += 1
        rewards[invalid] = rule.penalty
        if rule.max_streak is not None:
            cut = invalid[st.streak[invalid] >= rule.max_streak]
            truncated[cut] = True
            st.over[cut] = True
        for i in invalid.tolist():
            infos[i] = {"invalid_action": True, "invalid_streak": int(st.streak[i])}

    def _final_info(self, i: int, makespan: float, assignment: np.ndarray, order: np.ndarray) -> dict[str, Any]:
        """Env ``i``'s final info (the single env's keys), given its ``(n,)`` assignment and SEL order."""
        ctx = self.tables.data[i].ctx
        return {
            "makespan": makespan,
            "assignment": assignment,
            "order": order,
            "reference_makespan": ctx.reference_makespan,
            "lower_bound": ctx.lower_bound,
            "estimated_makespan": float(self.state.est_makespan[i]),
            "backend": BACKEND_NAME,
            "graph_id": ctx.graph_id,
            "graph_name": ctx.graph.name,
            "time_unit": ctx.config.time_unit,
            "feasible": True,
            "stragglers": (),
        }

    def _write_flat(self) -> None:
        flat = self._flat
        if flat is None:
            return
        st, t, g = self.state, self.tables, self.graph
        glob = flat.globals_
        glob[:, 0] = g.phase[:, 0]
        glob[:, 1] = st.n_placed / t.n_ops
        ref = self._ref_raw
        positive = ref > 0  # as FlatObservation.observation: 0 where the reference is not positive (or NaN)
        glob[:, 2] = 0.0
        np.divide(st.measured, ref, out=glob[:, 2], where=positive)
        glob[:, 3] = t.n_devices / self.max_devices
        write_flat(flat.features, g.op_state, flat.op_costs, g.op_device, g.device_features, flat.increase,
                   t.n_devices, glob)
