"""GPU/switch topologies for collective scheduling: directed links with capacity [B/s] and latency [s].

A :class:`CommTopology` is the graph TE-CCL schedules on (Liu et al., SIGCOMM 2024, "Rethinking
Machine Learning Collective Communication as a Multi-Commodity Flow Problem"): nodes are GPUs
(they buffer, forward and copy chunks) and switches (no buffer; a chunk leaves in the epoch it
arrives; copy-capable switches may multicast it on several out-links). Every link is directed and
carries one capacity and one latency.

:func:`comm_topology` builds the published machines by name. They follow the hardware the paper
describes, rebuilt from the figures in the released code (microsoft/TE-CCL ``teccl/topologies``),
without the released code's wiring quirks. Per name:

- ``dgx1``: 8 V100 in the hybrid cube mesh; doubled NVLink pairs 50 GB/s, single ones 25 GB/s per
  direction (32 directed links), alpha 0.7 us per hop. The link multiplicities and the NVLink
  figures come from the one DGX-1 description, :data:`doppler_gym.topology.presets.DGX1V_NVLINKS`
  (which also documents both NVLink latencies); only the GPU numbering differs: these topologies
  number the GPUs as the TE-CCL release does, so comm GPU ``i`` is DGX-1 GPU
  ``TECCL_GPU_ORDER[i]`` in ``nvidia-smi`` numbering (the ``v100x8-dgx1`` preset's).
- ``ndv2-K``: K Azure ND40rs_v2 chassis, each the same 8-V100 cube mesh (the released code's 23/46
  us/MB NVLink figures rounded to 50/25 GB/s: the NVLink 2.0 line rate, as the paper does), and one
  12.5 GB/s InfiniBand NIC per chassis (alpha 1.3 us). The NIC's egress is local GPU 0 and its
  ingress local GPU 1, as in the released code. K = 2: two direct links GPU0(ch0)->GPU1(ch1) and
  GPU0(ch1)->GPU1(ch0), and all 16 nodes are GPUs (the released code marks GPU0 of chassis 0 as a
  switch: quirk 1, not copied). K >= 3: one copy-capable IB switch; GPU0 of each chassis -> switch
  carries the whole 1.3 us, switch -> GPU1 has alpha 0, so a switched hop costs one NIC latency
  like the K = 2 direct link. K = 1: no NIC at all (the released code adds a pointless
  GPU0->switch->GPU1 loop).
- ``dgx2-K``: K DGX-2 chassis, each 16 V100 on one NVSwitch node (the 12 physical NVSwitches
  merged, as TACCL and TE-CCL do) at 125 GB/s per GPU and direction, alpha 0.35 us per hop; 8
  InfiniBand NICs per chassis at 12.5 GB/s, alpha 2.6 us, egress at local GPU 2m+1 and ingress at
  local GPU 2m (m = 0..7). K = 2: direct links GPU(2m+1, ch i) -> GPU(2m, ch j) as in the released
  code (16 links). K >= 3: one copy-capable switch per NIC rail m, joined by the NICs m of every
  chassis (uplink carries the 2.6 us, downlink 0). The released class ignores K and always builds
  2 chassis (quirk 2, not copied). NVSwitch switches are copy-capable by default, the paper's model
  (first-generation NVSwitch has no hardware multicast: pass ``switch_copy=False`` to model that).
- ``amd-K``: K chassis of 16 MI250X GCDs, xGMI links 50 GB/s x multiplicity (4 -> 200, 2 -> 100,
  1 -> 50) from the released adjacency list, alpha 0.7 us (an input in the released code). K >= 2
  adds per chassis 8 NIC switches, NIC k joining GCDs 2k and 2k+1 at 25 GB/s each way, and one
  global switch joining every NIC at 25 GB/s. The NIC uplink (NIC -> global) carries alpha 1.3 us,
  the other NIC hops 0. The released class indexes its switches off by one (quirk 3: local GCD 15
  becomes a switch, NIC 23 a GPU, NIC 16 keeps 50 GB/s); here every NIC link is 25 GB/s and every
  GCD is a GPU.
- ``mesh-L``: L x L GPUs, each linked to its up/down/left/right neighbours at 100 GB/s, alpha 0.7
  us, without wrap-around (the released mesh links row ends to the next row's start: quirk 4).

A :class:`doppler_gym.Topology` converts too: its devices become GPUs, and each pair it marks as
directly linked (bandwidth > 0) becomes one directed link with that bandwidth and latency.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from doppler_gym.topology.presets import DGX1V_NVLINKS, NVLINK2_HOP_ALPHA, NVLINK2_PER_LINK

NVLINK = NVLINK2_PER_LINK  # [B/s] one NVLink 2.0 link, per direction
NVLINK_ALPHA = NVLINK2_HOP_ALPHA  # [s] per NVLink hop of a collective schedule
NDV2_IB = 12.5e9  # [B/s] one InfiniBand NIC per NDv2 chassis
NDV2_IB_ALPHA = 1.3e-6  # [s]
DGX2_NVSWITCH = 125e9  # [B/s] GPU <-> NVSwitch, per direction (TACCL: 8 us/MB)
DGX2_NVSWITCH_ALPHA = 0.35e-6  # [s] per hop (GPU -> switch, switch -> GPU)
DGX2_IB = 12.5e9  # [B/s] one of 8 NICs per DGX-2
DGX2_IB_ALPHA = 2.6e-6  # [s]
XGMI = 50e9  # [B/s] one MI250X xGMI link
XGMI_ALPHA = 0.7e-6  # [s] modelling choice (an input in the released code)
AMD_NIC = 25e9  # [B/s]
AMD_NIC_ALPHA = 1.3e-6  # [s] modelling choice (an input in the released code)
MESH_LINK = 100e9  # [B/s]
MESH_ALPHA = 0.7e-6  # [s] modelling choice (an input in the released code)

# DGX-1 hybrid cube mesh = NDv2 chassis, in TE-CCL's GPU numbering: comm GPU i is DGX-1 GPU
# TECCL_GPU_ORDER[i] of DGX1V_NVLINKS (nvidia-smi numbering). CUBE_MESH[i, j] = number of NVLinks
# between comm GPUs i and j.
TECCL_GPU_ORDER = np.array([0, 3, 1, 2, 4, 7, 5, 6], dtype=np.int64)
TECCL_GPU_ORDER.setflags(write=False)
CUBE_MESH = DGX1V_NVLINKS[np.ix_(TECCL_GPU_ORDER, TECCL_GPU_ORDER)]
CUBE_MESH.setflags(write=False)

# MI250X chassis: GCD -> {neighbour: number of 50 GB/s xGMI links} (released amd.py).
AMD_ADJACENCY: dict[int, dict[int, int]] = {
    0: {1: 4, 4: 2, 8: 1}, 1: {0: 4, 5: 1, 9: 1, 10: 1}, 2: {3: 4, 6: 1, 10: 1, 9: 1},
    3: {2: 4, 7: 2, 11: 1}, 4: {6: 1, 5: 4, 0: 2}, 5: {1: 1, 4: 4, 7: 1, 6: 1},
    6: {4: 1, 7: 4, 2: 1, 5: 1}, 7: {5: 1, 6: 4, 3: 2}, 8: {0: 1, 9: 4, 12: 2},
    9: {1: 1, 2: 1, 8: 4, 13: 1}, 10: {1: 1, 2: 1, 11: 4, 14: 1}, 11: {3: 1, 10: 4, 15: 2},
    12: {8: 2, 13: 4, 14: 1}, 13: {9: 1, 12: 4, 15: 1, 14: 1}, 14: {10: 1, 12: 1, 13: 1, 15: 4},
    15: {11: 2, 13: 1, 14: 4},
}

PATTERNS = ("dgx1", "ndv2-K", "dgx2-K", "amd-K", "mesh-L")


@dataclass(frozen=True, eq=False)
class CommTopology:
    """Nodes (GPUs and switches) and directed links.

    Attributes:
        name: a label, e.g. ``"ndv2-2"``.
        node_names: ``(n_nodes,)`` labels, unique, e.g. ``"c0.gpu3"``.
        is_switch: ``(n_nodes,) bool``; switches hold no buffer and no demand.
        copy_capable: ``(n_nodes,) bool``; True for every GPU (a GPU may send a held chunk on all
            its out-links at once), True for a switch that can multicast an arriving chunk.
        src: ``(n_links,) int32`` tail node of each directed link.
        dst: ``(n_links,) int32`` head node of each directed link.
        capacity: ``(n_links,) float64`` [B/s], > 0.
        alpha: ``(n_links,) float64`` latency [s], >= 0.
        chassis: ``(n_nodes,) int32`` chassis of each node, -1 for fabric switches shared by
            chassis (used by the chassis-cut bound); all 0 when not given.
    """

    name: str
    node_names: tuple[str, ...]
    is_switch: np.ndarray
    copy_capable: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    capacity: np.ndarray
    alpha: np.ndarray
    chassis: np.ndarray | None = field(default=None)

    def __post_init__(self) -> None:
        where = f"CommTopology {self.name!r}"
        names = tuple(str(x) for x in self.node_names)
        n = len(names)
        if n < 1:
            raise ValueError(f"{where}: node_names is empty; give one name per node")
        if len(set(names)) != n:
            dup = sorted({x for x in names if names.count(x) > 1})
            raise ValueError(f"{where}: node names must be unique, repeated: {dup[:5]}")
        is_switch = _vector(self.is_switch, n, bool, "is_switch", where)
        copy_capable = _vector(self.copy_capable, n, bool, "copy_capable", where)
        bad = np.flatnonzero(~is_switch & ~copy_capable)
        if bad.size:
            raise ValueError(
                f"{where}: GPU node {int(bad[0])} ({names[bad[0]]}) has copy_capable=False; GPUs always "
                f"copy (send a held chunk on several links), set copy_capable=True for every GPU"
            )
        if not np.any(~is_switch):
            raise ValueError(f"{where}: no GPU node; at least one node must have is_switch=False")
        src = np.asarray(self.src)
        m = src.shape[0] if src.ndim == 1 else -1
        if m < 0:
            raise ValueError(f"{where}: src must be a 1-D array of node ids, got shape {src.shape}")
        src = _vector(self.src, m, np.int64, "src", where)
        dst = _vector(self.dst, m, np.int64, "dst", where)
        capacity = _vector(self.capacity, m, np.float64, "capacity", where)
        alpha = _vector(self.alpha, m, np.float64, "alpha", where)
        for label, ids in (("src", src), ("dst", dst)):
            out = np.flatnonzero((ids < 0) | (ids >= n))
            if out.size:
                raise ValueError(
                    f"{where}: link {int(out[0])} has {label}={int(ids[out[0]])}, not a node id in 0..{n - 1}"
                )
        loops = np.flatnonzero(src == dst)
        if loops.size:
            raise ValueError(
                f"{where}: link {int(loops[0])} goes from node {int(src[loops[0]])} to itself; remove self links"
            )
        keys = src * n + dst
        uniq, counts = np.unique(keys, return_counts=True)
        if np.any(counts > 1):
            k = int(uniq[np.argmax(counts > 1)])
            raise ValueError(
                f"{where}: {int(counts.max())} parallel links {k // n} -> {k % n}; merge them into one link "
                f"with the summed capacity"
            )
        badc = np.flatnonzero(~np.isfinite(capacity) | (capacity <= 0))
        if badc.size:
            raise ValueError(
                f"{where}: link {int(badc[0])} ({int(src[badc[0]])} -> {int(dst[badc[0]])}) has capacity "
                f"{float(capacity[badc[0]])!r}; capacities must be positive finite B/s (drop links that do not exist)"
            )
        bada = np.flatnonzero(~np.isfinite(alpha) | (alpha < 0))
        if bada.size:
            raise ValueError(
                f"{where}: link {int(bada[0])} ({int(src[bada[0]])} -> {int(dst[bada[0]])}) has alpha "
                f"{float(alpha[bada[0]])!r}; latencies must be finite and >= 0 s"
            )
        chassis = (
            np.zeros(n, np.int64) if self.chassis is None else _vector(self.chassis, n, np.int64, "chassis", where)
        )
        fields = {
            "node_names": names, "is_switch": is_switch, "copy_capable": copy_capable,
            "src": src.astype(np.int32), "dst": dst.astype(np.int32), "capacity": capacity, "alpha": alpha,
            "chassis": chassis.astype(np.int32),
        }
        for key, value in fields.items():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
            object.__setattr__(self, key, value)

    # ------------------------------------------------------------------ queries
    @property
    def n_nodes(self) -> int:
        """Number of nodes (GPUs and switches)."""
        return len(self.node_names)

    @property
    def n_links(self) -> int:
        """Number of directed links."""
        return int(self.src.shape[0])

    @cached_property
    def gpus(self) -> np.ndarray:
        """``(n_gpus,) int32`` node ids of the GPUs, ascending."""
        out = np.flatnonzero(~self.is_switch).astype(np.int32)
        out.setflags(write=False)
        return out

    @property
    def n_gpus(self) -> int:
        """Number of GPUs."""
        return int(self.gpus.shape[0])

    @cached_property
    def _out(self) -> list[np.ndarray]:
        order = np.argsort(self.src, kind="stable")
        bounds = np.searchsorted(self.src[order], np.arange(self.n_nodes + 1))
        return [order[bounds[i]:bounds[i + 1]].astype(np.int64) for i in range(self.n_nodes)]

    @cached_property
    def _in(self) -> list[np.ndarray]:
        order = np.argsort(self.dst, kind="stable")
        bounds = np.searchsorted(self.dst[order], np.arange(self.n_nodes + 1))
        return [order[bounds[i]:bounds[i + 1]].astype(np.int64) for i in range(self.n_nodes)]

    def out_links(self, i: int) -> np.ndarray:
        """``int64`` ids of the links leaving node ``i``, ascending."""
        return self._out[self._check_node(i)]

    def in_links(self, i: int) -> np.ndarray:
        """``int64`` ids of the links entering node ``i``, ascending."""
        return self._in[self._check_node(i)]

    @cached_property
    def link_id(self) -> np.ndarray:
        """``(n_nodes, n_nodes) int64``: the id of link ``i -> j``, -1 where there is none."""
        table = np.full((self.n_nodes, self.n_nodes), -1, np.int64)
        table[self.src, self.dst] = np.arange(self.n_links)
        table.setflags(write=False)
        return table

    def node_id(self, node: int | str) -> int:
        """Node id of ``node`` (an id or a name)."""
        if isinstance(node, str):
            try:
                return self.node_names.index(node)
            except ValueError:
                raise ValueError(f"topology {self.name!r} has no node named {node!r}") from None
        return self._check_node(node)

    def _check_node(self, i: object) -> int:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= int(i) < self.n_nodes:
            raise ValueError(f"topology {self.name!r}: node id {i!r} is not in 0..{self.n_nodes - 1}")
        return int(i)

    def __repr__(self) -> str:
        return (
            f"CommTopology(name={self.name!r}, n_gpus={self.n_gpus}, "
            f"n_switches={self.n_nodes - self.n_gpus}, n_links={self.n_links})"
        )


def _vector(values: object, n: int, dtype: type, label: str, where: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.shape != (n,):
        raise ValueError(f"{where}: {label} must have shape ({n},), got {arr.shape}")
    if dtype is bool and arr.dtype != bool:
        raise TypeError(f"{where}: {label} must be a bool array, got dtype {arr.dtype}")
    if dtype is np.int64 and arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{where}: {label} must hold integer node ids, got dtype {arr.dtype}")
    return np.array(arr, dtype=dtype)


# ---------------------------------------------------------------------- building
class _Builder:
    """Collects nodes and links, then makes a :class:`CommTopology`."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.switch: list[bool] = []
        self.copy: list[bool] = []
        self.chassis: list[int] = []
        self.links: list[tuple[int, int, float, float]] = []

    def node(self, name: str, switch: bool = False, copy: bool = True, chassis: int = 0) -> int:
        self.names.append(name)
        self.switch.append(switch)
        self.copy.append(copy or not switch)
        self.chassis.append(chassis)
        return len(self.names) - 1

    def link(self, i: int, j: int, capacity: float, alpha: float, both: bool = False) -> None:
        self.links.append((i, j, capacity, alpha))
        if both:
            self.links.append((j, i, capacity, alpha))

    def build(self, name: str) -> CommTopology:
        arr = np.array(self.links, dtype=np.float64).reshape(-1, 4)
        return CommTopology(
            name=name, node_names=tuple(self.names), is_switch=np.array(self.switch, bool),
            copy_capable=np.array(self.copy, bool), src=arr[:, 0].astype(np.int64),
            dst=arr[:, 1].astype(np.int64), capacity=arr[:, 2], alpha=arr[:, 3],
            chassis=np.array(self.chassis, np.int64),
        )


def _cube_mesh_chassis(b: _Builder, c: int, prefix: str) -> list[int]:
    gpus = [b.node(f"{prefix}gpu{i}", chassis=c) for i in range(8)]
    for i in range(8):
        for j in range(8):
            if CUBE_MESH[i, j]:
                b.link(gpus[i], gpus[j], CUBE_MESH[i, j] * NVLINK, NVLINK_ALPHA)
    return gpus


def dgx1() -> CommTopology:
    """NVIDIA DGX-1 (8 V100, hybrid cube mesh): 16 directed 50 GB/s and 16 directed 25 GB/s
    NVLink links, alpha 0.7 us each."""
    b = _Builder()
    _cube_mesh_chassis(b, 0, "")
    return b.build("dgx1")


def ndv2(chassis: int, switch_copy: bool = True) -> CommTopology:
    """Azure NDv2 with ``chassis`` chassis of 8 V100 (cube mesh, 25/50 GB/s) and one 12.5 GB/s NIC
    per chassis (egress at local GPU 0, ingress at local GPU 1); see the module docstring for how
    the NICs are joined for 1, 2 and >= 3 chassis."""
    b = _Builder()
    k = chassis
    gpus = [_cube_mesh_chassis(b, c, f"c{c}." if k > 1 else "") for c in range(k)]
    if k == 2:
        b.link(gpus[0][0], gpus[1][1], NDV2_IB, NDV2_IB_ALPHA)
        b.link(gpus[1][0], gpus[0][1], NDV2_IB, NDV2_IB_ALPHA)
    elif k >= 3:
        sw = b.node("ib-switch", switch=True, copy=switch_copy, chassis=-1)
        for c in range(k):
            b.link(gpus[c][0], sw, NDV2_IB, NDV2_IB_ALPHA)
            b.link(sw, gpus[c][1], NDV2_IB, 0.0)
    return b.build(f"ndv2-{k}")


def dgx2(chassis: int, switch_copy: bool = True) -> CommTopology:
    """NVIDIA DGX-2 with ``chassis`` chassis: 16 V100 per chassis on one NVSwitch node (125 GB/s
    per GPU and direction), 8 NICs per chassis at 12.5 GB/s (egress local GPU 2m+1, ingress local
    GPU 2m); see the module docstring for how the NICs are joined."""
    b = _Builder()
    k = chassis
    gpus = []
    for c in range(k):
        prefix = f"c{c}." if k > 1 else ""
        sw = b.node(f"{prefix}nvswitch", switch=True, copy=switch_copy, chassis=c)
        local = [b.node(f"{prefix}gpu{i}", chassis=c) for i in range(16)]
        for g in local:
            b.link(g, sw, DGX2_NVSWITCH, DGX2_NVSWITCH_ALPHA, both=True)
        gpus.append(local)
    if k == 2:
        for i, j in ((0, 1), (1, 0)):
            for m in range(8):
                b.link(gpus[i][2 * m + 1], gpus[j][2 * m], DGX2_IB, DGX2_IB_ALPHA)
    elif k >= 3:
        for m in range(8):
            rail = b.node(f"ib-rail{m}", switch=True, copy=switch_copy, chassis=-1)
            for c in range(k):
                b.link(gpus[c][2 * m + 1], rail, DGX2_IB, DGX2_IB_ALPHA)
                b.link(rail, gpus[c][2 * m], DGX2_IB, 0.0)
    return b.build(f"dgx2-{k}")


def amd(chassis: int, switch_copy: bool = True) -> CommTopology:
    """AMD MI250X with ``chassis`` chassis of 16 GCDs (xGMI 50/100/200 GB/s); for >= 2 chassis
    8 NIC switches per chassis (25 GB/s) and one global switch; see the module docstring."""
    b = _Builder()
    k = chassis
    gcds = []
    for c in range(k):
        prefix = f"c{c}." if k > 1 else ""
        local = [b.node(f"{prefix}gcd{i}", chassis=c) for i in range(16)]
        for i, nbrs in AMD_ADJACENCY.items():
            for j, mult in nbrs.items():
                b.link(local[i], local[j], mult * XGMI, XGMI_ALPHA)
        gcds.append(local)
    if k >= 2:
        top = b.node("global-switch", switch=True, copy=switch_copy, chassis=-1)
        for c in range(k):
            for m in range(8):
                nic = b.node(f"c{c}.nic{m}", switch=True, copy=switch_copy, chassis=c)
                for g in (gcds[c][2 * m], gcds[c][2 * m + 1]):
                    b.link(g, nic, AMD_NIC, 0.0, both=True)
                b.link(nic, top, AMD_NIC, AMD_NIC_ALPHA)
                b.link(top, nic, AMD_NIC, 0.0)
    return b.build(f"amd-{k}")


def mesh(side: int) -> CommTopology:
    """``side x side`` 2-D mesh of GPUs, 100 GB/s links to the 4 grid neighbours, no wrap-around."""
    b = _Builder()
    ids = [[b.node(f"gpu{r}.{c}") for c in range(side)] for r in range(side)]
    for r in range(side):
        for c in range(side):
            if c + 1 < side:
                b.link(ids[r][c], ids[r][c + 1], MESH_LINK, MESH_ALPHA, both=True)
            if r + 1 < side:
                b.link(ids[r][c], ids[r + 1][c], MESH_LINK, MESH_ALPHA, both=True)
    return b.build(f"mesh-{side}")


def from_topology(topo: object) -> CommTopology:
    """A :class:`doppler_gym.Topology` as GPUs and its direct links (bandwidth > 0)."""
    bw = np.asarray(topo.bandwidth, dtype=np.float64)  # type: ignore[attr-defined]
    lat = np.asarray(topo.latency, dtype=np.float64)  # type: ignore[attr-defined]
    d = bw.shape[0]
    linked = (bw > 0) & ~np.eye(d, dtype=bool)
    src, dst = np.nonzero(linked)
    names = tuple(topo.device_label(i) for i in range(d))  # type: ignore[attr-defined]
    return CommTopology(
        name=str(topo.name), node_names=names, is_switch=np.zeros(d, bool), copy_capable=np.ones(d, bool),  # type: ignore[attr-defined]
        src=src, dst=dst, capacity=bw[src, dst], alpha=lat[src, dst],
    )


_BUILDERS = {"ndv2": ndv2, "dgx2": dgx2, "amd": amd}


def comm_topology(spec: object, switch_copy: bool | None = None) -> CommTopology:
    """Build or convert a topology.

    Args:
        spec: a name (``"dgx1"``, ``"ndv2-K"``, ``"dgx2-K"``, ``"amd-K"`` with K >= 1 chassis,
            ``"mesh-L"`` with L >= 2), a :class:`CommTopology` (returned as is unless
            ``switch_copy`` is given), or a
            :class:`doppler_gym.Topology` (converted, see the module docstring).
        switch_copy: whether switches multicast (default: True for named topologies, the paper's
            model; a given CommTopology keeps its own). Ignored for switchless topologies.
    """
    if isinstance(spec, CommTopology):
        if switch_copy is None or not spec.is_switch.any():
            return spec
        copy = spec.copy_capable | (spec.is_switch & bool(switch_copy))
        copy &= ~spec.is_switch | bool(switch_copy)
        return CommTopology(
            name=spec.name, node_names=spec.node_names, is_switch=spec.is_switch, copy_capable=copy,
            src=spec.src, dst=spec.dst, capacity=spec.capacity, alpha=spec.alpha, chassis=spec.chassis,
        )
    if hasattr(spec, "bandwidth") and hasattr(spec, "latency") and hasattr(spec, "n_devices"):
        return from_topology(spec)
    if not isinstance(spec, str):
        raise TypeError(
            f"comm_topology: expected a name ({', '.join(PATTERNS)}), a CommTopology or a doppler_gym.Topology, "
            f"got {type(spec).__name__}"
        )
    text = spec.strip().lower()
    copy = True if switch_copy is None else bool(switch_copy)
    if text == "dgx1":
        return dgx1()
    match = re.fullmatch(r"(ndv2|dgx2|amd|mesh)-(\d+)", text)
    if match is None:
        hint = ""
        if text in _BUILDERS or text == "mesh":
            hint = f"; add the {'side' if text == 'mesh' else 'chassis count'}, e.g. {text}-2"
        raise ValueError(f"unknown comm topology {spec!r}: use one of {', '.join(PATTERNS)}{hint}")
    kind, count = match.group(1), int(match.group(2))
    if kind == "mesh":
        if count < 2:
            raise ValueError(f"comm topology {spec!r}: a mesh needs side L >= 2 (mesh-2 is 2 x 2 GPUs)")
        return mesh(count)
    if count < 1:
        raise ValueError(f"comm topology {spec!r}: the chassis count K must be >= 1")
    return _BUILDERS[kind](count, switch_copy=copy)


def names() -> tuple[str, ...]:
    """The name patterns :func:`comm_topology` accepts (K = chassis count, L = mesh side)."""
    return tuple(PATTERNS)


def reverse_topology(topo: CommTopology) -> CommTopology:
    """The same nodes with every link reversed; link ``l`` of the result is link ``l`` of ``topo``
    turned around (same capacity and latency). REDUCE-SCATTER on ``topo`` is an ALLGATHER on the
    reversed topology run backwards in time (see :mod:`doppler_gym.comm.demand`)."""
    topo = comm_topology(topo)
    return CommTopology(
        name=f"{topo.name}-reversed", node_names=topo.node_names, is_switch=topo.is_switch,
        copy_capable=topo.copy_capable, src=topo.dst, dst=topo.src, capacity=topo.capacity,
        alpha=topo.alpha, chassis=topo.chassis,
    )
