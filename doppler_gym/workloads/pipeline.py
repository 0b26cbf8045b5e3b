"""PIPELINE: one training iteration of a pipeline-parallel model, with its schedule.

The model is cut into ``L = stages * chunks`` consecutive *virtual stages* (chunks of layers);
virtual stage ``c`` runs on device ``c % stages`` (with ``chunks == 1`` stage ``s`` is device ``s``).
Each of ``microbatches`` microbatches ``j`` gets, per virtual stage ``c``:

- ``F[c,j]`` (kind ``"forward"``): needs ``F[c-1,j]`` (the activations of the previous stage; with
  the Llama costs through ``S[c-1,j]``, the send op of ``F[c-1,j]``, see Memory);
- ``B[c,j]`` (kind ``"backward"``): needs ``B[c+1,j]`` (the gradient of its output; for the last
  stage, ``F[L-1,j]``) and ``F[c,j]`` (its stashed activations, same device);
- with ``split_backward``, ``B`` is the input gradient only and ``W[c,j]`` (kind ``"wgrad"``), the
  weight gradient, needs ``B[c,j]`` and ``F[c,j]`` (Zero Bubble's split: the stash is freed after
  W; without the split ``B`` computes both).

A pipeline schedule is a fixed order of these ops on each device. The :class:`Workload` carries it:
``assignment`` (virtual stage to device), ``priorities`` (a key whose order on each device is the
schedule's, and which orders the whole graph topologically, so that no assignment deadlocks) and
``config``, a :class:`~doppler_gym.sim.config.SimConfig` with ``queue_order="fixed"``:

>>> import doppler_gym as dg
>>> w = dg.workloads.build("pipeline", stages=4, microbatches=8, schedule="1f1b", unit_costs=True)
>>> tr = dg.simulate(w.graph, w.assignment, topology=4, priorities=w.priorities, config=w.config)
>>> tr.makespan  # (F + B)(m + p - 1) = 3 (m + p - 1): the bubble is (p - 1) / m of the work
33.0

Schedules (``schedule=``):

- ``"gpipe"``: all forwards, then all backwards (Huang et al., *GPipe: Efficient Training of Giant
  Neural Networks using Pipeline Parallelism*, NeurIPS 2019). Bubble ``(p - 1) / m`` of the work
  with equal stages; ``m`` microbatches stashed on each stage.
- ``"1f1b"``: PipeDream-Flush, the non-interleaved schedule of Megatron-LM (Narayanan et al.,
  *Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM*, SC 2021): stage
  ``s`` runs ``min(p - s - 1, m)`` warm-up forwards, then alternates one forward and one backward,
  then drains the backwards. Same bubble as GPipe, at most ``p`` microbatches stashed.
- ``"interleaved"``: Megatron-LM's interleaved 1F1B (same paper, Section 2.2.2) with ``chunks = v``
  model chunks per device: forwards go chunk by chunk in groups of ``p`` microbatches, warm-up
  ``(p - s - 1) * 2 + (v - 1) * p`` forwards (all of them when ``m == p``). Bubble ``(p - 1) / (v m)``.
  Megatron requires ``m`` to be a multiple of ``p``, and so does this builder.
- ``"zb-h1"``: ZB-H1 of Qi et al., *Zero Bubble (Almost) Pipeline Parallelism*, ICLR 2024 (needs
  ``split_backward``): the F/B order of 1F1B, each stage ``s`` delaying its weight gradients by ``s``
  microbatches (``W[j - s]`` follows ``B[j]``; the rest at the end), so every stage holds at most
  ``p`` microbatches in flight and the tail bubbles fill with W. With ``F = B = W`` the bubble is
  ``(p - 1)(F + B - W) = (p - 1) F``, a third of 1F1B's: ``(p - 1) / (3 m)`` of the work.

Costs: ``unit_costs=True`` gives ``F = 1`` and a fused backward ``B = 2`` time units (split:
``B = W = 1``, so that ``B + W`` equals the fused backward) and no communication (``out_bytes = 0``;
``config`` uses raw costs, so times are in those units); this is the setting of the papers' bubble
formulas (Qi et al. take ``F = B = W``). Otherwise each virtual stage is ``layers / L`` Llama layers
(:func:`doppler_gym.workloads.llama.build_layer` with one block, ``micro_batch`` sequences), divided
over ``tensor_parallel`` devices (Megatron-LM's tensor parallelism: each pipeline device holds
``1 / t`` of every layer; the tensor-parallel all-reduces are not modelled): ``F`` is their forward
FLOPs, a backward is twice that (``B = W = F`` when split), plus the recomputation (``"full"``: one
more forward in ``B``; ``"selective"``: the attention core's forward FLOPs, ``scores``, ``probs`` and
``attn`` of the layer, in ``B``); ``F`` and ``B`` send the ``(micro_batch, seq, d_model)`` activation
or its gradient [B] (``1 / t`` of it with ``sequence_parallel``; ``F`` through its send op ``S``) to
the next stage, ``W`` sends nothing; ``config`` uses the topology's speeds and links (seconds).
``io_bytes`` (device-memory traffic) is the layer graph's (inputs + weights + output of each op) times
the layers, twice for a fused backward; ``precisions`` follow ``dtype``.

Memory (:mod:`doppler_gym.sim.memory`, with ``SimConfig(memory=...)``): ``F[c,j]``'s output is the
activations the chunk keeps for its backward, per Korthikanti et al. 2022
(:func:`~doppler_gym.workloads.activation.layer_activation_bytes` times the chunk's layers, with
``recompute``, ``tensor_parallel`` and ``sequence_parallel``): ``B[c,j]`` (split: also ``W[c,j]``, which
reads F's stash) consumes it on the same device, so the stash lives from the end of ``F[c,j]`` until the
matching ``B`` (split: ``W``) ends, whatever the order, and a schedule's stash shows in the memory profile.
The boundary activation goes to the next stage through a *send op* ``S[c,j]`` (kind ``"send"``, no
FLOPs, no traffic, every stage but the last) that follows ``F[c,j]`` on its device: its output is the
``(micro_batch, seq, d_model)`` activation [B], what crosses the link, freed once sent (and the received
copy once ``F[c+1,j]`` ends). ``B[c,j]``'s output (the gradient sent back) stays until it is sent and,
split, until ``W[c,j]`` ends. ``F[c,0]`` holds the training state of the chunk's parameters as
``persistent_bytes`` (:func:`~doppler_gym.workloads.builder.parameter_bytes` per parameter; ``d + 4 d^2``
for attention and ``d + 3 d f`` for the MLP per layer, over ``t``). With ``unit_costs`` there is no
memory and no send op: the graph is ``F``, ``B`` (and ``W``) only, ``F[c+1,j]`` reading ``F[c,j]``.

Peaks, in stashes of one chunk and microbatch, on the device of stage ``s`` (``tests/doppler_gym/
workloads/test_activation_memory.py`` checks them against the simulated profile): GPipe ``m``; 1F1B
``min(p - s, m)`` (``p`` on the first stage); interleaved 1F1B with ``v`` chunks ``2 (p - s - 1) +
(v - 1) p + 1`` for ``m > p`` (Megatron-LM's warm-up plus one forward; ``v m``, all forwards first, for
``m = p``): on the first stage ``v p + p - 1`` chunks, ``p (1 + (p - 1) / (p v))`` stages' worth,
Narayanan et al.'s factor over 1F1B; ZB-H1 ``min(p, m)`` on every stage (stage ``s`` delays its W by
``s`` microbatches), 1F1B's first-stage peak (Qi et al.: the same activation memory as 1F1B). Beside the
stashes a device holds boundary activations and gradients (``2 s b h`` each) in flight or waiting for
their consumer; ZB-H1 keeps each delayed W's gradient too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.workloads import llama
from doppler_gym.workloads.activation import layer_activation_bytes
from doppler_gym.workloads.builder import DTYPE_BYTES, check_ints, parameter_bytes
from doppler_gym.workloads.workload import Workload

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1")

Op = tuple[str, int, int]
"""One scheduled op: ``(phase, virtual stage, microbatch)``, phase ``"F"``, ``"S"`` (F's send), ``"B"`` or ``"W"``."""


def build(
    stages: int = 4,
    microbatches: int = 16,
    schedule: str = "1f1b",
    chunks: int = 1,
    split_backward: bool | None = None,
    unit_costs: bool = False,
    layers: int = 32,
    micro_batch: int = 1,
    seq: int = 2048,
    d_model: int = 4096,
    n_heads: int = 32,
    ffn_hidden: int = 11008,
    dtype: str = "bfloat16",
    optimizer: str = "adam",
    recompute: str = "none",
    tensor_parallel: int = 1,
    sequence_parallel: bool = False,
) -> Workload:
    """Build one pipeline-parallel training iteration and its schedule.

    Args:
        stages: pipeline stages ``p`` = devices [count].
        microbatches: microbatches ``m`` per iteration [count].
        schedule: one of :data:`SCHEDULES` (see the module docstring).
        chunks: model chunks ``v`` per device; > 1 only with ``"interleaved"``.
        split_backward: split each backward into ``B`` (input gradient) and ``W`` (weight gradient);
            ``None`` = only for ``"zb-h1"``, which requires it.
        unit_costs: ``F = 1``, ``B = 2`` (split: ``B = W = 1``) and no communication or memory (raw
            costs), as in the papers' formulas.
        layers: transformer layers of the model; divisible by ``stages * chunks``.
        micro_batch: sequences per microbatch [count].
        seq, d_model, n_heads, ffn_hidden: the Llama layer's sizes (:func:`~doppler_gym.workloads.llama.build_layer`).
        dtype: element type of activations and gradients (``out_bytes``) and the ops' precision.
        optimizer: training state held per parameter (``"adam"``, ``"sgd"``, ``"none"``; see
            :func:`~doppler_gym.workloads.builder.parameter_bytes`); not with ``unit_costs``.
        recompute: activation recomputation, ``"none"``, ``"selective"`` or ``"full"``
            (:data:`~doppler_gym.workloads.activation.RECOMPUTE`): what each stash holds and what ``B``
            recomputes.
        tensor_parallel: tensor-parallel size ``t`` of each stage [devices]; each pipeline device
            computes and holds ``1 / t`` of its layers.
        sequence_parallel: Megatron-LM's sequence parallelism with the tensor parallelism (stash and
            boundary activation ``1 / t``).

    Returns:
        A :class:`Workload` with ``assignment`` ``(n_ops,) int64``, ``priorities`` ``(n_ops,) float64``
        and ``config`` (``queue_order="fixed"``); graph name ``"pipeline"``.
    """
    p, m, v = check_ints("pipeline", stages=stages, microbatches=microbatches, chunks=chunks)
    if schedule not in SCHEDULES:
        raise ValueError(f"pipeline: schedule must be one of {SCHEDULES}, got {schedule!r}")
    if v > 1 and schedule != "interleaved":
        raise ValueError(f"pipeline: chunks={v} needs schedule='interleaved' (the others run one chunk per device)")
    if schedule == "interleaved" and m % p:
        raise ValueError(
            f"pipeline: the interleaved schedule needs microbatches a multiple of stages (Megatron-LM's "
            f"assumption), got microbatches={m}, stages={p}"
        )
    if split_backward is None:
        split_backward = schedule == "zb-h1"
    if not isinstance(split_backward, (bool, np.bool_)) or not isinstance(unit_costs, (bool, np.bool_)):
        raise TypeError(f"pipeline: split_backward and unit_costs must be True or False, got "
                        f"{split_backward!r}, {unit_costs!r}")
    if schedule == "zb-h1" and not split_backward:
        raise ValueError("pipeline: zb-h1 schedules the weight gradients W apart: it needs split_backward=True")
    split = bool(split_backward)
    if unit_costs:
        costs = _unit_costs(split)
    else:
        costs = _layer_costs(split, p * v, layers, micro_batch, seq, d_model, n_heads, ffn_hidden, dtype, optimizer,
                             recompute, tensor_parallel, sequence_parallel)
    sends = costs.stash is not None
    orders = [_with_sends(_ORDERS[schedule](s, p, m, v, split), sends, p * v) for s in range(p)]
    graph, index = _graph(p * v, m, split, costs)
    assignment = np.array([c % p for _, c, _ in index], dtype=np.int64)
    op_id = {op: i for i, op in enumerate(index)}
    priorities = schedule_start_times(graph, assignment, [[op_id[op] for op in o] for o in orders])
    return Workload(graph, assignment=assignment, priorities=priorities, config=_config(bool(unit_costs)))


# ---------------------------------------------------------------- per-device orders
def _gpipe(s: int, p: int, m: int, v: int, split: bool) -> list[Op]:
    """GPipe: every forward, then every backward (microbatch order)."""
    return [("F", s, j) for j in range(m)] + [op for j in range(m) for op in _backward(s, j, split)]


def _one_f_one_b(s: int, p: int, m: int, v: int, split: bool) -> list[Op]:
    """1F1B (PipeDream-Flush): ``min(p - s - 1, m)`` warm-up forwards, then F/B pairs, then the last backwards."""
    warm = min(p - s - 1, m)
    out = [("F", s, j) for j in range(warm)]
    for j in range(m):
        if j + warm < m:
            out.append(("F", s, j + warm))
        out += _backward(s, j, split)
    return out


def _zb_h1(s: int, p: int, m: int, v: int, split: bool) -> list[Op]:
    """ZB-H1: 1F1B's F and B order; ``W[j - s]`` right after ``B[j]``, the remaining W at the end."""
    with_w: list[Op] = []
    for op in _one_f_one_b(s, p, m, v, False):
        with_w.append(op)
        if op[0] == "B" and op[2] - s >= 0:
            with_w.append(("W", s, op[2] - s))
    return with_w + [("W", s, j) for j in range(max(m - s, 0), m)]


def _interleaved(s: int, p: int, m: int, v: int, split: bool) -> list[Op]:
    """Megatron-LM's interleaved 1F1B on device ``s`` (its ``forward_backward_pipelining_with_interleaving``)."""
    total = m * v

    def unit(k: int, forward: bool) -> tuple[int, int]:  # (virtual stage, microbatch) of the k-th F or B
        in_group = k % (p * v)
        chunk = in_group // p if forward else v - 1 - in_group // p
        return chunk * p + s, (k // (p * v)) * p + in_group % p

    warm = total if m == p else min((p - s - 1) * 2 + (v - 1) * p, total)
    out: list[Op] = [("F", *unit(k, True)) for k in range(warm)]
    for k in range(total - warm):
        out.append(("F", *unit(k + warm, True)))
        out += _backward(*unit(k, False), split)
    for k in range(total - warm, total):
        out += _backward(*unit(k, False), split)
    return out


def _backward(c: int, j: int, split: bool) -> list[Op]:
    return [("B", c, j), ("W", c, j)] if split else [("B", c, j)]


def _with_sends(order: list[Op], sends: bool, n_virtual: int) -> list[Op]:
    """``order`` with the send op ``S[c,j]`` right after each ``F[c,j]`` but the last stage's (when the stash
    is modelled: ``F``'s output is then the stash, and ``S`` sends the boundary activation)."""
    if not sends:
        return order
    return [op for f in order for op in ((f, ("S", f[1], f[2])) if f[0] == "F" and f[1] + 1 < n_virtual else (f,))]


_ORDERS: dict[str, Callable[[int, int, int, int, bool], list[Op]]] = {
    "gpipe": _gpipe, "1f1b": _one_f_one_b, "interleaved": _interleaved, "zb-h1": _zb_h1,
}


# ---------------------------------------------------------------- graph and costs
@dataclass(frozen=True)
class _Costs:
    """Per-phase costs of one op of a virtual stage and microbatch.

    ``flops`` [FLOP or time units], ``out_bytes`` [B] and ``io_bytes`` [B] by phase (``"F"``, ``"B"``,
    ``"W"``; ``out_bytes["F"]`` is the boundary activation, which the send op carries); ``state``:
    persistent training state of one chunk [B]; ``stash``: activations one chunk keeps per microbatch
    for its backward [B], F's output, ``None`` = not modelled (no send ops); ``precision``:
    the ops' numeric format, ``None`` = the cost model's default.
    """

    flops: dict[str, float]
    out_bytes: dict[str, float]
    io_bytes: dict[str, float]
    state: float = 0.0
    stash: float | None = None
    precision: str | None = None


def _graph(n_virtual: int, m: int, split: bool, costs: _Costs) -> tuple[DataflowGraph, list[Op]]:
    """The F/(S/)B(/W) graph; ops are numbered microbatch by microbatch (a topological order)."""
    sends = costs.stash is not None
    index: list[Op] = []
    for j in range(m):
        index += _with_sends([("F", c, j) for c in range(n_virtual)], sends, n_virtual)
        for c in reversed(range(n_virtual)):
            index += _backward(c, j, split)
    op_id = {op: i for i, op in enumerate(index)}
    edges = []
    for phase, c, j in index:
        me = op_id[(phase, c, j)]
        if phase == "F" and c > 0:  # the previous stage's boundary activation (through its send)
            edges.append((op_id[("S" if sends else "F", c - 1, j)], me))
        elif phase == "S":
            edges.append((op_id[("F", c, j)], me))
        elif phase == "B":
            if c + 1 < n_virtual:
                edges.append((op_id[("B", c + 1, j)], me))
            edges.append((op_id[("F", c, j)], me))
        elif phase == "W":  # after its B; it reads the stashed activations too (held until W ends)
            edges.append((op_id[("B", c, j)], me))
            edges.append((op_id[("F", c, j)], me))
    src, dst = (np.array(col, dtype=np.int64) for col in zip(*edges)) if edges else ([], [])
    kinds = {"F": "forward", "S": "send", "B": "backward", "W": "wgrad"}
    flops = {**costs.flops, "S": 0.0}
    out_bytes = {**costs.out_bytes, "S": costs.out_bytes["F"]}
    if sends:
        out_bytes["F"] = costs.stash
    io_bytes = {**costs.io_bytes, "S": 0.0}
    graph = DataflowGraph(
        src=src, dst=dst,
        flops=[flops[ph] for ph, _, _ in index],
        out_bytes=[out_bytes[ph] for ph, _, _ in index],
        names=tuple(f"{ph}[{c},{j}]" for ph, c, j in index),
        kinds=tuple(kinds[ph] for ph, _, _ in index),
        name="pipeline",
        persistent_bytes=[costs.state if (ph, j) == ("F", 0) else 0.0 for ph, _, j in index],
        io_bytes=[io_bytes[ph] for ph, _, _ in index],
        precisions=None if costs.precision is None else (costs.precision,) * len(index),
    )
    return graph, index


def _unit_costs(split: bool) -> _Costs:
    """``F = 1`` and ``B + W = 2`` time units (fused ``B = 2``, split ``B = W = 1``); nothing sent or held."""
    backward = 1.0 if split else 2.0
    zero = {"F": 0.0, "B": 0.0, "W": 0.0}
    return _Costs(flops={"F": 1.0, "B": backward, "W": 1.0}, out_bytes=zero, io_bytes=zero)


def _layer_costs(split: bool, n_virtual: int, layers: int, micro_batch: int, seq: int, d_model: int, n_heads: int,
                 ffn_hidden: int, dtype: str, optimizer: str, recompute: str, tensor_parallel: int,
                 sequence_parallel: bool) -> _Costs:
    """The costs of a chunk of ``layers / n_virtual`` Llama layers over ``tensor_parallel`` devices."""
    (layers,) = check_ints("pipeline", layers=layers)
    if layers % n_virtual:
        raise ValueError(f"pipeline: layers={layers} must be divisible by stages * chunks = {n_virtual}")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"pipeline: dtype must be one of {sorted(DTYPE_BYTES)}, got {dtype!r}")
    per_layer_stash = layer_activation_bytes(seq, micro_batch, d_model, n_heads, recompute, tensor_parallel,
                                             sequence_parallel, dtype, where="pipeline")
    t, per_chunk = tensor_parallel, layers // n_virtual
    layer = llama.build_layer(batch=micro_batch, seq=seq, d_model=d_model, n_heads=n_heads,
                              ffn_hidden=ffn_hidden, blocks=1, dtype=dtype).graph
    forward = float(layer.flops.sum()) * per_chunk / t
    core = sum(float(f) for f, name in zip(layer.flops, layer.names) if name.split("[")[0] in _ATTENTION_CORE)
    recomputed = {"none": 0.0, "selective": core * per_chunk / t, "full": forward}[recompute]
    backward = (forward if split else 2.0 * forward) + recomputed
    io = float(layer.io_bytes.sum()) * per_chunk / t
    activation = float(micro_batch * seq * d_model * DTYPE_BYTES[dtype]) / (t if sequence_parallel else 1)
    per_layer = d_model + 4 * d_model * d_model + d_model + 3 * d_model * ffn_hidden  # parameters
    state = float(per_layer * per_chunk * parameter_bytes(dtype, optimizer)) / t
    return _Costs(flops={"F": forward, "B": backward, "W": forward},
                  out_bytes={"F": activation, "B": activation, "W": 0.0},
                  io_bytes={"F": io, "B": io if split else 2.0 * io, "W": io},
                  state=state, stash=per_layer_stash * per_chunk, precision=llama.precision_of(dtype))


_ATTENTION_CORE = ("scores", "probs", "attn")
"""The layer ops selective recomputation recomputes (Korthikanti et al.: ``QK^T``, softmax, ``softmax V``)."""


def _config(unit_costs: bool) -> object:
    # SimConfig is a plain frozen dataclass; imported here so that the workload layer stays below sim at import time.
    from doppler_gym.sim.config import SimConfig

    return SimConfig(cost_model="raw", queue_order="fixed") if unit_costs else SimConfig(queue_order="fixed")


def schedule_start_times(graph: DataflowGraph, assignment: np.ndarray, orders: list[list[int]]) -> np.ndarray:
    """``(n_ops,) float64`` rank of each op's start when each device runs ``orders[d]`` in turn, with the
    graph's FLOPs as times and free communication: a key that keeps each device's order (starts increase
    along it; ties, such as a send op of no FLOPs and the op after it, by the position in the order) and
    orders the graph topologically (an input starts before its consumer; other ties by op id, a
    topological numbering).

    Raises:
        ValueError: the orders do not cover each op once on its device, or deadlock (a schedule bug).
    """
    n = graph.n_ops
    listed = np.concatenate([np.asarray(o, dtype=np.int64) for o in orders]) if orders else np.zeros(0, np.int64)
    misplaced = any(assignment[o] != d for d, ops in enumerate(orders) for o in ops)
    if np.sort(listed).tolist() != list(range(n)) or misplaced:
        raise ValueError("pipeline: the per-device orders must list every op once, on its own device")
    preds: list[list[int]] = [[] for _ in range(n)]
    for s, t in zip(graph.src.tolist(), graph.dst.tolist()):
        preds[t].append(s)
    start, end = np.full(n, np.nan), np.full(n, np.nan)
    position = np.zeros(n, np.int64)
    head, free = [0] * len(orders), [0.0] * len(orders)
    progress = True
    while progress:
        progress = False
        for d, ops in enumerate(orders):
            while head[d] < len(ops) and not any(np.isnan(end[q]) for q in preds[ops[head[d]]]):
                o = ops[head[d]]
                start[o] = max([free[d], *(end[q] for q in preds[o])])
                end[o] = free[d] = start[o] + float(graph.flops[o])
                position[o] = head[d]
                head[d] += 1
                progress = True
    if np.isnan(start).any():
        raise ValueError("pipeline: the schedule deadlocks (an op waits for one that comes later on its device)")
    rank = np.empty(n, np.float64)
    rank[np.lexsort((np.arange(n), position, start))] = np.arange(n, dtype=np.float64)
    return rank
