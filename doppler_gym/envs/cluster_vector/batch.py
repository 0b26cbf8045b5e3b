"""The batched core of the native ``Doppler-Cluster-v0`` vector envs: ``N`` cluster envs behind one step call.

:class:`ClusterBatch` resets and steps the envs it is told to and returns what each single env returns
(:class:`~doppler_gym.envs.cluster.ClusterEnv`: rewards, ends, infos), with the observations of all envs in
preallocated ``(N, ...)`` arrays (:class:`~doppler_gym.envs.cluster_vector.observation.ObservationBatch`); the
autoreset policy is its callers' (Gymnasium's next-step autoreset in
:class:`~doppler_gym.envs.cluster_vector.env.ClusterVectorEnv`, SB3's same-step autoreset in
``agents.sb3_cluster_vec_env``).

The scheduling engine (:mod:`doppler_gym.cluster`) is Python and stays per env: each env's transition is
:meth:`ClusterEnv.transition <doppler_gym.envs.cluster.ClusterEnv.transition>` (its step without the
observation). What the batch saves against ``SyncVectorEnv`` is the per-env observation ``Dict`` (built once
for all envs from their :meth:`~doppler_gym.envs.cluster.ClusterEnv.observation_inputs`, not per env and then
stacked), Gymnasium's wrapper layers (order enforcing, the passive checker, ``ActionMasks``) and the
per-env, per-key info merge.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from doppler_gym.cluster import traces
from doppler_gym.envs.batched import BatchObservations, StepResult, batch_actions, shown_actions
from doppler_gym.envs.cluster import ClusterEnv
from doppler_gym.envs.cluster_obs import ClusterObservation
from doppler_gym.envs.cluster_vector.observation import ObservationBatch

# the keywords the native vector env refuses (a value other than the default), with why
UNSUPPORTED = {"render_mode": "rendering (Doppler-Cluster-v0 has no render modes)"}
SINGLE_ENV_PATH = ("gym.make_vec('Doppler-Cluster-v0', num_envs=N, vectorization_mode='sync', ...) (a SyncVectorEnv "
                   "of single envs)")


def check_options(num_envs: object, kwargs: dict[str, Any]) -> None:
    """Refuse what the batch cannot build, before any env is made.

    Raises:
        TypeError: ``num_envs`` not an integer; a keyword ``ClusterEnv`` does not take (listing the valid ones).
        ValueError: ``num_envs < 1``; a keyword of :data:`UNSUPPORTED` away from its default (naming the
            ``SyncVectorEnv`` path).
    """
    if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)):
        raise TypeError(f"num_envs must be an integer >= 1, got {num_envs!r}")
    if num_envs < 1:
        raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
    params = inspect.signature(ClusterEnv.__init__).parameters
    valid = [name for name in params if name != "self"]
    unknown = sorted(set(kwargs) - set(valid))
    if unknown:
        raise TypeError(f"Doppler-Cluster-v0 takes no keyword(s) {unknown}; valid: {', '.join(valid)}")
    for name, what in UNSUPPORTED.items():
        if name in kwargs and kwargs[name] != params[name].default:
            raise ValueError(f"the native Doppler-Cluster-v0 vector env does not support {what}: "
                             f"{name}={kwargs[name]!r}; use {SINGLE_ENV_PATH}")


def shared_state(first: ClusterEnv, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keywords that let the other envs reuse ``first``'s read-only objects instead of building their own, where
    that changes nothing they do: a shipped trace loaded once (its ``JobTrace``; a shipped trace has no
    ``trace_seed`` either way) and a cluster spec parsed once (its ``Cluster``). A ``"generated:N"`` trace is
    left as it is (each env keeps its ``trace_seed`` and, with ``resample_trace``, its own draws)."""
    shared: dict[str, Any] = {}
    trace = kwargs.get("trace")
    if isinstance(trace, str) and trace in traces.names():
        shared["trace"] = first.trace
    if isinstance(kwargs.get("cluster"), str):
        shared["cluster"] = first.cluster
    return shared


class ClusterBatch(BatchObservations):
    """``num_envs`` ``Doppler-Cluster-v0`` envs with the same keyword arguments, stepped and observed together.

    Args:
        num_envs: number of envs ``N``.
        copy_obs: :meth:`observation` returns fresh copies (default) or the live arrays.
        **kwargs: :class:`~doppler_gym.envs.cluster.ClusterEnv`'s keywords, the same for every env (objects
            such as a ``JobTrace`` or a ``FailureModel`` are shared, as ``gym.make_vec``'s sync mode shares them;
            a shipped trace and a cluster spec are loaded once, :func:`shared_state`); see :func:`check_options`
            for the ones refused.

    Attributes:
        num_envs: ``N``; n_actions: each env's ``A``.
        envs: the ``N`` single envs (unwrapped; read their public state, e.g. ``job_view``, between steps).
        single_observation_space, single_action_space: one env's spaces.
        obs: ``{key: (N, ...) array}``, the live observation arrays (read only; :meth:`observation` to keep).
    """

    def __init__(self, num_envs: int, copy_obs: bool = True, **kwargs: Any) -> None:
        check_options(num_envs, kwargs)
        if not isinstance(copy_obs, (bool, np.bool_)):
            raise TypeError(f"copy_obs must be a bool (True: fresh observation arrays each step, False: the live "
                            f"batch arrays), got {copy_obs!r}")
        self.num_envs = int(num_envs)
        self.copy_obs = bool(copy_obs)
        first = ClusterEnv(**kwargs)
        shared = shared_state(first, kwargs)
        self.envs = (first, *(ClusterEnv(**{**kwargs, **shared}) for _ in range(self.num_envs - 1)))
        self.n_actions = first.n_actions
        self.single_observation_space = first.observation_space
        self.single_action_space: spaces.Discrete = first.action_space
        self._observations = ObservationBatch(ClusterObservation(
            first.cluster, first.max_jobs, first.time_scale, first.known_durations, first.n_actions), self.num_envs)
        self.obs = self._observations.arrays
        self._all = np.ones(self.num_envs, bool)
        self._pending = np.zeros(self.num_envs, bool)  # reset with write=False: written at the next step
        self._raise = first.invalid_actions.mode == "raise"

    # ------------------------------------------------------------------ reset and step
    def reset(self, rows: Sequence[int], seeds: Sequence[int | None], write: bool = True) -> list[dict[str, Any]]:
        """Start a new episode in each env of ``rows``; env ``rows[j]`` is reset with ``seed=seeds[j]`` (``None``: its
        generator goes on). ``write=False`` leaves their observation rows to the next :meth:`step`, which writes
        them with the envs it steps in one pass (an autoreset's rows; :attr:`obs` is stale until then). Returns the
        reset infos, in the order of ``rows``."""
        rows = [int(i) for i in rows]
        infos = [self.envs[i].reset(seed=seed)[1] for i, seed in zip(rows, seeds)]
        if write:
            self._write(rows)
        else:
            self._pending[rows] = True
        return infos

    def step(self, actions: object, active: np.ndarray | None = None) -> StepResult:
        """One step of every env with ``active[i]`` (default: all), env ``i`` taking ``actions[i]``.

        Args:
            actions: ``(N,)`` integer actions (the entries of envs not stepped are ignored).
            active: ``(N,) bool`` the envs to step.

        Raises:
            TypeError / ValueError: ``actions`` not ``N`` integers; with ``invalid_action="raise"`` an action its
                env's mask rules out (nothing is stepped then).
            RuntimeError: an env whose episode has ended (reset it first): the env's own error, raised when its turn
                comes (the envs before it have stepped).
        """
        acts = batch_actions(actions, self.num_envs, "ClusterVectorEnv.step",
                             f"row * n_modes + mode, or {self.n_actions - 1} to advance")
        active = self._all if active is None else np.asarray(active, bool)
        rows = np.flatnonzero(active).tolist()
        if self._raise:
            self._check_valid(acts, rows)
        rewards = np.zeros(self.num_envs)
        terminated = np.zeros(self.num_envs, bool)
        truncated = np.zeros(self.num_envs, bool)
        infos: dict[int, dict[str, Any]] = {}
        envs, chosen = self.envs, acts.tolist()
        for i in rows:
            rewards[i], terminated[i], truncated[i], infos[i] = envs[i].transition(chosen[i])
        if self._pending.any():
            self._write(np.flatnonzero(active | self._pending).tolist())
            self._pending[:] = False
        else:
            self._write(rows)
        return StepResult(rewards, terminated, truncated, infos)

    # ------------------------------------------------------------------ views
    def action_masks(self) -> np.ndarray:
        """``(N, n_actions) int8``: 1 where an action is valid (``obs["action_mask"]``, a copy)."""
        return self.obs["action_mask"].copy()

    # ------------------------------------------------------------------ internals
    def _write(self, rows: list[int]) -> None:
        envs = self.envs
        self._observations.write(rows, [envs[i].observation_inputs() for i in rows])

    def _check_valid(self, acts: np.ndarray, rows: list[int]) -> None:
        """``invalid_action="raise"``: the error of the first env stepped whose action its mask rules out, before any
        env steps."""
        mask = self.obs["action_mask"]
        for i in rows:
            a = int(acts[i])
            if not (0 <= a < self.n_actions and mask[i, a]):
                raise ValueError(f"ClusterVectorEnv.step: env {i}: action {a} is not valid at this event (valid: "
                                 f"[{shown_actions(mask[i])}]; {self.n_actions - 1} = advance); nothing was stepped")
