"""Immutable device topology: devices (speed, memory) and directed links (bandwidth, latency).

Pairs without a direct link communicate over a route of direct links, chosen once at
construction: the path with the highest bottleneck bandwidth, ties broken by fewer hops, then by
the lower device id. A transfer over a route is store-and-forward: each hop takes
``latency + bytes / bandwidth`` of that link (see :mod:`doppler_gym.sim`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

# Defaults of Topology.uniform: one NVIDIA P100 over PCIe 3.0 x16 (see presets.p100x4 for sources).
DEFAULT_SPEED = 9.3e12  # [FLOP/s] P100 PCIe fp32 peak
DEFAULT_MEMORY = 16e9  # [B]
DEFAULT_BANDWIDTH = 12e9  # [B/s] PCIe 3.0 x16, effective peer-to-peer
DEFAULT_LATENCY = 10e-6  # [s]


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
    """

    speed: np.ndarray
    memory: np.ndarray
    bandwidth: np.ndarray
    latency: np.ndarray
    name: str = "custom"
    device_names: tuple[str, ...] | None = None
    link_kinds: tuple[tuple[str, ...], ...] | None = None

    def __post_init__(self) -> None:
        where = f"topology {self.name!r}"
        speed = np.array(self.speed, dtype=np.float64).reshape(-1)
        d = speed.shape[0]
        if d < 1:
            raise ValueError(f"{where}: needs at least one device")
        memory = np.broadcast_to(np.array(self.memory, dtype=np.float64), (d,)).copy()
        try:
            bandwidth = np.broadcast_to(np.array(self.bandwidth, dtype=np.float64), (d, d)).copy()
            latency = np.broadcast_to(np.array(self.latency, dtype=np.float64), (d, d)).copy()
        except ValueError:
            raise ValueError(f"{where}: bandwidth and latency must be scalars or ({d}, {d}) matrices") from None
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
        if self.device_names is not None and len(self.device_names) != d:
            raise ValueError(f"{where}: {len(self.device_names)} device names for {d} devices")
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
        if isinstance(n_devices, bool) or not isinstance(n_devices, (int, np.integer)) or n_devices < 1:
            raise ValueError(f"Topology.uniform: n_devices must be a positive integer, got {n_devices!r}")
        n = int(n_devices)
        return cls(
            speed=np.full(n, float(speed)),
            memory=np.full(n, float(memory)),
            bandwidth=np.full((n, n), float(bandwidth)),
            latency=np.full((n, n), float(latency)),
            name=name or f"uniform{n}",
        )

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
        """``(D, D) int32``: the next device on the route ``i -> j`` (``j`` itself if linked; ``i`` on the diagonal)."""
        d = self.n_devices
        linked = self.bandwidth > 0
        nxt = np.full((d, d), -1, dtype=np.int32)
        for target in range(d):
            # Widest path to `target`, ties by hops then device id: Bellman-Ford style relaxation.
            best_bw = np.full(d, -1.0)
            hops = np.full(d, np.iinfo(np.int32).max, dtype=np.int64)
            best_bw[target], hops[target] = np.inf, 0
            for _ in range(d):
                changed = False
                for i in range(d):
                    if i == target:
                        continue
                    for j in np.flatnonzero(linked[i]):
                        if best_bw[j] < 0:
                            continue
                        bw = min(self.bandwidth[i, j], best_bw[j])
                        better = bw > best_bw[i] or (
                            bw == best_bw[i] and (hops[j] + 1 < hops[i] or (hops[j] + 1 == hops[i] and j < nxt[i, target]))
                        )
                        if better:
                            best_bw[i], hops[i], nxt[i, target] = bw, hops[j] + 1, j
                            changed = True
                if not changed:
                    break
            nxt[target, target] = target
            unreachable = np.flatnonzero(nxt[:, target] < 0)
            if unreachable.size:
                raise ValueError(
                    f"topology {self.name!r}: device {int(unreachable[0])} has no route to device "
                    f"{target}; add a link (bandwidth > 0) that connects them"
                )
        nxt.setflags(write=False)
        return nxt

    def route(self, i: int, j: int) -> list[int]:
        """Devices visited from ``i`` to ``j``, both included (``[i]`` when ``i == j``)."""
        path = [int(i)]
        while path[-1] != j:
            path.append(int(self.next_hop[path[-1], j]))
        return path

    def transfer_time(self, nbytes: float, i: int, j: int) -> float:
        """Uncontended time to send ``nbytes`` [B] from device ``i`` to ``j`` [s] (0 if ``i == j``)."""
        path = self.route(i, j)
        return float(
            sum(self.latency[a, b] + nbytes / self.bandwidth[a, b] for a, b in zip(path[:-1], path[1:]))
        )

    def device_label(self, d: int) -> str:
        """Name of device ``d`` (``"dev<d>"`` when unnamed)."""
        return self.device_names[d] if self.device_names is not None else f"dev{d}"

    def __repr__(self) -> str:
        return f"Topology(name={self.name!r}, n_devices={self.n_devices})"
