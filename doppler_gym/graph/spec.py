"""Executable op specs: what a real backend needs to run an op.

An :class:`OpSpec` names a function from :data:`doppler_gym.graph.ops.OP_FUNCTIONS` (``"einsum"``
with an equation, or a named elementwise/reduction op such as ``"softmax"``), the shapes of its
operands, where each operand comes from (a producer op of the graph, or an external input that a
backend materialises itself), the output shape and the dtype.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpSpec:
    """How to execute one op.

    Attributes:
        fn: function name, ``"einsum"`` or a key of ``doppler_gym.graph.ops.OP_FUNCTIONS``.
        operand_shapes: shape of each operand, in call order.
        operand_sources: per operand, the producer op id, or ``-1`` for an external input
            (a weight or graph input that a backend creates itself, seeded).
        output_shape: shape of the op's output.
        equation: the einsum equation (``"ij,jk->ik"``) when ``fn == "einsum"``, else ``None``.
        dtype: element type of operands and output, a torch/numpy dtype name.
    """

    fn: str
    operand_shapes: tuple[tuple[int, ...], ...]
    operand_sources: tuple[int, ...]
    output_shape: tuple[int, ...]
    equation: str | None = None
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if len(self.operand_shapes) != len(self.operand_sources):
            raise ValueError(
                f"OpSpec({self.fn}): {len(self.operand_shapes)} operand shapes but "
                f"{len(self.operand_sources)} operand sources; give one source per operand"
            )
        if self.fn == "einsum" and not self.equation:
            raise ValueError("OpSpec(einsum) needs an equation such as 'ij,jk->ik'")
        object.__setattr__(self, "operand_shapes", tuple(tuple(int(d) for d in s) for s in self.operand_shapes))
        object.__setattr__(self, "operand_sources", tuple(int(s) for s in self.operand_sources))
        object.__setattr__(self, "output_shape", tuple(int(d) for d in self.output_shape))

    def to_dict(self) -> dict:
        """JSON-ready dict (inverse of :meth:`from_dict`)."""
        out = {
            "fn": self.fn,
            "operand_shapes": [list(s) for s in self.operand_shapes],
            "operand_sources": list(self.operand_sources),
            "output_shape": list(self.output_shape),
            "dtype": self.dtype,
        }
        if self.equation is not None:
            out["equation"] = self.equation
        return out

    @classmethod
    def from_dict(cls, data: dict, where: str = "spec") -> OpSpec:
        """Build from a JSON dict; raises ValueError naming ``where`` on a missing key."""
        try:
            return cls(
                fn=data["fn"],
                operand_shapes=tuple(tuple(s) for s in data["operand_shapes"]),
                operand_sources=tuple(data["operand_sources"]),
                output_shape=tuple(data["output_shape"]),
                equation=data.get("equation"),
                dtype=data.get("dtype", "float32"),
            )
        except KeyError as exc:
            raise ValueError(f"{where}: missing key {exc.args[0]!r} in op spec {data!r}") from None
