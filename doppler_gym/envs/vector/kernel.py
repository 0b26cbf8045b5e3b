"""The batched state transition of ``Doppler-Sim-v0``: one Numba call steps (or resets) every env of a batch.

Per env ``i`` it does what :class:`~doppler_gym.sim.placement_state.PlacementState`,
:class:`~doppler_gym.sim.estimate.EstimatedSchedule` (``time_model="fixed"``) and the observation
writes of :class:`~doppler_gym.envs.placement.PlacementEnv` do for one env, with the same floating-point
operations in the same order, so that every array it writes equals the single env's bit for bit:

- SEL (a ready op ``v``): the ``(D, 5)`` device features of ``v`` (compute placed on each device, compute
  of ``v``'s placed inputs there, first start and last end of those inputs, ``v``'s earliest start there;
  [internal time]) times ``1 / scale`` into ``device_features[i, :, :5]`` as float32, the devices' static
  columns into ``[:, 5:]``, the selected flag, phase 1 and the device mask.
- PLC (device ``d``): ``v`` starts at its earliest start on ``d`` and ends a compute time later; the
  schedule, the SEL position, the ready ops (its successors whose last input it was), the flags, phase 0
  and the op mask; the final placement marks ``TERMINAL_ACTION`` alone in the mask.

Shapes: ``N`` envs, ``n = max_ops``, ``E = max_edges``, ``D = max_devices``, ``A = n + D``. Two
signatures in all (:func:`step_rows`, :func:`reset_rows`), compiled once and cached on disk (``cache=True``);
:func:`step_rows` without reference counting (:mod:`doppler_gym.sim.compiled_step`: 9-10 us per step of 64 envs,
against 16-24 us with the counts around its SEL and PLC steps).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from doppler_gym.envs.context import FEATURE_MAX
from doppler_gym.sim.compiled_step import compiled_step

INACTIVE, SEL_OK, PLC_OK, FINAL, INVALID = -1, 0, 1, 2, 3  # the outcome of each env's step (``codes``)
_SEL, _PLC = 0, 1


@njit(cache=True)
def reset_rows(
    rows, n_ops, in_degree, max_ops,
    op_device, device32, start, end, avail, work, makespan, est_makespan, waiting, ready, position, n_placed, sel_est,
    op_state, device_features, phase, selected_op, action_mask,
):
    """Start a new episode in each env of ``rows`` ``(k,) int64``: nothing placed, SEL phase, the sources ready.

    The instance rows (``n_ops`` ``(N,)``, ``in_degree`` ``(N, n)``) must hold the env's new instance already.
    Writes the state rows (``op_device`` ``(N, n) int64`` and its int32 copy ``device32`` -1, schedule arrays 0,
    ``waiting`` = in-degrees, ``ready``, ``position``, ``n_placed``) and the dynamic observation rows (``op_state``
    ``(N, n, 3) float32``,
    ``device_features`` ``(N, D, 7) float32``, ``phase``/``selected_op`` ``(N, 1) int64``,
    ``action_mask`` ``(N, A) int8``), as ``PlacementEnv._start`` does.
    """
    for r in range(rows.shape[0]):
        i = rows[r]
        n = n_ops[i]
        op_device[i, :] = -1
        device32[i, :] = -1
        start[i, :] = 0.0
        end[i, :] = 0.0
        avail[i, :] = 0.0
        work[i, :] = 0.0
        makespan[i] = 0.0
        est_makespan[i] = 0.0
        position[i, :] = 0.0
        n_placed[i] = 0
        sel_est[i, :] = 0.0
        op_state[i, :, :] = 0.0
        device_features[i, :, :] = 0.0
        phase[i, 0] = _SEL
        selected_op[i, 0] = -1
        action_mask[i, :] = 0
        ready[i, :] = 0
        waiting[i, :] = 0
        for v in range(n):
            waiting[i, v] = in_degree[i, v]
            if in_degree[i, v] == 0:
                ready[i, v] = 1
                op_state[i, v, 1] = 1.0
                action_mask[i, v] = 1


@njit(cache=True, inline="always")
def _select(i, v, pred_ptr, pred, comp, out_bytes, latency, inv_bw, inv_scale, device_static, n_dev, max_ops,
            op_device, start, end, avail, work, sel_est, op_state, device_features, phase, selected_op, action_mask,
            inp, first, last, seen):
    """SEL op ``v`` in env ``i``: ``EstimatedSchedule.device_features`` and ``PlacementEnv._select``.
    ``inp``, ``first``, ``last`` ``(D,) float64`` and ``seen`` ``(D,) bool`` are scratch (overwritten)."""
    est = sel_est[i]
    for j in range(n_dev):
        est[j] = avail[i, j]
        inp[j] = 0.0
        first[j] = 0.0
        last[j] = 0.0
        seen[j] = False
    for k in range(pred_ptr[i, v], pred_ptr[i, v + 1]):
        p = pred[i, k]
        dv = op_device[i, p]
        if dv < 0:
            continue
        inp[dv] += comp[i, p, dv]
        s = start[i, p]
        e = end[i, p]
        if not seen[dv] or s < first[dv]:
            first[dv] = s
        if e > last[dv]:
            last[dv] = e
        seen[dv] = True
        size = out_bytes[i, p]
        for j in range(n_dev):  # arrival of p's output on device j (no transfer on its own device)
            a = e if j == dv else e + (latency[i, dv, j] + size * inv_bw[i, dv, j])
            if a > est[j]:
                est[j] = a
    scale = inv_scale[i]
    for j in range(n_dev):
        device_features[i, j, 0] = np.float32(min(work[i, j] * scale, FEATURE_MAX))
        device_features[i, j, 1] = np.float32(min(inp[j] * scale, FEATURE_MAX))
        device_features[i, j, 2] = np.float32(min(first[j] * scale, FEATURE_MAX))
        device_features[i, j, 3] = np.float32(min(last[j] * scale, FEATURE_MAX))
        device_features[i, j, 4] = np.float32(min(est[j] * scale, FEATURE_MAX))
        device_features[i, j, 5] = np.float32(device_static[i, j, 0])
        device_features[i, j, 6] = np.float32(device_static[i, j, 1])
    op_state[i, v, 2] = 1.0
    selected_op[i, 0] = v
    phase[i, 0] = _PLC
    action_mask[i, :max_ops] = 0
    for j in range(n_dev):
        action_mask[i, max_ops + j] = 1


@njit(cache=True, inline="always")
def _place(i, d, succ_ptr, succ, comp, time_divisor, max_ops,
           op_device, device32, start, end, avail, work, makespan, est_makespan, waiting, ready, position, n_placed,
           sel_est, op_state, device_features, phase, selected_op, action_mask):
    """PLC device ``d`` in env ``i``: ``PlacementState.place`` and ``PlacementEnv._place``."""
    v = selected_op[i, 0]
    s = sel_est[i, d]
    e = s + comp[i, v, d]
    op_device[i, v] = d
    device32[i, v] = d
    start[i, v] = s
    end[i, v] = e
    avail[i, d] = e
    work[i, d] += comp[i, v, d]
    if e > makespan[i]:
        makespan[i] = e
    est_makespan[i] = makespan[i] / time_divisor[i]
    position[i, v] = n_placed[i]
    n_placed[i] += 1
    ready[i, v] = 0
    op_state[i, v, 0] = 1.0
    op_state[i, v, 1] = 0.0
    op_state[i, v, 2] = 0.0
    for k in range(succ_ptr[i, v], succ_ptr[i, v + 1]):
        c = succ[i, k]
        waiting[i, c] -= 1
        if waiting[i, c] == 0:
            ready[i, c] = 1
            op_state[i, c, 1] = 1.0
    selected_op[i, 0] = -1
    phase[i, 0] = _SEL
    device_features[i, :, :] = 0.0
    for u in range(max_ops):
        action_mask[i, u] = ready[i, u]
    action_mask[i, max_ops:] = 0


@njit(cache=True, inline="always")
def _count(i, code, rows_by_code, count):
    k = code + 1
    rows_by_code[k, count[k]] = i
    count[k] += 1


@compiled_step
def step_rows(
    actions, active, n_ops, n_devices, max_ops, terminal_action,
    pred_ptr, pred, succ_ptr, succ, comp, out_bytes, latency, inv_bw, inv_scale, device_static, time_divisor,
    op_device, device32, start, end, avail, work, makespan, est_makespan, waiting, ready, position, n_placed, sel_est,
    op_state, device_features, phase, selected_op, action_mask, over, codes, rows_by_code, count, scratch, seen,
):
    """One step of every env ``i`` with ``active[i]``, action ``actions[i]`` (``(N,) int64``).

    Instance rows (static within an episode): ``n_ops``, ``n_devices`` ``(N,) int64``, ``pred_ptr``/``succ_ptr``
    ``(N, n + 1) int64`` and ``pred``/``succ`` ``(N, E) int64`` (the graph's CSR lists, in its edge order),
    ``comp`` ``(N, n, D) float64`` [internal time], ``out_bytes`` ``(N, n) float64``, ``latency``/``inv_bw``
    ``(N, D, D) float64`` (:class:`~doppler_gym.sim.costs.Costs`), ``inv_scale`` ``(N,)`` (1 / the graph's
    compute-only critical path), ``device_static`` ``(N, D, 2)``, ``time_divisor`` ``(N,)``.

    State rows (updated): ``op_device`` ``(N, n) int64`` (also the observation's) and ``device32``, the same as
    int32 (the partial makespans' rows), ``start``/``end`` ``(N, n)``,
    ``avail``/``work`` ``(N, D)``, ``makespan``/``est_makespan`` ``(N,)`` (internal / reported unit),
    ``waiting`` ``(N, n) int64`` (unplaced inputs), ``ready`` ``(N, n) int8``, ``position`` ``(N, n) float64``
    (SEL position of each placed op: the final run's priorities), ``n_placed`` ``(N,) int64``,
    ``sel_est`` ``(N, D)`` (the selected op's earliest starts), and the observation rows.

    Writes ``codes[i]``: :data:`SEL_OK`, :data:`PLC_OK`, :data:`FINAL` (the last op placed), :data:`INVALID`
    (nothing changed) or :data:`INACTIVE`; ``count`` ``(5,) int64`` the envs of each code (``count[c + 1]``) and
    ``rows_by_code`` ``(5, N) int64`` their indices (``rows_by_code[c + 1, :count[c + 1]]``, ascending).

    ``scratch`` ``(3, D) float64`` and ``seen`` ``(D,) bool`` are the SEL step's scratch (overwritten).

    Returns the first active env whose episode is over (``over`` ``(N,) bool``), having stepped nothing, or -1.
    """
    for i in range(actions.shape[0]):
        if active[i] and over[i]:
            return i
    count[:] = 0
    inp = scratch[0]
    first = scratch[1]
    last = scratch[2]
    for i in range(actions.shape[0]):
        if not active[i]:
            codes[i] = INACTIVE
            _count(i, INACTIVE, rows_by_code, count)
            continue
        a = actions[i]
        if phase[i, 0] == _SEL:
            if a < 0 or a >= n_ops[i] or ready[i, a] == 0:
                codes[i] = INVALID
                _count(i, INVALID, rows_by_code, count)
                continue
            _select(i, a, pred_ptr, pred, comp, out_bytes, latency, inv_bw, inv_scale, device_static, n_devices[i],
                    max_ops, op_device, start, end, avail, work, sel_est, op_state, device_features, phase,
                    selected_op, action_mask, inp, first, last, seen)
            codes[i] = SEL_OK
            _count(i, SEL_OK, rows_by_code, count)
            continue
        d = a - max_ops
        if d < 0 or d >= n_devices[i]:
            codes[i] = INVALID
            _count(i, INVALID, rows_by_code, count)
            continue
        _place(i, d, succ_ptr, succ, comp, time_divisor, max_ops,
               op_device, device32, start, end, avail, work, makespan, est_makespan, waiting, ready, position, n_placed,
               sel_est, op_state, device_features, phase, selected_op, action_mask)
        if n_placed[i] == n_ops[i]:
            action_mask[i, terminal_action] = 1  # never an all-zero mask (masked.TERMINAL_ACTION)
            codes[i] = FINAL
        else:
            codes[i] = PLC_OK
        _count(i, codes[i], rows_by_code, count)
    return -1
