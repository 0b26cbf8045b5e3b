"""DOPPLER's dual policy (SEL + PLC) as an sb3-contrib ``MaskableActorCriticPolicy``.

One network scores both phases of ``Doppler-Sim-v0`` (``Discrete(max_ops + max_devices)``):

- **static part**, once per distinct graph (:class:`~agents.embedding.StaticEncoder`): GINE
  embeddings ``H`` of the ops on the bidirected graph, their critical-path context ``P_b @ H`` and
  ``P_t @ H`` (sums over each op's longest path to an exit / from an entry, rows = op ids), and a
  per-op projection table that the heads read. Cached per graph while collecting rollouts, computed
  once per graph (with gradients) per training minibatch.
- **SEL head** (SEL phase): one scorer shared across ops, run on the ready ops only:
  ``MLP(static_sel[v] + W [zscore_ready(x_v), frac_placed, frac_ready])`` where ``static_sel`` is a
  projection of ``[H_v, LN(bsum_v), LN(tsum_v), x_v]`` (computed with the static part: the first
  layer is split into its static and dynamic halves) and ``zscore_ready`` z-scores the 5 op features
  over the ready ops (DOPPLER's candidate normalisation: "largest b-level among the candidates" is
  one feature away).
- **PLC head** (PLC phase): one scorer shared across devices: ``MLP(static_plc[v*] + devsum_d +
  R (devsum_d - mean_d devsum) + W dev_in_d)`` for the selected op ``v*``. ``devsum_d`` is the SUM
  of the (projected) static embeddings of the ops already on device ``d`` (``op_device``), divided
  by ``n_ops`` so that its scale does not grow with the graph; ``dev_in_d`` holds the 7 device
  features (log1p), the 5 dynamic ones z-scored across the devices (DOPPLER), log1p of the earliest
  start minus its minimum over the devices, and the share of the ops and of the compute already on
  ``d``. No parameter depends on the number of devices (or ops, or edges), so a 4-device policy
  runs on 8 devices (:meth:`DopplerPolicy.transfer_to`, :func:`transfer_objects`).
- **value head**: ``MLP([mean_v pool_v, mean over placed ops pool_v, pool_{v*}, frac_placed,
  frac_ready, phase, 1/n_devices, D * max load, D * std load])`` on the extractor's flat features
  (pooled graph and placed-op embeddings, device-load balance).

SEL logits go to slots ``[0, max_ops)`` in the SEL phase and PLC logits to ``[max_ops, max_ops +
max_devices)`` in the PLC phase; every other slot (non-candidate ops, the other phase, padding)
holds ``NEG`` (-1e8). The env's action mask (``action_masks`` from MaskablePPO, else
``obs["action_mask"]``, so ``predict`` without masks is safe too) is applied by a
``MaskableCategorical``.

The heads' dynamic inputs (SEL inputs, device inputs, finish-time gap) are defined in
:mod:`agents.features`, beside the numpy versions the direct decoder (:mod:`agents.decode`) runs.

Per-step cost: the GNN never runs per step. While collecting rollouts (no grad) the static part
comes from the cache; the heads are vectorised over the batch (SEL on the ready ops only, PLC on
``D`` devices, all per-device sums one matmul). See ``benchmarks/bench_policy.py``.

Usage::

    from sb3_contrib import MaskablePPO
    from agents.policy import DopplerPolicy
    model = MaskablePPO(DopplerPolicy, venv, policy_kwargs=dict(hidden_dim=64, n_layers=4, head_dim=64))
    logits = model.policy.action_logits(obs)            # (B, max_ops + max_devices), for imitation
    policy8 = model.policy.transfer_to(env8)             # same weights, 8-device spaces
    model8 = MaskablePPO.load(path, env=venv8, custom_objects=transfer_objects(venv8))  # a 4-device zip
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.distributions import MaskableCategorical, MaskableDistribution
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.preprocessing import preprocess_obs
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.type_aliases import Schedule
from torch import nn
from torch.distributions import Distribution
from torch.nn import functional as F

from agents.embedding import StaticBatch, StaticEncoder
from agents.features import EPS, N_DEV_INPUTS, N_SEL_INPUTS, device_inputs, eft_gap, sel_inputs

NEG = -1e8  # logit of padding slots and of the inactive phase's slots
REQUIRED_KEYS = (
    "op_features",
    "op_state",
    "op_device",
    "edge_index",
    "edge_attr",
    "n_ops",
    "n_edges",
    "n_devices",
    "device_features",
    "phase",
    "selected_op",
    "graph_id",
    "action_mask",
)
N_VALUE_SCALARS = 6
DEFAULTS = {"hidden_dim": 64, "n_layers": 4, "head_dim": 64, "cache_size": 64, "id_features": 0,
            "structure_features": 0}
LOGIT_CLIP = 10.0  # DopplerPolicy's default bound on the SEL and PLC scores
PRIOR_INIT = 2.0  # initial weight of the heuristic prior terms (heuristic_prior=True)


@dataclass
class Encoding:
    """What the heads read, for a batch of ``B`` padded observations (``N`` ops, ``D`` devices).

    Attributes:
        static: the per-graph static part (:class:`~agents.embedding.StaticBatch`).
        value_features: ``(B, features_dim)`` the extractor's flat output (value-head input).
        devsum: ``(B, D, d)`` per-device sum of the placed ops' PLC projections / n_ops.
        count: ``(B, D)`` share of the ops placed on each device.
        load: ``(B, D)`` share of the graph's compute placed on each device.
        dev_valid: ``(B, D) bool`` real devices.
        ready: ``(B, N) bool`` ready ops.
        frac: ``(B, 2)`` placed and ready share of the ops.
        phase: ``(B,) int64``; selected: ``(B,) int64`` (0 in SEL).
    """

    static: StaticBatch
    value_features: th.Tensor
    devsum: th.Tensor
    count: th.Tensor
    load: th.Tensor
    dev_valid: th.Tensor
    ready: th.Tensor
    frac: th.Tensor
    phase: th.Tensor
    selected: th.Tensor


class DopplerExtractor(BaseFeaturesExtractor):
    """Features extractor of :class:`DopplerPolicy` (usable alone with any SB3 policy too).

    ``forward(obs)`` returns ``(B, features_dim)`` flat per-sample features (pooled graph, placed-op
    and selected-op embeddings plus progress and load-balance scalars); :meth:`encode` returns the
    full :class:`Encoding` the dual heads read.

    Args:
        observation_space: ``Doppler-Sim-v0``'s ``Dict`` space.
        hidden_dim: GNN width.
        n_layers: GNN layers.
        head_dim: width ``d`` of the heads (the projection table holds 4 slices of ``d``).
        cache_size: graphs kept in the embedding cache.
        id_features: width of the fixed random op-identity inputs of the GNN (0 = none; see
            :class:`~agents.embedding.StaticEncoder`).
        structure_features: 1 = append the structural op features of :mod:`agents.structure` to
            the GNN inputs (0 = none; see :class:`~agents.embedding.StaticEncoder`).
    """

    def __init__(
        self,
        observation_space: spaces.Dict,
        hidden_dim: int = 64,
        n_layers: int = 4,
        head_dim: int = 64,
        cache_size: int = 64,
        id_features: int = 0,
        structure_features: int = 0,
    ) -> None:
        if not isinstance(observation_space, spaces.Dict) or not set(REQUIRED_KEYS) <= set(
            observation_space.spaces
        ):
            have = (
                sorted(observation_space.spaces)
                if isinstance(observation_space, spaces.Dict)
                else observation_space
            )
            raise ValueError(
                f"DopplerExtractor needs Doppler-Sim-v0's Dict observation with keys {REQUIRED_KEYS}; "
                f"got {have}. Use it on gym.make('Doppler-Sim-v0', ...) (or a wrapper that keeps its observation)."
            )
        super().__init__(observation_space, features_dim=3 * head_dim + N_VALUE_SCALARS)
        self.hidden_dim, self.n_layers, self.head_dim = int(hidden_dim), int(n_layers), int(head_dim)
        self.static = StaticEncoder(
            hidden_dim, n_layers, proj_dim=4 * head_dim, cache_size=cache_size, id_features=id_features,
            structure=bool(structure_features),
        )
        d = self.head_dim
        # slices of the projection table: SEL | PLC (selected op) | PLC (device sums) | value pool | comp, 1
        self.sel_slice, self.plc_op_slice = slice(0, d), slice(d, 2 * d)
        self.sums_slice = slice(2 * d, 4 * d + 2)  # what is summed per device / over placed ops
        self._aranges: dict[tuple[int, str], th.Tensor] = {}

    def clear_cache(self) -> None:
        """Forget the cached static embeddings (they also refresh by themselves when weights change)."""
        self.static.clear_cache()

    def forward(self, observations: dict[str, th.Tensor]) -> th.Tensor:
        return self.encode(observations).value_features

    def _arange(self, n: int, device: th.device) -> th.Tensor:
        key = (n, str(device))
        ar = self._aranges.get(key)
        if ar is None:
            ar = self._aranges[key] = th.arange(n, dtype=th.float32, device=device)
        return ar

    def encode(self, obs: dict[str, th.Tensor]) -> Encoding:
        """Everything the heads need, from a batch of (float) observation tensors."""
        st = self.static(obs)
        table, group = st.table, st.group
        op_state, dfeat = obs["op_state"], obs["device_features"]
        b, _n, nd = op_state.shape[0], op_state.shape[1], dfeat.shape[1]
        dt, d = table.dtype, self.head_dim
        meta = th.cat([obs["n_ops"], obs["n_devices"], obs["phase"], obs["selected_op"]], 1)  # (B, 4) float
        n_ops, n_dev = meta[:, 0].clamp_min(1.0), meta[:, 1].clamp_min(1.0)
        phase = meta[:, 2].round().long()
        selected = meta[:, 3].clamp_min(0.0).round().long()
        placed, ready = op_state[..., 0], op_state[..., 1] > 0.5
        ar = self._arange(nd, op_state.device)
        dev_valid = ar < n_dev.unsqueeze(1)

        # one (B, D + 1, N) 0/1 matrix: device rows (op on device d) and a last row (op placed);
        # times the table's [plc_dev | pool | comp | 1] columns it gives every per-device and
        # placed-op sum at once (a matmul, no per-op gather); / n_ops
        member = th.cat(
            [(obs["op_device"].unsqueeze(1) == ar.view(1, nd, 1)).to(dt), placed.unsqueeze(1).to(dt)], 1
        )
        sums_table = table[..., self.sums_slice]  # (K, N, 2d + 2)
        if sums_table.shape[0] == 1:
            sums = th.matmul(member, sums_table[0])
        else:
            sums = th.bmm(member, sums_table.index_select(0, group))
        sums = sums / n_ops.view(b, 1, 1)  # (B, D + 1, 2d + 2)
        mean = st.table_mean if st.table_mean.shape[0] == 1 else st.table_mean.index_select(0, group)
        devsum = sums[:, :nd, :d]
        load = sums[:, :nd, -2] / mean[:, -2:-1].clamp_min(EPS)  # share of the graph's compute
        count = sums[:, :nd, -1]  # share of the ops
        frac_placed = sums[:, nd, -1]
        placed_pool = sums[:, nd, d : 2 * d] / frac_placed.clamp_min(EPS).unsqueeze(1)
        frac = th.stack([frac_placed, ready.sum(1) / n_ops], dim=1)

        # value features: pooled graph, placed ops and selected op; progress and load balance
        is_plc = (phase == 1).to(dt).unsqueeze(1)
        sel_pool = table[group, selected, 3 * d : 4 * d] * is_plc
        mean_load = load.sum(1, keepdim=True) / n_dev.unsqueeze(1)
        std_load = (((load - mean_load) * dev_valid) ** 2).sum(1) / n_dev
        scalars = th.stack(
            [
                frac_placed,
                frac[:, 1],
                is_plc[:, 0],
                1.0 / n_dev,
                load.max(1).values * n_dev,
                std_load.sqrt() * n_dev,
            ],
            dim=1,
        )
        graph_pool = mean[:, 3 * d : 4 * d].expand(b, d)
        value_features = th.cat([graph_pool, placed_pool, sel_pool, scalars], dim=1)
        return Encoding(st, value_features, devsum, count, load, dev_valid, ready, frac, phase, selected)


class _MaskedCategorical(MaskableCategorical):
    """``MaskableCategorical`` built in one pass: the mask applied once and the logits normalised
    with ``log_softmax`` (``logsumexp`` is ~10x slower on CPU when masked logits of -1e8 underflow),
    without argument validation. Same attributes (``masks``, ``_original_logits``) and methods."""

    def __init__(self, logits: th.Tensor, masks: th.Tensor) -> None:
        self.masks = masks
        self._original_logits = logits
        masked = th.where(masks, logits, th.tensor(NEG, dtype=logits.dtype, device=logits.device))
        self.logits = F.log_softmax(masked, dim=-1)
        self._param = self.logits
        self._num_events = logits.shape[-1]
        Distribution.__init__(self, logits.shape[:-1], validate_args=False)


def bound(x: th.Tensor, c: float | None) -> th.Tensor:
    """``c * tanh(x / c)`` (identity when ``c`` is None): a soft bound to ``(-c, c)``."""
    return x if c is None else c * th.tanh(x / c)


def _mlp_tail(d: int) -> nn.Sequential:
    """``act -> Linear(d, d) -> act -> Linear(d, 1)``: the rest of a scorer after its first layer."""
    return nn.Sequential(nn.LeakyReLU(0.1), nn.Linear(d, d), nn.LeakyReLU(0.1), nn.Linear(d, 1))


class SelHead(nn.Module):
    """SEL scorer, shared across ops (its first layer's static half lives in the projection table).

    With ``prior``, a learned scalar ``prior`` (initially :data:`PRIOR_INIT`) times the op's b-level
    z-scored over the ready ops (``dyn[:, 1]``) is added: at initialisation the greedy SEL is the
    critical-path (largest b-level) rule, which the MLP learns to correct; ``residual_clip`` ``c``
    bounds the correction to ``(-c, c)`` (:func:`bound`), so that it can reorder only ops whose
    prior scores are within ``2c`` of each other.

    Shapes:
        static: ``(R, d)``; dyn: ``(R, N_SEL_INPUTS)``; returns ``(R,)`` (one row per scored op).
    """

    def __init__(self, d: int, prior: bool = False, residual_clip: float | None = None) -> None:
        super().__init__()
        self.dyn = nn.Linear(N_SEL_INPUTS, d, bias=False)
        self.tail = _mlp_tail(d)
        self.prior = nn.Parameter(th.tensor(PRIOR_INIT)) if prior else None
        self.residual_clip = residual_clip if prior else None

    def forward(self, static: th.Tensor, dyn: th.Tensor) -> th.Tensor:
        score = self.tail(static + self.dyn(dyn)).squeeze(-1)
        if self.prior is None:
            return score
        return bound(score, self.residual_clip) + self.prior * dyn[:, 1]


class PlcHead(nn.Module):
    """PLC scorer, shared across devices.

    ``MLP(op + devsum_d + R (devsum_d - mean devsum) + W dev_in_d)``, plus with ``affinity`` the
    bilinear term ``(Q op) . (devsum_d - mean devsum)``: since ``devsum_d`` sums the ops on ``d``,
    it is the selected op's summed pairwise affinity ``sum_u q_v . u`` to the ops already on ``d``,
    relative to the other devices (a pointer-style match that an additive MLP only approximates:
    "put me with my kin").

    With ``prior``, the device's finish-time gap :func:`eft_gap` is one more device input and
    ``-prior * gap`` is added (a learned scalar, initially :data:`PRIOR_INIT`): at initialisation the
    greedy PLC is the earliest-finish-time (HEFT) rule, which the MLP learns to correct. Both priors
    are scale-free, so they carry over to graphs, sizes and topologies never trained on.
    ``residual_clip`` ``c`` bounds the learned part (MLP and affinity) to ``(-c, c)``: it can then
    only choose among devices whose finish-time gaps are within ``2c / prior`` op durations of the best.

    Shapes:
        op_static: ``(b, d)``; devsum: ``(b, D, d)``; dev_in: ``(b, D, N_DEV_INPUTS)``;
        dev_valid: ``(b, D) bool``; gap: ``(b, D)`` (required with ``prior``); returns ``(b, D)``.
    """

    def __init__(self, d: int, affinity: bool = False, prior: bool = False,
                 residual_clip: float | None = None) -> None:
        super().__init__()
        self.dev = nn.Linear(N_DEV_INPUTS + int(prior), d, bias=False)
        self.rel = nn.Linear(d, d, bias=False)
        self.tail = _mlp_tail(d)
        self.query = nn.Linear(d, d, bias=False) if affinity else None
        self.prior = nn.Parameter(th.tensor(PRIOR_INIT)) if prior else None
        self.residual_clip = residual_clip if prior else None

    def forward(
        self, op_static: th.Tensor, devsum: th.Tensor, dev_in: th.Tensor, dev_valid: th.Tensor,
        gap: th.Tensor | None = None,
    ) -> th.Tensor:
        m = dev_valid.unsqueeze(-1).to(devsum.dtype)
        mean = (devsum * m).sum(1, keepdim=True) / m.sum(1, keepdim=True).clamp_min(1.0)
        rel = (devsum - mean) * m
        if self.prior is not None:
            if gap is None:
                raise ValueError("PlcHead with prior=True needs the finish-time gap (agents.policy.eft_gap)")
            dev_in = th.cat([dev_in, gap.unsqueeze(-1)], dim=-1)
        h = op_static.unsqueeze(1) + devsum + self.rel(rel) + self.dev(dev_in)
        score = self.tail(h).squeeze(-1)
        if self.query is not None:
            score = score + (rel * self.query(op_static).unsqueeze(1)).sum(-1) * math.sqrt(rel.shape[-1])
        if self.prior is not None:
            score = bound(score, self.residual_clip) - self.prior * gap
        return score


class DopplerPolicy(MaskableActorCriticPolicy):
    """DOPPLER's dual SEL/PLC policy with a shared GNN encoder, for ``MaskablePPO``.

    Args:
        observation_space: ``Doppler-Sim-v0``'s ``Dict`` space (any padding sizes).
        action_space: ``Discrete(max_ops + max_devices)``.
        lr_schedule: learning-rate schedule (given by the algorithm).
        hidden_dim: GNN width (default 64).
        n_layers: GNN layers (default 4).
        head_dim: width of the SEL/PLC/value heads (default 64).
        cache_size: graphs kept in the rollout embedding cache (default 64).
        id_features: width of fixed random op-identity inputs of the GNN (default 0 = none): with
            them the policy can give ops of identical costs and structure different devices.
        structure_features: 1 (or True) = structural op inputs of the GNN (:mod:`agents.structure`:
            depth, level, critical-path position, degrees, ...), which carry over to unseen graphs;
            default 0 = none.
        ortho_init: orthogonal init (gain sqrt(2), logits 0.01, value 1) of the heads.
        logit_clip: scores are squashed to ``logit_clip * tanh(score / logit_clip)`` (Bello et al.,
            "Neural combinatorial optimization with reinforcement learning", 2016; Kool et al.,
            ICLR 2019: C = 10); ``None`` = raw scores. Unbounded, imitation on the critical-path
            teacher drove them to 1e3-1e4 (top-two gaps in the thousands on paper/ffnn): a
            softmax that samples its argmax, so RL saw no other action and got no gradient.
        plc_affinity: add the PLC head's bilinear affinity term between the selected op and the
            ops already on each device (:class:`PlcHead`); default off.
        heuristic_prior: add learned-weight heuristic terms to the scores (:class:`SelHead`,
            :class:`PlcHead`): the b-level (critical-path rule) to SEL and the finish-time gap
            (HEFT's rule) to PLC, so that the untrained greedy decode is a list scheduler and
            training learns corrections; default off.
        residual_clip: with ``heuristic_prior``, bound the learned part of each score to
            ``(-residual_clip, residual_clip)`` (a correction of the heuristic among its near-ties,
            which cannot stray far from it on graphs unlike the training ones); default None = unbounded.
        optimizer_class, optimizer_kwargs: as in SB3 (Adam with eps=1e-5 by default).
        features_extractor_kwargs: alternative way to give the four sizes above (what SB3 saves).
        net_arch, activation_fn, features_extractor_class, share_features_extractor,
            normalize_images: accepted for SB3 compatibility and ignored (the architecture is fixed;
            the extractor is always :class:`DopplerExtractor`, shared by actor and critic).

    The parameters do not depend on ``max_ops``, ``max_edges`` or ``max_devices``: see
    :meth:`transfer_to` and :func:`transfer_objects`.
    """

    features_extractor: DopplerExtractor

    def __init__(
        self,
        observation_space: spaces.Dict,
        action_space: spaces.Discrete,
        lr_schedule: Schedule,
        hidden_dim: int | None = None,
        n_layers: int | None = None,
        head_dim: int | None = None,
        cache_size: int | None = None,
        id_features: int | None = None,
        structure_features: int | bool | None = None,
        ortho_init: bool = True,
        logit_clip: float | None = LOGIT_CLIP,
        plc_affinity: bool = False,
        heuristic_prior: bool = False,
        residual_clip: float | None = None,
        optimizer_class: type[th.optim.Optimizer] = th.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
        features_extractor_kwargs: dict[str, Any] | None = None,
        net_arch: Any = None,
        activation_fn: Any = None,
        features_extractor_class: Any = None,
        share_features_extractor: bool = True,
        normalize_images: bool = False,
    ) -> None:
        if not isinstance(action_space, spaces.Discrete):
            raise TypeError(
                f"DopplerPolicy needs a Discrete(max_ops + max_devices) action space, got {action_space}"
            )
        kwargs = dict(DEFAULTS)
        kwargs.update({k: v for k, v in (features_extractor_kwargs or {}).items() if k in DEFAULTS})
        given = {
            "hidden_dim": hidden_dim,
            "n_layers": n_layers,
            "head_dim": head_dim,
            "cache_size": cache_size,
            "id_features": id_features,
            "structure_features": structure_features,
        }
        kwargs.update({k: int(v) for k, v in given.items() if v is not None})
        if logit_clip is not None and not logit_clip > 0:
            raise ValueError(f"DopplerPolicy: logit_clip must be > 0 or None, got {logit_clip}")
        self.logit_clip = None if logit_clip is None else float(logit_clip)
        self.plc_affinity = bool(plc_affinity)
        self.heuristic_prior = bool(heuristic_prior)
        if residual_clip is not None and not residual_clip > 0:
            raise ValueError(f"DopplerPolicy: residual_clip must be > 0 or None, got {residual_clip}")
        self.residual_clip = None if residual_clip is None else float(residual_clip)
        if optimizer_kwargs is None and optimizer_class is th.optim.Adam:
            optimizer_kwargs = {"eps": 1e-5, "foreach": True}  # SB3's eps; foreach: one fused step
        n_pad = observation_space["op_features"].shape[0] + observation_space["device_features"].shape[0]
        if action_space.n != n_pad:
            raise ValueError(
                f"DopplerPolicy: action space Discrete({action_space.n}) does not match the observation's "
                f"max_ops + max_devices = {n_pad}; build the policy from one env's spaces"
            )
        super().__init__(
            observation_space,
            action_space,
            lr_schedule,
            net_arch=[],
            activation_fn=nn.LeakyReLU,
            ortho_init=ortho_init,
            features_extractor_class=DopplerExtractor,
            features_extractor_kwargs=kwargs,
            share_features_extractor=True,
            normalize_images=False,
            optimizer_class=optimizer_class,
            optimizer_kwargs=optimizer_kwargs,
        )

    # ---------------------------------------------------------------- construction
    def _build(self, lr_schedule: Schedule) -> None:
        ext = self.features_extractor
        d = ext.head_dim
        self.sel_head = SelHead(d, prior=self.heuristic_prior, residual_clip=self.residual_clip)
        self.plc_head = PlcHead(d, affinity=self.plc_affinity, prior=self.heuristic_prior,
                                residual_clip=self.residual_clip)
        self.value_net = nn.Sequential(
            nn.Linear(ext.features_dim, 2 * d),
            nn.LeakyReLU(0.1),
            nn.Linear(2 * d, d),
            nn.LeakyReLU(0.1),
            nn.Linear(d, 1),
        )
        if self.ortho_init:
            for module in (self.sel_head, self.plc_head, self.value_net, ext.static.proj):
                module.apply(partial(self.init_weights, gain=np.sqrt(2)))
            self.init_weights(self.sel_head.tail[-1], gain=0.01)
            self.init_weights(self.plc_head.tail[-1], gain=0.01)
            self.init_weights(self.value_net[-1], gain=1.0)
        if self.heuristic_prior:  # a residual policy: the scores start as the heuristic's (the MLPs add 0)
            with th.no_grad():
                for head in (self.sel_head, self.plc_head):
                    head.tail[-1].weight.zero_()
                    head.tail[-1].bias.zero_()
                if self.plc_head.query is not None:
                    self.plc_head.query.weight.zero_()
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        for key in ("net_arch", "activation_fn", "features_extractor_class"):
            data.pop(key, None)
        data["logit_clip"] = self.logit_clip
        data["plc_affinity"] = self.plc_affinity
        data["heuristic_prior"] = self.heuristic_prior
        data["residual_clip"] = self.residual_clip
        return data

    def _clip(self, scores: th.Tensor) -> th.Tensor:
        """``logit_clip * tanh(scores / logit_clip)`` (identity when ``logit_clip`` is None)."""
        return bound(scores, self.logit_clip)

    def transfer_to(
        self, env_or_space: gym.Env | spaces.Dict, action_space: spaces.Discrete | None = None
    ) -> DopplerPolicy:
        """A copy of this policy for another env's spaces (other ``max_ops``/``max_edges``/
        ``max_devices``, e.g. 4 -> 8 devices), with the same weights (no parameter depends on them)
        and the same optimiser state and learning rate.

        Args:
            env_or_space: an env / VecEnv (its spaces are used) or an observation space.
            action_space: the action space when an observation space is given.
        """
        if isinstance(env_or_space, spaces.Dict):
            obs_space = env_or_space
            if action_space is None:
                n = obs_space["op_features"].shape[0] + obs_space["device_features"].shape[0]
                action_space = spaces.Discrete(n)
        else:
            obs_space, action_space = env_or_space.observation_space, env_or_space.action_space
        data = self._get_constructor_parameters()
        lr = self.optimizer.param_groups[0]["lr"]
        data.update(observation_space=obs_space, action_space=action_space, lr_schedule=lambda _: lr)
        policy = type(self)(**data).to(self.device)
        policy.load_state_dict(self.state_dict())
        policy.optimizer.load_state_dict(self.optimizer.state_dict())
        return policy

    # ---------------------------------------------------------------- heads
    def _obs(self, obs: Any) -> dict[str, th.Tensor]:
        """Float tensors from an observation batch (SB3 already preprocesses; numpy is accepted)."""
        if isinstance(obs, dict) and obs and not isinstance(next(iter(obs.values())), th.Tensor):
            obs, _ = self.obs_to_tensor(obs)
        return preprocess_obs(obs, self.observation_space, normalize_images=False)  # type: ignore[return-value]

    def _logits(self, enc: Encoding, obs: dict[str, th.Tensor], score_all: bool = False) -> th.Tensor:
        ext = self.features_extractor
        st = enc.static
        b, n = enc.ready.shape
        nd = enc.dev_valid.shape[1]
        dev, dt = enc.ready.device, st.table.dtype
        is_sel = enc.phase == 0
        # SEL: score the ready ops of SEL-phase rows (all real ops with score_all)
        if score_all:
            cand = is_sel.unsqueeze(1) & (th.arange(n, device=dev) < obs["n_ops"].reshape(b, 1))
        else:
            cand = enc.ready & is_sel.unsqueeze(1)
        si, vi = cand.nonzero(as_tuple=True)
        sel_full = th.full((b, n), NEG, device=dev, dtype=dt)
        if si.numel():
            dyn = sel_inputs(obs["op_features"], enc.ready, enc.frac, si, vi)
            static = st.table[..., ext.sel_slice][st.group[si], vi]
            sel_full = sel_full.index_put((si, vi), self._clip(self.sel_head(static, dyn)))
        # PLC: score every device of PLC-phase rows
        pi = (~is_sel).nonzero(as_tuple=True)[0]
        plc_full = th.full((b, nd), NEG, device=dev, dtype=dt)
        if pi.numel():
            valid = enc.dev_valid[pi]
            op_static = st.table[..., ext.plc_op_slice][st.group[pi], enc.selected[pi]]
            dfeat = obs["device_features"][pi]
            dev_in = device_inputs(dfeat, valid, enc.count[pi], enc.load[pi])
            gap = None
            if self.heuristic_prior:
                gap = eft_gap(dfeat, obs["op_features"][pi, enc.selected[pi], 0], valid)
            scores = self._clip(self.plc_head(op_static, enc.devsum[pi], dev_in, valid, gap))
            plc_full = plc_full.index_copy(0, pi, th.where(valid, scores, th.full_like(scores, NEG)))
        return th.cat([sel_full, plc_full], dim=1)

    def _distribution(
        self, logits: th.Tensor, obs: dict[str, th.Tensor], action_masks: Any
    ) -> MaskableDistribution:
        """The masked action distribution (``action_masks`` from the algorithm, else the obs's mask)."""
        if action_masks is None:
            masks = obs["action_mask"] > 0.5
        else:
            masks = th.as_tensor(action_masks, device=logits.device).reshape(logits.shape).bool()
        dist = self.action_dist
        dist.distribution = _MaskedCategorical(logits, masks)
        return dist

    def action_logits(self, obs: Any, score_all: bool = False) -> th.Tensor:
        """``(B, max_ops + max_devices)`` raw scores (before the env's action mask) for imitation.

        SEL-phase rows hold the SEL scores of the ready ops in ``[0, max_ops)`` (of every real op
        with ``score_all=True``), PLC-phase rows the PLC scores of every real device in
        ``[max_ops, max_ops + max_devices)``; all other slots (ops that are not candidates, the
        other phase, padding) hold ``NEG`` (-1e8). Mask with ``obs["action_mask"]`` (or the env's
        ``action_masks()``) before a softmax; the teacher's targets are ``env.teacher_mask()``.
        Differentiable; runs the GNN once per distinct graph of the batch (cache in no-grad mode).

        Args:
            obs: a dict of batched tensors (as in a rollout buffer) or of numpy arrays (batched or
                one observation).
        """
        return self.logits_and_values(obs, score_all=score_all, values=False)[0]

    def logits_and_values(
        self, obs: Any, score_all: bool = False, values: bool = True
    ) -> tuple[th.Tensor, th.Tensor | None]:
        """:meth:`action_logits` and the value estimates ``(B, 1)`` from one encoding (the GNN runs
        once for both; ``values=False`` skips the value head and returns ``None`` for it)."""
        obs_t = self._obs(obs)
        enc = self.features_extractor.encode(obs_t)
        logits = self._logits(enc, obs_t, score_all=score_all)
        return logits, self.value_net(enc.value_features) if values else None

    # ---------------------------------------------------------------- SB3 API
    def forward(
        self, obs: th.Tensor, deterministic: bool = False, action_masks: np.ndarray | None = None
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        obs_t = self._obs(obs)
        enc = self.features_extractor.encode(obs_t)
        values = self.value_net(enc.value_features)
        dist = self._distribution(self._logits(enc, obs_t), obs_t, action_masks)
        actions = dist.get_actions(deterministic=deterministic)
        log_prob = dist.log_prob(actions)
        return actions.reshape((-1, *self.action_space.shape)), values, log_prob

    def evaluate_actions(
        self, obs: th.Tensor, actions: th.Tensor, action_masks: th.Tensor | None = None
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        obs_t = self._obs(obs)
        enc = self.features_extractor.encode(obs_t)
        values = self.value_net(enc.value_features)
        dist = self._distribution(self._logits(enc, obs_t), obs_t, action_masks)
        return values, dist.log_prob(actions), dist.entropy()

    def get_distribution(self, obs: Any, action_masks: np.ndarray | None = None) -> MaskableDistribution:
        obs_t = self._obs(obs)
        enc = self.features_extractor.encode(obs_t)
        return self._distribution(self._logits(enc, obs_t), obs_t, action_masks)

    def predict_values(self, obs: Any) -> th.Tensor:
        obs_t = self._obs(obs)
        return self.value_net(self.features_extractor.encode(obs_t).value_features)

    def clear_cache(self) -> None:
        """Forget the cached static embeddings (automatic when the weights change)."""
        self.features_extractor.clear_cache()


def transfer_objects(env: Any) -> dict[str, Any]:
    """``custom_objects`` for ``MaskablePPO.load(path, env=env, custom_objects=...)`` that load a
    DopplerPolicy checkpoint onto an env with other padding sizes (e.g. 8 devices for a 4-device
    checkpoint): the saved spaces are replaced by the env's, and the weights (size-independent)
    load unchanged."""
    return {"observation_space": env.observation_space, "action_space": env.action_space}
