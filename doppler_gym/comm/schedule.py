"""Epoch timing of links and the :class:`Schedule` every solver and baseline returns.

Time is cut into epochs of length ``tau`` [s] (TE-CCL's time-expanded network;
``tau`` itself comes from :func:`doppler_gym.comm.epochs.epoch_duration`).
For a chunk of ``chunk_bytes`` [B] each link gets three numbers (:func:`link_timing`):

- ``kappa = capacity * tau / chunk_bytes``: chunks the link moves per epoch (may be < 1);
- ``beta = max(0, ceil(1/kappa - 1e-9) - 1)``: extra epochs a slow link needs to serialise one chunk;
- ``delta = ceil(alpha/tau - 1e-9)`` if ``alpha/tau > 0.1`` else 0: the latency in whole epochs.

The timing rule shared by solvers, baselines and the validator (the released code's buffer and
switch equations) says when a chunk that starts crossing link
``i -> j`` in epoch ``k`` is available at ``j``; :func:`arrival_offset` gives the offset:

- into a GPU from a GPU, or into a switch from anything: ``k + 1 + delta + beta``. A GPU holds the
  chunk from the start of that epoch (and may forward it then); a switch must send it on in
  exactly that epoch (it has no buffer), on every out-link if it is copy-capable, on one
  out-link per arrival otherwise;
- into a GPU from a switch: ``k + delta``. The transmission was already counted on the hop into
  the switch; counting it again would make GPU -> switch -> GPU twice as slow as a direct link.
  (A ``k + 1 + delta`` rule would charge an extra epoch per switched hop: the published DGX-2
  2-chassis ALLGATHER 1 GB, slow epochs, would need 5 epochs instead of 4. We follow the code.)

Capacity: on every link, every window of ``beta + 1`` consecutive epochs ending at epoch
``k >= beta`` holds at most ``window_capacity = floor((beta + 1) * kappa + 1e-9)`` sends (the first
window also covers epochs ``0..beta - 1``). A GPU may send (copy) one held chunk on all its
out-links in the same epoch. A demand is met at the end of epoch ``e`` when its destination holds
the chunk from the start of ``e + 1``; ``epochs = 1 + `` the last such ``e``, so ``epochs`` is the
largest arrival epoch, and a schedule may contain a switch -> GPU send in epoch ``epochs`` (it
lands at the start of that epoch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from doppler_gym.comm.demand import Demand
from doppler_gym.comm.topology import CommTopology

EPS = 1e-9  # guards ceil/floor against float noise ((beta+1)*kappa = 0.9999999999999999)
ALPHA_THRESHOLD = 0.1  # alpha/tau below this counts as no latency (released code)


@dataclass(frozen=True, eq=False)
class LinkTiming:
    """Per-link epoch figures for one ``tau`` and chunk size.

    Attributes:
        kappa: ``(n_links,) float64`` chunks per epoch, ``capacity * tau / chunk_bytes``.
        beta: ``(n_links,) int64`` extra epochs to serialise one chunk.
        delta: ``(n_links,) int64`` latency in whole epochs.
    """

    kappa: np.ndarray
    beta: np.ndarray
    delta: np.ndarray

    @property
    def window_capacity(self) -> np.ndarray:
        """``(n_links,) int64`` sends allowed in a window of ``beta + 1`` epochs,
        ``floor((beta + 1) * kappa + 1e-9)`` (>= 1)."""
        return np.floor((self.beta + 1) * self.kappa + EPS).astype(np.int64)


def link_timing(topology: CommTopology, tau: float, chunk_bytes: float) -> LinkTiming:
    """:class:`LinkTiming` of every link for epoch length ``tau`` [s] and ``chunk_bytes`` [B]."""
    tau = _positive(tau, "tau (epoch length, s)")
    chunk_bytes = _positive(chunk_bytes, "chunk_bytes")
    kappa = topology.capacity * tau / chunk_bytes
    beta = np.maximum(0, np.ceil(1.0 / kappa - EPS) - 1).astype(np.int64)
    ratio = topology.alpha / tau
    delta = np.where(ratio > ALPHA_THRESHOLD, np.ceil(ratio - EPS), 0).astype(np.int64)
    for arr in (kappa, beta, delta):
        arr.setflags(write=False)
    return LinkTiming(kappa=kappa, beta=beta, delta=delta)


def arrival_offset(topology: CommTopology, timing: LinkTiming) -> np.ndarray:
    """``(n_links,) int64``: a send in epoch ``k`` is available at the link's head in epoch
    ``k + offset`` (``delta`` for switch -> GPU links, ``1 + delta + beta`` otherwise)."""
    switch_to_gpu = topology.is_switch[topology.src] & ~topology.is_switch[topology.dst]
    return np.where(switch_to_gpu, timing.delta, 1 + timing.delta + timing.beta).astype(np.int64)


@dataclass(frozen=True, eq=False)
class Schedule:
    """A chunk schedule on the time-expanded network.

    Attributes:
        topology: the topology it runs on.
        demand: the commodities it delivers.
        chunk_bytes: size of one chunk [B].
        tau: epoch length [s].
        epochs: epochs until the last demand is met (``1 +`` the last epoch at whose end one is met).
        sends: ``(n_sends, 3) int32`` rows ``(commodity, link, epoch)``: the commodity's chunk starts
            crossing the link in that epoch.
        method: who made it (``"milp"``, ``"lp"``, ``"rounds"``, ``"ring"``, ``"direct"``, ...).
        solver_seconds: wall time spent finding it [s].
        optimal: True when ``epochs`` is proven minimal.
    """

    topology: CommTopology
    demand: Demand
    chunk_bytes: float
    tau: float
    epochs: int
    sends: np.ndarray
    method: str
    solver_seconds: float = 0.0
    optimal: bool = False

    def __post_init__(self) -> None:
        sends = np.asarray(self.sends)
        if sends.size == 0:
            sends = np.zeros((0, 3), np.int32)
        if sends.ndim != 2 or sends.shape[1] != 3:
            raise ValueError(
                f"Schedule ({self.method}): sends must have shape (n_sends, 3) rows (commodity, link, epoch), "
                f"got {sends.shape}"
            )
        if not np.issubdtype(sends.dtype, np.integer):
            raise TypeError(f"Schedule ({self.method}): sends must be integers, got dtype {sends.dtype}")
        sends = np.ascontiguousarray(sends, dtype=np.int32)
        sends.setflags(write=False)
        object.__setattr__(self, "sends", sends)
        if isinstance(self.epochs, bool) or not isinstance(self.epochs, (int, np.integer)) or self.epochs < 0:
            raise ValueError(f"Schedule ({self.method}): epochs must be an integer >= 0, got {self.epochs!r}")
        object.__setattr__(self, "epochs", int(self.epochs))
        object.__setattr__(self, "chunk_bytes", _positive(self.chunk_bytes, "chunk_bytes"))
        object.__setattr__(self, "tau", _positive(self.tau, "tau"))
        object.__setattr__(self, "solver_seconds", float(self.solver_seconds))
        object.__setattr__(self, "optimal", bool(self.optimal))

    @property
    def n_sends(self) -> int:
        """Number of (commodity, link, epoch) sends."""
        return int(self.sends.shape[0])

    @property
    def finish_time(self) -> float:
        """``epochs * tau`` [s]."""
        return self.epochs * self.tau

    @property
    def output_bytes(self) -> float:
        """Output buffer per GPU [B]: ``demand.output_chunks * chunk_bytes``."""
        return self.demand.output_chunks * self.chunk_bytes

    @property
    def algo_bandwidth(self) -> float:
        """Algorithmic bandwidth ``output_bytes / finish_time`` [B/s] (inf for an empty schedule)."""
        return self.output_bytes / self.finish_time if self.finish_time > 0 else math.inf

    def timing(self) -> LinkTiming:
        """:func:`link_timing` of this schedule's topology, tau and chunk size."""
        return link_timing(self.topology, self.tau, self.chunk_bytes)

    def __repr__(self) -> str:
        return (
            f"Schedule(method={self.method!r}, topology={self.topology.name!r}, demand={self.demand.name!r}, "
            f"epochs={self.epochs}, tau={self.tau:.4g}, n_sends={self.n_sends}, optimal={self.optimal})"
        )


def _positive(value: object, label: str) -> float:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TypeError(f"{label} must be a number, got {value!r}") from None
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"{label} must be positive and finite, got {value!r}")
    return x
