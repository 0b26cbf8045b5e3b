"""Incremental estimated schedule: ops placed one at a time, in a given (SEL) order.

This is the time bookkeeping of DOPPLER's MDP and of its critical-path teacher: when op ``v`` is
placed on device ``d`` it is assumed to start at its *earliest start* there,
``EST[d] = max(avail[d], max over inputs u of end[u] + transfer(u, dev[u] -> d))``, and to end a
compute time later; ``avail[d]`` becomes that end. Durations follow the simulator's cost model
(:class:`SimConfig`): raw costs, or speeds, latencies and bandwidths of the topology.

``time_model="faithful"`` reproduces the authors' env instead (their ``_update_device_info``):
an op's start is the compute already placed on its device (a packed schedule that ignores
dependencies), so ``avail[d]`` equals the compute sum of ``d``; only the EST feature of the op
being placed looks at its inputs. Kept for comparison with the paper's numbers only.

All times are in the simulator's internal unit (seconds, or raw cost units), before
``SimConfig.time_divisor``.
"""

from __future__ import annotations

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.costs import Costs
from doppler_gym.topology.types import Topology

TIME_MODELS = ("fixed", "faithful")
N_DEVICE_FEATURES = 5


class EstimatedSchedule:
    """Mutable estimate of start/end times while ops are placed one by one.

    Attributes (state, updated in place by :meth:`place`):
        device: ``(n_ops,) int64`` device of each placed op, -1 if not placed.
        start: ``(n_ops,) float64`` estimated start of each placed op (0 if not placed).
        end: ``(n_ops,) float64`` estimated end of each placed op (0 if not placed).
        avail: ``(D,) float64`` when each device is next free (end of its last placed op).
        work: ``(D,) float64`` compute time already placed on each device.
        makespan: largest estimated end so far.

    Static:
        comp_time: ``(n_ops, D) float64`` compute time of each op on each device.
    """

    def __init__(
        self,
        graph: DataflowGraph,
        topology: Topology,
        config: SimConfig | None = None,
        time_model: str = "fixed",
    ) -> None:
        if time_model not in TIME_MODELS:
            raise ValueError(f"time_model must be one of {TIME_MODELS}, got {time_model!r}")
        config = config if config is not None else SimConfig()
        self.graph = graph
        self.n_devices = topology.n_devices
        self.time_model = time_model
        costs = Costs.of(graph, topology, config)
        d = self.n_devices
        self.comp_time = costs.comp  # (n, D)
        self._pair_latency = costs.latency  # (D, D) [time]
        self._pair_inv_bw = costs.inv_bw  # (D, D) [time / B]
        self.device = np.full(graph.n_ops, -1, dtype=np.int64)
        self.start = np.zeros(graph.n_ops)
        self.end = np.zeros(graph.n_ops)
        self.avail = np.zeros(d)
        self.work = np.zeros(d)
        self.makespan = 0.0

    def reset(self) -> None:
        """Forget every placement."""
        self.device.fill(-1)
        self.start.fill(0.0)
        self.end.fill(0.0)
        self.avail.fill(0.0)
        self.work.fill(0.0)
        self.makespan = 0.0

    # ------------------------------------------------------------------ queries
    def input_arrivals(self, op: int) -> np.ndarray:
        """``(k, D)``: when each placed input of ``op`` would reach each device (k = placed inputs)."""
        preds = self.graph.predecessors(op)
        preds = preds[self.device[preds] >= 0]
        src_dev = self.device[preds]
        size = self.graph.out_bytes[preds]
        transfer = self._pair_latency[src_dev] + size[:, None] * self._pair_inv_bw[src_dev]  # (k, D)
        transfer[np.arange(preds.size), src_dev] = 0.0
        return self.end[preds][:, None] + transfer

    def earliest_start(self, op: int) -> np.ndarray:
        """``(D,)`` earliest start of ``op`` on each device given the ops placed so far."""
        arrivals = self.input_arrivals(op)
        if arrivals.shape[0] == 0:
            return self.avail.copy()
        return np.maximum(self.avail, arrivals.max(axis=0))

    def device_features(self, op: int) -> np.ndarray:
        """``(D, 5)`` DOPPLER's device features for ``op`` (raw, unnormalised, time units).

        Columns: compute already placed on the device; compute of ``op``'s inputs placed there;
        earliest start of those inputs (0 if none); latest end of those inputs (0 if none);
        the earliest start of ``op`` on the device.
        """
        d = self.n_devices
        out = np.zeros((d, N_DEVICE_FEATURES))
        out[:, 0] = self.work
        preds = self.graph.predecessors(op)
        preds = preds[self.device[preds] >= 0]
        if preds.size:
            dev = self.device[preds]
            out[:, 1] = np.bincount(dev, weights=self.comp_time[preds, dev], minlength=d)
            # An op has a handful of inputs: a plain loop beats ufunc.at on tiny arrays.
            seen = np.zeros(d, dtype=bool)
            for p, dv in zip(preds.tolist(), dev.tolist()):
                s, e = self.start[p], self.end[p]
                if not seen[dv] or s < out[dv, 2]:
                    out[dv, 2] = s
                if e > out[dv, 3]:
                    out[dv, 3] = e
                seen[dv] = True
        out[:, 4] = self.earliest_start(op)
        return out

    # ------------------------------------------------------------------ updates
    def place(self, op: int, device: int, earliest: np.ndarray | None = None) -> None:
        """Place ``op`` on ``device`` and advance the estimate.

        Args:
            op: an op whose inputs are all placed.
            device: its device.
            earliest: ``earliest_start(op)`` if the caller has it already (saves a recomputation).
        """
        if self.time_model == "fixed":
            start = (earliest if earliest is not None else self.earliest_start(op))[device]
        else:  # the authors' env: start = compute already on the device
            start = self.work[device]
        end = start + self.comp_time[op, device]
        self.device[op] = device
        self.start[op] = start
        self.end[op] = end
        self.avail[device] = end
        self.work[device] += self.comp_time[op, device]
        if end > self.makespan:
            self.makespan = end
