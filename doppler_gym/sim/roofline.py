"""The roofline op-time model (``SimConfig(cost_model="roofline")``): each op's time on each GPU model.

Op ``i`` on a device whose GPU model (``Topology.gpus``) is ``g`` takes [s]::

    t = max(F / (P(g, precision, class) * eff), B / BW(g)) + L(g)

- ``F``: the op's FLOPs (``graph.flops``).
- ``precision``: ``graph.precisions[i]``, or ``SimConfig.precision`` when the graph has none.
- ``class``: tensor core or vector, from ``graph.kinds[i]`` (:func:`is_tensor_kind`); a graph without
  kinds is all tensor-core ops (the DOPPLER graphs' ops are einsums).
- ``P``: the GPU's dense peak for that precision and class (:meth:`~doppler_gym.topology.gpus.GpuSpec.peak`).
- ``eff``: achieved fraction of the peak. Tensor-core ops: :func:`gemm_efficiency`, which falls for small
  problems, ``eff = EFF_MAX * F / (F + F_HALF)``; vector ops: 1 (they are memory-bound at any realistic
  size: a layer norm does ~10 FLOP per 4-byte element, far below every GPU's ridge point).
- ``B``: bytes the op reads and writes in device memory, ``graph.io_bytes[i]``; where that is 0 (traffic
  unknown) the op's output, ``graph.out_bytes[i]``, is the fallback: every op writes its output at least,
  so this never overstates the traffic.
- ``BW``: the GPU's datasheet HBM bandwidth (achievable is ~88-90% of it on streaming kernels, so a
  memory-bound op is that much optimistic here); ``L``: its kernel-launch overhead.

An op with neither FLOPs nor bytes (an alias such as a ``getitem``) launches no kernel: it takes 0 s.

The efficiency curve, with ``L`` the launch overhead, makes a GEMM's time affine in its FLOPs:
``t = (F + F_HALF) / (P * EFF_MAX) + L``. Its two constants are fitted exactly (:func:`fit_gemm_efficiency`)
on two published measurements of one GPU (:data:`FIT_POINTS`: H100 SXM bf16 ``torch.matmul`` at 2048^3 and
4096^3, 676.6 and 788.7 TFLOP/s, torch-performance-test-data#79, torch 2.7 cu128) and used for every GPU and
precision; ``docs/results/physics.md`` reports the other published points (8192^3, 1024^3, A100, V100,
other precisions) as held out, with their errors. ``F_HALF`` is in FLOPs, not time: the size at which a
GEMM fills half the machine depends on its tile count against the SM count (tile and wave quantization,
NVIDIA's "Matrix Multiplication Background" guide), which is similar across these GPUs (108-132 SMs).
"""

from __future__ import annotations

import numpy as np

from doppler_gym.graph.op_kinds import TENSOR_KINDS, is_tensor_kind  # noqa: F401  re-exported
from doppler_gym.graph.types import PRECISIONS, DataflowGraph
from doppler_gym.topology.gpus import GpuSpec, gpu_spec
from doppler_gym.topology.types import Topology

FIT_GPU = "h100-sxm"
FIT_PRECISION = "bf16"
FIT_POINTS = ((2048, 2048, 2048, 676.6e12), (4096, 4096, 4096, 788.7e12))
"""``(M, N, K, measured FLOP/s)`` that :data:`EFF_MAX` and :data:`F_HALF` are fitted on: H100 SXM, bf16,
``torch.matmul`` (cuBLAS), torch 2.7 cu128, zzc0721/torch-performance-test-data#79 (reference note §2)."""


def fit_gemm_efficiency(
    points: tuple[tuple[int, int, int, float], ...], gpu: GpuSpec, precision: str
) -> tuple[float, float]:
    """``(eff_max, f_half)`` of :func:`gemm_efficiency` [-, FLOP] through two measured GEMMs exactly.

    Each point ``(M, N, K, flop_per_s)`` is a GEMM of ``F = 2 M N K`` FLOPs measured at ``flop_per_s``, i.e.
    in ``t = F / flop_per_s`` [s]; the model's time ``(F + f_half) / (P * eff_max) + L`` (compute-bound; ``P``
    the GPU's tensor peak for ``precision``, ``L`` its launch overhead) is affine in ``F``, so two points fix
    its slope ``1 / (P eff_max)`` and intercept ``f_half / (P eff_max) + L``.
    """
    if len(points) != 2:
        raise ValueError(f"fit_gemm_efficiency: give exactly two (M, N, K, FLOP/s) points, got {len(points)}")
    (f1, t1), (f2, t2) = ((2.0 * m * n * k, 2.0 * m * n * k / r) for m, n, k, r in points)
    if f1 == f2:
        raise ValueError("fit_gemm_efficiency: the two points must differ in FLOPs")
    slope = (t2 - t1) / (f2 - f1)  # [s/FLOP] = 1 / (P eff_max)
    ramp = t1 - slope * f1 - gpu.launch_overhead  # [s] = f_half / (P eff_max)
    if slope <= 0 or ramp < 0:
        raise ValueError(f"fit_gemm_efficiency: points {points} give slope {slope} s/FLOP and ramp {ramp} s; "
                         f"the curve needs a positive slope and a ramp >= 0")
    peak = gpu.peak(precision, tensor_core=True)
    return 1.0 / (slope * peak), ramp / slope


EFF_MAX, F_HALF = fit_gemm_efficiency(FIT_POINTS, gpu_spec(FIT_GPU), FIT_PRECISION)
"""Large-GEMM efficiency [-] and the FLOPs at which a GEMM reaches half of it [FLOP], fitted on
:data:`FIT_POINTS` (about 0.817 and 9.0e8)."""


def gemm_efficiency(flops: np.ndarray | float) -> np.ndarray | float:
    """Achieved fraction of the tensor-core peak of a GEMM of ``flops`` FLOPs: ``EFF_MAX * F / (F + F_HALF)``."""
    return EFF_MAX * flops / (flops + F_HALF)


def op_times(graph: DataflowGraph, gpu: GpuSpec, precision: str = "bf16") -> np.ndarray:
    """``(n_ops,) float64`` time of every op of ``graph`` on one ``gpu`` [s] (module docstring's formula).

    Args:
        graph: a graph in physical units (FLOPs, bytes).
        gpu: the GPU model.
        precision: the format of ops without one (``graph.precisions is None``), one of
            :data:`~doppler_gym.graph.types.PRECISIONS`.
    """
    if graph.units != "physical":
        raise ValueError(f"the roofline cost model needs a graph in physical units (FLOPs, bytes); graph "
                         f"{graph.name!r} has units {graph.units!r} (its costs are times): use cost_model='raw'")
    if precision not in PRECISIONS:
        raise ValueError(f"roofline: precision must be one of {PRECISIONS}, got {precision!r}")
    n = graph.n_ops
    kinds = graph.kinds if graph.kinds is not None else (None,) * n
    precisions = graph.precisions if graph.precisions is not None else (precision,) * n
    tensor = np.fromiter((is_tensor_kind(k) for k in kinds), dtype=bool, count=n)
    peaks = {(p, t): gpu.peak(p, t) for p in set(precisions) for t in (False, True)}
    peak = np.fromiter((peaks[(p, t)] for p, t in zip(precisions, tensor)), dtype=np.float64, count=n)
    flops = graph.flops
    eff = np.where(tensor, gemm_efficiency(flops) if n else flops, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        compute = np.where(flops > 0, flops / (peak * eff), 0.0)
    nbytes = np.where(graph.io_bytes > 0, graph.io_bytes, graph.out_bytes)
    memory = nbytes / gpu.hbm_bandwidth
    kernel = (flops > 0) | (nbytes > 0)
    return np.where(kernel, np.maximum(compute, memory) + gpu.launch_overhead, 0.0)


def roofline_applies(graph: DataflowGraph, topology: Topology | None) -> bool:
    """Whether ``graph`` on ``topology`` can run under the roofline, so its default config uses it
    (:func:`doppler_gym.instances.default_config`): the graph is in physical units (FLOPs, bytes; not the
    paper files' times) and every device of the topology has a GPU model (``topology.gpus`` set, as on the
    GPU presets). ``None`` (no topology known) or a topology without GPU models (``Topology.uniform``, a
    device count) is False: there the FLOP-rate model (``cost_model="topology"``) is the one that applies.
    """
    return graph.units == "physical" and topology is not None and topology.gpus is not None
