"""``Doppler-Collective-v0``: schedule the chunk sends of a collective epoch by epoch (TE-CCL's model)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from doppler_gym.comm.schedule import Schedule
from doppler_gym.envs.collective.types import NEVER, CollectiveInstance, build_instance
from doppler_gym.envs.masked import (
    MASK_DTYPE,
    InvalidActions,
    action_index,
    episode_over_error,
    mask_space,
    reset_options,
)

REWARDS = ("epochs", "sparse")


class CollectiveEnv(gym.Env):
    """Deliver every chunk of a collective over a GPU topology in as few epochs as possible.

    ## Description

    TE-CCL's time-expanded model (:mod:`doppler_gym.comm`): time is cut into epochs of length
    ``tau``; each commodity (one chunk) starts at a source GPU and must reach a set of GPUs; a
    link ``l`` carries at most ``window_capacity[l]`` sends in any ``beta[l] + 1`` consecutive
    epochs; a send of commodity ``c`` on ``i -> j`` in epoch ``k`` is available at ``j`` from
    epoch ``k + offset[l]`` (:func:`~doppler_gym.comm.schedule.arrival_offset`: ``delta`` for a
    switch -> GPU hop, ``1 + delta + beta`` otherwise). GPUs store and forward (and copy: one held
    chunk may go out on all out-links in one epoch); switches have no buffer and must forward an
    arriving chunk in its arrival epoch (on any number of out-links if copy-capable, else one per
    arriving copy). Within an epoch the agent issues sends one at a time, then advances time.

    ## Action Space

    ``Discrete(n_commodities * n_links + 1)``. Action ``a < n_commodities * n_links`` sends
    commodity ``a // n_links`` on link ``a % n_links`` in the current epoch; the last action,
    ``n_commodities * n_links`` (:attr:`next_epoch_action`), ends the epoch. A send is valid when

    - the link's tail holds the commodity now (a GPU: it arrived by this epoch; a switch: a copy
      arrives in this epoch and, for a switch that cannot copy, not all arriving copies were sent on);
    - the link has capacity left in its current window (``obs["capacity_left"] > 0``);
    - the link's head is a GPU that neither holds nor expects (in flight) the commodity, or a
      switch through which (switches only) some GPU lacking the commodity can be reached;
    - the same (commodity, link) was not sent already in this epoch.

    "Next epoch" is always valid. :meth:`action_masks` (sb3-contrib's hook) equals
    ``obs["action_mask"]``. An invalid action, with ``invalid_action="penalize"`` (default),
    leaves the state unchanged, is rewarded ``invalid_penalty`` and flagged
    ``info["invalid_action"] = True`` (``info["invalid_streak"]``: how many in a row);
    ``max_invalid_streak`` in a row truncate the episode. With ``invalid_action="raise"`` it raises
    ``ValueError`` listing the valid actions. A non-integer action raises ``TypeError``.

    ## Observation Space

    A ``Dict`` of fixed-shape ``Box`` arrays (``C = n_commodities``, ``N = n_nodes``,
    ``L = n_links``, ``A = C * L + 1``), every float in ``[0, 1]`` (O(1) for a network as it is):

    ================  =============  ===========================================================
    key               shape, dtype   meaning, scale
    ================  =============  ===========================================================
    ``holdings``      (C, N) f32     1 where the node holds the commodity now (a switch: a copy
                                     arrives this epoch), else 0
    ``in_flight``     (C, N) f32     epochs until the next arrival of the commodity there, divided
                                     by :attr:`max_offset` (the longest hop [epochs]); 0 if none
                                     is under way
    ``wants``         (C, N) f32     1 where the commodity must be delivered (static), else 0
    ``capacity_left`` (L,) f32       sends the link may still start in this epoch, divided by its
                                     window capacity (``instance.window_capacity``, sends per
                                     ``beta + 1`` epochs; 1 where that is 0)
    ``epoch``         (1,) f32       the current epoch ``k`` divided by ``max_epochs``
    ``action_mask``   (A,) int8      1 for valid actions, else 0 (an integer key, not scaled)
    ================  =============  ===========================================================

    Multiply by the scale to get epochs or sends back: ``obs["in_flight"] * env.unwrapped.max_offset``.

    ## Rewards

    ``reward="epochs"`` (default): -1 for every "next epoch"; on the step that ends the episode
    (every wanted chunk held or in flight) ``-(epochs - k)``, the epochs still needed until the
    last send lands; so the return is ``-epochs`` of the resulting schedule. ``"sparse"``: 0 until
    the end, then ``-epochs``. On truncation at ``max_epochs`` both add
    ``-max_epochs * missing / n_deliveries`` (missing = wanted (commodity, GPU) pairs neither held
    nor in flight), so an unfinished episode scores below any finished one. Invalid actions:
    ``invalid_penalty``.

    ## Starting State

    Epoch 0, every commodity at its source only, nothing in flight. The instance is fixed by the
    arguments; ``reset`` involves no randomness.

    ## Episode End

    Terminates when every wanted (commodity, GPU) pair is held or in flight; truncates when
    ``max_epochs`` epochs have passed or after ``max_invalid_streak`` consecutive invalid actions.
    The final ``info`` holds ``epochs`` (the schedule's epoch count: the latest arrival of any
    send), ``finish_time`` (``epochs * tau`` [s]), ``schedule`` (a
    :class:`~doppler_gym.comm.schedule.Schedule`, ``method="agent"``; on termination it passes
    :func:`~doppler_gym.comm.validate`), ``delivered`` (fraction of wanted pairs held or in
    flight) and ``n_sends``.

    ## Teacher

    Needs OR-Tools, from the ``solvers`` extra (``pip install doppler-gym[solvers]``); without it
    the env runs and the teacher's methods raise ``ImportError`` saying so.
    :meth:`teacher_mask` / :meth:`teacher_actions` follow the MILP optimum
    (``solve_demand(..., method="milp")``, solved on first use and cached for the env's lifetime,
    :mod:`~doppler_gym.envs.collective.teacher`): in epoch ``k`` the optimum's still-valid sends of
    epoch ``k``, else "next epoch". Followed from the start it reaches the MILP's epoch count.

    ## Arguments

    ```python
    gym.make("Doppler-Collective-v0", topology="dgx1", collective="allgather", chunks=1,
             buffer_bytes="1GB", epoch="fast")
    ```

    - ``topology``: a comm name (``"dgx1"``, ``"ndv2-2"``, ...), a ``CommTopology`` or a ``dg.Topology``.
    - ``collective``: ``"allgather"``, ``"alltoall"``, ``"broadcast"``, ``"scatter"``, ``"gather"`` or
      ``{source: destinations}`` (REDUCE-SCATTER/ALLREDUCE are rejected: several phases).
    - ``chunks``: C, chunks per GPU. ``buffer_bytes``: per-GPU output buffer [B] (number or ``"1GB"``).
    - ``epoch``: ``"fast"``, ``"slow"`` or ``tau`` [s]; ``multiplier`` scales fast/slow; ``root`` for
      broadcast/scatter/gather.
    - ``max_epochs``: truncation [epochs]; default ``4 * n_gpus * chunks * (1 + max offset)``.
    - ``reward``: ``"epochs"`` or ``"sparse"``; ``invalid_action``, ``invalid_penalty``,
      ``max_invalid_streak`` as above; ``teacher_time_limit``: MILP budget [s].
    - ``render_mode``: ``None`` or ``"ansi"``.

    ## Version History

    * v0: initial version; ``in_flight``, ``capacity_left`` and ``epoch`` scaled to ``[0, 1]`` (they
      were epochs and sends).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        topology: Any = "dgx1",
        collective: str | Mapping = "allgather",
        chunks: int = 1,
        buffer_bytes: float | str = "1GB",
        epoch: str | float = "fast",
        multiplier: float = 1.0,
        root: int | str | None = None,
        max_epochs: int | None = None,
        reward: str = "epochs",
        invalid_action: str = "penalize",
        invalid_penalty: float = -0.1,
        max_invalid_streak: int = 100,
        teacher_time_limit: float = 60.0,
        render_mode: str | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
        # what an action the mask rules out does (penalty and truncation, or ValueError)
        self.invalid_actions = InvalidActions(invalid_action, invalid_penalty, max_invalid_streak)
        if max_epochs is not None and (
            isinstance(max_epochs, bool) or not isinstance(max_epochs, (int, np.integer)) or max_epochs < 1
        ):
            raise ValueError(f"max_epochs must be an integer >= 1, got {max_epochs!r}")
        self.render_mode = render_mode
        self.instance: CollectiveInstance = build_instance(topology, collective, buffer_bytes, chunks=chunks,
                                                           epoch=epoch, multiplier=multiplier, root=root)
        inst = self.instance
        topo = inst.topology
        self.reward_kind = reward
        self.teacher_time_limit = float(teacher_time_limit)
        self.max_epochs = int(max_epochs) if max_epochs is not None else int(
            4 * topo.n_gpus * inst.demand.chunks * (1 + int(inst.offset.max(initial=0))))
        c, n, nl = inst.n_commodities, inst.n_nodes, inst.n_links
        self.n_actions = c * nl + 1
        self.next_epoch_action = c * nl
        # observation scales: every float key lies in [0, 1]
        self.max_offset = max(1, int(inst.offset.max(initial=0)))  # the longest hop [epochs]
        self._capacity_scale = np.maximum(inst.window_capacity, 1).astype(np.float32)  # (L,) [sends]
        self.observation_space = spaces.Dict({
            "holdings": spaces.Box(0.0, 1.0, (c, n), np.float32),
            "in_flight": spaces.Box(0.0, 1.0, (c, n), np.float32),
            "wants": spaces.Box(0.0, 1.0, (c, n), np.float32),
            "capacity_left": spaces.Box(0.0, 1.0, (nl,), np.float32),
            "epoch": spaces.Box(0.0, 1.0, (1,), np.float32),
            "action_mask": mask_space(self.n_actions),
        })
        self.action_space = spaces.Discrete(self.n_actions)
        self._wants = inst.demand.wants
        self._n_deliveries = max(1, int(self._wants.sum()))
        self._gpu = ~topo.is_switch
        self._src_switch = topo.is_switch[topo.src]
        self._dst_switch = topo.is_switch[topo.dst]
        self._src_copy = topo.copy_capable[topo.src]
        self._reach_t = inst.reach.T.astype(np.int64)  # (n_nodes gpu, n_nodes switch)
        self._teacher_sched: Schedule | None = None
        self._teacher_rows: np.ndarray | None = None
        # episode state (set by reset)
        self._k = 0
        self._held = np.full((c, n), NEVER, np.int64)  # (C, N) epoch a GPU holds x from; NEVER: not expected
        self._sw_pending: dict[int, np.ndarray] = {}  # epoch -> (C, N) int64 copies arriving at switches
        self._sw_now = np.zeros((c, n), np.int64)  # (C, N) copies at switches in this epoch
        self._sw_used = np.zeros((c, n), np.int64)  # (C, N) of them sent on this epoch
        self._counts = np.zeros((self.max_epochs + 1, nl), np.int64)  # (epochs, L) sends per link per epoch
        self._csum = np.zeros((self.max_epochs + 1, nl), np.int64)  # (epochs, L) row k: sends in epochs 0..k-1
        self._links = np.arange(nl)
        self._prior = np.zeros(nl, np.int64)  # (L,) sends in the window before this epoch
        self._sent_now = np.zeros((c, nl), bool)  # (C, L) sent in this epoch
        self._sends: list[tuple[int, int, int]] = []
        self._last_arrival = 0
        self._mask = np.zeros(self.n_actions, MASK_DTYPE)  # (A,) 1 = valid action
        self._done = True

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        """Start at epoch 0 with every commodity at its source. The instance is fixed, so the env reads no
        ``options``: any key is a ``ValueError`` (:func:`~doppler_gym.envs.masked.reset_options`)."""
        reset_options(options, (), "CollectiveEnv.reset")
        super().reset(seed=seed)
        d = self.instance.demand
        self._k = 0
        self._held.fill(NEVER)
        self._held[np.arange(d.n_commodities), d.source] = 0
        self._sw_pending = {}
        self._sw_now.fill(0)
        self._sw_used.fill(0)
        self._counts.fill(0)
        self._csum.fill(0)
        self._prior.fill(0)
        self._sent_now.fill(False)
        self._sends = []
        self._last_arrival = 0
        self.invalid_actions.reset()
        self._done = False
        self._update_mask()
        info = {"tau": self.instance.tau, "chunk_bytes": self.instance.chunk_bytes,
                "n_commodities": d.n_commodities, "n_deliveries": int(self._wants.sum())}
        if self._all_expected():  # an empty demand
            self._done = True
        return self._observation(), info

    def step(self, action: object) -> tuple[dict, float, bool, bool, dict]:
        if self._done:
            raise episode_over_error("CollectiveEnv.step")
        a = action_index(action, "CollectiveEnv.step", "commodity * n_links + link, or next_epoch_action")
        if not (0 <= a < self.n_actions and self._mask[a]):
            return self._invalid(a)
        self.invalid_actions.accept()
        dense = self.reward_kind == "epochs"
        if a == self.next_epoch_action:
            self._advance()
            if self._k >= self.max_epochs:
                return self._end(reward=-1.0 if dense else 0.0, terminated=False)
            self._update_mask()
            return self._observation(), -1.0 if dense else 0.0, False, False, {}
        self._send(a // self.instance.n_links, a % self.instance.n_links)
        if self._all_expected():
            return self._end(reward=0.0, terminated=True)
        self._update_mask()
        return self._observation(), 0.0, False, False, {}

    def action_masks(self) -> np.ndarray:
        """``(n_actions,) int8``: 1 where the action is valid (== ``obs["action_mask"]``)."""
        return self._mask.copy()

    def teacher_actions(self) -> np.ndarray:
        """``(m,) int64`` the MILP teacher's actions now (see the class docstring); empty once done."""
        if self._done:
            return np.zeros(0, np.int64)
        rows = self.teacher_rows()
        rows = rows[rows[:, 2] == self._k]
        acts = rows[:, 0] * self.instance.n_links + rows[:, 1]
        acts = acts[self._mask[acts] == 1]
        if acts.size == 0:
            return np.array([self.next_epoch_action], np.int64)
        return np.unique(acts)

    def teacher_mask(self) -> np.ndarray:
        """``(n_actions,) int8`` mask of :meth:`teacher_actions` (all zeros once the episode has ended)."""
        mask = np.zeros(self.n_actions, np.int8)
        mask[self.teacher_actions()] = 1
        return mask

    def teacher_schedule(self) -> Schedule:
        """The MILP's minimum-epoch :class:`Schedule` (solved on first call, then cached)."""
        if self._teacher_sched is None:
            from doppler_gym.envs.collective.teacher import milp_schedule

            self._teacher_sched = milp_schedule(self.instance, time_limit=self.teacher_time_limit)
        return self._teacher_sched

    def teacher_rows(self) -> np.ndarray:
        """``(m, 3) int64`` the cleaned MILP sends ``(commodity, link, epoch)`` the teacher replays."""
        if self._teacher_rows is None:
            from doppler_gym.envs.collective.teacher import teacher_sends

            self._teacher_rows = teacher_sends(self.instance, self.teacher_schedule())
        return self._teacher_rows

    def render(self) -> str | None:
        """``"ansi"``: epoch, sends so far and the wanted pairs still missing."""
        if self.render_mode is None:
            gym.logger.warn("CollectiveEnv.render() without a render_mode; use render_mode='ansi'")
            return None
        topo = self.instance.topology
        missing = self._wants & (self._held >= NEVER)
        head = (f"Doppler-Collective-v0 {self.instance.collective} on {topo.name}: epoch {self._k}, "
                f"{len(self._sends)} sends, {int(missing.sum())}/{int(self._wants.sum())} deliveries missing")
        lines = [head]
        now = [s for s in self._sends if s[2] == self._k]
        for x, lk, _ in now:
            lines.append(f"  x{x}: {topo.node_names[topo.src[lk]]} -> {topo.node_names[topo.dst[lk]]}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ read-only views
    @property
    def epoch(self) -> int:
        """The current epoch ``k``."""
        return self._k

    @property
    def sends(self) -> np.ndarray:
        """``(n_sends, 3) int64`` rows ``(commodity, link, epoch)`` issued so far."""
        return np.array(self._sends, np.int64).reshape(-1, 3)

    def schedule(self) -> Schedule:
        """The sends so far as a :class:`Schedule` (``method="agent"``); ``epochs`` is the latest
        arrival of any send (at least the current epoch once the episode is truncated)."""
        return Schedule(topology=self.instance.topology, demand=self.instance.demand,
                        chunk_bytes=self.instance.chunk_bytes, tau=self.instance.tau,
                        epochs=self._schedule_epochs(), sends=self.sends, method="agent")

    # ------------------------------------------------------------------ internals
    def _schedule_epochs(self) -> int:
        if self._all_expected():
            return int(self._last_arrival)
        return int(max(self._last_arrival, self._k))

    def _all_expected(self) -> bool:
        return not bool(np.any(self._wants & (self._held >= NEVER)))

    def _send(self, x: int, lk: int) -> None:
        topo, k = self.instance.topology, self._k
        i, j = int(topo.src[lk]), int(topo.dst[lk])
        e = k + int(self.instance.offset[lk])
        self._counts[k, lk] += 1
        self._sent_now[x, lk] = True
        self._sends.append((x, lk, k))
        if topo.is_switch[i]:
            self._sw_used[x, i] += 1
        if topo.is_switch[j]:  # e > k: every hop into a switch takes >= 1 epoch
            pend = self._sw_pending.get(e)
            if pend is None:
                pend = self._sw_pending[e] = np.zeros_like(self._sw_now)
            pend[x, j] += 1
        else:
            self._held[x, j] = e  # the mask guarantees it was NEVER; e == k lands now (switch -> GPU)
        self._last_arrival = max(self._last_arrival, e)

    def _advance(self) -> None:
        self._k += 1
        k = self._k
        arriving = self._sw_pending.pop(k, None)
        self._sw_now[:] = 0 if arriving is None else arriving
        self._sw_used.fill(0)
        self._sent_now.fill(False)
        csum = self._csum
        np.add(csum[k - 1], self._counts[k - 1], out=csum[k])  # extend the running sum by one epoch
        lo = np.maximum(0, k - self.instance.timing.beta)
        self._prior = csum[k] - csum[lo, self._links]

    def _capacity_left(self) -> np.ndarray:
        k = min(self._k, self.max_epochs)
        return self.instance.window_capacity - self._prior - self._counts[k]

    def _update_mask(self) -> None:
        topo, k = self.instance.topology, self._k
        src, dst = topo.src, topo.dst
        held_now = self._held <= k
        sw_ok = (self._sw_now[:, src] > 0) & (self._src_copy[None, :] | (self._sw_used[:, src] < self._sw_now[:, src]))
        src_ok = np.where(self._src_switch[None, :], sw_ok, held_now[:, src])
        lacking = (self._held >= NEVER) & self._gpu[None, :]
        need_sw = (lacking.astype(np.int64) @ self._reach_t) > 0  # (C, N): a lacking GPU behind switch s
        dst_ok = np.where(self._dst_switch[None, :], need_sw[:, dst], lacking[:, dst])
        cap_ok = self._capacity_left() > 0
        ok = src_ok & dst_ok & cap_ok[None, :] & ~self._sent_now
        self._mask[:-1] = ok.reshape(-1)
        self._mask[-1] = True

    def _observation(self) -> dict[str, np.ndarray]:
        k = self._k
        holdings = ((self._held <= k) | (self._sw_now > 0)).astype(np.float32)
        flying = (self._held > k) & (self._held < NEVER)
        in_flight = np.where(flying, self._held - k, 0).astype(np.float32)
        for e in sorted(self._sw_pending, reverse=True):  # nearest arrival wins
            in_flight[self._sw_pending[e] > 0] = e - k
        in_flight /= np.float32(self.max_offset)
        return {
            "holdings": holdings,
            "in_flight": in_flight,
            "wants": self._wants.astype(np.float32),
            "capacity_left": np.maximum(self._capacity_left(), 0).astype(np.float32) / self._capacity_scale,
            "epoch": np.array([min(k, self.max_epochs) / self.max_epochs], np.float32),
            "action_mask": self._mask.copy(),
        }

    def _end(self, reward: float, terminated: bool) -> tuple[dict, float, bool, bool, dict]:
        self._done = True
        epochs = self._schedule_epochs()
        missing = int(np.sum(self._wants & (self._held >= NEVER)))
        if terminated:
            reward += -float(epochs) if self.reward_kind == "sparse" else -float(epochs - self._k)
        else:
            reward += -self.max_epochs * missing / self._n_deliveries
            if self.reward_kind == "sparse":
                reward += -float(epochs)
        self._mask[:] = False
        self._mask[-1] = True  # keep one valid action so maskable policies never see an all-False mask
        info = {
            "epochs": epochs,
            "finish_time": epochs * self.instance.tau,
            "schedule": self.schedule(),
            "delivered": 1.0 - missing / self._n_deliveries,
            "n_sends": len(self._sends),
        }
        return self._observation(), float(reward), terminated, not terminated, info

    def _invalid(self, a: int) -> tuple[dict, float, bool, bool, dict]:
        reward, truncated, rejection = self.invalid_actions.reject(lambda: self._invalid_message(a))
        if truncated:
            obs, reward, _, _, info = self._end(reward=reward, terminated=False)
            return obs, reward, False, True, {**info, **rejection}
        return self._observation(), reward, False, False, rejection

    def _invalid_message(self, a: int) -> str:
        valid = np.flatnonzero(self._mask)
        return (f"CollectiveEnv.step: action {a} is not valid in epoch {self._k} "
                f"(valid: {valid[:20].tolist()}{' ...' if valid.size > 20 else ''}; "
                f"{self.next_epoch_action} = next epoch); use action_masks()")
