"""Immutable device topology: devices (speed, memory) and directed links (bandwidth, latency).

Pairs without a direct link communicate over a route of direct links, chosen once at
construction: the path of least uncontended time for a message of ``ROUTE_REFERENCE_BYTES``
(each hop costs ``latency + bytes / bandwidth``: transfers are store-and-forward, see
:mod:`doppler_gym.sim`), ties broken by fewer hops. On a DGX-1 this sends linked pairs over
their direct NVLink and unlinked pairs through one intermediate GPU, as NCCL does.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from doppler_gym.topology.gpus import GPUS

# Defaults of Topology.uniform: one NVIDIA P100 over PCIe 3.0 x16 (see presets.p100x4 for sources).
DEFAULT_SPEED = 9.3e12  # [FLOP/s] P100 PCIe fp32 peak
DEFAULT_MEMORY = 16e9  # [B]
DEFAULT_BANDWIDTH = 12e9  # [B/s] PCIe 3.0 x16, effective peer-to-peer
DEFAULT_LATENCY = 10e-6  # [s]
ROUTE_REFERENCE_BYTES = 16 * 2**20  # [B] message size that routes are chosen for


@dataclass(frozen=True, eq=False)
class Topology:
    """Devices and the links between them.

    Attributes:
        speed: ``(D,) float64`` compute speed of each device [FLOP/s].
        memory: ``(D,) float64`` memory of each device [B].
        bandwidth: ``(D, D) float64`` bandwidth of the direct link ``i -> j`` [B/s]; 0 where there
            is no direct link. The diagonal is ignored (same-device transfers are free).
        latency: ``(D, D) float64`` latency of the direct link ``i -> j`` [s].
        name: a label, e.g. the preset name.
        device_names: optional per-device labels.
        link_kinds: optional ``(D, D)`` labels of each direct link (``"nvlink"``, ``"pcie"``, ...).
        gpus: optional GPU model of each device, a name of :func:`doppler_gym.topology.gpus.gpu_spec`
            (e.g. ``"h100-sxm"``); the roofline cost model (``SimConfig(cost_model="roofline")``) reads
            their datasheet figures instead of ``speed``. ``None``: unknown (the presets set it).
    """

    speed: np.ndarray
    memory: np.ndarray
    bandwidth: np.ndarray
    latency: np.ndarray
    name: str = "custom"
    device_names: tuple[str, ...] | None = None
    link_kinds: tuple[tuple[str, ...], ...] | None = None
    gpus: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        where = f"topology {self.name!r}"
        speed = np.array(self.speed, dtype=np.float64)
        if speed.ndim != 1 or speed.shape[0] < 1:
            raise ValueError(
                f"{where}: speed must be a 1-D array with one FLOP/s value per device, got shape {speed.shape}"
            )
        d = speed.shape[0]
        memory = _broadcast(self.memory, (d,), "memory", where)
        bandwidth = _broadcast(self.bandwidth, (d, d), "bandwidth", where)
        latency = _broadcast(self.latency, (d, d), "latency", where)
        if not np.all(np.isfinite(speed) & (speed > 0)):
            raise ValueError(f"{where}: every device speed must be a positive finite FLOP/s value, got {speed}")
        if not np.all(np.isfinite(memory) & (memory >= 0)):
            raise ValueError(f"{where}: memory must be finite and >= 0 bytes, got {memory}")
        off = ~np.eye(d, dtype=bool)
        if np.any(~np.isfinite(bandwidth[off]) | (bandwidth[off] < 0)):
            raise ValueError(f"{where}: bandwidth must be finite and >= 0 B/s (0 = no direct link)")
        if np.any(~np.isfinite(latency[off]) | (latency[off] < 0)):
            raise ValueError(f"{where}: latency must be finite and >= 0 s")
        np.fill_diagonal(bandwidth, 0.0)
        np.fill_diagonal(latency, 0.0)
        if self.device_names is not None:
            if len(self.device_names) != d:
                raise ValueError(f"{where}: {len(self.device_names)} device names for {d} devices")
            object.__setattr__(self, "device_names", tuple(str(x) for x in self.device_names))
        if self.link_kinds is not None:
            kinds = tuple(tuple(str(x) for x in row) for row in self.link_kinds)
            if len(kinds) != d or any(len(row) != d for row in kinds):
                raise ValueError(f"{where}: link_kinds must be a {d} x {d} table of labels")
            object.__setattr__(self, "link_kinds", kinds)
        if self.gpus is not None:
            gpus = tuple(self.gpus)
            unknown = sorted({str(g) for g in gpus if g not in GPUS})
            if len(gpus) != d or unknown:
                raise ValueError(f"{where}: gpus must name one GPU model per device ({d}) from "
                                 f"{', '.join(GPUS)}; got {len(gpus)} names, unknown: {unknown}")
            object.__setattr__(self, "gpus", gpus)
        for arr in (speed, memory, bandwidth, latency):
            arr.setflags(write=False)
        object.__setattr__(self, "speed", speed)
        object.__setattr__(self, "memory", memory)
        object.__setattr__(self, "bandwidth", bandwidth)
        object.__setattr__(self, "latency", latency)
        _ = self.next_hop  # fail now if some pair cannot reach another

    # ------------------------------------------------------------------ constructors
    @classmethod
    def uniform(
        cls,
        n_devices: int,
        speed: float = DEFAULT_SPEED,
        memory: float = DEFAULT_MEMORY,
        bandwidth: float = DEFAULT_BANDWIDTH,
        latency: float = DEFAULT_LATENCY,
        name: str | None = None,
    ) -> Topology:
        """``n_devices`` identical devices, every pair directly linked.

        Args:
            n_devices: number of devices (>= 1).
            speed: compute speed of each device [FLOP/s].
            memory: memory of each device [B].
            bandwidth: bandwidth of every link [B/s].
            latency: latency of every link [s].
        """
        n = _device_count(n_devices, minimum=1, where="Topology.uniform")
        return cls(
            speed=np.full(n, float(speed)),
            memory=np.full(n, float(memory)),
            bandwidth=np.full((n, n), float(bandwidth)),
            latency=np.full((n, n), float(latency)),
            name=name or f"uniform{n}",
        )

    @classmethod
    def ring(
        cls,
        n_devices: int,
        speed: float = DEFAULT_SPEED,
        memory: float = DEFAULT_MEMORY,
        bandwidth: float = DEFAULT_BANDWIDTH,
        latency: float = DEFAULT_LATENCY,
        name: str | None = None,
    ) -> Topology:
        """``n_devices`` identical devices on a bidirectional ring: device ``i`` is linked to
        ``i - 1`` and ``i + 1`` (mod ``n_devices``), other pairs are routed around the ring.

        Args:
            n_devices: number of devices (>= 2).
            speed: compute speed of each device [FLOP/s].
            memory: memory of each device [B].
            bandwidth: bandwidth of every ring link, each direction [B/s].
            latency: latency of every ring link [s].
        """
        n = _device_count(n_devices, minimum=2, where="Topology.ring")
        bw = np.zeros((n, n))
        lat = np.zeros((n, n))
        for i in range(n):
            for j in ((i + 1) % n, (i - 1) % n):
                bw[i, j], lat[i, j] = float(bandwidth), float(latency)
        return cls(speed=np.full(n, float(speed)), memory=np.full(n, float(memory)), bandwidth=bw, latency=lat,
                   name=name or f"ring{n}")

    @classmethod
    def preset(cls, name: str) -> Topology:
        """A named preset; see :func:`doppler_gym.topology.presets.preset_names`."""
        from doppler_gym.topology.presets import make_preset

        return make_preset(name)

    # ------------------------------------------------------------------ queries
    @property
    def n_devices(self) -> int:
        """Number of devices."""
        return int(self.speed.shape[0])

    @cached_property
    def next_hop(self) -> np.ndarray:
        """``(D, D) int32``: the next device on the route ``i -> j`` (``j`` itself if that is the
        best route; ``i`` on the diagonal). Floyd-Warshall on per-hop time, then hop count."""
        d = self.n_devices
        linked = self.bandwidth > 0
        with np.errstate(divide="ignore"):
            cost = np.where(linked, self.latency + ROUTE_REFERENCE_BYTES / self.bandwidth, np.inf)
        hops = np.where(linked, 1, np.iinfo(np.int32).max // 4).astype(np.int64)
        nxt = np.where(linked, np.arange(d)[None, :], -1).astype(np.int32)
        np.fill_diagonal(cost, 0.0)
        np.fill_diagonal(hops, 0)
        np.fill_diagonal(nxt, np.arange(d))
        for k in range(d):
            via_cost = cost[:, k, None] + cost[None, k, :]
            via_hops = hops[:, k, None] + hops[None, k, :]
            better = (via_cost < cost) | ((via_cost == cost) & (via_hops < hops))
            cost = np.where(better, via_cost, cost)
            hops = np.where(better, via_hops, hops)
            nxt = np.where(better, nxt[:, k, None], nxt)
        unreachable = np.argwhere(~np.isfinite(cost))
        if unreachable.size:
            i, j = (int(x) for x in unreachable[0])
            raise ValueError(
                f"topology {self.name!r}: device {i} has no route to device {j}; add a link "
                f"(bandwidth > 0) that connects them"
            )
        nxt = nxt.astype(np.int32)
        nxt.setflags(write=False)
        return nxt

    def route(self, i: int, j: int) -> list[int]:
        """Devices visited from ``i`` to ``j``, both included (``[i]`` when ``i == j``)."""
        self._check_device(i)
        self._check_device(j)
        path = [int(i)]
        while path[-1] != j:
            path.append(int(self.next_hop[path[-1], j]))
        return path

    def transfer_time(self, nbytes: float, i: int, j: int) -> float:
        """Uncontended time to send ``nbytes`` [B] from device ``i`` to ``j`` [s] (0 if ``i == j``)."""
        if not nbytes >= 0:
            raise ValueError(f"transfer_time: nbytes must be >= 0, got {nbytes!r}")
        path = self.route(i, j)
        return float(
            sum(self.latency[a, b] + nbytes / self.bandwidth[a, b] for a, b in zip(path[:-1], path[1:]))
        )

    def _check_device(self, d: int) -> None:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 0 <= d < self.n_devices:
            raise ValueError(f"topology {self.name!r}: device id {d!r} is not in 0..{self.n_devices - 1}")

    def device_label(self, d: int) -> str:
        """Name of device ``d`` (``"dev<d>"`` when unnamed)."""
        return self.device_names[d] if self.device_names is not None else f"dev{d}"

    def __repr__(self) -> str:
        return f"Topology(name={self.name!r}, n_devices={self.n_devices})"


def _device_count(n_devices: object, minimum: int, where: str) -> int:
    """``n_devices`` as an int, or a ValueError saying it must be an integer >= ``minimum``."""
    if isinstance(n_devices, bool) or not isinstance(n_devices, (int, np.integer)) or n_devices < minimum:
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{where}: n_devices must be {kind}, got {n_devices!r}")
    return int(n_devices)


def _broadcast(values: object, shape: tuple[int, ...], label: str, where: str) -> np.ndarray:
    """``values`` as a float64 array of ``shape`` (scalars broadcast), or a clear ValueError."""
    arr = np.array(values, dtype=np.float64)
    try:
        return np.broadcast_to(arr, shape).copy()
    except ValueError:
        raise ValueError(f"{where}: {label} must be a scalar or of shape {shape}, got shape {arr.shape}") from None
