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
        # Python-list mirrors of the static tables and of the state, built on the first device_features
        # call (numpy's per-call overhead dominates the per-op work on a handful of inputs). The state
        # arrays above are written by place() and reset() only, which keep the mirrors in step.
        self._static_l: tuple | None = None
        self._state_l: tuple | None = None

    def _lists(self) -> tuple:
        """``(preds, comp, size, latency, inv_bw, device, start, end, avail, work)`` as Python lists."""
        if self._static_l is None:
            g = self.graph
            ptr, pred = g.pred_ptr.tolist(), g.pred.tolist()
            self._static_l = ([pred[ptr[v] : ptr[v + 1]] for v in range(g.n_ops)], self.comp_time.tolist(),
                              g.out_bytes.astype(np.float64).tolist(), self._pair_latency.tolist(),
                              self._pair_inv_bw.tolist())
        if self._state_l is None:
            self._state_l = (self.device.tolist(), self.start.tolist(), self.end.tolist(), self.avail.tolist(),
                             self.work.tolist())
        return self._static_l + self._state_l

    def reset(self) -> None:
        """Forget every placement."""
        self.device.fill(-1)
        self.start.fill(0.0)
        self.end.fill(0.0)
        self.avail.fill(0.0)
        self.work.fill(0.0)
        self.makespan = 0.0
        self._state_l = None

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
        preds, comp_l, size_l, lat_l, inv_bw_l, dev_l, start_l, end_l, avail_l, work_l = self._lists()
        inp = [0.0] * d  # compute of the placed inputs per device (in input order, as np.bincount)
        first = [0.0] * d  # earliest start of those inputs
        last = [0.0] * d  # latest end of those inputs
        seen = [False] * d
        est = avail_l.copy()  # earliest start: max(avail, every input's arrival)
        for p in preds[op]:
            dv = dev_l[p]
            if dv < 0:
                continue
            inp[dv] += comp_l[p][dv]
            s, e = start_l[p], end_l[p]
            if not seen[dv] or s < first[dv]:
                first[dv] = s
            if e > last[dv]:
                last[dv] = e
            seen[dv] = True
            size, lat, inv_bw = size_l[p], lat_l[dv], inv_bw_l[dv]
            for j in range(d):  # arrival of p's output on device j (no transfer on its own device)
                a = e if j == dv else e + (lat[j] + size * inv_bw[j])
                if a > est[j]:
                    est[j] = a
        return np.array([work_l, inp, first, last, est]).T.copy()

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
        if self._state_l is not None:
            dev_l, start_l, end_l, avail_l, work_l = self._state_l
            dev_l[op] = int(device)
            start_l[op] = float(start)
            end_l[op] = float(end)
            avail_l[device] = float(end)
            work_l[device] = float(self.work[device])
        if end > self.makespan:
            self.makespan = end
