"""Each env's instance in padded per-env rows: what the batched kernel reads about the graph and devices.

An env of the batch may place a different instance (graph, topology, sim config) from its neighbours
(a sequence or a generator of graphs, ``reset(options={"graph": ...})``), so the kernel reads every
static table from the env's own row. A row is written when the env starts an episode on another
:class:`~doppler_gym.envs.context.GraphContext` than its last one (with one shared instance: once per
env), from a per-context :class:`InstanceData` built once and reused by every env on that context.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from doppler_gym.envs.context import N_DEVICE_STATIC, N_OP_FEATURES, GraphContext
from doppler_gym.envs.flat_observation import normalised_op_costs
from doppler_gym.envs.observation import static_observation
from doppler_gym.sim.costs import Costs

CACHE_SIZE = 64  # contexts whose InstanceData is kept (least recently used dropped first)


class InstanceData:
    """What the batch needs of one context, derived once.

    Attributes:
        ctx: the context.
        costs: its :class:`~doppler_gym.sim.costs.Costs` (the estimated schedule's tables).
        static_obs: the graph form's padded static arrays (:func:`~doppler_gym.envs.observation.static_observation`).
        op_costs: ``(max_ops, 5) float32`` the flat form's normalised op costs, zero padded.
        reference: the rewards' reference makespan (``reference_makespan``, or 1 where it is 0) [reported unit].
        partial: the context's :class:`~doppler_gym.sim.partial_incremental.IncrementalPartialMakespan` (one slot
            per env), built on first use (by :mod:`doppler_gym.envs.vector.simulate`).
    """

    def __init__(self, ctx: GraphContext, max_ops: int, max_edges: int) -> None:
        self.ctx = ctx
        self.costs = Costs.of(ctx.graph, ctx.topology, ctx.config)
        self.static_obs = static_observation(ctx, max_ops, max_edges)
        self.op_costs = np.zeros((max_ops, N_OP_FEATURES), np.float32)
        self.op_costs[: ctx.n_ops] = normalised_op_costs(ctx.op_features)
        self.reference = ctx.reference_makespan or 1.0  # as PlacementEnv.step (0 only for a graph without cost)
        self.partial = None


class InstanceTables:
    """Per-env rows of the instance tables (module docstring), ``N = num_envs`` rows padded to
    ``n = max_ops``, ``E = max_edges``, ``D = max_devices``.

    Attributes (one row per env; dtypes as :func:`~doppler_gym.envs.vector.kernel.step_rows` reads them):
        n_ops, n_devices: ``(N,) int64`` [count].
        pred_ptr, succ_ptr: ``(N, n + 1) int64``; pred, succ: ``(N, E) int64``: the graph's CSR lists.
        in_degree: ``(N, n) int64``.
        comp: ``(N, n, D) float64`` compute time of each op on each device [internal time].
        out_bytes: ``(N, n) float64`` output size of each op.
        latency, inv_bw: ``(N, D, D) float64`` transfer latency [internal time] and time per output unit.
        inv_scale: ``(N,) float64`` 1 / the graph's compute-only critical path [1 / internal time].
        device_static: ``(N, D, 2) float64`` relative speed and memory of each device.
        time_divisor: ``(N,) float64`` internal / reported time.
        reference: ``(N,) float64`` the rewards' reference makespan [reported unit].
        data: ``N`` entries, the :class:`InstanceData` of each env's current instance (``None`` before its first).
        shared: the :class:`InstanceData` every env holds, or ``None`` when they differ.
    """

    def __init__(self, num_envs: int, max_ops: int, max_edges: int, max_devices: int) -> None:
        b, n, e, d = num_envs, max_ops, max_edges, max_devices
        self.max_ops, self.max_edges, self.max_devices = n, e, d
        self.n_ops = np.ones(b, np.int64)  # 1 until the row is loaded (a divisor of the flat form's globals)
        self.n_devices = np.ones(b, np.int64)
        self.pred_ptr = np.zeros((b, n + 1), np.int64)
        self.pred = np.zeros((b, e), np.int64)
        self.succ_ptr = np.zeros((b, n + 1), np.int64)
        self.succ = np.zeros((b, e), np.int64)
        self.in_degree = np.zeros((b, n), np.int64)
        self.comp = np.zeros((b, n, d))
        self.out_bytes = np.zeros((b, n))
        self.latency = np.zeros((b, d, d))
        self.inv_bw = np.zeros((b, d, d))
        self.inv_scale = np.ones(b)
        self.device_static = np.zeros((b, d, N_DEVICE_STATIC))
        self.time_divisor = np.ones(b)
        self.reference = np.ones(b)
        self.data: list[InstanceData | None] = [None] * b
        self.shared: InstanceData | None = None
        self._cache: OrderedDict[int, InstanceData] = OrderedDict()

    def instance(self, ctx: GraphContext) -> InstanceData:
        """The :class:`InstanceData` of ``ctx`` (built on first use, kept for the last ``CACHE_SIZE`` contexts)."""
        data = self._cache.get(id(ctx))
        if data is not None and data.ctx is ctx:
            self._cache.move_to_end(id(ctx))
            return data
        data = InstanceData(ctx, self.max_ops, self.max_edges)
        self._cache[id(ctx)] = data
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return data

    def load(self, i: int, ctx: GraphContext) -> bool:
        """Make row ``i`` describe ``ctx``; returns whether it changed (False: the row held ``ctx`` already)."""
        old = self.data[i]
        if old is not None and old.ctx is ctx:
            return False
        data = self.instance(ctx)
        g, n, e, d = ctx.graph, ctx.n_ops, ctx.n_edges, ctx.n_devices
        self.n_ops[i] = n
        self.n_devices[i] = d
        self.pred_ptr[i] = 0
        self.pred_ptr[i, : n + 1] = g.pred_ptr
        self.pred_ptr[i, n + 1 :] = e
        self.succ_ptr[i] = 0
        self.succ_ptr[i, : n + 1] = g.succ_ptr
        self.succ_ptr[i, n + 1 :] = e
        self.pred[i] = 0
        self.pred[i, :e] = g.pred
        self.succ[i] = 0
        self.succ[i, :e] = g.succ
        self.in_degree[i] = 0
        self.in_degree[i, :n] = ctx.in_degree
        costs = data.costs
        self.comp[i] = 0.0
        self.comp[i, :n, :d] = costs.comp
        self.out_bytes[i] = 0.0
        self.out_bytes[i, :n] = g.out_bytes
        self.latency[i] = 0.0
        self.latency[i, :d, :d] = costs.latency
        self.inv_bw[i] = 0.0
        self.inv_bw[i, :d, :d] = costs.inv_bw
        self.inv_scale[i] = 1.0 / ctx.scale
        self.device_static[i] = 0.0
        self.device_static[i, :d] = ctx.device_static
        self.time_divisor[i] = ctx.time_divisor
        self.reference[i] = data.reference
        self.data[i] = data
        self.shared = data if all(x is data for x in self.data) else None
        return True
