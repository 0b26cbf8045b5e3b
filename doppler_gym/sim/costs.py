"""Compute and transfer times of a graph on a topology, exactly as the simulator charges them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.packing import compute_tables, device_tables
from doppler_gym.topology.types import Topology


@dataclass(frozen=True, eq=False)
class Costs:
    """Compute and transfer times of one graph on one topology under one config.

    Attributes:
        comp: ``(n_ops, D) float64`` compute time of each op on each device.
        latency: ``(D, D) float64`` fixed part of a transfer from device ``a`` to ``b`` (0 on the diagonal).
        inv_bw: ``(D, D) float64`` time per output unit (byte, or raw comm cost) from ``a`` to ``b``
            (0 on the diagonal).
        out_bytes: ``(n_ops,) float64`` output size of each op (the graph's column).

    All times are the simulator's internal unit (before ``time_divisor``), uncontended: the
    ``fifo`` link model and extra streams are not reflected here.
    """

    comp: np.ndarray
    latency: np.ndarray
    inv_bw: np.ndarray
    out_bytes: np.ndarray

    @classmethod
    def of(cls, graph: DataflowGraph, topology: Topology, config: SimConfig) -> Costs:
        """The tables the simulator itself uses (:func:`doppler_gym.sim.packing.compute_tables` and
        :func:`~doppler_gym.sim.packing.device_tables`): ``comp[w, d] = table[comp_row[d] + w] * inv_speed[d]``."""
        d = topology.n_devices
        topo_key = None if config.cost_model == "raw" else topology
        *_, pair_latency, pair_inv_bw = device_tables(topo_key, d, config.cost_model)
        comp, comp_row, inv_speed = compute_tables(graph, topology, d, config)
        n = graph.n_ops
        return cls(
            comp=np.stack([comp[r : r + n] for r in comp_row], axis=1) * inv_speed[None, :],
            latency=pair_latency.reshape(d, d),
            inv_bw=pair_inv_bw.reshape(d, d),
            out_bytes=graph.out_bytes,
        )

    @property
    def n_devices(self) -> int:
        """Number of devices D."""
        return int(self.latency.shape[0])

    def transfer(self, op: int) -> np.ndarray:
        """``(D, D)`` time to move ``op``'s output from device ``a`` (row) to ``b`` (column)."""
        return self.latency + self.out_bytes[op] * self.inv_bw

    @property
    def mean_comp(self) -> np.ndarray:
        """``(n_ops,)`` compute time averaged over the devices (HEFT's w-bar)."""
        return self.comp.mean(axis=1)

    @property
    def mean_comm(self) -> np.ndarray:
        """``(n_ops,)`` transfer time of each op's output averaged over ordered device pairs
        ``a != b`` (HEFT's c-bar); zeros with one device. Raw costs: exactly ``out_bytes``."""
        d = self.n_devices
        if d == 1:
            return np.zeros(self.out_bytes.shape[0])
        off = ~np.eye(d, dtype=bool)
        return self.latency[off].mean() + self.out_bytes * self.inv_bw[off].mean()

    @property
    def uniform(self) -> bool:
        """Whether all devices are interchangeable: equal speeds and equal links between every pair."""
        d = self.n_devices
        off = ~np.eye(d, dtype=bool)
        return bool(
            np.all(self.comp == self.comp[:, :1])
            and np.all(self.latency[off] == self.latency[off][:1])
            and np.all(self.inv_bw[off] == self.inv_bw[off][:1])
        )
