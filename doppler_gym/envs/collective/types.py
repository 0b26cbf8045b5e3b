"""Static data of one ``Doppler-Collective-v0`` instance (topology, demand, epoch timing).

Everything here is fixed for the env's lifetime; the episode state lives in
:class:`~doppler_gym.envs.collective.env.CollectiveEnv`. Timing follows
:mod:`doppler_gym.comm.schedule` exactly (the same functions the solvers and the validator use).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from doppler_gym.comm.demand import Demand
from doppler_gym.comm.schedule import LinkTiming, arrival_offset, link_timing
from doppler_gym.comm.solve import collective_phases, parse_bytes, phase_demand, phase_timing
from doppler_gym.comm.topology import CommTopology, comm_topology

NEVER = np.iinfo(np.int64).max // 4  # "not held / never arrives" in epoch arrays


@dataclass(frozen=True, eq=False)
class CollectiveInstance:
    """One collective on one topology, cut into epochs.

    Attributes:
        topology: the :class:`CommTopology`.
        demand: the commodities (one chunk each) and where they are wanted.
        collective: the collective's name (``"allgather"``, ..., ``"multicast"``).
        buffer_bytes: per-GPU output buffer [B].
        chunk_bytes: size of one chunk [B] (``buffer_bytes / demand.output_chunks``).
        tau: epoch length [s].
        epoch: the ``epoch`` argument it was built with (``"fast"``, ``"slow"`` or seconds).
        multiplier: epoch multiplier used for ``"fast"``/``"slow"``.
        timing: :class:`LinkTiming` (kappa, beta, delta per link).
        offset: ``(n_links,) int64`` epochs from a send to its availability at the link's head
            (:func:`~doppler_gym.comm.schedule.arrival_offset`).
        window_capacity: ``(n_links,) int64`` sends per window of ``beta + 1`` epochs.
        reach: ``(n_nodes, n_nodes) bool``: ``reach[s, g]`` when GPU ``g`` is reachable from switch
            ``s`` through switches only (all False on rows of GPUs).
    """

    topology: CommTopology
    demand: Demand
    collective: str
    buffer_bytes: float
    chunk_bytes: float
    tau: float
    epoch: Any
    multiplier: float
    timing: LinkTiming
    offset: np.ndarray
    window_capacity: np.ndarray
    reach: np.ndarray

    @property
    def n_commodities(self) -> int:
        return self.demand.n_commodities

    @property
    def n_nodes(self) -> int:
        return self.topology.n_nodes

    @property
    def n_links(self) -> int:
        return self.topology.n_links


def build_instance(topology: Any, collective: str | Mapping, buffer_bytes: float | str, chunks: int = 1,
                   epoch: str | float = "fast", multiplier: float = 1.0,
                   root: int | str | None = None) -> CollectiveInstance:
    """A :class:`CollectiveInstance` from the env's keyword arguments (see ``CollectiveEnv``).

    Raises ``ValueError`` for REDUCE-SCATTER/ALLREDUCE: they are several phases, one of them on the
    reversed topology run backwards in time, which an epoch-by-epoch MDP cannot express as one
    episode (schedule their ALLGATHER phases instead).
    """
    topo = comm_topology(topology)
    name, parts = collective_phases(collective)
    if len(parts) != 1 or parts[0][1]:
        raise ValueError(f"Doppler-Collective-v0: {name!r} is a composite collective (phases {parts}); "
                         "use a single-phase one (allgather, alltoall, broadcast, scatter, gather or "
                         "{source: destinations})")
    buffer = parse_bytes(buffer_bytes)
    part_topo, demand = phase_demand(topo, parts[0][0], False, chunks=chunks, root=root)
    if not (isinstance(multiplier, (int, float)) and not isinstance(multiplier, bool) and multiplier > 0):
        raise ValueError(f"Doppler-Collective-v0: multiplier must be a positive number, got {multiplier!r}")
    chunk_bytes, tau = phase_timing(part_topo, demand, buffer, epoch, float(multiplier))
    timing = link_timing(part_topo, tau, chunk_bytes)
    offset = arrival_offset(part_topo, timing)
    return CollectiveInstance(
        topology=part_topo, demand=demand, collective=name, buffer_bytes=buffer, chunk_bytes=chunk_bytes,
        tau=tau, epoch=epoch, multiplier=float(multiplier), timing=timing, offset=offset,
        window_capacity=timing.window_capacity, reach=_switch_reach(part_topo),
    )


def _switch_reach(topo: CommTopology) -> np.ndarray:
    n = topo.n_nodes
    reach = np.zeros((n, n), bool)
    for s in np.flatnonzero(topo.is_switch):
        seen = {int(s)}
        stack = [int(s)]
        while stack:
            u = stack.pop()
            for lk in topo.out_links(u):
                v = int(topo.dst[lk])
                if topo.is_switch[v]:
                    if v not in seen:
                        seen.add(v)
                        stack.append(v)
                else:
                    reach[s, v] = True
    return reach
