"""Named topologies built from published hardware figures.

Every preset is a small function whose docstring cites the figures it uses. Conventions shared by
all presets:

- ``speed`` is the **fp32 non-tensor-core peak** [FLOP/s] of each GPU, so the presets compare
  like with like (the DOPPLER paper's graphs are fp32). Tensor-core peaks are given as constants
  for users who want them; build one with ``dataclasses.replace(topo, speed=...)``.
- ``memory`` is the HBM capacity in decimal bytes (16 GB = 16e9 B), as on the datasheets.
- ``bandwidth`` is **per direction** [B/s]. NVLink, NVSwitch and InfiniBand use the datasheet
  peak; PCIe uses an effective peer-to-peer figure (see :func:`p100x4` for why).
- ``latency`` [s] is an order-of-magnitude modeling choice, not a datasheet figure: a small
  GPU-to-GPU copy costs microseconds, dominated by DMA/driver set-up rather than the wire
  (Li et al., "Evaluating Modern GPU Interconnect: PCIe, NVLink, NV-SLI, NVSwitch and
  GPUDirect", IEEE TPDS 2020, measures these on DGX-1 and DGX-2).
- ``gpus`` names each device's GPU model (:mod:`doppler_gym.topology.gpus`), whose per-precision peaks,
  HBM bandwidth and launch overhead the roofline cost model (``SimConfig(cost_model="roofline")``) uses in
  place of ``speed``.
- ``link_kinds[i][j]`` names the direct link ``i -> j``: ``"pcie"``, ``"nvlink"`` (one NVLink),
  ``"nvlink-x2"`` (two bonded NVLinks), ``"nvswitch"``, ``"ib"``, ``"wan"`` (between datacentres,
  :func:`multi_datacentre`); ``""`` where there is no direct link and on the diagonal.

Besides the fixed names, ``"uniform<N>"`` (e.g. ``"uniform4"``) gives ``Topology.uniform(N)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from doppler_gym.topology.types import (
    DEFAULT_BANDWIDTH,
    DEFAULT_LATENCY,
    DEFAULT_MEMORY,
    DEFAULT_SPEED,
    Topology,
)

NO_LINK = ""  # link_kinds label of a pair without a direct link (and of the diagonal)

# ---------------------------------------------------------------------- published figures
# NVIDIA Tesla P100 PCIe (datasheet "NVIDIA Tesla P100", 2016): 9.3 TFLOP/s fp32, 16 GB HBM2.
P100_PCIE_FP32 = DEFAULT_SPEED  # [FLOP/s] 9.3e12
P100_MEMORY = DEFAULT_MEMORY  # [B] 16e9
# PCIe 3.0 x16: 8 GT/s x 16 lanes x 128b/130b = 15.75 GB/s per direction theoretical.
PCIE3_X16_PEAK = 15.75e9  # [B/s] per direction, for reference only
PCIE3_X16_P2P = DEFAULT_BANDWIDTH  # [B/s] 12e9, effective peer-to-peer (what p100x4 uses)
PCIE_LATENCY = DEFAULT_LATENCY  # [s] 10e-6

# NVIDIA Tesla V100 SXM2 (datasheet "NVIDIA Tesla V100 GPU Accelerator", 2017/2018).
V100_SXM2_FP32 = 15.7e12  # [FLOP/s]
V100_SXM2_FP16_TENSOR = 125e12  # [FLOP/s] for reference only
V100_MEMORY = 16e9  # [B] the 16 GB part of the original DGX-1V (a 32 GB part exists since 2018)
NVLINK2_PER_LINK = 25e9  # [B/s] per direction per NVLink 2.0 link (DGX-1 whitepaper)
# NVLink latency, one modeling choice with two uses. A transfer of the simulator is a standalone
# GPU-to-GPU copy, so its latency includes the copy's DMA/driver set-up (module docstring): 2 us. A
# hop of a collective schedule (doppler_gym.comm) moves a chunk inside one resident kernel, which
# pays no set-up per chunk, so it takes the TE-CCL paper's per-hop NVLink alpha: 0.7 us.
NVLINK_LATENCY = 2e-6  # [s] per simulated transfer over NVLink
NVLINK2_HOP_ALPHA = 0.7e-6  # [s] per NVLink hop of a collective schedule (the comm topologies)

# NVIDIA H100 SXM5 (datasheet "NVIDIA H100 Tensor Core GPU", 2022/2023).
H100_SXM_FP32 = 67e12  # [FLOP/s] fp32 non-tensor
H100_SXM_BF16_DENSE = 989.4e12  # [FLOP/s] bf16 tensor core, dense (1979 with 2:4 sparsity)
H100_MEMORY = 80e9  # [B] HBM3
NVLINK4_PER_GPU = 450e9  # [B/s] per direction (900 GB/s bidirectional, 18 NVLink4 links)
NVSWITCH_LATENCY = 2e-6  # [s] modeling choice (see module docstring)
# DGX H100: 8x ConnectX-7, one 400 Gb/s InfiniBand NDR port per GPU for the compute fabric.
IB_NDR_PER_GPU = 400e9 / 8  # [B/s] 50e9 per direction
IB_LATENCY = 5e-6  # [s] modeling choice: ~1-2 us NIC + switch, plus GPU-side set-up

# DGX-1 with V100, hybrid cube-mesh: number of NVLinks between GPU i and GPU j (0 = none). This is
# the `nvidia-smi topo -m` matrix of a DGX-1V (NV1/NV2/SYS) and the hybrid cube-mesh of the "NVIDIA
# DGX-1 With Tesla V100 System Architecture" whitepaper (2017): a cube whose 12 edges are NVLinked
# (some doubly) plus the diagonals of two opposite faces ({0,1,2,3} and {4,5,6,7} are complete);
# every GPU uses all 6 of its links, which form three interwoven rings of single links. It is the
# one DGX-1 description: the collective scheduler's dgx1/ndv2 machines (doppler_gym.comm.topology)
# are built from it, renumbered to TE-CCL's GPU order.
DGX1V_NVLINKS = np.array(
    [
        # 0  1  2  3  4  5  6  7
        [0, 1, 1, 2, 2, 0, 0, 0],  # GPU0
        [1, 0, 2, 1, 0, 2, 0, 0],  # GPU1
        [1, 2, 0, 2, 0, 0, 1, 0],  # GPU2
        [2, 1, 2, 0, 0, 0, 0, 1],  # GPU3
        [2, 0, 0, 0, 0, 1, 1, 2],  # GPU4
        [0, 2, 0, 0, 1, 0, 2, 1],  # GPU5
        [0, 0, 1, 0, 1, 2, 0, 2],  # GPU6
        [0, 0, 0, 1, 2, 1, 2, 0],  # GPU7
    ],
    dtype=np.int64,
)
DGX1V_NVLINKS.setflags(write=False)


# ---------------------------------------------------------------------- helpers
def _kinds(labels: np.ndarray) -> tuple[tuple[str, ...], ...]:
    """``(D, D)`` object/str array -> nested tuples, with :data:`NO_LINK` on the diagonal."""
    d = labels.shape[0]
    return tuple(tuple(NO_LINK if i == j else str(labels[i, j]) for j in range(d)) for i in range(d))


def _gpu_names(prefix: str, n: int) -> tuple[str, ...]:
    """``("<prefix>0", ..., "<prefix><n-1>")``."""
    return tuple(f"{prefix}{k}" for k in range(n))


def _nvswitch_node(n_gpus: int, per_gpu: float = NVLINK4_PER_GPU) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bandwidth [B/s], latency [s] and kind matrices of ``n_gpus`` GPUs all-to-all over NVSwitch,
    ``per_gpu`` [B/s] per direction between every pair."""
    off = ~np.eye(n_gpus, dtype=bool)
    bandwidth = np.where(off, per_gpu, 0.0)
    latency = np.where(off, NVSWITCH_LATENCY, 0.0)
    kinds = np.where(off, "nvswitch", NO_LINK).astype(object)
    return bandwidth, latency, kinds


# ---------------------------------------------------------------------- presets
def p100x4() -> Topology:
    """The DOPPLER paper's machine: 4x NVIDIA Tesla P100 16 GB (PCIe) over PCIe 3.0 x16.

    Figures:
        - speed 9.3 TFLOP/s fp32 peak, memory 16 GB HBM2: "NVIDIA Tesla P100" datasheet (2016),
          PCIe form factor.
        - bandwidth 12 GB/s per direction, every pair: PCIe 3.0 x16 is 8 GT/s x 16 lanes with
          128b/130b coding = 15.75 GB/s per direction ("PCI Express Base Specification 3.0", 2010).
          Packet headers and flow control cost ~20-25%, and measured GPU peer-to-peer copies on
          PCIe 3.0 x16 reach ~10-13 GB/s (cf. Li et al., IEEE TPDS 2020), so we use the effective
          12 GB/s rather than the theoretical peak; it equals ``Topology.uniform``'s default.
        - latency 10 us per transfer: order of magnitude of a small peer-to-peer cudaMemcpy over
          PCIe (driver + DMA set-up), a modeling choice.

    All pairs are treated as directly linked (through the PCIe switch / root complex); contention on
    shared upstream ports is not modeled.
    """
    n = 4
    off = ~np.eye(n, dtype=bool)
    return Topology(
        speed=np.full(n, P100_PCIE_FP32),
        memory=np.full(n, P100_MEMORY),
        bandwidth=np.where(off, PCIE3_X16_P2P, 0.0),
        latency=np.where(off, PCIE_LATENCY, 0.0),
        name="p100x4",
        device_names=_gpu_names("gpu", n),
        gpus=("p100-pcie",) * n,
        link_kinds=_kinds(np.where(off, "pcie", NO_LINK).astype(object)),
    )


def v100x8_dgx1() -> Topology:
    """NVIDIA DGX-1 with 8x Tesla V100 SXM2 16 GB, hybrid cube-mesh NVLink 2.0.

    Figures:
        - speed 15.7 TFLOP/s fp32 peak, memory 16 GB HBM2: "NVIDIA Tesla V100 GPU Accelerator"
          datasheet (2017). (Tensor-core fp16 peak is 125 TFLOP/s: :data:`V100_SXM2_FP16_TENSOR`.)
        - links: "NVIDIA DGX-1 With Tesla V100 System Architecture" whitepaper (2017): each V100 has
          6 NVLink 2.0 links of 25 GB/s per direction; pairs joined by two links get 50 GB/s
          (``"nvlink-x2"``), by one link 25 GB/s (``"nvlink"``). The multiplicities are
          :data:`DGX1V_NVLINKS` (16 linked pairs, 8 of them doubled; 12 pairs not linked).
        - latency 2 us per NVLink hop: a modeling choice (module docstring).

    Pairs without an NVLink (``SYS`` in ``nvidia-smi topo -m``) are left unlinked, so transfers
    between them are staged through an intermediate GPU over NVLink (as NCCL's rings do) instead of
    crossing PCIe and the inter-socket link, which is slower.
    """
    n = 8
    counts = DGX1V_NVLINKS
    kinds = np.full((n, n), NO_LINK, dtype=object)
    kinds[counts == 1] = "nvlink"
    kinds[counts == 2] = "nvlink-x2"
    return Topology(
        speed=np.full(n, V100_SXM2_FP32),
        memory=np.full(n, V100_MEMORY),
        bandwidth=counts * NVLINK2_PER_LINK,
        latency=np.where(counts > 0, NVLINK_LATENCY, 0.0),
        name="v100x8-dgx1",
        device_names=_gpu_names("gpu", n),
        gpus=("v100-sxm2",) * n,
        link_kinds=_kinds(kinds),
    )


def h100x8_nvswitch() -> Topology:
    """NVIDIA DGX H100: 8x H100 SXM5 80 GB, all-to-all over NVSwitch (NVLink 4).

    Figures:
        - speed 67 TFLOP/s = fp32 non-tensor peak, "NVIDIA H100 Tensor Core GPU" datasheet (2022),
          SXM5. Chosen for consistency with the other presets (fp32 everywhere). The bf16 tensor
          core peak is 989.4 TFLOP/s dense (1979 with 2:4 sparsity), :data:`H100_SXM_BF16_DENSE`;
          for bf16 workloads use ``dataclasses.replace(topo, speed=np.full(8, H100_SXM_BF16_DENSE))``.
        - memory 80 GB HBM3 (same datasheet).
        - bandwidth 450 GB/s per direction between every pair: each H100 has 18 NVLink 4 links,
          900 GB/s bidirectional, into the four NVSwitch chips of the baseboard ("NVIDIA DGX H100
          System Architecture" / "NVIDIA H100 Tensor Core GPU Architecture" whitepapers, 2022). One
          GPU's NVLink port limit is modeled as the bandwidth of each pair; the simulator does not
          model several flows sharing that port.
        - latency 2 us per transfer: a modeling choice (module docstring).
    """
    return _dgx("h100x8-nvswitch", 1, "h100-sxm", H100_SXM_FP32, H100_MEMORY, NVLINK4_PER_GPU, 0.0)


def _dgx(name: str, nodes: int, gpu: str, speed: float, memory: float, nvlink: float, ib: float) -> Topology:
    """``nodes`` (1 or 2) DGX-style nodes of 8 GPUs of model ``gpu`` (fp32 ``speed`` [FLOP/s], ``memory`` [B]),
    all-to-all over NVSwitch at ``nvlink`` [B/s per direction]; two nodes are joined rail by rail at ``ib``
    [B/s per direction per GPU] (:func:`_two_nodes`). Names ``gpu<g>`` for one node, ``node<k>/gpu<g>`` for two."""
    per_node = 8
    n = nodes * per_node
    if nodes == 1:
        bandwidth, latency, kinds = _nvswitch_node(n, nvlink)
        names = _gpu_names("gpu", n)
    else:
        bandwidth, latency, kinds = _two_nodes(per_node, nvlink, ib)
        names = tuple(f"node{k // per_node}/gpu{k % per_node}" for k in range(n))
    return Topology(
        speed=np.full(n, speed), memory=np.full(n, memory), bandwidth=bandwidth, latency=latency, name=name,
        device_names=names, link_kinds=_kinds(kinds), gpus=(gpu,) * n,
    )


def _two_nodes(per_node: int, per_gpu: float, ib_per_gpu: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bandwidth [B/s], latency [s] and kind matrices of two NVSwitch nodes of ``per_node`` GPUs
    (``per_gpu`` per direction inside a node) joined rail by rail: GPU ``g`` of node 0 to GPU ``g`` of
    node 1 over InfiniBand at ``ib_per_gpu`` per direction, :data:`IB_LATENCY`."""
    n = 2 * per_node
    intra_bw, intra_lat, intra_kinds = _nvswitch_node(per_node, per_gpu)
    bandwidth = np.zeros((n, n))
    latency = np.zeros((n, n))
    kinds = np.full((n, n), NO_LINK, dtype=object)
    for node in range(2):
        block = slice(node * per_node, (node + 1) * per_node)
        bandwidth[block, block] = intra_bw
        latency[block, block] = intra_lat
        kinds[block, block] = intra_kinds
    for g in range(per_node):
        a, b = g, per_node + g
        bandwidth[a, b] = bandwidth[b, a] = ib_per_gpu
        latency[a, b] = latency[b, a] = IB_LATENCY
        kinds[a, b] = kinds[b, a] = "ib"
    return bandwidth, latency, kinds


def h100x16_2node() -> Topology:
    """Two DGX H100 joined by a rail-optimised InfiniBand NDR fabric (16 GPUs).

    Devices ``0..7`` are node 0, ``8..15`` node 1 (names ``node<k>/gpu<g>``). Each node is
    :func:`h100x8_nvswitch` (the DGX H100 one-node preset; this one is the two-node DGX H100).

    Figures:
        - inter-node: each DGX H100 GPU has its own ConnectX-7 400 Gb/s InfiniBand NDR port = 50 GB/s
          per direction ("NVIDIA DGX H100" datasheet, 2022; "NVIDIA DGX SuperPOD: Next Generation
          Scalable Infrastructure for AI Leadership, Reference Architecture featuring DGX H100",
          2023). The SuperPOD fabric is rail-optimised: NIC ``g`` of every node sits on leaf switch
          (rail) ``g``, so we link GPU ``g`` of node 0 directly to GPU ``g`` of node 1 (``"ib"``).
        - cross-rail pairs (``node0/gpu a`` to ``node1/gpu b``, ``a != b``) have no direct link:
          they route over NVSwitch to the rail GPU and then over IB (two hops), as NCCL's PXN does,
          rather than through the spine, which is not modeled.
        - latency 5 us per IB hop: a modeling choice, ~1-2 us NIC + switch plus GPU-side set-up.
    """
    return _dgx("h100x16-2node", 2, "h100-sxm", H100_SXM_FP32, H100_MEMORY, NVLINK4_PER_GPU, IB_NDR_PER_GPU)


# ---------------------------------------------------------------------- multi-datacentre
# NVIDIA A100 SXM4 80 GB (datasheet "NVIDIA A100 Tensor Core GPU", 2020/2021): 19.5 TFLOP/s fp32, 80 GB
# HBM2e, NVLink 3 at 600 GB/s bidirectional per GPU (12 links) = 300 GB/s per direction through NVSwitch.
A100_SXM_FP32 = 19.5e12  # [FLOP/s]
A100_MEMORY = 80e9  # [B]
NVLINK3_PER_GPU = 300e9  # [B/s] per direction
# Light in silica fibre (group index ~1.47) covers ~204,000 km/s: ~4.9 us per km one way, "about 5 us
# per km". Great-circle distances understate fibre routes (often 1.2-1.5x longer), so latencies from
# them are lower bounds.
FIBRE_DELAY_PER_KM = 5e-6  # [s/km] one way
WAN_BANDWIDTH = 100e9 / 8  # [B/s] 12.5e9: one 100 Gb/s data-centre interconnect wavelength, per direction
WAN_GATEWAY_LATENCY = 20e-6  # [s] modeling choice: NICs, routers and DCI optics at both ends
# Great-circle distances [km] of the dc3 preset's sites (New York, San Francisco, London).
DC3_DISTANCES_KM = ((0.0, 4130.0, 5570.0), (4130.0, 0.0, 8640.0), (5570.0, 8640.0, 0.0))

# GPU types a site may hold: fp32 speed [FLOP/s], memory [B], intra-site bandwidth per direction [B/s],
# intra-site latency [s], link kind. V100 sites are the fully NVLinked half of a DGX-1 (GPUs 0-3, one or
# two 25 GB/s links per pair: DGX1V_NVLINKS); with more than 4 V100 the pairs are given one NVLink each.
SITE_GPU_MODELS = {"h100": "h100-sxm", "a100": "a100-sxm-80gb", "v100": "v100-sxm2"}  # topology.gpus names
SITE_GPUS: dict[str, tuple[float, float, float, float, str]] = {
    "h100": (H100_SXM_FP32, H100_MEMORY, NVLINK4_PER_GPU, NVSWITCH_LATENCY, "nvswitch"),
    "a100": (A100_SXM_FP32, A100_MEMORY, NVLINK3_PER_GPU, NVSWITCH_LATENCY, "nvswitch"),
    "v100": (V100_SXM2_FP32, V100_MEMORY, NVLINK2_PER_LINK, NVLINK_LATENCY, "nvlink"),
}


def wan_latency(distance_km: float) -> float:
    """One-way latency of a WAN link [s]: :data:`FIBRE_DELAY_PER_KM` x distance + :data:`WAN_GATEWAY_LATENCY`."""
    if not (isinstance(distance_km, (int, float, np.integer, np.floating)) and 0 <= distance_km < np.inf):
        raise ValueError(f"wan_latency: distance must be a finite number of km >= 0, got {distance_km!r}")
    return float(distance_km) * FIBRE_DELAY_PER_KM + WAN_GATEWAY_LATENCY


def multi_datacentre(
    sites: tuple[str, ...] = ("h100", "a100"),
    gpus_per_site: int = 4,
    distance_km: float | object = 1000.0,
    wan_bandwidth: float = WAN_BANDWIDTH,
    name: str | None = None,
) -> Topology:
    """Datacentres joined by WAN links through one gateway per site.

    Device ``s * gpus_per_site + g`` is GPU ``g`` of site ``s`` (named ``dc<s>/<type>-<g>``). GPUs of a
    site are all-to-all at their type's intra-node figures (:data:`SITE_GPUS`). GPU 0 of each site stands
    for its WAN gateway (NIC, routers, DCI optics): only gateways are joined across sites, by a direct
    ``"wan"`` link each way, so every cross-site transfer is routed GPU -> gateway -> WAN -> gateway -> GPU
    (store-and-forward; ``Topology.route`` finds it, as no other path exists).

    Figures:
        - WAN bandwidth: a parameter [B/s per direction]; default one 100 Gb/s DCI wavelength, 12.5 GB/s
          (:data:`WAN_BANDWIDTH`).
        - WAN latency: ``distance_km`` x 5 us/km (light in fibre, group index ~1.47: ~4.9 us/km) plus
          20 us at the gateways (:func:`wan_latency`); distances are great-circle, so a lower bound.
        - GPUs: H100 SXM5 (67 TFLOP/s fp32, 80 GB, NVLink 4 450 GB/s per direction, "NVIDIA H100 Tensor
          Core GPU" datasheet 2022), A100 SXM4 (19.5 TFLOP/s fp32, 80 GB, NVLink 3 300 GB/s per
          direction, "NVIDIA A100 Tensor Core GPU" datasheet 2021), V100 SXM2 (15.7 TFLOP/s, 16 GB,
          25 GB/s per NVLink 2 link; :func:`v100x8_dgx1`).

    Args:
        sites: the GPU type of each site (keys of :data:`SITE_GPUS`), at least 2.
        gpus_per_site: GPUs per site (>= 1).
        distance_km: one distance for every pair of sites, or a ``(k, k)`` symmetric matrix [km].
        wan_bandwidth: bandwidth of each WAN link, per direction [B/s].
        name: the topology's name (default ``"dc<k>-wan"``).
    """
    sites = tuple(sites)
    k = len(sites)
    if k < 2:
        raise ValueError(f"multi_datacentre: give at least 2 sites, got {sites!r}")
    for s in sites:
        if s not in SITE_GPUS:
            raise ValueError(f"multi_datacentre: unknown GPU type {s!r}; valid: {', '.join(SITE_GPUS)}")
    g = gpus_per_site
    if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 1:
        raise ValueError(f"multi_datacentre: gpus_per_site must be an integer >= 1, got {g!r}")
    dist = np.array(distance_km, dtype=np.float64)
    dist = np.full((k, k), float(dist)) if dist.ndim == 0 else dist
    if dist.shape != (k, k) or not np.allclose(dist, dist.T) or not np.all(np.isfinite(dist) & (dist >= 0)):
        raise ValueError(f"multi_datacentre: distance_km must be one number or a symmetric ({k}, {k}) matrix of "
                         f"km >= 0, got {distance_km!r}")
    bw_wan = float(wan_bandwidth)
    if not 0 < bw_wan < np.inf:
        raise ValueError(f"multi_datacentre: wan_bandwidth must be positive B/s, got {wan_bandwidth!r}")
    n = k * g
    speed, memory = np.zeros(n), np.zeros(n)
    bandwidth, latency = np.zeros((n, n)), np.zeros((n, n))
    kinds = np.full((n, n), NO_LINK, dtype=object)
    names = []
    for s, gpu in enumerate(sites):
        flops, mem, bw, lat, kind = SITE_GPUS[gpu]
        block = slice(s * g, (s + 1) * g)
        speed[block], memory[block] = flops, mem
        off = ~np.eye(g, dtype=bool)
        if gpu == "v100" and g <= 4:
            counts = DGX1V_NVLINKS[:g, :g]
            bandwidth[block, block] = counts * bw
            kinds[block, block] = np.where(counts == 2, "nvlink-x2", np.where(counts == 1, kind, NO_LINK))
        else:
            bandwidth[block, block] = np.where(off, bw, 0.0)
            kinds[block, block] = np.where(off, kind, NO_LINK)
        latency[block, block] = np.where(off, lat, 0.0)
        names += [f"dc{s}/{gpu}-{i}" for i in range(g)]
    for a in range(k):
        for b in range(k):
            if a != b:
                bandwidth[a * g, b * g] = bw_wan
                latency[a * g, b * g] = wan_latency(dist[a, b])
                kinds[a * g, b * g] = "wan"
    return Topology(speed=speed, memory=memory, bandwidth=bandwidth, latency=latency, name=name or f"dc{k}-wan",
                    device_names=tuple(names), link_kinds=_kinds(kinds),
                    gpus=tuple(SITE_GPU_MODELS[gpu] for gpu in sites for _ in range(g)))


# DGX A100: 8x ConnectX-6 single-port HDR 200 Gb/s for the compute fabric, one per GPU ("NVIDIA DGX A100
# User Guide", introduction; NVIDIA/nccl#812: "8x200Gbit/s IB cards").
IB_HDR_PER_GPU = 200e9 / 8  # [B/s] 25e9 per direction


def a100x8_dgx() -> Topology:
    """NVIDIA DGX A100 80 GB: 8x A100 SXM4 80 GB, all-to-all over six NVSwitch gen2 chips (NVLink 3).

    Figures:
        - speed 19.5 TFLOP/s = fp32 non-tensor peak, memory 80 GB HBM2e: "NVIDIA A100 Tensor Core GPU"
          datasheet (2021), SXM4 80 GB (bf16 tensor core 312 TFLOP/s dense; :mod:`doppler_gym.topology.gpus`
          ``"a100-sxm-80gb"`` for the roofline model).
        - bandwidth 300 GB/s per direction between every pair: 12 NVLink 3 links per GPU, 600 GB/s total
          (bidirectional) into the NVSwitch fabric (same datasheet; "NVIDIA DGX A100 System Architecture"
          whitepaper, 2020). One GPU's port limit is modeled as each pair's bandwidth, as in
          :func:`h100x8_nvswitch`.
        - latency 2 us per transfer: a modeling choice (module docstring).
    """
    return _dgx("a100x8-dgx", 1, "a100-sxm-80gb", A100_SXM_FP32, A100_MEMORY, NVLINK3_PER_GPU, 0.0)


def a100x16_2node() -> Topology:
    """Two DGX A100 80 GB joined by a rail-optimised InfiniBand HDR fabric (16 GPUs).

    Devices ``0..7`` are node 0, ``8..15`` node 1 (names ``node<k>/gpu<g>``); each node is :func:`a100x8_dgx`.

    Figures:
        - inter-node: 8x ConnectX-6 HDR 200 Gb/s per node, one per GPU = 25 GB/s per direction per GPU,
          1.6 Tb/s per node ("NVIDIA DGX A100 User Guide"; NVIDIA/nccl#812). As in :func:`h100x16_2node`,
          GPU ``g`` of node 0 is linked to GPU ``g`` of node 1 (its rail, ``"ib"``); cross-rail pairs route
          over NVSwitch to the rail GPU, then over IB.
        - latency 5 us per IB hop: a modeling choice (:data:`IB_LATENCY`).
    """
    return _dgx("a100x16-2node", 2, "a100-sxm-80gb", A100_SXM_FP32, A100_MEMORY, NVLINK3_PER_GPU, IB_HDR_PER_GPU)


def dc2_wan() -> Topology:
    """Two sites 1000 km apart (e.g. two regions of one cloud): 4x H100 and 4x A100, one 100 Gb/s WAN
    wavelength between their gateways (:func:`multi_datacentre`: latency 5 ms + 20 us)."""
    return multi_datacentre(("h100", "a100"), 4, 1000.0, WAN_BANDWIDTH, name="dc2-wan")


def dc3_wan() -> Topology:
    """Three sites across two continents: 4x H100 in New York, 4x A100 in San Francisco, 4x V100 in London,
    joined by 100 Gb/s WAN links. Great-circle distances (:data:`DC3_DISTANCES_KM`): New York-San
    Francisco 4130 km, New York-London 5570 km, San Francisco-London 8640 km, hence one-way latencies of
    20.7, 27.9 and 43.2 ms (:func:`multi_datacentre`). Cross-continent training of this kind is what
    INTELLECT-1 (Prime Intellect, 2024) ran with DiLoCo-style local steps."""
    return multi_datacentre(("h100", "a100", "v100"), 4, DC3_DISTANCES_KM, WAN_BANDWIDTH, name="dc3-wan")


_PRESETS: dict[str, Callable[[], Topology]] = {
    "p100x4": p100x4,
    "v100x8-dgx1": v100x8_dgx1,
    "h100x8-nvswitch": h100x8_nvswitch,
    "h100x16-2node": h100x16_2node,
    "a100x8-dgx": a100x8_dgx,
    "a100x16-2node": a100x16_2node,
    "dc2-wan": dc2_wan,
    "dc3-wan": dc3_wan,
}
_UNIFORM = re.compile(r"uniform(\d+)")


def preset_names() -> tuple[str, ...]:
    """The fixed preset names (``"uniform<N>"`` is accepted too, for any ``N >= 1``)."""
    return tuple(_PRESETS)


def make_preset(name: str) -> Topology:
    """Build the preset ``name`` (see :func:`preset_names`), or ``Topology.uniform(N)`` for ``"uniform<N>"``.

    Raises:
        ValueError: unknown name; the message lists the valid ones.
    """
    if not isinstance(name, str):
        raise TypeError(f"make_preset: name must be a str, got {type(name).__name__}")
    if name in _PRESETS:
        return _PRESETS[name]()
    match = _UNIFORM.fullmatch(name)
    if match:
        return Topology.uniform(int(match.group(1)), name=name)
    raise ValueError(
        f"unknown topology preset {name!r}; valid names: {', '.join(preset_names())}, "
        f"or 'uniform<N>' (e.g. 'uniform4') for N identical, fully linked devices"
    )
