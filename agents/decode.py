"""Direct decode of a :class:`~agents.policy.DopplerPolicy` on a graph of any size: greedy and sampled.

Stepping ``Doppler-Sim-v0`` costs ``O(n)`` per step (padded observations, the heads' per-device sums
as a ``(D + 1, N)`` matmul), so ``O(n^2)`` per episode. This module runs the same MDP (SEL a ready
op, PLC its device: one :class:`~doppler_gym.sim.placement_state.PlacementState` per episode, whose
estimated schedule gives the device features) without the env:

- the **static part** (GNN, critical-path sums, projection table) is computed once, through the
  policy's own :class:`~agents.embedding.StaticEncoder` on the env's static observation of the graph
  (:func:`~doppler_gym.envs.observation.static_observation`), so every static input feature the
  policy has is used as is;
- **per step** only the dynamic inputs are computed (:mod:`agents.features`, the policy's own
  definitions): SEL scores the ready ops (their 5 op features z-scored over the ready set, the placed
  and ready shares), PLC scores the devices from per-device sums of the projection table that are
  updated incrementally (one row added per placement) and the estimated schedule's device features
  of the selected op.

The heads are those of :meth:`DopplerExtractor.encode` and :meth:`DopplerPolicy._logits` in numpy
(:class:`NumpyHeads`; tested action for action against the env). Cost per episode: ``O(n + E)``
bookkeeping plus one head call per step over the ready ops (SEL) or the devices (PLC), i.e.
``O(sum of ready-set sizes)``; memory ``O(n (F + D))``. ``K`` episodes run in lockstep with one
batched head call per step; a single episode (``K == 1``, e.g. the greedy decode alone) runs on its
own loop without the batching bookkeeping, with the same operations on the same values (the same
actions, bit for bit).

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

from agents.features import EPS, device_inputs_np, eft_gap_np, sel_inputs_np, speed_terms_np
from doppler_gym.envs.context import GraphContext, build_context
from doppler_gym.envs.observation import static_observation
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.instances import default_config, resolve_topology
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.placement_state import PlacementState
from doppler_gym.topology.types import Topology

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


def _soft_bound(x: np.ndarray, c: np.float32 | None) -> np.ndarray:
    """``c * tanh(x / c)`` (identity when ``c`` is None), as ``agents.policy.bound``."""
    return x if c is None else c * np.tanh(x / c)


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
        (:func:`~agents.features.eft_gap_np`; every device real)."""
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
        """The heads on random inputs against the policy's torch heads (the same device inputs and
        gap fed to both; ``tests/agents/test_features.py`` checks the numpy features themselves)."""
        from agents.features import device_inputs, eft_gap

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
        got_sel = self.sel(static.numpy(), dyn.numpy())
        got_plc = self.plc(op.numpy(), devsum.numpy(), dev_in.numpy(), gap.numpy())
        for name, got, want in (("SEL", got_sel, want_sel), ("PLC", got_plc, want_plc)):
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
        config = default_config(graph, topology) if config is None else config
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
        self.mean_comp = max(np.float32(st.table_mean[0, -2].item()), np.float32(EPS))  # mean compute column
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
        return self._run_batch(k, greedy, np.random.default_rng(seed), started, time_limit)

    def _run_batch(self, k: int, greedy: bool, rng: np.random.Generator, started: float,
                   time_limit: float | None) -> Decoded:
        """:meth:`run` for ``k`` episodes in lockstep, row 0 greedy when ``greedy``: one
        :class:`PlacementState` per row, one batched head call per phase and step."""
        ctx, heads, d = self.ctx, self.heads, self.d
        n, nd = ctx.n_ops, ctx.n_devices
        f32 = np.float32
        sampled = np.ones(k, bool)
        sampled[0] = not greedy
        inv_scale = 1.0 / ctx.scale
        states = [PlacementState(ctx.graph, ctx.topology, ctx.config) for _ in range(k)]
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
            lists = [sorted(state.ready) for state in states]
            sizes = np.array([len(r) for r in lists])
            idx = np.fromiter((v for r in lists for v in r), np.int64, int(sizes.sum()))
            starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            seg = np.repeat(rows, sizes)
            placed = np.full(k, f32(step) / n_f, f32)
            dyn = sel_inputs_np(feats64[idx], starts, sizes.astype(np.float64)[:, None], placed,
                                sizes.astype(f32) / n_f, seg)
            scores = heads.sel(sel_static[idx], dyn)
            chosen = []
            for r in range(k):
                s = scores[starts[r] : starts[r] + sizes[r]]
                pick = int(np.argmax(s.astype(np.float64) + rng.gumbel(size=s.size))) if sampled[r] else _greedy(s)
                chosen.append(lists[r][pick])
            # ---------------------------------------------------------------- PLC
            for r, v in enumerate(chosen):
                dfeat[r, :, :5] = states[r].select(v) * inv_scale  # (D, 5) [internal time] / scale
            sums = acc / n_f
            dev_in = device_inputs_np(dfeat, sums[:, :, -1], sums[:, :, -2] / self.mean_comp)
            v_arr = np.array(chosen)
            gap = eft_gap_np(dfeat, self.op_features[v_arr, 0]) if heads.plc_prior is not None else None
            plc = heads.plc(plc_static[v_arr], sums[:, :, :d], dev_in, gap)
            ex = np.exp(plc - plc.max(1, keepdims=True))
            probs[rows, v_arr] = ex / ex.sum(1, keepdims=True)
            for r, v in enumerate(chosen):
                dv = int(np.argmax(plc[r].astype(np.float64) + rng.gumbel(size=nd))) if sampled[r] else _greedy(plc[r])
                states[r].place(dv)
                acc[r, dv] += sums_table[v]
        assignments = np.stack([state.assignment for state in states])
        orders = np.stack([state.order for state in states])
        estimated = np.array([state.makespan for state in states]) / ctx.time_divisor
        return Decoded(assignments, orders, estimated, probs, bool(greedy), time.perf_counter() - started, 0.0)

    def _run_one(self, sampled: bool, rng: np.random.Generator, started: float,
                 time_limit: float | None = None) -> Decoded:
        """:meth:`run` for one episode (``K == 1``): the same operations on the same values as
        :meth:`_run_batch`, in the same order (so the same actions, bit for bit), on one
        :class:`PlacementState`; the per-device sums are updated on the placed device only. It stays
        a loop of its own for speed: :meth:`_run_batch` at K = 1 (segment bookkeeping, per-row loops)
        takes about 1.7 times its CPU time, for the same actions."""
        ctx, heads, d = self.ctx, self.heads, self.d
        n, nd = ctx.n_ops, ctx.n_devices
        f32 = np.float32
        inv_scale = 1.0 / ctx.scale
        state = PlacementState(ctx.graph, ctx.topology, ctx.config)
        plc_scores = np.zeros((n, nd), f32)  # each op's PLC scores; their softmax after the loop
        acc = np.zeros((1, nd, self.sums_table.shape[1]), f32)  # per-device sums of the table rows
        sums = acc / f32(n)  # acc / n, row dv refreshed when a placement changes acc[0, dv]
        n_f = f32(n)
        dfeat = np.zeros((1, nd, 7), f32)
        dfeat[:, :, 5:] = self.device_static
        feats64, sel_static, plc_static = self.op_features.astype(np.float64), self.sel_static, self.plc_static
        comp_feat = self.op_features[:, 0]
        speed = speed_terms_np(dfeat)
        sums_table, mean_comp = self.sums_table, self.mean_comp
        head0 = np.zeros(1, np.intp)  # one segment starting at row 0 (np.add.reduceat, as the batch's sums)
        step_f = np.arange(n, dtype=f32) / n_f  # (n,) placed share at each step, as f32(step) / n_f
        for step in range(n):
            _check_time(started, step, n, time_limit)
            # ---------------------------------------------------------------- SEL
            lst = sorted(state.ready)
            m = len(lst)
            idx = np.array(lst, np.int64)
            dyn = sel_inputs_np(feats64[idx], head0, float(m), step_f[step], f32(m) / n_f)
            scores = heads.sel(sel_static[idx], dyn)
            pick = int(np.argmax(scores.astype(np.float64) + rng.gumbel(size=m))) if sampled else _greedy(scores)
            v = lst[pick]
            # ---------------------------------------------------------------- PLC
            dfeat[0, :, :5] = state.select(v) * inv_scale  # (D, 5) [internal time] / scale
            dev_in = device_inputs_np(dfeat, sums[:, :, -1], sums[:, :, -2] / mean_comp)
            gap = eft_gap_np(dfeat, comp_feat[v : v + 1], speed) if heads.plc_prior is not None else None
            plc = heads.plc(plc_static[v : v + 1], sums[:, :, :d], dev_in, gap)
            plc_scores[v] = plc[0]
            dv = int(np.argmax(plc[0].astype(np.float64) + rng.gumbel(size=nd))) if sampled else _greedy(plc[0])
            state.place(dv)
            acc[0, dv] += sums_table[v]
            sums[0, dv] = acc[0, dv] / n_f
        ex = np.exp(plc_scores - plc_scores.max(1, keepdims=True))  # row-wise, as the batch's per-step softmax
        probs = (ex / ex.sum(1, keepdims=True))[None]
        estimated = np.array([state.makespan]) / ctx.time_divisor
        return Decoded(state.assignment[None], state.order[None], estimated, probs, not sampled,
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
