"""Simulator configuration: every knob of the work-conserving model, with its unit."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from doppler_gym.graph.types import PRECISIONS
from doppler_gym.sim.stragglers import Straggler, as_stragglers

COST_MODELS = ("topology", "raw", "roofline")
LINK_MODELS = ("ideal", "fifo")
QUEUE_ORDERS = ("fifo", "priority", "fixed")  # packing.py stores the index: keep this order
MULTICASTS = ("p2p", "teccl")
MEMORY_MODES = ("off", "track", "enforce")


@dataclass(frozen=True)
class SimConfig:
    """How the work-conserving (WC) runtime is modelled.

    Attributes:
        cost_model: ``"topology"``: an op takes ``flops / speed[d]`` [s] on device ``d`` and a
            transfer takes ``latency + out_bytes / bandwidth`` [s] per hop of the route between
            the two devices. ``"raw"``: the graph's costs are times: an op takes ``flops`` and a
            cross-device transfer takes ``out_bytes`` whatever the devices (the DOPPLER files'
            model; the topology's figures are ignored, only its device count is used).
            ``"roofline"``: an op takes ``max(flops / (peak * eff), bytes / hbm_bandwidth) + launch``
            [s] on its device's GPU model (``Topology.gpus``: per-precision tensor-core and vector
            peaks, HBM bandwidth, launch overhead; :mod:`doppler_gym.sim.roofline`), the topology's
            ``speed`` ignored; transfers as under ``"topology"``. Needs a topology whose ``gpus`` are
            set (the presets' are) and a graph in physical units.
            The field's default is ``"topology"``, so ``SimConfig()`` and ``simulate`` without a config
            stay on the FLOP-rate model; the tools' default (the ``doppler`` command, the envs, the
            baselines and agents, when given no config) is :func:`doppler_gym.instances.default_config`,
            which picks ``"roofline"`` for a graph in physical units on a topology whose devices all
            have GPU models, the reference model for the paper graphs, and ``"topology"`` otherwise.
        link_model: ``"ideal"``: transfers never contend (any number share a link at full
            speed). ``"fifo"``: each directed link carries one transfer at a time, first come
            first served; a multi-hop transfer is store-and-forward, queueing at every hop.
        streams: ops that may run at once on one device (>= 1). Sharing rule: each stream runs
            its op at the device's full speed; this models kernels too small to fill a GPU
            (the einsummable engine uses 5 streams per GPU). Keep 1 for kernels that saturate it.
        queue_order: the order in which a device starts its ready ops: ``"fifo"`` by the time an
            op became ready (same-time ties in event order, and a free stream is granted at
            once, as SimPy), or ``"priority"`` by the ``priorities`` argument of ``simulate``
            (lower first, ties by ready order), e.g. the SEL order or negative b-level; in this
            mode free streams are filled once all events of the instant are processed, so every
            op ready at that instant competes by priority. ``"fixed"``: each device runs its ops in
            one given order, by ``priorities`` (lower first, ties by op id; ``None``: op id order),
            and waits when its next op is not ready, even if later ones are (not work-conserving: a
            pipeline-parallel schedule); with ``streams > 1`` ops start in that order and may
            overlap. Priorities that order the whole graph topologically (e.g. start times of a
            valid schedule, the SEL order) never deadlock; an order that does is a ``ValueError``.
        compute_jitter: sigma of a mean-one lognormal factor on each op's compute time
            (``exp(sigma * z - sigma**2 / 2)``, ``z ~ N(0, 1)``); 0 = deterministic.
        transfer_jitter: the same for each edge's transfer time.
        seed: seed of the jitter draws (same seed, same trace).
        time_divisor: reported times are internal times divided by this (``1e10`` in the
            reference mode gives the paper's units; 1 keeps seconds or raw units).
        multicast: how one op's output reaches the other devices that consume it. ``"p2p"``:
            one independent point-to-point transfer per consuming edge (the model above).
            ``"teccl"``: per producer, the distinct other devices consuming its output get one
            TE-CCL multicast (:class:`doppler_gym.comm.multicast.MulticastTimer`: copy at GPUs,
            chunks pipelined, the schedule's sends replayed with the topology's link figures), and
            each consuming edge takes that multicast's delay for its device (times the edge's
            jitter factor). A collective op (kind in ``dg.COLLECTIVE_KINDS``; ``out_bytes`` the
            output buffer each participant holds [B]) is timed as that collective over its group
            G (the devices of the op, its producers and its consumers): its in-edges take 0 s (a
            barrier: it starts after its last producer), it computes as usual, and every consumer,
            one on its own device too, gets the output the collective's TE-CCL time T [s] after the
            op ends (``|G| == 1``: T = 0; :mod:`doppler_gym.sim.multicast` has the kinds). Under
            ``"p2p"`` a collective op is an ordinary op. Needs ``cost_model="topology"`` and
            ``link_model="ideal"``:
            multicasts are timed in isolation (they do not queue behind other transfers), and
            the paper's raw-cost files have no topology. Needs OR-Tools (``pip install
            doppler-gym[solvers]``); schedules are cached per topology, source device,
            destination set and size bucket (collectives: kind, group, root, size bucket), so
            the first runs are slower.
        multicast_chunks: TE-CCL chunks per output (C >= 1; more pipelines better, solves slower).
        multicast_epoch: TE-CCL epoch rule, ``"fast"``, ``"slow"`` or an epoch length [s].
        multicast_time_limit: CP-SAT budget per multicast schedule [s]; a solve that hits it
            keeps its best valid schedule (then makespans may vary between processes).
        stragglers: :class:`~doppler_gym.sim.stragglers.Straggler` slowdowns (a device or a link at
            a fraction of its speed from ``start`` to ``end``, in the reported time unit), applied
            exactly (:mod:`doppler_gym.sim.stragglers`); ``()`` = steady hardware. A sequence is
            stored as a tuple (the config stays hashable). Runs with stragglers use the event loop.
        memory: per-device memory (:mod:`doppler_gym.sim.memory`; it never changes the times).
            ``"off"``: not computed (the fast path). ``"track"``: ``simulate`` attaches a
            :class:`~doppler_gym.sim.memory.MemoryProfile` (``Trace.memory``: peak and timeline per
            device, and the first point over the topology's ``memory``, if any). ``"enforce"``:
            the same, and a placement whose peak exceeds a device's memory is infeasible:
            ``Trace.feasible`` is False with ``Trace.memory.violation`` (device, time, excess
            bytes), and ``simulate_batch`` returns ``inf`` for its makespan.
        precision: numeric format of the ops of a graph without ``precisions`` under the roofline
            cost model (one of ``dg.graph.types.PRECISIONS``: ``"fp32"``, ``"tf32"``, ``"bf16"``,
            ``"fp16"``, ``"fp8"``); the other cost models ignore it.
    """

    cost_model: str = "topology"
    link_model: str = "ideal"
    streams: int = 1
    queue_order: str = "fifo"
    compute_jitter: float = 0.0
    transfer_jitter: float = 0.0
    seed: int = 0
    time_divisor: float = 1.0
    multicast: str = "p2p"
    multicast_chunks: int = 1
    multicast_epoch: str | float = "fast"
    multicast_time_limit: float = 30.0  # [s] per schedule
    stragglers: tuple[Straggler, ...] = ()  # slowdowns of devices/links over time (sim/stragglers.py)
    memory: str = "off"  # "off" | "track" | "enforce"
    precision: str = "bf16"  # roofline: format of ops without one (graph.precisions)

    def __post_init__(self) -> None:
        for label, value, allowed in (
            ("cost_model", self.cost_model, COST_MODELS),
            ("link_model", self.link_model, LINK_MODELS),
            ("queue_order", self.queue_order, QUEUE_ORDERS),
            ("multicast", self.multicast, MULTICASTS),
            ("memory", self.memory, MEMORY_MODES),
            ("precision", self.precision, PRECISIONS),
        ):
            if value not in allowed:
                raise ValueError(f"SimConfig.{label} must be one of {allowed}, got {value!r}")
        if isinstance(self.streams, bool) or not isinstance(self.streams, (int, np.integer)) or self.streams < 1:
            raise ValueError(f"SimConfig.streams must be an integer >= 1, got {self.streams!r}")
        object.__setattr__(self, "streams", int(self.streams))
        for label in ("compute_jitter", "transfer_jitter"):
            value = getattr(self, label)
            if isinstance(value, bool) or not (isinstance(value, (int, float, np.floating)) and 0.0 <= value < 10.0):
                raise ValueError(f"SimConfig.{label} is a lognormal sigma in [0, 10), got {value!r}")
            object.__setattr__(self, label, float(value))
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"SimConfig.seed must be an integer >= 0, got {self.seed!r}")
        object.__setattr__(self, "seed", int(self.seed))
        divisor = self.time_divisor
        if isinstance(divisor, bool) or not (isinstance(divisor, (int, float, np.floating)) and 0 < divisor < np.inf):
            raise ValueError(f"SimConfig.time_divisor must be a positive finite number, got {divisor!r}")
        object.__setattr__(self, "time_divisor", float(divisor))
        self._check_multicast()
        self._check_stragglers()

    def _check_stragglers(self) -> None:
        stragglers = as_stragglers(self.stragglers, "SimConfig.stragglers")
        object.__setattr__(self, "stragglers", stragglers)
        if self.multicast == "teccl" and any(s.kind == "link" for s in stragglers):
            raise ValueError("SimConfig(multicast='teccl') times multicasts in isolation and cannot slow a link; "
                             "use multicast='p2p' with link stragglers (device stragglers are fine)")

    def _check_multicast(self) -> None:
        chunks = self.multicast_chunks
        if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
            raise ValueError(f"SimConfig.multicast_chunks must be an integer >= 1, got {chunks!r}")
        object.__setattr__(self, "multicast_chunks", int(chunks))
        epoch = self.multicast_epoch
        if isinstance(epoch, str):
            if epoch not in ("fast", "slow"):
                raise ValueError(f"SimConfig.multicast_epoch must be 'fast', 'slow' or an epoch length in seconds, "
                                 f"got {epoch!r}")
        elif isinstance(epoch, bool) or not (isinstance(epoch, (int, float, np.floating)) and 0 < epoch < np.inf):
            raise ValueError(f"SimConfig.multicast_epoch must be 'fast', 'slow' or a positive epoch length in seconds, "
                             f"got {epoch!r}")
        limit = self.multicast_time_limit
        if isinstance(limit, bool) or not (isinstance(limit, (int, float, np.floating)) and 0 < limit < np.inf):
            raise ValueError(f"SimConfig.multicast_time_limit must be positive seconds, got {limit!r}")
        object.__setattr__(self, "multicast_time_limit", float(limit))
        if self.multicast == "teccl":
            if self.cost_model == "raw":
                raise ValueError(f"SimConfig(multicast='teccl') needs cost_model='topology' or 'roofline', got "
                                 f"cost_model={self.cost_model!r}: raw costs (the paper's files, "
                                 f"SimConfig.reference()) have no topology to schedule a multicast on; "
                                 f"use multicast='p2p' there")
            if self.link_model != "ideal":
                raise ValueError(f"SimConfig(multicast='teccl') needs link_model='ideal', got "
                                 f"link_model={self.link_model!r}: multicasts are timed in isolation and cannot "
                                 f"queue on FIFO links; use link_model='ideal', or multicast='p2p' with FIFO links")

    @classmethod
    def reference(cls) -> SimConfig:
        """The DOPPLER authors' SimPy simulator exactly (their ``env/cost.py``).

        One FIFO server per device; every edge is its own transfer that starts when its
        producer ends and lasts the producer's ``comm`` cost when the devices differ (0 otherwise);
        no contention; same-time events in SimPy's order; makespan in paper units (raw / 1e10).
        """
        return cls(cost_model="raw", link_model="ideal", streams=1, queue_order="fifo", time_divisor=1e10)

    @property
    def has_jitter(self) -> bool:
        """Whether compute or transfer times are random."""
        return self.compute_jitter > 0 or self.transfer_jitter > 0

    @property
    def time_unit(self) -> str:
        """Unit of reported times: ``"s"``, ``"paper"`` (raw / 1e10) or ``"cost"`` (raw costs)."""
        if self.cost_model in ("topology", "roofline"):
            return "s" if self.time_divisor == 1.0 else f"s/{self.time_divisor:g}"
        if self.time_divisor == 1e10:
            return "paper"
        return "cost" if self.time_divisor == 1.0 else f"cost/{self.time_divisor:g}"
