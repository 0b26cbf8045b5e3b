"""Capture a ``torch.nn.Module`` with ``torch.export``, PyTorch's supported whole-graph capture.

``torch.fx.symbolic_trace`` cannot follow Python control flow on its inputs or modules (a stock
``torch.nn.TransformerEncoderLayer`` checks its arguments and picks a fast path in ``forward``);
``torch.export.export`` traces such modules on the example inputs (control flow that depends on
tensor *values* still fails, as the fx path does). The exported graph holds ATen ops
(``aten.linear``, ``aten.scaled_dot_product_attention``, ``aten.conv2d``, ...); parameters, buffers
and inputs are placeholders, and every node's ``meta["tensor_meta"]`` has its output shape and
dtype, which is all :func:`doppler_gym.workloads.torch_fx.from_torch` needs to cost it.

torch is imported inside :func:`export_graph_module` only.
"""

from __future__ import annotations

from typing import Any


def export_graph_module(module: Any, args: tuple[Any, ...], name: str) -> Any:
    """``torch.export.export(module, args).graph_module``: ATen call_function nodes with ``tensor_meta``.

    Args:
        module: a ``torch.nn.Module``.
        args: the positional arguments of ``forward``.
        name: the module's name in error messages.

    Raises:
        ValueError: ``torch.export`` failed (the message gives its reason), or a node lacks its
            ``tensor_meta``.
    """
    import torch

    try:
        with torch.no_grad():
            program = torch.export.export(module, args)
    except Exception as exc:
        raise ValueError(
            f"from_torch: torch.export could not capture {name}: {type(exc).__name__}: {str(exc)[:500]}"
        ) from exc
    gm = program.graph_module
    for node in gm.graph.nodes:
        if node.op == "call_function" and "tensor_meta" not in node.meta and hasattr(node.meta.get("val"), "shape"):
            raise ValueError(f"from_torch: torch.export gave node {node.name} of {name} no tensor_meta")
    return gm


def aten_name(target: Any) -> str | None:
    """``"linear"`` for ``aten.linear.default`` (an ATen overload's packet name); None for other targets."""
    packet = getattr(target, "overloadpacket", None)
    return None if packet is None else packet.__name__.split(".")[-1]
