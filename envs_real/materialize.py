"""Torch kernels for the ops of a graph: from their :class:`~doppler_gym.graph.spec.OpSpec`, or
synthetic ones sized by the op's costs when a graph carries costs only.

Spec'd ops map the vocabulary of :mod:`doppler_gym.graph.ops` one to one onto torch
(:data:`TORCH_OPS`) with the same semantics as the NumPy references (``rmsnorm`` uses
:data:`~doppler_gym.graph.ops.RMSNORM_EPS`, ``rotary`` the half-split convention, ``linear`` is
``x @ w.T + b``).

**External operands** (spec source ``-1``) are drawn uniformly in ``[-0.5, 0.5)`` from
``np.random.default_rng([seed, op, operand_index])``: they depend on the op and the operand, never
on the placement or on the order ops run in. A :class:`~doppler_gym.workloads.Workload`'s tiles
(:func:`workload_externals`, or :class:`WorkloadExternals` to draw them only when materialising) or
any ``{(op, operand_index): array}`` may replace them, so ops that share a weight tile see the same
values.

**Synthetic ops** (a graph without specs, such as the DOPPLER paper files, or an op whose spec
is ``None``): op ``v`` multiplies two ``n x n`` float32 matrices with ``n**3`` multiply-adds
equal to its cost times ``scale`` (paper units: ``flops`` counts join-shape elements, i.e.
multiply-adds; physical units: ``flops / 2``), then writes an output of ``m`` elements: ``m = n*n``
(the product itself) for paper graphs, whose ``out_bytes`` column is a transfer *time*, not a size,
and ``out_bytes * scale / 4`` for physical graphs. The output is the product's first ``m`` entries
plus half the mean of the first element of every input, so it reads all its inputs (dependencies
are real) and stays bounded along deep chains. The two matrices are drawn on the run's device by
a torch generator seeded by ``(seed, op)`` (no host copy: the paper's FFNN at full size has 4.7 GB
of them); their values are the same on every GPU and differ between CPU and GPU.

``scale="auto"`` is 1 on CUDA and, on CPU, ``min(1, CPU_WORK_BUDGET / total multiply-adds)`` so a
whole CPU run stays about a tenth of a second: the paper's FFNN (2.3e12 multiply-adds) runs at
scale ~9e-5. A linear scale keeps every op's share of the total work; it does not keep the ratio
of compute to transfer time of the original hardware.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from doppler_gym.graph.analysis import topological_order
from doppler_gym.graph.ops import RMSNORM_EPS, check_spec
from doppler_gym.graph.types import DataflowGraph

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from doppler_gym.workloads.workload import Workload

CPU_WORK_BUDGET = 2e8
"""Total synthetic multiply-adds of one CPU run under ``synthetic_scale="auto"`` [multiply-adds]."""

SYNTHETIC_DTYPE = "float32"
MAX_SYNTHETIC_ELEMENTS = 2**31 - 1  # one tensor's element limit; larger outputs mean a wrong scale


# --------------------------------------------------------------------------------- torch vocabulary
def _einsum(x: Sequence[torch.Tensor], eq: str | None) -> torch.Tensor:
    import torch

    return torch.einsum(eq, *x)


def _add(x: Sequence[torch.Tensor], eq: str | None) -> torch.Tensor:
    out = x[0] + x[1]
    for t in x[2:]:
        out = out + t
    return out


def _mul(x: Sequence[torch.Tensor], eq: str | None) -> torch.Tensor:
    out = x[0] * x[1]
    for t in x[2:]:
        out = out * t
    return out


def _relu(x: Sequence[torch.Tensor], eq: str | None) -> torch.Tensor:
    import torch

    return torch.relu(x[0])


def _silu(x: Sequence[torch.Tensor], eq: str | None) -> torch.Tensor:
    import torch.nn.functional as F

    return F.silu(x[0])


def _swiglu(x: Sequence[torch.Tensor], eq: str | None) -> torch.Tensor:
    import torch.nn.functional as F

    return F.silu(x[0]) * x[1]


def _softmax(x: Sequence[torch.Tensor], eq: str | None) -> torch.Tensor:
    import torch

    return torch.softmax(x[0], dim=-1)


def _rmsnorm(x: Sequence[torch.Tensor], eq: str | None) -> torch.Tensor:
    import torch

    a, w = x
    return a * torch.rsqrt((a * a).mean(dim=-1, keepdim=True) + RMSNORM_EPS) * w


def _rotary(x: Sequence[torch.Tensor], eq: str | None) -> torch.Tensor:
    import torch

    a, cos, sin = x
    h = a.shape[-1] // 2
    a1, a2 = a[..., :h], a[..., h:]
    return torch.cat([a1 * cos - a2 * sin, a1 * sin + a2 * cos], dim=-1)


def _linear(x: Sequence[torch.Tensor], eq: str | None) -> torch.Tensor:
    import torch.nn.functional as F

    return F.linear(x[0], x[1], x[2] if len(x) == 3 else None)


TORCH_OPS: dict[str, Callable[[Sequence[Any], str | None], Any]] = {
    "einsum": _einsum,
    "add": _add,
    "mul": _mul,
    "relu": _relu,
    "silu": _silu,
    "swiglu": _swiglu,
    "softmax": _softmax,
    "rmsnorm": _rmsnorm,
    "rotary": _rotary,
    "linear": _linear,
}
"""Torch implementation of every function of :data:`doppler_gym.graph.ops.OP_FUNCTIONS`:
``(operands, equation) -> output``."""


# --------------------------------------------------------------------------------------- kernels
@dataclass(frozen=True, eq=False)
class Kernel:
    """How to run one op.

    Attributes:
        op: op id.
        fn: ``OpSpec.fn``, or ``"synthetic"``.
        sources: per operand in call order, the producer op id or ``-1`` (external).
        externals: ``{operand_index: array}`` host values of the external operands.
        dtype: torch dtype name of the operands and output.
        out_shape: shape of the output.
        equation: einsum equation or ``None``.
        synthetic_n: side of the synthetic matmul (0 for spec'd ops).
        synthetic_seed: seed of the synthetic matrices (drawn on the device by :meth:`operands`).
    """

    op: int
    fn: str
    sources: tuple[int, ...]
    externals: Mapping[int, np.ndarray]
    dtype: str
    out_shape: tuple[int, ...]
    equation: str | None = None
    synthetic_n: int = 0
    synthetic_seed: int = 0

    @property
    def out_nbytes(self) -> int:
        """Size of the output [B]."""
        return math.prod(self.out_shape) * np.dtype(_np_dtype(self.dtype)).itemsize

    @property
    def flops(self) -> float:
        """Multiply-adds x 2 of a synthetic op (0 for spec'd ops) [FLOP]."""
        return 2.0 * self.synthetic_n**3

    def external_operands(self, device: str) -> dict[int, torch.Tensor]:
        """``{operand_index: tensor}`` of the external operands on ``device``: the host arrays, or
        for a synthetic op its two ``n x n`` matrices drawn uniformly in ``[-0.5, 0.5)`` by a torch
        generator of ``device``'s type seeded by ``(seed, op)`` (the same values on every GPU,
        other values on the CPU)."""
        import torch

        if self.fn == "synthetic":
            gen = torch.Generator(device=device).manual_seed(self.synthetic_seed)
            n = self.synthetic_n
            return {
                i: torch.rand((n, n), generator=gen, device=device, dtype=torch.float32) - 0.5 for i in (0, 1)
            }
        dt = torch_dtype(self.dtype)
        return {i: torch.from_numpy(a).to(device=device, dtype=dt) for i, a in self.externals.items()}

    def __call__(self, operands: Sequence[torch.Tensor]) -> torch.Tensor:
        """Run the op on ``operands`` (in call order, all on one device)."""
        if self.fn == "synthetic":
            return synthetic_matmul(operands, math.prod(self.out_shape))
        return TORCH_OPS[self.fn](operands, self.equation)


def synthetic_matmul(operands: Sequence[torch.Tensor], m: int) -> torch.Tensor:
    """The kernel of a synthetic op (an op with costs but no spec): a matmul sized by its cost,
    plus a scalar from each input so the dependencies are real data dependencies.

    Args:
        operands: the op's two ``(n, n)`` float32 matrices (see :meth:`Kernel.external_operands`),
            then its inputs (producer outputs, any shape), all on one device.
        m: number of output elements (the op's output size in float32 elements).

    Returns:
        ``(m,)`` float32 tensor: the first ``m`` entries of ``a @ b`` flattened (or its first entry
        repeated when ``m > n * n``), plus half the mean of the inputs' first elements.
    """
    a, b, inputs = operands[0], operands[1], operands[2:]
    base = (a @ b).reshape(-1)
    s: Any = 0.0
    if inputs:
        for t in inputs:
            s = s + t.reshape(-1)[0].to(base.dtype)
        s = s * (0.5 / len(inputs))
    if m <= base.shape[0]:
        return base[:m] + s
    return (base[0] + s).expand(m).contiguous()


@dataclass(frozen=True, eq=False)
class Materialized:
    """The kernels of a graph.

    Attributes:
        graph: the graph.
        kernels: one :class:`Kernel` per op.
        synthetic: ``(n_ops,) bool``: ops run as synthetic matmuls.
        scale: the synthetic scale used (1.0 when no op is synthetic).
        seed: seed of the external operands.
    """

    graph: DataflowGraph
    kernels: tuple[Kernel, ...]
    synthetic: np.ndarray
    scale: float
    seed: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def any_synthetic(self) -> bool:
        return bool(self.synthetic.any())

    @property
    def out_nbytes(self) -> np.ndarray:
        """``(n_ops,) float64`` real output size of each op [B]."""
        return np.array([k.out_nbytes for k in self.kernels], dtype=np.float64)


def resolve_scale(graph: DataflowGraph, scale: float | str, device_kind: str) -> float:
    """The synthetic scale: a positive number, or ``"auto"`` (see the module docstring)."""
    if scale == "auto":
        if device_kind == "cuda":
            return 1.0
        total = float(_madds(graph).sum())
        return 1.0 if total <= CPU_WORK_BUDGET else CPU_WORK_BUDGET / total
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating)) or not 0 < scale < np.inf:
        raise ValueError(f"synthetic_scale must be 'auto' or a positive finite number, got {scale!r}")
    return float(scale)


def _madds(graph: DataflowGraph) -> np.ndarray:
    """Multiply-adds each op stands for: paper costs are join-shape elements, FLOPs count 2 per MAC."""
    return graph.flops if graph.units == "paper" else graph.flops / 2.0


def materialize(
    graph: DataflowGraph,
    *,
    seed: int = 0,
    externals: Mapping[tuple[int, int], np.ndarray] | WorkloadExternals | None = None,
    synthetic_scale: float | str = "auto",
    device_kind: str = "cpu",
) -> Materialized:
    """Kernels and host external operands for every op of ``graph``.

    Args:
        graph: any graph; ops with a spec run it, the others run synthetic matmuls.
        seed: seed of the external operands (per ``(seed, op, operand_index)``).
        externals: optional ``{(op, operand_index): array}`` overriding drawn externals, or a
            :class:`WorkloadExternals` drawn here (each kernel keeps a copy of its tiles).
        synthetic_scale: ``"auto"`` or a positive factor on synthetic ops' costs.
        device_kind: ``"cpu"`` or ``"cuda"`` (only for ``"auto"`` scaling).

    Raises:
        ValueError: an invalid spec, spec sources that disagree with the edges, an external of the
            wrong shape, or a synthetic output too large for one tensor.
    """
    externals = externals.draw() if isinstance(externals, WorkloadExternals) else externals or {}
    n = graph.n_ops
    specs = graph.specs if graph.specs is not None else (None,) * n
    synthetic = np.array([s is None for s in specs], dtype=bool)
    scale = resolve_scale(graph, synthetic_scale, device_kind) if synthetic.any() else 1.0
    madds = _madds(graph)
    kernels = []
    for v in range(n):
        where = f"graph {graph.name!r} op {v} ({graph.op_name(v)})"
        preds = tuple(int(u) for u in dict.fromkeys(graph.predecessors(v).tolist()))
        spec = specs[v]
        if spec is None:
            side = max(1, round(float(madds[v] * scale) ** (1.0 / 3.0)))
            if graph.units == "paper":
                m = side * side
            else:
                m = max(1, round(float(graph.out_bytes[v]) * scale / 4.0))
            if m > MAX_SYNTHETIC_ELEMENTS:
                raise ValueError(
                    f"{where}: a synthetic output of {m} elements is too large; pass a smaller "
                    f"synthetic_scale"
                )
            # the two matrices are drawn on the run's device (see external_tensors): no host copy
            kernels.append(
                Kernel(
                    v, "synthetic", (-1, -1, *preds), {}, SYNTHETIC_DTYPE, (m,), None, side, _seed(seed, v)
                )
            )
            continue
        if spec.fn not in TORCH_OPS:
            raise ValueError(f"{where}: no torch implementation of {spec.fn!r}; known: {sorted(TORCH_OPS)}")
        check_spec(spec, where)
        sources = {s for s in spec.operand_sources if s != -1}
        if sources != set(preds):
            raise ValueError(
                f"{where}: spec operand sources {sorted(sources)} differ from the graph's predecessors "
                f"{sorted(preds)}; every edge must feed an operand"
            )
        ext = {
            i: _draw(seed, v, i, shape, spec.dtype, externals, where)
            for i, (src, shape) in enumerate(zip(spec.operand_sources, spec.operand_shapes))
            if src == -1
        }
        kernels.append(
            Kernel(v, spec.fn, spec.operand_sources, ext, spec.dtype, spec.output_shape, spec.equation)
        )
    notes = ()
    if synthetic.any():
        note = (
            f"{int(synthetic.sum())} of {n} ops are synthetic matmuls sized by their costs x {scale:.3g} "
            f"(see envs_real.materialize)"
        )
        notes = (note,)
    return Materialized(graph, tuple(kernels), synthetic, scale, seed, notes)


def _np_dtype(name: str) -> str:
    # numpy has no bfloat16: host arrays of bfloat16 ops are float32, cast on the device
    return "float32" if name == "bfloat16" else name


def _draw(
    seed: int,
    op: int,
    index: int,
    shape: tuple[int, ...],
    dtype: str,
    externals: Mapping[tuple[int, int], np.ndarray],
    where: str,
) -> np.ndarray:
    if (op, index) in externals:
        arr = np.array(externals[(op, index)], dtype=_np_dtype(dtype), order="C")  # keeps 0-d as 0-d
        if arr.shape != tuple(shape):
            raise ValueError(
                f"{where}: external operand {index} should be {tuple(shape)} but the given array is "
                f"{arr.shape}"
            )
        return arr
    rng = np.random.default_rng([seed, op, index])
    return rng.uniform(-0.5, 0.5, size=shape).astype(_np_dtype(dtype))


def _seed(seed: int, op: int) -> int:
    """A 63-bit torch seed from ``(seed, op)``."""
    return int(np.random.SeedSequence([seed, op]).generate_state(1, np.uint64)[0] >> np.uint64(1))


def workload_externals(workload: Workload, seed: int = 0) -> dict[tuple[int, int], np.ndarray]:
    """``{(op, operand_index): tile}`` of a workload's full random inputs (float32), so ops sharing a
    weight tile see the same values and the assembled outputs equal the untiled computation."""
    return workload.externals(workload.random_inputs(seed, np.float32))


@dataclass(frozen=True, eq=False)
class WorkloadExternals:
    """A workload's input tiles, to be drawn by :func:`materialize` (:meth:`draw`), not before.

    :class:`~envs_real.backend.RealBackend` binds a workload's graph to one of these, so the
    workload's full inputs (gigabytes for a large workload) are drawn when its kernels are
    materialised, after the call's estimate passed the memory guard, never when the backend is
    built; and they are freed once the kernels hold their tiles. It pickles as the workload and the
    seed: a rank process draws the same tiles itself.

    Attributes:
        workload: the :class:`~doppler_gym.workloads.Workload`.
        seed: seed of its random inputs.
    """

    workload: Workload
    seed: int = 0

    def draw(self) -> dict[tuple[int, int], np.ndarray]:
        """:func:`workload_externals` of the workload and seed (drawn anew at every call)."""
        return workload_externals(self.workload, self.seed)


# -------------------------------------------------------------------------------------- tensors
def torch_dtype(name: str) -> torch.dtype:
    """``"float32"`` -> ``torch.float32``."""
    import torch

    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}; use a torch dtype name such as 'float32'")
    return dt


def external_tensors(mat: Materialized, op_device: Sequence[str]) -> list[dict[int, torch.Tensor]]:
    """Per op, its external operands as torch tensors on ``op_device[op]`` (put there before a run,
    like weights resident on their device)."""
    return [k.external_operands(op_device[k.op]) for k in mat.kernels]


def reference_outputs(mat: Materialized, device: str = "cpu") -> dict[int, torch.Tensor]:
    """Every op's output computed sequentially on one device, in topological order: the
    single-device reference a placed run must reproduce (``{op: tensor}``)."""
    import torch

    ext = external_tensors(mat, [device] * mat.graph.n_ops)
    values: dict[int, torch.Tensor] = {}
    with torch.no_grad():
        for v in topological_order(mat.graph).tolist():
            k = mat.kernels[v]
            operands = [values[s] if s != -1 else ext[v][i] for i, s in enumerate(k.sources)]
            values[v] = k(operands)
    return values
