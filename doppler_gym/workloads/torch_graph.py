"""Turn an ATen fx graph (a ``make_fx`` trace of a training step) into a :class:`DataflowGraph`.

One op per ``call_function`` node that produces a tensor or a tuple of tensors, in graph order, except
views (:data:`~doppler_gym.workloads.torch_flops.ALIAS`: ``view``, ``t``, ``transpose``, ``expand``,
``split``, ``detach``, ...), which are folded into the node they view: their consumers read that
node's producer directly. This is PyTorch's storage rule (a view keeps its base alive), so under
``memory="track"`` a base lives until the last consumer of any of its views, and a view's bytes are
not counted again. Multi-output kernels (``native_layer_norm``, ``topk``, ``max_pool2d_with_indices``,
the attention kernels, ...) are one op with the FLOPs of the whole kernel and the bytes of every
element they return; each ``getitem`` that picks an element is a zero-FLOP op with that element's
bytes (and no memory traffic), fed by the producer, so each element lives until its own last consumer
(a pooling output is freed after the next op while its indices wait for the backward). The
producer's output is freed once its getitems ran, on one device at the same instant, which counts the
elements twice at that instant. (A ``getitem`` of a view such as ``split`` is folded like a view.)
Placeholders (parameters, buffers, optimizer state, inputs) are external operands: no op, no edge. An
edge ``u -> v`` joins every op ``u`` among ``v``'s inputs. The output node is dropped.

Per op:
    ``flops``: :func:`doppler_gym.workloads.torch_flops.aten_flops` (unknown ops: one per output
    element, with one warning listing them).
    ``out_bytes``: bytes of every tensor the op returns.
    ``io_bytes``: bytes of its distinct tensor operands (placeholders included; a view's operand is
    its whole base) plus its output; a gather (``embedding``, ``index_select``, ...) reads only its
    rows (the output's bytes) and its indices.
    ``precisions``: the format of its first floating output (else of its first floating operand,
    else the graph's most common one); ``"tf32"`` for fp32 matmul-like ops when ``tf32``. ``None``
    for the whole graph when some op runs in float64 (no such format in ``PRECISIONS``).
    ``kinds``: the ATen packet name (``"mm"``, ``"convolution_backward"``, ``"native_layer_norm"``);
    :func:`~doppler_gym.workloads.torch_flops.is_matmul_like` tells the tensor-core ones.
    ``persistent_bytes``: ``placeholder_bytes[i]`` of the i-th placeholder on the first op that reads
    it (through folded views: a weight is owned by the matmul that reads its transpose); a
    placeholder no op reads puts its bytes on op 0.
    With ``fused_update``, the optimizer's ops of one parameter are one op (:func:`_fuse`).
    ``names``: ``"<phase>.<node>"``, the phase ``"fwd"``, ``"bwd"`` or ``"opt"`` from the op's
    position in the trace (:func:`_phases`).

Memory under ``SimConfig(memory="track")`` follows: an activation is an op output that stays live from
its forward producer until its last consumer ends, which for a saved tensor is a backward op. A
weight gradient is both an op output (until the update reads it) and part of the persistent bytes
(PyTorch keeps ``.grad`` between steps): an upper bound by the gradients in flight.

torch is not imported here.
"""

from __future__ import annotations

import operator
import warnings
from typing import Any

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.workloads.torch_export import aten_name
from doppler_gym.workloads.torch_flops import (
    ALIAS,
    GATHER,
    aten_flops,
    fill_precisions,
    nbytes,
    node_precision,
    tensors,
)


def aten_graph(
    gm: Any,
    name: str,
    placeholder_bytes: list[float],
    n_grads: int,
    tf32: bool = False,
    fused_update: str | None = None,
    placeholder_names: list[str] | None = None,
) -> DataflowGraph:
    """The dataflow graph of ATen fx graph ``gm`` (see the module docstring).

    Args:
        gm: a ``torch.fx.GraphModule`` whose nodes carry ``meta["val"]``, traced in program order;
            its outputs are the loss, then ``n_grads`` gradients, then anything else (the
            optimizer's results).
        name: the graph's name.
        placeholder_bytes: persistent bytes owned by each placeholder, in placeholder order [B].
        n_grads: how many outputs after the loss are gradients.
        tf32: label fp32 matmul-like ops ``"tf32"``.
        fused_update: when given, the optimizer's ops (phase ``"opt"``) are fused into one op of this
            kind per connected group (one parameter's update): see :func:`_fuse`.
        placeholder_names: a name per placeholder, for the fused ops' names (``"opt.<name>"``).

    Raises:
        ValueError: ``placeholder_bytes`` does not match the placeholders, or the trace has no ops.
    """
    nodes = list(gm.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    if len(placeholder_bytes) != len(placeholders):
        raise ValueError(
            f"aten_graph({name}): {len(placeholder_bytes)} placeholder sizes for {len(placeholders)} placeholders"
        )
    source: dict[Any, Any] = {}  # node -> the node it stands for (folded views map to their base)
    ops = []
    for node in nodes:
        if node.op != "call_function" or not tensors(node.meta.get("val")):
            continue
        if _kind(node) in ALIAS and node.all_input_nodes and not _element(node, source):
            source[node] = source.get(node.all_input_nodes[0], node.all_input_nodes[0])
            continue
        ops.append(node)
    if not ops:
        raise ValueError(f"from_torch({name}): the traced step has no ops")
    unknown: set[str] = set()
    rows = [_row(node, source, tf32, unknown) for node in ops]
    for row, phase in zip(rows, _phases(gm, ops, source, n_grads)):
        row["name"] = f"{phase}.{row['node'].name}"
        row["phase"] = phase
    if unknown:
        warnings.warn(
            f"from_torch({name}): no FLOP rule for {sorted(unknown)}; counted one FLOP per output element",
            stacklevel=3,
        )
    if fused_update is not None:
        names = dict(zip(placeholders, placeholder_names or [p.name for p in placeholders]))
        rows = _fuse(rows, gm, fused_update, names)
    op_of = {member: i for i, row in enumerate(rows) for member in row["members"]}
    held = dict(zip(placeholders, placeholder_bytes))
    persistent = np.zeros(len(rows))
    src, dst = [], []
    for v, row in enumerate(rows):
        for u in row["inputs"]:
            if u in op_of and op_of[u] != v:
                src.append(op_of[u])
                dst.append(v)
            elif u in held:  # the first op that reads a placeholder owns its bytes
                persistent[v] += held.pop(u)
    persistent[0] += sum(held.values())
    return DataflowGraph(
        src=src, dst=dst, flops=[r["flops"] for r in rows], out_bytes=[r["out_bytes"] for r in rows],
        names=tuple(r["name"] for r in rows), kinds=tuple(r["kind"] for r in rows), name=name,
        persistent_bytes=persistent, io_bytes=[r["io_bytes"] for r in rows],
        precisions=fill_precisions([r["precision"] for r in rows]),
    )  # fmt: skip


def _row(node: Any, source: dict[Any, Any], tf32: bool, unknown: set[str]) -> dict[str, Any]:
    """One op's costs: ``{"node", "members", "inputs", "kind", "flops", "out_bytes", "io_bytes", "precision"}``."""
    kind = _kind(node)
    val = node.meta["val"]
    cost = aten_flops(kind, tuple(_value(a) for a in node.args), val, alpha=node.kwargs.get("alpha", 1) != 1)
    if cost is None:
        unknown.add(kind)
        cost = float(sum(int(np.prod(t.shape)) for t in tensors(val)))
    inputs = list(dict.fromkeys(source.get(u, u) for u in node.all_input_nodes))
    operands = [t for u in inputs for t in tensors(u.meta.get("val"))]
    if kind in GATHER:  # the rows picked (as many bytes as the output) and the indices
        read = nbytes(val) + sum(nbytes(t) for t in operands if not t.dtype.is_floating_point)
    else:
        read = sum(nbytes(t) for t in operands)
    return {
        "node": node, "members": [node], "inputs": inputs, "kind": kind, "flops": cost,
        "out_bytes": float(nbytes(val)), "io_bytes": 0.0 if kind == "getitem" else float(nbytes(val) + read),
        "precision": node_precision(tensors(val) + operands, kind, tf32),
    }  # fmt: skip


def _fuse(rows: list[dict[str, Any]], gm: Any, kind: str, names: dict[Any, str]) -> list[dict[str, Any]]:
    """Fuse the optimizer's ops into one op per connected group, as a fused optimizer kernel
    (``torch.optim.Adam(fused=True)``, apex ``FusedAdam``) runs one parameter's update.

    A fused op: FLOPs the sum of its members'; ``io_bytes`` its external operands (gradient, weight,
    master copy, moments) plus the step's outputs it writes (the new weight, master copy, moments);
    ``out_bytes`` 0: it writes in place into the persistent state it owns, and nothing reads it;
    precision fp32; name ``"opt.<parameter>"`` (the first placeholder it reads, without a ``":master"``
    / ``":m"`` / ``":v"`` suffix).
    """
    opt = [i for i, r in enumerate(rows) if r["phase"] == "opt"]
    member_of = {rows[i]["node"]: i for i in opt}
    parent = {i: i for i in opt}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in opt:
        for u in rows[i]["inputs"]:
            if u in member_of:
                parent[find(member_of[u])] = find(i)
    groups: dict[int, list[int]] = {}
    for i in opt:
        groups.setdefault(find(i), []).append(i)
    output = next(n for n in gm.graph.nodes if n.op == "output")
    results = set(output.all_input_nodes)
    fused = []
    for members in sorted(groups.values()):
        nodes = [rows[i]["node"] for i in members]
        inside = set(nodes)
        external = list(dict.fromkeys(u for i in members for u in rows[i]["inputs"] if u not in inside))
        read = sum(nbytes(u.meta.get("val")) for u in external)
        written = sum(nbytes(n.meta.get("val")) for n in nodes if n in results)
        label = next((names[u].split(":")[0] for u in external if u in names), nodes[0].name)
        fused.append({
            "node": nodes[0], "members": nodes, "inputs": external, "kind": kind, "name": f"opt.{label}",
            "phase": "opt", "flops": float(sum(rows[i]["flops"] for i in members)), "out_bytes": 0.0,
            "io_bytes": float(read + written), "precision": "fp32",
        })  # fmt: skip
    return [r for r in rows if r["phase"] != "opt"] + fused


def _element(node: Any, source: dict[Any, Any]) -> bool:
    """Whether ``node`` picks one output of a multi-output kernel (a ``getitem`` of a node that is
    an op, not a view, and returns a tuple): such an element has a lifetime of its own."""
    if node.target is not operator.getitem:
        return False
    producer = node.all_input_nodes[0]
    return (
        producer.op == "call_function"
        and producer not in source
        and isinstance(producer.meta.get("val"), (tuple, list))
    )


def _kind(node: Any) -> str:
    if node.target is operator.getitem:
        return "getitem"
    return aten_name(node.target) or getattr(node.target, "__name__", str(node.target))


def _value(arg: Any) -> Any:
    """An fx node's traced value; lists and tuples element-wise; other arguments as they are."""
    if hasattr(arg, "meta"):
        return arg.meta.get("val")
    if isinstance(arg, (list, tuple)):
        return type(arg)(_value(a) for a in arg)
    return arg


def _phases(gm: Any, ops: list[Any], source: dict[Any, Any], n_grads: int) -> list[str]:
    """Each op's phase from its position in the trace, which runs the step in program order:
    ``"fwd"`` up to the loss (output 0), ``"bwd"`` up to the last gradient (outputs ``1..n_grads``),
    ``"opt"`` after it."""
    output = next(n for n in gm.graph.nodes if n.op == "output")
    results = [source.get(r, r) for r in output.args[0]]
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    loss_at = order.get(results[0], -1)
    grads_at = max((order.get(r, -1) for r in results[1 : 1 + n_grads]), default=loss_at)
    return ["fwd" if order[n] <= loss_at else "bwd" if order[n] <= grads_at else "opt" for n in ops]
