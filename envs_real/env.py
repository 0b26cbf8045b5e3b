"""``Doppler-Real-v0``: DOPPLER's placement MDP whose episodes end with a real execution.

:func:`make_real_env` builds a :class:`doppler_gym.envs.PlacementEnv` with a
:class:`~envs_real.backend.RealBackend` (the env's ``backend`` argument) and, by default, a
calibrated instance (:func:`envs_real.calibrate`): the env's graph has op times in seconds and
its topology the measured links, so the env's reference makespan (the critical-path heuristic,
simulated), its lower bound and its estimated schedule are in seconds like the real makespan, and
the sparse reward ``-real makespan / reference`` is about -1 for the heuristic. Without
calibration the reward compares real seconds with simulated units (a warning says so).

The returned env is wrapped in :class:`RealInfo`, which adds the real run's figures to the final
``info`` (``info["real"]``: per-run makespans, devices, NVML report, notes; ``info["error"]``) and
turns a failed run (an op raising, out of memory, a timeout: the backend's trace then has an
infinite makespan) into ``failure_reward`` instead of an infinite reward.

>>> import gymnasium as gym, envs_real
>>> env = gym.make("Doppler-Real-v0", graph="ffnn", devices="auto")
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import gymnasium as gym
import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.instances import resolve_graph, resolve_topology
from doppler_gym.sim.config import SimConfig
from envs_real.backend import RealBackend
from envs_real.estimate import DEFAULT_MAX_ESTIMATED_SECONDS

DEFAULT_FAILURE_REWARD = -10.0  # about ten times the sparse reward of the critical-path heuristic


class RealInfo(gym.Wrapper):
    """Adds the real run's report to the final ``info`` and bounds the reward of failed runs.

    Args:
        env: a ``PlacementEnv`` (or a wrapper of one) whose backend is a :class:`RealBackend`.
        backend: that backend.
        failure_reward: reward of the final step when the real run failed (``info["error"]``
            says why); the episode ends as usual.
    """

    def __init__(
        self, env: gym.Env, backend: RealBackend, failure_reward: float = DEFAULT_FAILURE_REWARD
    ) -> None:
        super().__init__(env)
        self.backend = backend
        self.failure_reward = float(failure_reward)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated and "makespan" in info:
            report = self.backend.last_report
            info = dict(info)
            info["real"] = report.as_info() if report is not None else {}
            info["error"] = None if report is None else report.error
            if info["error"] is not None or not np.isfinite(info["makespan"]):
                reward = self.failure_reward
        return obs, reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """``(max_ops + max_devices,) int8``: the inner ``PlacementEnv``'s valid actions (its contract:
        :mod:`doppler_gym.envs.masked`)."""
        return self.env.get_wrapper_attr("action_masks")()

    def teacher_mask(self) -> np.ndarray:
        """The inner ``PlacementEnv``'s critical-path teacher mask."""
        return self.env.get_wrapper_attr("teacher_mask")()


def make_real_env(
    graph: object = "paper/ffnn",
    devices: object = "auto",
    topology: object = None,
    *,
    calibrate: bool = True,
    backend: RealBackend | None = None,
    repeats: int = 3,
    warmup: int = 1,
    timeout_s: float | None = 60.0,
    monitor: bool | str = "auto",
    synthetic_scale: float | str = "auto",
    failure_reward: float = DEFAULT_FAILURE_REWARD,
    calibration_reps: int = 5,
    max_estimated_seconds: float | None = DEFAULT_MAX_ESTIMATED_SECONDS,
    max_memory_bytes: float | str | None = "auto",
    progress: bool | str = "auto",
    **env_kwargs: Any,
) -> gym.Env:
    """A ``PlacementEnv`` whose final step runs the placement on real devices.

    Args:
        graph: a :class:`DataflowGraph`, a paper graph name (``"paper/ffnn"``), a workload name
            (``"ffnn"``) or a ``.txt``/``.json`` path. Spec'd workloads run at their real sizes
            (``"ffnn"`` at its defaults is 1.1 TFLOP per run: pick small sizes on CPU); cost-only
            graphs run synthetic ops, scaled down on CPU (:mod:`envs_real.materialize`).
            With ``calibrate=False`` anything
            ``PlacementEnv`` accepts (sequences, callables) works too.
        devices: device spec (``"auto"``, ``"cpu:4"``, ``"cuda:0,1"``, ...), ignored when
            ``backend`` is given.
        topology: device count, preset name or :class:`Topology` of the MDP; its device count is
            the number of logical devices (default: the device spec's count). With calibration,
            the calibrated topology of that many devices replaces it.
        calibrate: profile the graph on the devices and use the calibrated graph/topology/config
            (rewards and observations in seconds). Needs a single graph.
        backend: a ready :class:`RealBackend` (else one is built from the arguments below).
        repeats, warmup, timeout_s, monitor, synthetic_scale: the backend's arguments (``monitor``:
            NVML on GPUs by default; on CPU ``info["real"]["monitor"]`` says it is unavailable and why).
        max_estimated_seconds, max_memory_bytes, progress: the backend's limits and progress bar
            (:mod:`envs_real.estimate`): the calibration (all on one device) and every episode's run
            are estimated first and refused above the limits, with the estimate and how to shrink
            the workload in the message.
        failure_reward: final reward of a failed real run (see :class:`RealInfo`).
        calibration_reps: repetitions per calibration measurement.
        **env_kwargs: passed to ``PlacementEnv`` (``reward``, ``sim_config``, ``max_ops``, ...).
            With calibration, ``sim_config`` only contributes its ``queue_order`` and ``streams``.

    Returns:
        ``RealInfo(PlacementEnv(...))``.
    """
    from doppler_gym.envs import PlacementEnv

    be = (
        backend
        if backend is not None
        else RealBackend(
            devices,
            repeats=repeats,
            warmup=warmup,
            timeout_s=timeout_s,
            monitor=monitor,
            synthetic_scale=synthetic_scale,
            max_estimated_seconds=max_estimated_seconds,
            max_memory_bytes=max_memory_bytes,
            progress=progress,
        )
    )
    n_dev = _device_count(topology, be)
    if calibrate:
        from envs_real.calibration import calibrate as _calibrate

        g = _single_graph(graph)  # calibrate() checks its estimate against the limits first
        user_cfg = env_kwargs.pop("sim_config", None)
        if user_cfg is not None and not isinstance(user_cfg, SimConfig):
            raise TypeError(f"sim_config must be a SimConfig or None, got {type(user_cfg).__name__}")
        cfg = user_cfg if user_cfg is not None else SimConfig()
        cal = _calibrate(
            g,
            backend=be,
            n_devices=n_dev,
            queue_order=cfg.queue_order,
            lanes=cfg.streams,
            reps=calibration_reps,
        )
        env = PlacementEnv(
            graph=cal.graph, topology=cal.topology, sim_config=cal.config, backend=be, **env_kwargs
        )
        env.calibration = cal  # type: ignore[attr-defined]  kept for inspection
    else:
        warnings.warn(
            "make_real_env(calibrate=False): the env's reference makespan and estimates are simulated in the "
            "sim config's units while the real makespan is in seconds, so the reward mixes units",
            RuntimeWarning,
            stacklevel=2,
        )
        topo = topology if topology is not None else n_dev
        env = PlacementEnv(graph=graph, topology=topo, backend=be, **env_kwargs)
    return RealInfo(env, be, failure_reward)


def _device_count(topology: object, be: RealBackend) -> int:
    """The backend's device count for ``topology=None``, else that of the topology it names."""
    if topology is None:
        return be.devices.n_default
    return resolve_topology(topology).n_devices


def _single_graph(graph: object) -> DataflowGraph:
    """The one graph calibration profiles (:func:`doppler_gym.instances.resolve_graph`)."""
    if not isinstance(graph, (DataflowGraph, str, os.PathLike)):
        raise ValueError(
            f"make_real_env(calibrate=True) needs one graph: a DataflowGraph, a graph or workload name, or a "
            f"file; got {type(graph).__name__}. For graph sequences or generators pass calibrate=False"
        )
    return resolve_graph(graph, where="make_real_env: graph")
