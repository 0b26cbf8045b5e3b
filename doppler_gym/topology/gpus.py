"""Datasheet figures of NVIDIA data-centre GPUs, for the roofline op-time model (:mod:`doppler_gym.sim.roofline`).

Every figure is per GPU and **dense** (NVIDIA prints 2:4-sparse tensor-core peaks, twice these, on newer
datasheets). Sources (the reference note ``shared/reference/gpu-physics.md`` §1 collects them):

- P100 PCIe 16 GB: "NVIDIA Tesla P100" datasheet (2016): 9.3 TFLOP/s fp32, 18.7 TFLOP/s fp16 (half2 on
  CUDA cores, no tensor cores), 732 GB/s HBM2, 16 GB.
- V100 SXM2 16 GB: "NVIDIA Tesla V100 GPU Accelerator" datasheet (2017/2018): 15.7 TFLOP/s fp32, 125 TFLOP/s
  fp16 tensor core (no bf16, tf32 or fp8), 900 GB/s HBM2; non-tensor fp16 31.4 TFLOP/s (2x fp32, same sheet's
  "Volta" whitepaper).
- A100 SXM 40/80 GB: "NVIDIA A100 Tensor Core GPU" datasheet (2020/2021): 19.5 TFLOP/s fp32, 156 tf32,
  312 bf16/fp16 tensor core, no fp8; 1,555 GB/s HBM2 (40 GB), 2,039 GB/s HBM2e (80 GB). Non-tensor fp16 78,
  bf16 39 TFLOP/s (NVIDIA "Hopper in depth" blog, Table 3).
- H100 SXM5 80 GB: "NVIDIA H100 Tensor Core GPU" datasheet (2022/2023): 67 TFLOP/s fp32, 494.7 tf32,
  989.4 bf16/fp16, 1,979 fp8 (dense), 3.35 TB/s HBM3, 80 GB. Non-tensor fp16/bf16 120 TFLOP/s ("Hopper in
  depth" Table 3, preliminary; Calculon's ``h100_80g_nvl8.json`` vector tier uses the same).
- H200 SXM 141 GB: H100's compute ("NVIDIA H200" product page), 4.8 TB/s HBM3e, 141 GB.
- B200 (HGX, 1000 W): NVIDIA HGX/DGX B200 per-GPU table, sparse figures halved: 75 TFLOP/s fp32, 1,100 tf32,
  2,250 bf16/fp16, 4,500 fp8; 7.7 TB/s HBM3e (8.0 in some documents), 180 GB. No published non-tensor
  fp16 figure: vector bf16/fp16 ops run at the fp32 rate here (a modeling choice).

Kernel-launch overhead: 3 us per kernel on every GPU, a GPU-side floor between back-to-back kernels (a
1024-element add measures ~1.1-1.3 us of device time, pytorch/pytorch#161104; CPU-side launch is 5-20 us
per op in eager mode, HolisticTraceAnalysis docs; CUDA graphs hide most of it). It is a modeling choice
(the reference note's recommended 3 us), not a datasheet figure.
"""

from __future__ import annotations

from dataclasses import dataclass

from doppler_gym.graph.types import PRECISIONS

LAUNCH_OVERHEAD = 3e-6  # [s] per kernel, every GPU (module docstring)


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model's datasheet figures.

    Attributes:
        name: the key of :func:`gpu_spec` (e.g. ``"h100-sxm"``).
        tensor: dense matrix peak per precision [FLOP/s], a ``((precision, peak), ...)`` tuple over
            :data:`~doppler_gym.graph.types.PRECISIONS`; ``"fp32"`` is the CUDA-core fp32 peak (an fp32 GEMM
            without TF32 runs there); a precision the GPU lacks is absent.
        vector: non-tensor (elementwise, reduction) peak per precision [FLOP/s], same form.
        hbm_bandwidth: device-memory bandwidth [B/s], datasheet peak.
        hbm_capacity: device memory [B] (decimal, as on the datasheets).
        launch_overhead: time added to every kernel [s].
    """

    name: str
    tensor: tuple[tuple[str, float], ...]
    vector: tuple[tuple[str, float], ...]
    hbm_bandwidth: float
    hbm_capacity: float
    launch_overhead: float = LAUNCH_OVERHEAD

    def __post_init__(self) -> None:
        for label in ("tensor", "vector"):
            table = dict(getattr(self, label))
            unknown = sorted(set(table) - set(PRECISIONS))
            if unknown or "fp32" not in table or not all(v > 0 for v in table.values()):
                raise ValueError(f"GpuSpec {self.name!r}: {label} must give a positive peak [FLOP/s] for 'fp32' and "
                                 f"only for precisions in {PRECISIONS}, got {getattr(self, label)!r}")
        if not (self.hbm_bandwidth > 0 and self.hbm_capacity > 0 and self.launch_overhead >= 0):
            raise ValueError(f"GpuSpec {self.name!r}: hbm_bandwidth and hbm_capacity must be > 0 and "
                             f"launch_overhead >= 0")

    def peak(self, precision: str, tensor_core: bool) -> float:
        """The peak [FLOP/s] an op of ``precision`` runs at, on tensor cores or not.

        A precision the GPU lacks falls back along :data:`FALLBACK` (fp8 -> bf16 -> fp32, fp16 -> fp32,
        tf32 -> fp32): the op runs in the next wider format the GPU has (e.g. bf16 on a V100 runs at its fp32
        rate, as PyTorch's bf16 GEMM does there without bf16 tensor cores).
        """
        if precision not in PRECISIONS:
            raise ValueError(f"GpuSpec {self.name!r}: unknown precision {precision!r}; use one of {PRECISIONS}")
        table = dict(self.tensor if tensor_core else self.vector)
        while precision not in table:
            precision = FALLBACK[precision]
        return table[precision]


FALLBACK = {"fp8": "bf16", "bf16": "fp32", "fp16": "fp32", "tf32": "fp32"}
"""The wider format a precision falls back to where a GPU lacks it (:meth:`GpuSpec.peak`)."""

_T = 1e12
_GPUS = (
    GpuSpec("p100-pcie", tensor=(("fp32", 9.3 * _T), ("fp16", 18.7 * _T)),
            vector=(("fp32", 9.3 * _T), ("fp16", 18.7 * _T)), hbm_bandwidth=732e9, hbm_capacity=16e9),
    GpuSpec("v100-sxm2", tensor=(("fp32", 15.7 * _T), ("fp16", 125 * _T)),
            vector=(("fp32", 15.7 * _T), ("fp16", 31.4 * _T)), hbm_bandwidth=900e9, hbm_capacity=16e9),
    GpuSpec("a100-sxm-40gb", tensor=(("fp32", 19.5 * _T), ("tf32", 156 * _T), ("bf16", 312 * _T), ("fp16", 312 * _T)),
            vector=(("fp32", 19.5 * _T), ("bf16", 39 * _T), ("fp16", 78 * _T)), hbm_bandwidth=1555e9,
            hbm_capacity=40e9),
    GpuSpec("a100-sxm-80gb", tensor=(("fp32", 19.5 * _T), ("tf32", 156 * _T), ("bf16", 312 * _T), ("fp16", 312 * _T)),
            vector=(("fp32", 19.5 * _T), ("bf16", 39 * _T), ("fp16", 78 * _T)), hbm_bandwidth=2039e9,
            hbm_capacity=80e9),
    GpuSpec("h100-sxm", tensor=(("fp32", 67 * _T), ("tf32", 494.7 * _T), ("bf16", 989.4 * _T), ("fp16", 989.4 * _T),
                                ("fp8", 1979 * _T)),
            vector=(("fp32", 67 * _T), ("bf16", 120 * _T), ("fp16", 120 * _T)), hbm_bandwidth=3.35e12,
            hbm_capacity=80e9),
    GpuSpec("h200-sxm", tensor=(("fp32", 67 * _T), ("tf32", 494.7 * _T), ("bf16", 989.4 * _T), ("fp16", 989.4 * _T),
                                ("fp8", 1979 * _T)),
            vector=(("fp32", 67 * _T), ("bf16", 120 * _T), ("fp16", 120 * _T)), hbm_bandwidth=4.8e12,
            hbm_capacity=141e9),
    GpuSpec("b200", tensor=(("fp32", 75 * _T), ("tf32", 1100 * _T), ("bf16", 2250 * _T), ("fp16", 2250 * _T),
                            ("fp8", 4500 * _T)),
            vector=(("fp32", 75 * _T),), hbm_bandwidth=7.7e12, hbm_capacity=180e9),
)
GPUS: dict[str, GpuSpec] = {g.name: g for g in _GPUS}
"""Every known GPU model by name."""


def gpu_names() -> tuple[str, ...]:
    """The names :func:`gpu_spec` accepts."""
    return tuple(GPUS)


def gpu_spec(name: str) -> GpuSpec:
    """The :class:`GpuSpec` of GPU model ``name``; a ValueError listing the known names otherwise."""
    if not isinstance(name, str) or name not in GPUS:
        raise ValueError(f"unknown GPU model {name!r}; known models: {', '.join(GPUS)}")
    return GPUS[name]
