"""The dynamic inputs of :class:`~agents.policy.DopplerPolicy`'s SEL and PLC heads, defined once.

Each feature is written twice, side by side: in torch for the policy (padded batches of env
observations, ``dev_valid``/``ready`` masks) and in numpy for the direct decoder
(:mod:`agents.decode`: one or ``K`` unpadded episodes, every device real), with the same operations
in the same precision, so the two give the same numbers up to float32 rounding
(``tests/agents/test_features.py`` checks them against each other).

- **SEL inputs** ``(R, N_SEL_INPUTS)`` per scored op: its 5 op features (observation
  ``op_features``) z-scored over the ready ops of its episode (float64 two-pass statistics,
  population std), then the share of the ops placed and the share ready.
- **PLC device inputs** ``(b, D, N_DEV_INPUTS)`` per device: log1p of the 7 device features
  (observation ``device_features``: 5 of the selected op from the estimated schedule, relative speed
  and memory), the 5 dynamic ones z-scored across the devices, log1p of the earliest start minus its
  minimum over the devices, the share of the ops and of the compute already on the device.
- **finish-time gap** ``(b, D)`` (the PLC prior, ``heuristic_prior=True``): how much later the
  selected op would finish on each device than on its best one, in units of its own compute time.

Times are the observation's: divided by the graph's compute-only critical path (``GraphContext.scale``).
"""

from __future__ import annotations

import numpy as np
import torch as th

EPS = 1e-6  # floor of the z-scores' std, of the speeds and of the shares' denominators
EFT_GAP_CAP = 10.0  # the PLC prior's finish-time gap is capped at this many of the op's own durations
COMP_FLOOR = 1e-3  # the gap's denominator: the op's compute time, at least this share of the critical path
N_SEL_INPUTS = 7  # 5 op features z-scored over the ready ops, frac placed, frac ready
N_DEV_INPUTS = 15  # 7 log1p device features, 5 z-scored dynamic ones, relative EST, op and load share


# ---------------------------------------------------------------------------- torch (the policy)
def zscore(x: th.Tensor, mask: th.Tensor, dim: int) -> th.Tensor:
    """``x`` z-scored along ``dim`` over the entries where ``mask`` (broadcast on the last axis) is 1
    (population std; entries outside the mask are not zeroed: callers only read masked ones).

    Statistics in float64, two-pass (``mean((x - mean)^2)``), cast back to ``x``'s dtype: in float32,
    ``E[x^2] - mean^2`` over entries that are (nearly) equal, as ready ops of layered graphs often
    are, is rounding noise that ``/ (std + EPS)`` amplifies to O(1) inputs, which then depend on the
    padding size and the summation order (the numpy versions compute the same numbers without padding)."""
    x64 = x.double()
    m = mask.unsqueeze(-1).to(th.float64)
    count = m.sum(dim, keepdim=True).clamp_min(1.0)
    mean = (x64 * m).sum(dim, keepdim=True) / count
    var = (((x64 - mean) * m) ** 2).sum(dim, keepdim=True) / count
    return ((x64 - mean) / (var.sqrt() + EPS)).to(x.dtype)


def sel_inputs(op_features: th.Tensor, ready: th.Tensor, frac: th.Tensor, rows: th.Tensor,
               ops: th.Tensor) -> th.Tensor:
    """``(R, N_SEL_INPUTS)`` SEL inputs of the ops ``ops`` of the batch rows ``rows`` (``(R,)`` each),
    from ``op_features (B, N, 5)``, ``ready (B, N) bool`` and ``frac (B, 2)`` (placed and ready share)."""
    cz = zscore(op_features, ready, 1)  # z-scored over each row's ready ops
    return th.cat([cz[rows, ops], frac[rows]], dim=1)


def device_inputs(dfeat: th.Tensor, dev_valid: th.Tensor, count: th.Tensor, load: th.Tensor) -> th.Tensor:
    """``(b, D, N_DEV_INPUTS)`` PLC inputs per device: log1p of the 7 device features, the 5 dynamic
    ones z-scored across the real devices, log1p(earliest start - its minimum), op and compute share.
    Zeros on padding devices."""
    dfeat = dfeat.clamp_min(0.0)
    est = dfeat[..., 4]
    est_min = th.where(dev_valid, est, th.full_like(est, float("inf"))).min(1, keepdim=True).values
    rel_est = th.log1p((est - est_min).clamp_min(0.0))
    out = th.cat(
        [
            th.log1p(dfeat),
            zscore(dfeat[..., :5], dev_valid, 1),
            rel_est.unsqueeze(-1),
            count.unsqueeze(-1),
            load.unsqueeze(-1),
        ],
        dim=-1,
    )
    return out * dev_valid.unsqueeze(-1).to(out.dtype)


def eft_gap(dfeat: th.Tensor, comp: th.Tensor, dev_valid: th.Tensor) -> th.Tensor:
    """``(b, D)`` how much later the selected op would finish on each device than on its best one,
    in units of the op's own compute time: ``min((EFT_d - min_d EFT) / max(comp, COMP_FLOOR),
    EFT_GAP_CAP)`` (0 on the earliest-finish device, 0 on padding devices).

    ``EFT_d = earliest_start_d + comp * (1 / speed_d) / mean_d(1 / speed_d)``: the earliest start is
    device feature 4, the relative speed feature 5 and ``comp`` (``(b,)``, op feature 0) the op's mean
    compute time over the devices, all divided by the graph's critical path (so the gap is
    scale-free). ``argmin`` of the finish time is HEFT's device choice (Topcuoglu et al., 2002)."""
    m = dev_valid.to(dfeat.dtype)
    inv = m / dfeat[..., 5].clamp_min(EPS)
    mean_inv = inv.sum(1, keepdim=True) / m.sum(1, keepdim=True).clamp_min(1.0)
    comp = comp.clamp_min(0.0).unsqueeze(1)
    eft = dfeat[..., 4].clamp_min(0.0) + comp * inv / mean_inv.clamp_min(EPS)
    eft_min = th.where(dev_valid, eft, th.full_like(eft, float("inf"))).min(1, keepdim=True).values
    gap = ((eft - eft_min) / comp.clamp_min(COMP_FLOOR)).clamp(0.0, EFT_GAP_CAP)
    return gap * m


# ---------------------------------------------------------------------------- numpy (the direct decoder)
def zscore_np(x: np.ndarray, axis: int) -> np.ndarray:
    """:func:`zscore` over every entry along ``axis``: float64 two-pass statistics (population std),
    the result in ``x``'s dtype."""
    x64 = x.astype(np.float64)
    count = float(max(x.shape[axis], 1))
    dx = x64 - x64.sum(axis, keepdims=True) / count
    var = (dx * dx).sum(axis, keepdims=True) / count
    return (dx / (np.sqrt(var) + EPS)).astype(x.dtype)


def sel_inputs_np(x64: np.ndarray, starts: np.ndarray, counts: np.ndarray, placed: np.ndarray,
                  ready: np.ndarray, seg: np.ndarray | None = None) -> np.ndarray:
    """:func:`sel_inputs` of the ready ops of ``K`` episodes, stacked: ``(M, N_SEL_INPUTS) float32``.

    Args:
        x64: ``(M, 5) float64`` the op features of the ready ops, episode after episode.
        starts: ``(K,) intp`` the first row of each episode.
        counts: ``(K, 1) float64`` the rows (ready ops) of each episode [count]; a float when ``K == 1``.
        placed, ready: ``(K,) float32`` each episode's placed and ready share of the ops; float32
            scalars when ``K == 1``.
        seg: ``(M,) intp`` the episode of each row; ``None`` when ``K == 1``.
    """
    mean = np.add.reduceat(x64, starts, axis=0) / counts  # (K, 5)
    dx = x64 - (mean if seg is None else mean[seg])
    std = np.sqrt(np.add.reduceat(dx * dx, starts, axis=0) / counts)
    out = np.empty((x64.shape[0], N_SEL_INPUTS), np.float32)
    out[:, :5] = dx / ((std if seg is None else std[seg]) + EPS)
    out[:, 5] = placed if seg is None else placed[seg]
    out[:, 6] = ready if seg is None else ready[seg]
    return out


def device_inputs_np(dfeat: np.ndarray, count: np.ndarray, load: np.ndarray) -> np.ndarray:
    """:func:`device_inputs`, every device real: ``(K, D, N_DEV_INPUTS)`` float32 from
    ``dfeat (K, D, 7)``, ``count (K, D)`` and ``load (K, D)``."""
    dfeat = np.maximum(dfeat, 0)
    est = dfeat[..., 4]
    rel_est = np.log1p(np.maximum(est - est.min(1, keepdims=True), 0))
    return np.concatenate(
        [np.log1p(dfeat), zscore_np(dfeat[..., :5], 1), rel_est[..., None], count[..., None], load[..., None]],
        axis=-1,
    ).astype(np.float32, copy=False)


def speed_terms_np(dfeat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(inv, mean)``: ``1 / relative speed`` ``(K, D)`` and its mean over the devices ``(K, 1)``
    (floored at ``EPS``), from ``dfeat (K, D, 7)``; constant through a decode (static features)."""
    inv = 1.0 / np.maximum(dfeat[..., 5], EPS)
    return inv, np.maximum(inv.mean(1, keepdims=True), EPS)


def eft_gap_np(dfeat: np.ndarray, comp: np.ndarray,
               speed: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """:func:`eft_gap`, every device real: ``(K, D)`` float32 from ``dfeat (K, D, 7)`` and the
    selected ops' compute feature ``comp (K,)``; ``speed``: :func:`speed_terms_np` of ``dfeat`` when
    the caller has them (the same values, computed once per decode)."""
    inv, mean = speed_terms_np(dfeat) if speed is None else speed
    comp = np.maximum(comp, 0)[:, None]
    eft = np.maximum(dfeat[..., 4], 0) + comp * inv / mean
    gap = (eft - eft.min(1, keepdims=True)) / np.maximum(comp, COMP_FLOOR)
    return np.minimum(np.maximum(gap, 0.0), EFT_GAP_CAP).astype(np.float32, copy=False)
