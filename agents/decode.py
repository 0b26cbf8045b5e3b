"""Direct decode of a :class:`~agents.policy.DopplerPolicy` on a graph of any size: greedy and sampled.

Stepping ``Doppler-Sim-v0`` costs ``O(n)`` per step (padded observations, the heads' per-device sums
as a ``(D + 1, N)`` matmul), so ``O(n^2)`` per episode. This module runs the same MDP (SEL a ready
op, PLC its device, the ``"fixed"`` :class:`~doppler_gym.sim.estimate.EstimatedSchedule` for the
device features) without the env:

- the **static part** (GNN, critical-path sums, projection table) is computed once, through the
  policy's own :class:`~agents.embedding.StaticEncoder` on the env's static observation of the graph
  (:func:`~doppler_gym.envs.observation.static_observation`), so every static input feature the
  policy has is used as is;
- **per step** only the dynamic inputs are computed: SEL scores the ready ops (their 5 op features
  z-scored over the ready set, the placed and ready shares), PLC scores the devices from per-device
  sums of the projection table that are updated incrementally (one row added per placement) and
  the estimated schedule's device features of the selected op.

The formulas are those of :meth:`DopplerExtractor.encode` and :meth:`DopplerPolicy._logits` (tested
action for action against the env). Cost per episode: ``O(n + E)`` bookkeeping plus one head call
per step over the ready ops (SEL) or the devices (PLC), i.e. ``O(sum of ready-set sizes)``; memory
``O(n (F + D))``. ``K`` episodes run in lockstep with one batched head call per step; a single
episode (``K == 1``, e.g. the greedy decode alone) runs on its own loop without the batching
bookkeeping, with the same operations on the same values (the same actions, bit for bit).

Greedy rows take the argmax of the clipped scores (ties, within ``TIE_ATOL``, to the lowest op id /
device id, as ``torch.argmax`` on the env's padded scores); sampled rows draw from their softmax with the
Gumbel-max trick on a seeded ``numpy`` generator, so the same seed gives the same placements.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from agents.policy import COMP_FLOOR, EFT_GAP_CAP
from doppler_gym.envs.context import GraphContext, build_context
from doppler_gym.envs.observation import static_observation
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.instances import default_config, resolve_topology
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.estimate import EstimatedSchedule
from doppler_gym.topology.types import Topology

_EPS = 1e-6  # as agents.policy._EPS
CHECK_RTOL = 1e-4  # the numpy heads must agree with the policy's torch heads to this relative tolerance
TIE_ATOL = 4e-6  # greedy: scores this close to the best are ties (to the lowest id); float32 rounding of
# equal inputs in different matmul rows differs by a few ulps (~1e-6 at the clip's 10)


def _greedy(scores: np.ndarray) -> int:
    """The first index whose score is within ``TIE_ATOL`` of the largest (the env's argmax over
    exactly tied scores takes the lowest id)."""
    return int((scores >= scores.max() - TIE_ATOL).argmax())


@dataclass(frozen=True)
class Decoded:
    """``K`` placements decoded by a policy.

    Attributes:
        assignments: ``(K, n_ops) int64`` device of each op, row 0 the greedy decode when asked.
        orders: ``(K, n_ops) int64`` the SEL order of each row.
        estimated: ``(K,) float64`` estimated makespan of each row (the env's estimated schedule)
            [reported unit].
        plc_probs: ``(K, n_ops, D) float32`` the PLC softmax each row's policy gave each op when it
            was placed.
        greedy: whether row 0 is the greedy decode.
        seconds: wall clock of the decode, the static part included [s].
        static_seconds: of which the static part (instance context, GNN) [s].
    """

    assignments: np.ndarray
    orders: np.ndarray
    estimated: np.ndarray
    plc_probs: np.ndarray
    greedy: bool
    seconds: float
    static_seconds: float


def instance_context(graph: DataflowGraph, topology: Topology, config: SimConfig) -> GraphContext:
    """:func:`doppler_gym.envs.context.build_context` without its reference run and lower bound
    (``reference_makespan`` and ``lower_bound`` are NaN): the same op features, edge attributes,
    device features and adjacency, in ``O(n + E)``."""
    return build_context(graph, topology, config, reference=False)


# ---------------------------------------------------------------------------- numpy heads
def _layers(seq: torch.nn.Module, where: str) -> list[tuple]:
    """The layers of an MLP tail as ``("linear", W.T, b)`` / ``("leaky", slope)`` (float32 numpy)."""
    out: list[tuple] = []
    for m in seq:
        if isinstance(m, torch.nn.Linear):
            w = m.weight.detach().cpu().numpy().T.astype(np.float32).copy()
            b = None if m.bias is None else m.bias.detach().cpu().numpy().astype(np.float32)
            out.append(("linear", w, b))
        elif isinstance(m, torch.nn.LeakyReLU) and 0.0 <= m.negative_slope <= 1.0:
            out.append(("leaky", np.float32(m.negative_slope)))
        else:
            raise TypeError(f"decode: {where} holds a {type(m).__name__}; agents/decode.py runs Linear and "
                            f"LeakyReLU layers only: update its numpy heads to the policy's")
    return out


def _run(layers: list[tuple], x: np.ndarray) -> np.ndarray:
    for layer in layers:
        if layer[0] == "linear":
            x = x @ layer[1]
            if layer[2] is not None:
                x = x + layer[2]
        else:  # LeakyReLU with a slope in [0, 1]: max(x, slope x)
            x = np.maximum(x, x * layer[1])
    return x


def _weight(m: torch.nn.Module | None) -> np.ndarray | None:
    """``W.T`` of a bias-free Linear as float32 numpy (None for None)."""
    return None if m is None else m.weight.detach().cpu().numpy().T.astype(np.float32).copy()


def _zscore(x: np.ndarray, axis: int) -> np.ndarray:
    """As ``agents.policy._zscore`` over every entry along ``axis``: float64 two-pass statistics
    (population std), the result in ``x``'s dtype."""
    x64 = x.astype(np.float64)
    count = float(max(x.shape[axis], 1))
    dx = x64 - x64.sum(axis, keepdims=True) / count
    var = (dx * dx).sum(axis, keepdims=True) / count
    return (dx / (np.sqrt(var) + _EPS)).astype(x.dtype)


def device_inputs_np(dfeat: np.ndarray, count: np.ndarray, load: np.ndarray) -> np.ndarray:
    """``agents.policy.device_inputs`` in numpy, all devices real: ``(K, D, 15)`` float32 from
    ``dfeat (K, D, 7)``, ``count (K, D)`` and ``load (K, D)``."""
    dfeat = np.maximum(dfeat, 0)
    est = dfeat[..., 4]
    rel_est = np.log1p(np.maximum(est - est.min(1, keepdims=True), 0))
    return np.concatenate(
        [np.log1p(dfeat), _zscore(dfeat[..., :5], 1), rel_est[..., None], count[..., None], load[..., None]], axis=-1
    ).astype(np.float32, copy=False)


def _soft_bound(x: np.ndarray, c: np.float32 | None) -> np.ndarray:
    """``c * tanh(x / c)`` (identity when ``c`` is None), as ``agents.policy.bound``."""
    return x if c is None else c * np.tanh(x / c)


def speed_terms(dfeat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(inv, mean)``: ``1 / relative speed`` ``(K, D)`` and its mean over the devices ``(K, 1)``
    (floored at ``_EPS``), from ``dfeat (K, D, 7)``; constant through a decode (static features)."""
    inv = 1.0 / np.maximum(dfeat[..., 5], _EPS)
    return inv, np.maximum(inv.mean(1, keepdims=True), _EPS)


def eft_gap_np(dfeat: np.ndarray, comp: np.ndarray,
               speed: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """``agents.policy.eft_gap`` in numpy, all devices real: ``(K, D)`` float32 from ``dfeat (K, D, 7)``
    and the selected ops' compute feature ``comp (K,)``; ``speed``: :func:`speed_terms` of ``dfeat``
    when the caller has them (the same values, computed once per decode)."""
    inv, mean = speed_terms(dfeat) if speed is None else speed
    comp = np.maximum(comp, 0)[:, None]
    eft = np.maximum(dfeat[..., 4], 0) + comp * inv / mean
    gap = (eft - eft.min(1, keepdims=True)) / np.maximum(comp, COMP_FLOOR)
    return np.minimum(np.maximum(gap, 0.0), EFT_GAP_CAP).astype(np.float32, copy=False)


class NumpyHeads:
    """The policy's SEL and PLC heads (and logit clip) in float32 numpy: a head call costs a few
    microseconds instead of the tens that torch's per-op dispatch adds, which is most of a decode
    step. Checked against the torch heads on random inputs when built (``RuntimeError`` if they
    disagree, e.g. after a change of the policy's architecture)."""

    def __init__(self, policy: torch.nn.Module) -> None:
        sel, plc = policy.sel_head, policy.plc_head
        self.sel_dyn = _weight(sel.dyn)
        self.sel_tail = _layers(sel.tail, "sel_head.tail")
        self.plc_dev, self.plc_rel = _weight(plc.dev), _weight(plc.rel)
        self.plc_query = _weight(plc.query)
        self.plc_tail = _layers(plc.tail, "plc_head.tail")
        self.sel_prior = None if sel.prior is None else np.float32(sel.prior.item())
        self.plc_prior = None if plc.prior is None else np.float32(plc.prior.item())
        self.residual_clip = None if plc.residual_clip is None else np.float32(plc.residual_clip)
        self.clip = None if policy.logit_clip is None else np.float32(policy.logit_clip)
        self._check(policy)

    def _bound(self, s: np.ndarray) -> np.ndarray:
        """The policy's ``residual_clip`` bound of the learned part of a score (``agents.policy.bound``)."""
        return _soft_bound(s, self.residual_clip)

    def _clip(self, s: np.ndarray) -> np.ndarray:
        return _soft_bound(s, self.clip)

    def sel(self, static: np.ndarray, dyn: np.ndarray) -> np.ndarray:
        """Clipped SEL scores ``(M,)`` from ``static (M, d)`` and ``dyn (M, N_SEL_INPUTS)``."""
        score = _run(self.sel_tail, static + dyn @ self.sel_dyn)[:, 0]
        if self.sel_prior is not None:
            score = self._bound(score) + self.sel_prior * dyn[:, 1]
        return self._clip(score)

    def plc(self, op_static: np.ndarray, devsum: np.ndarray, dev_in: np.ndarray,
            gap: np.ndarray | None = None) -> np.ndarray:
        """Clipped PLC scores ``(K, D)`` from ``op_static (K, d)``, ``devsum (K, D, d)``,
        ``dev_in (K, D, N_DEV_INPUTS)`` and, with the heuristic prior, ``gap (K, D)``
        (:func:`eft_gap_np`; every device real)."""
        rel = devsum - devsum.sum(1, keepdims=True) / np.float32(devsum.shape[1])
        if self.plc_prior is not None:
            dev_in = np.concatenate([dev_in, gap[..., None]], axis=-1)
        h = op_static[:, None, :] + devsum + rel @ self.plc_rel + dev_in @ self.plc_dev
        score = _run(self.plc_tail, h)[..., 0]
        if self.plc_query is not None:
            q = op_static @ self.plc_query
            score = score + (rel * q[:, None, :]).sum(-1) * np.float32(math.sqrt(rel.shape[-1]))
        if self.plc_prior is not None:
            score = self._bound(score) - self.plc_prior * gap
        return self._clip(score)

    def _check(self, policy: torch.nn.Module) -> None:
        from agents.policy import device_inputs, eft_gap

        g = torch.Generator().manual_seed(0)
        d = self.sel_dyn.shape[1]
        k, nd = 3, 5
        static, dyn = torch.randn(7, d, generator=g), torch.randn(7, self.sel_dyn.shape[0], generator=g)
        op, devsum = torch.randn(k, d, generator=g), torch.randn(k, nd, d, generator=g) * 0.1
        dfeat = torch.rand(k, nd, 7, generator=g)
        comp = torch.rand(k, generator=g) * 0.1
        count, load = torch.rand(k, nd, generator=g), torch.rand(k, nd, generator=g)
        valid = torch.ones(k, nd, dtype=torch.bool)
        c = policy.logit_clip

        def clip(x: torch.Tensor) -> torch.Tensor:  # DopplerPolicy's logit clip
            return x if c is None else c * torch.tanh(x / c)

        with torch.no_grad():
            dev_in = device_inputs(dfeat, valid, count, load)
            gap = eft_gap(dfeat, comp, valid)
            want_sel = clip(policy.sel_head(static, dyn)).numpy()
            want_plc = clip(policy.plc_head(op, devsum, dev_in, valid, gap)).numpy()
        got_in = device_inputs_np(dfeat.numpy(), count.numpy(), load.numpy())
        got_gap = eft_gap_np(dfeat.numpy(), comp.numpy())
        got_sel = self.sel(static.numpy(), dyn.numpy())
        got_plc = self.plc(op.numpy(), devsum.numpy(), got_in, got_gap)
        for name, got, want in (("device inputs", got_in, dev_in.numpy()), ("finish-time gap", got_gap, gap.numpy()),
                                ("SEL", got_sel, want_sel), ("PLC", got_plc, want_plc)):
            if got.shape != want.shape or not np.allclose(got, want, rtol=CHECK_RTOL, atol=CHECK_RTOL):
                raise RuntimeError(f"decode: the numpy {name} head disagrees with the policy's; agents/decode.py "
                                   f"must be updated to the policy's architecture")


def _check_policy(policy: object) -> None:
    from agents.policy import DopplerPolicy

    if not isinstance(policy, DopplerPolicy):
        raise TypeError(
            f"decode needs an agents.policy.DopplerPolicy, got {type(policy).__name__}; load one with "
            f"agents.pretrained.load_policy() or agents.training.load_policy(checkpoint, env)"
        )


TIME_CHECK_STEPS = 32  # a decode with a time limit projects its wall clock every this many steps


class DecodeTimeLimit(RuntimeError):
    """A decode stopped early: at its pace so far it would have run past its time limit.

    Attributes:
        projected: the whole decode's projected wall clock [s] (time so far / steps done x ops).
        limit: the limit it was given [s].
        steps: the steps it had done.
    """

    def __init__(self, projected: float, limit: float, steps: int) -> None:
        super().__init__(f"decode would take about {projected:.2f} s, over its limit of {limit:.2f} s "
                         f"(projected after {steps} steps)")
        self.projected, self.limit, self.steps = projected, limit, steps


def _check_time(started: float, step: int, n: int, time_limit: float | None) -> None:
    """Raise :class:`DecodeTimeLimit` when ``time_limit`` [s] is set and the decode's pace so far
    (``step`` of ``n`` steps since ``started``, ``time.perf_counter()``) projects past it; checked
    every :data:`TIME_CHECK_STEPS` steps."""
    if time_limit is None or step == 0 or step % TIME_CHECK_STEPS:
        return
    projected = (time.perf_counter() - started) * n / step
    if projected > time_limit:
        raise DecodeTimeLimit(projected, time_limit, step)


class DirectDecoder:
    """The static part of one instance under one policy, and the lockstep decode loop.

    Args:
        policy: a :class:`~agents.policy.DopplerPolicy` (any padding sizes: its weights do not
            depend on them).
        graph: the graph (a :class:`DataflowGraph`).
        topology: a :class:`Topology` or a device count.
        config: the simulator config (``None``: the graph's default), the one the env would use.
    """

    def __init__(
        self, policy: torch.nn.Module, graph: DataflowGraph, topology: Topology | int,
        config: SimConfig | None = None,
    ) -> None:
        _check_policy(policy)
        started = time.perf_counter()
        if not isinstance(graph, DataflowGraph):
            raise TypeError(f"DirectDecoder: graph must be a DataflowGraph, got {type(graph).__name__}")
        if graph.n_ops == 0:
            raise ValueError(f"DirectDecoder: graph {graph.name!r} has no ops; there is nothing to place")
        topology = resolve_topology(topology, "DirectDecoder: topology")
        config = default_config(graph) if config is None else config
        self.policy = policy
        self.ctx: GraphContext = instance_context(graph, topology, config)
        self.heads = NumpyHeads(policy)
        self._static()
        self.static_seconds = time.perf_counter() - started

    def _static(self) -> None:
        ctx, policy = self.ctx, self.policy
        ext = policy.features_extractor
        obs = static_observation(ctx, ctx.n_ops, max(ctx.n_edges, 1))
        obs_t = {k: torch.as_tensor(np.array(v), device=policy.device).float().unsqueeze(0) for k, v in obs.items()}
        with torch.no_grad():
            st = ext.static(obs_t)
        table = st.table[0].cpu().numpy()  # (n, 4d + 2) float32
        self.d = ext.head_dim
        self.sel_static = np.ascontiguousarray(table[:, ext.sel_slice])  # (n, d)
        self.plc_static = np.ascontiguousarray(table[:, ext.plc_op_slice])  # (n, d)
        self.sums_table = np.ascontiguousarray(table[:, ext.sums_slice])  # (n, 2d + 2): plc_dev | pool | comp | 1
        self.mean_comp = max(np.float32(st.table_mean[0, -2].item()), np.float32(_EPS))  # mean compute column
        self.op_features = obs["op_features"].astype(np.float32)  # (n, 5), as the env's observation
        self.device_static = ctx.device_static.astype(np.float32)  # (D, 2)

    # ------------------------------------------------------------------ decode
    def run(self, samples: int = 0, greedy: bool = True, seed: int = 0, time_limit: float | None = None) -> Decoded:
        """Decode ``greedy`` (row 0) plus ``samples`` sampled episodes, in lockstep (one episode:
        :meth:`_run_one`).

        Args:
            samples: sampled episodes [count].
            greedy: include the greedy episode as row 0.
            seed: seeds the sampled episodes (``numpy`` Gumbel noise).
            time_limit: ``None``, or a wall-clock limit [s]: every :data:`TIME_CHECK_STEPS` steps the
                decode projects its whole wall clock from its pace so far and raises
                :class:`DecodeTimeLimit` when that is over the limit (so it stops after about
                ``limit x steps done / n_ops`` seconds, not at the end).
        """
        started = time.perf_counter()
        if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 0:
            raise ValueError(f"decode: samples must be an integer >= 0, got {samples!r}")
        number = isinstance(time_limit, (int, float, np.integer, np.floating)) and not isinstance(time_limit, bool)
        if time_limit is not None and not (number and time_limit >= 0):
            raise ValueError(f"decode: time_limit must be None or a number of seconds >= 0, got {time_limit!r}")
        k = int(greedy) + int(samples)
        if k < 1:
            raise ValueError("decode: nothing to decode; give greedy=True and/or samples >= 1")
        if k == 1:
            return self._run_one(not greedy, np.random.default_rng(seed), started, time_limit)
        ctx, heads, d = self.ctx, self.heads, self.d
        n, nd = ctx.n_ops, ctx.n_devices
        f32 = np.float32
        rng = np.random.default_rng(seed)
        sampled = np.ones(k, bool)
        sampled[0] = not greedy
        succ, in_degree = ctx.succ, ctx.in_degree
        inv_scale = 1.0 / ctx.scale
        schedules = [EstimatedSchedule(ctx.graph, ctx.topology, ctx.config, time_model="fixed") for _ in range(k)]
        waiting = [in_degree.tolist() for _ in range(k)]
        sources = [v for v in range(n) if in_degree[v] == 0]
        ready = [set(sources) for _ in range(k)]
        orders = np.zeros((k, n), np.int64)
        probs = np.zeros((k, n, nd), f32)
        acc = np.zeros((k, nd, self.sums_table.shape[1]), f32)  # per-device sums of the table rows
        rows = np.arange(k)
        n_f = f32(n)
        dfeat = np.zeros((k, nd, 7), f32)
        dfeat[:, :, 5:] = self.device_static
        feats64, sel_static, plc_static = self.op_features.astype(np.float64), self.sel_static, self.plc_static
        sums_table = self.sums_table
        for step in range(n):
            _check_time(started, step, n, time_limit)
            # ---------------------------------------------------------------- SEL
            lists = [sorted(r) for r in ready]
            sizes = np.array([len(r) for r in lists])
            idx = np.fromiter((v for r in lists for v in r), np.int64, int(sizes.sum()))
            starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            seg = np.repeat(rows, sizes)
            x = feats64[idx]  # (M, 5), float64 statistics as agents.policy._zscore
            cnt = sizes.astype(np.float64)[:, None]
            dx = x - (np.add.reduceat(x, starts, axis=0) / cnt)[seg]
            var = np.add.reduceat(dx * dx, starts, axis=0) / cnt
            z = (dx / (np.sqrt(var)[seg] + _EPS)).astype(f32)
            frac = np.stack([np.full(k, f32(step) / n_f, f32), sizes.astype(f32) / n_f], 1)
            scores = heads.sel(sel_static[idx], np.concatenate([z, frac[seg]], 1))
            chosen = []
            for r in range(k):
                s = scores[starts[r] : starts[r] + sizes[r]]
                pick = int(np.argmax(s.astype(np.float64) + rng.gumbel(size=s.size))) if sampled[r] else _greedy(s)
                chosen.append(lists[r][pick])
            # ---------------------------------------------------------------- PLC
            ests = []
            for r, v in enumerate(chosen):
                feats = schedules[r].device_features(v)  # (D, 5) [internal time]
                ests.append(feats[:, 4])
                dfeat[r, :, :5] = feats * inv_scale
            sums = acc / n_f
            dev_in = device_inputs_np(dfeat, sums[:, :, -1], sums[:, :, -2] / self.mean_comp)
            v_arr = np.array(chosen)
            gap = eft_gap_np(dfeat, self.op_features[v_arr, 0]) if heads.plc_prior is not None else None
            plc = heads.plc(plc_static[v_arr], sums[:, :, :d], dev_in, gap)
            ex = np.exp(plc - plc.max(1, keepdims=True))
            probs[rows, v_arr] = ex / ex.sum(1, keepdims=True)
            for r, v in enumerate(chosen):
                dv = int(np.argmax(plc[r].astype(np.float64) + rng.gumbel(size=nd))) if sampled[r] else _greedy(plc[r])
                orders[r, step] = v
                schedules[r].place(v, dv, ests[r])
                acc[r, dv] += sums_table[v]
                rd, wt = ready[r], waiting[r]
                rd.discard(v)
                for s_op in succ[v]:
                    wt[s_op] -= 1
                    if wt[s_op] == 0:
                        rd.add(s_op)
        assignments = np.stack([es.device for es in schedules]).astype(np.int64)
        estimated = np.array([es.makespan for es in schedules]) / ctx.time_divisor
        return Decoded(assignments, orders, estimated, probs, bool(greedy), time.perf_counter() - started, 0.0)


    def _run_one(self, sampled: bool, rng: np.random.Generator, started: float,
                 time_limit: float | None = None) -> Decoded:
        """:meth:`run` for one episode (``K == 1``): the same operations on the same values, in the
        same order (so the same actions, bit for bit), without the lockstep batching (segment
        bookkeeping, per-row loops); the per-device sums are updated on the placed device only."""
        ctx, heads, d = self.ctx, self.heads, self.d
        n, nd = ctx.n_ops, ctx.n_devices
        f32 = np.float32
        succ, in_degree = ctx.succ, ctx.in_degree
        inv_scale = 1.0 / ctx.scale
        schedule = EstimatedSchedule(ctx.graph, ctx.topology, ctx.config, time_model="fixed")
        waiting = in_degree.tolist()
        ready = {v for v in range(n) if waiting[v] == 0}
        order = np.zeros(n, np.int64)
        plc_scores = np.zeros((n, nd), f32)  # each op's PLC scores; their softmax after the loop
        acc = np.zeros((1, nd, self.sums_table.shape[1]), f32)  # per-device sums of the table rows
        sums = acc / f32(n)  # acc / n, row dv refreshed when a placement changes acc[0, dv]
        n_f = f32(n)
        dfeat = np.zeros((1, nd, 7), f32)
        dfeat[:, :, 5:] = self.device_static
        feats64, sel_static, plc_static = self.op_features.astype(np.float64), self.sel_static, self.plc_static
        comp_feat = self.op_features[:, 0]
        speed = speed_terms(dfeat)
        sums_table, mean_comp = self.sums_table, self.mean_comp
        head0 = np.zeros(1, np.intp)  # one segment starting at row 0 (np.add.reduceat, as run's batched sums)
        step_f = np.arange(n, dtype=f32) / n_f  # (n,) placed share at each step, as f32(step) / n_f
        for step in range(n):
            _check_time(started, step, n, time_limit)
            # ---------------------------------------------------------------- SEL
            lst = sorted(ready)
            m = len(lst)
            idx = np.array(lst, np.int64)
            x = feats64[idx]  # (M, 5), float64 statistics as agents.policy._zscore
            cnt = float(m)
            dx = x - np.add.reduceat(x, head0, axis=0) / cnt
            var = np.add.reduceat(dx * dx, head0, axis=0) / cnt
            dyn = np.empty((m, 7), f32)
            dyn[:, :5] = dx / (np.sqrt(var) + _EPS)
            dyn[:, 5] = step_f[step]
            dyn[:, 6] = f32(m) / n_f
            scores = heads.sel(sel_static[idx], dyn)
            pick = int(np.argmax(scores.astype(np.float64) + rng.gumbel(size=m))) if sampled else _greedy(scores)
            v = lst[pick]
            # ---------------------------------------------------------------- PLC
            feats = schedule.device_features(v)  # (D, 5) [internal time]
            dfeat[0, :, :5] = feats * inv_scale
            dev_in = device_inputs_np(dfeat, sums[:, :, -1], sums[:, :, -2] / mean_comp)
            gap = eft_gap_np(dfeat, comp_feat[v : v + 1], speed) if heads.plc_prior is not None else None
            plc = heads.plc(plc_static[v : v + 1], sums[:, :, :d], dev_in, gap)
            plc_scores[v] = plc[0]
            dv = int(np.argmax(plc[0].astype(np.float64) + rng.gumbel(size=nd))) if sampled else _greedy(plc[0])
            order[step] = v
            schedule.place(v, dv, feats[:, 4])
            acc[0, dv] += sums_table[v]
            sums[0, dv] = acc[0, dv] / n_f
            ready.discard(v)
            for s_op in succ[v]:
                waiting[s_op] -= 1
                if waiting[s_op] == 0:
                    ready.add(s_op)
        ex = np.exp(plc_scores - plc_scores.max(1, keepdims=True))  # row-wise, as run's per-step softmax
        probs = (ex / ex.sum(1, keepdims=True))[None]
        estimated = np.array([schedule.makespan]) / ctx.time_divisor
        return Decoded(schedule.device[None].astype(np.int64), order[None], estimated, probs, not sampled,
                       time.perf_counter() - started, 0.0)


def decode(
    policy: torch.nn.Module,
    graph: DataflowGraph,
    topology: Topology | int = 4,
    config: SimConfig | None = None,
    *,
    samples: int = 0,
    greedy: bool = True,
    seed: int = 0,
) -> Decoded:
    """Greedy (row 0) and ``samples`` sampled decodes of ``policy`` on ``graph`` (module docstring).

    Same actions as stepping ``Doppler-Sim-v0`` (``graph``, ``topology``, ``sim_config=config``)
    with the policy's argmax (greedy), in ``O(n + E)`` bookkeeping plus the heads' work per step.

    Args:
        policy: a :class:`~agents.policy.DopplerPolicy`.
        graph: a :class:`DataflowGraph`.
        topology: a :class:`Topology`, a preset name or a device count.
        config: the simulator config (``None``: the graph's default).
        samples: sampled episodes besides the greedy one [count].
        greedy: include the greedy episode (row 0).
        seed: seeds the sampled episodes.

    Returns:
        :class:`Decoded` (``seconds`` includes the static part).
    """
    decoder = DirectDecoder(policy, graph, topology, config)
    out = decoder.run(samples=samples, greedy=greedy, seed=seed)
    return Decoded(out.assignments, out.orders, out.estimated, out.plc_probs, out.greedy,
                   out.seconds + decoder.static_seconds, decoder.static_seconds)
