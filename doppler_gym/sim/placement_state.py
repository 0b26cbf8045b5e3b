"""The state of DOPPLER's two-phase placement MDP: SEL a ready op, then PLC its device.

One :class:`PlacementState` is one episode: which ops are ready (every input placed, itself not
placed), the op selected and its device features, the SEL order so far, and the estimated schedule
(:class:`~doppler_gym.sim.estimate.EstimatedSchedule`) that the placements build in that order.
``Doppler-Sim-v0`` (:mod:`doppler_gym.envs.placement`), the direct decoder (``agents.decode``), the
critical-path teacher (:mod:`doppler_gym.baselines.critical_path`) and the real backend's
calibration placements all drive it; each keeps its own policy (how it picks the op and the device)
and its own outputs (observations, scores, priorities).

An episode alternates :meth:`PlacementState.select` (SEL phase; returns the ``(D, 5)`` device features
of the op) and :meth:`PlacementState.place` (PLC phase; returns the ops it made ready) until
:attr:`PlacementState.done`. It is the decoder's per-step hot loop: the checks are a few dict and
integer operations, and the bookkeeping runs on Python lists.

Ready ops are kept in the order they became ready: the sources by id, then each op when its last
input is placed (the placed op's successors in edge order). This is the authors' ready list
(``cp_utils.py``), which the critical-path teacher's ``paper_faithful`` mode indexes.
"""

from __future__ import annotations

from collections.abc import KeysView

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.estimate import EstimatedSchedule
from doppler_gym.topology.types import Topology

SEL, PLC = 0, 1  # the two phases: select a ready op, place the selected op on a device


class PlacementState:
    """One episode of the SEL/PLC placement MDP on a graph and a topology.

    Args:
        graph: the graph.
        topology: the devices.
        config: the simulator's cost model for the estimated schedule (``None``: ``SimConfig()``).
        time_model: the estimated schedule's time model, ``"fixed"`` (DOPPLER's MDP) or
            ``"faithful"`` (the authors' packed bookkeeping), see :class:`EstimatedSchedule`.

    Attributes (updated by :meth:`select`, :meth:`place` and :meth:`reset`; read, do not write):
        schedule: the estimated schedule of the ops placed so far.
        phase: :data:`SEL` or :data:`PLC`.
        selected: the op being placed (PLC phase), -1 in the SEL phase.
        selected_features: ``(D, 5) float64`` the selected op's device features (PLC phase; ``None`` in
            the SEL phase) [internal time]: see :meth:`EstimatedSchedule.device_features`.
        n_placed: ops placed so far [count].

    Static:
        n_ops, n_devices: the instance's sizes [count].
    """

    def __init__(
        self,
        graph: DataflowGraph,
        topology: Topology,
        config: SimConfig | None = None,
        time_model: str = "fixed",
    ) -> None:
        self.schedule = EstimatedSchedule(graph, topology, config, time_model=time_model)
        self.graph = graph
        self.n_ops = graph.n_ops
        self.n_devices = topology.n_devices
        ptr, succ = graph.succ_ptr.tolist(), graph.succ.tolist()
        self._successors = [succ[ptr[v] : ptr[v + 1]] for v in range(self.n_ops)]  # edge order
        self._in_degree = graph.in_degree.tolist()
        self.reset()

    def reset(self) -> None:
        """Nothing placed, SEL phase; the ready ops are the graph's sources."""
        self.schedule.reset()
        self._waiting = self._in_degree.copy()  # (n_ops,) unplaced inputs of each op
        self._ready = dict.fromkeys(v for v, k in enumerate(self._waiting) if k == 0)  # in ready order
        self._order: list[int] = []
        self.phase = SEL
        self.selected = -1
        self.selected_features: np.ndarray | None = None
        self.n_placed = 0

    # ------------------------------------------------------------------ views
    @property
    def ready(self) -> KeysView[int]:
        """The ready ops in the order they became ready (module docstring): a live, read-only view."""
        return self._ready.keys()

    @property
    def order(self) -> np.ndarray:
        """``(n_placed,) int64`` the ops placed so far, in SEL order (a copy)."""
        return np.array(self._order, dtype=np.int64)

    @property
    def assignment(self) -> np.ndarray:
        """``(n_ops,) int64`` the device of each placed op, -1 for the others (a copy)."""
        return self.schedule.device.copy()

    @property
    def makespan(self) -> float:
        """The estimated schedule's makespan so far [internal time, before ``time_divisor``]."""
        return self.schedule.makespan

    @property
    def done(self) -> bool:
        """Whether every op is placed."""
        return self.n_placed == self.n_ops

    # ------------------------------------------------------------------ transitions
    def select(self, op: int) -> np.ndarray:
        """SEL: select the ready op ``op``; returns its ``(D, 5)`` device features (also kept as
        :attr:`selected_features`) [internal time].

        Raises:
            ValueError: in the PLC phase (an op is selected and not placed yet), or when ``op`` is
                not ready.
        """
        if self.phase != SEL:
            raise ValueError(f"PlacementState.select({op}): op {self.selected} is selected and not placed yet; "
                             f"call place(device) first")
        if op not in self._ready:
            shown = ", ".join(str(v) for v in list(self._ready)[:20]) + (", ..." if len(self._ready) > 20 else "")
            raise ValueError(f"PlacementState.select({op}): op {op} is not ready (placed already, an input unplaced, "
                             f"or not an op id < {self.n_ops}); the ready ops are [{shown}]")
        features = self.schedule.device_features(op)
        self.selected, self.phase, self.selected_features = op, PLC, features
        return features

    def place(self, device: int) -> list[int]:
        """PLC: place the selected op on ``device`` at its earliest start there (under the schedule's
        time model); returns the ops this made ready, in the order they became ready.

        Raises:
            ValueError: in the SEL phase (no op selected), or when ``device`` is not a device id.
        """
        op = self.selected
        if op < 0:
            raise ValueError(f"PlacementState.place({device}): no op is selected; call select(op) with a ready op "
                             f"first")
        if not 0 <= device < self.n_devices:
            raise ValueError(f"PlacementState.place({device}): not a device id; the devices are "
                             f"0..{self.n_devices - 1}")
        self.schedule.place(op, device, self.selected_features[:, 4])
        del self._ready[op]
        self._order.append(op)
        self.n_placed += 1
        waiting, ready, newly = self._waiting, self._ready, []
        for s in self._successors[op]:
            waiting[s] -= 1
            if waiting[s] == 0:
                ready[s] = None
                newly.append(s)
        self.selected, self.phase, self.selected_features = -1, SEL, None
        return newly
