"""Collective-communication scheduling on GPU topologies (TE-CCL: Liu et al., SIGCOMM 2024).

A collective (ALLGATHER, ALLTOALL, BROADCAST, ...) on a topology of GPUs and switches becomes a
multi-commodity flow over a time-expanded network of epochs; the solvers return chunk schedules
(chunk, link, epoch) and :func:`validate` replays any schedule independently of its solver.

==========================  =======================================================================
:func:`comm_topology`       topologies by name (``dgx1``, ``ndv2-K``, ``dgx2-K``, ``amd-K``, ``mesh-L``)
:func:`make_demand`         commodities of a collective (or ``{source: destinations}``)
:func:`solve`               minimum-epoch schedule: ``method="milp"`` (CP-SAT), ``"lp"`` (HiGHS),
                            ``"rounds"`` (time-partitioned), ``"auto"``
:func:`validate`            capacity, causality, buffers, demands of a :class:`Schedule`
:func:`ring_schedule`, ...  baselines, and the NCCL-like alpha-beta model :func:`nccl_time`
:func:`lower_bound`         analytic cut and hop-latency bounds (and the solvers' bound,
                            :func:`release_cut_bound_epochs`)
:class:`MulticastTimer`     per-destination delays of one tensor multicast on a simulator topology
                            (cached TE-CCL schedules; ``SimConfig(multicast="teccl")`` uses it)
==========================  =======================================================================

Importing this package loads neither OR-Tools nor HiGHS; the solvers import them when called.
"""

from doppler_gym.comm.baselines import direct_schedule, nccl_time, ring_order, ring_schedule
from doppler_gym.comm.bounds import (
    LowerBound,
    cut_bound_epochs,
    cut_bound_seconds,
    hop_bound_epochs,
    hop_bound_seconds,
    lower_bound,
    release_cut_bound_epochs,
)
from doppler_gym.comm.demand import (
    COLLECTIVES,
    Demand,
    chunk_bytes_for,
    composition,
    is_composite,
    make_demand,
    reverse_topology,
)
from doppler_gym.comm.epochs import default_multiplier, epoch_duration
from doppler_gym.comm.multicast import MulticastPlan, MulticastTimer, size_bucket
from doppler_gym.comm.schedule import LinkTiming, Schedule, link_timing
from doppler_gym.comm.solve import METHODS, PhasedSchedule, parse_bytes, solve, solve_demand
from doppler_gym.comm.topology import CommTopology, comm_topology
from doppler_gym.comm.validate import ValidationReport, validate

__all__ = [
    "COLLECTIVES", "METHODS", "CommTopology", "Demand", "LinkTiming", "LowerBound", "MulticastPlan", "MulticastTimer",
    "PhasedSchedule", "Schedule", "ValidationReport", "chunk_bytes_for", "comm_topology", "composition",
    "cut_bound_epochs", "cut_bound_seconds", "default_multiplier", "direct_schedule", "epoch_duration",
    "hop_bound_epochs", "hop_bound_seconds", "is_composite", "link_timing", "lower_bound", "make_demand", "nccl_time",
    "parse_bytes", "release_cut_bound_epochs", "reverse_topology", "ring_order", "ring_schedule", "size_bucket",
    "solve", "solve_demand", "validate",
]
