"""Multicast delays for the simulator: one op's output sent to several devices by a TE-CCL schedule.

:class:`MulticastTimer` answers "the producer on device ``s`` ended at ``t``; when does each of
the devices ``V`` hold its whole output of ``n`` bytes?" with a TE-CCL multicast schedule
(:func:`doppler_gym.comm.solve` of ``{s: V}``, copy at GPUs, store-and-forward, ``chunks`` chunks)
on the simulator's own topology, instead of ``|V|`` independent point-to-point copies.

**Cache and size buckets.** A schedule is solved once per ``(s, frozenset(V), bucket)``, where
``bucket = 2 ** ceil(log2(max(n, 1)))`` bytes: the size rounded up to a power of two (1 B for
``n <= 1``). The schedule is solved for a ``bucket``-byte output; its *routing and send order*
are then timed at the actual ``n`` (below), so every size in a bucket gets its own exact-size time.
Delays of each exact ``(s, V, n)`` are cached as well.

**From the schedule to seconds (the replay).** The epoch model fixes which chunk crosses which
link in which epoch: epochs of ``tau`` [s], ``delivery_epoch[c, v]`` (:func:`~doppler_gym.comm.validate`)
the epoch at whose end ``v`` first holds chunk ``c``, so the epoch model's time is
``(max_c delivery_epoch[c, v] + 1) * tau`` (:attr:`MulticastPlan.epoch_delays`). That time rounds a
link's latency ``alpha`` to whole epochs and drops it when ``alpha < 0.1 tau``, and it belongs to the
bucket's size, not to ``n``. The delays the timer returns therefore replay the schedule's sends at
size ``n`` in continuous time with the simulator's link physics (``cost_model="topology"``):

- sends are taken in epoch order (ties: commodity, then link); a chunk is ``n / chunks`` bytes;
- a send on link ``i -> j`` starts when the chunk is held at ``i`` (time 0 for the producer) and the
  link has finished its previous send of this schedule; it occupies the link for
  ``chunk / bandwidth[i, j]`` and the chunk is held at ``j`` a further ``latency[i, j]`` later
  (store-and-forward, as one hop of a point-to-point transfer);
- ``delays[v]`` = the time the last of ``v``'s chunks is held there (the first copy of each counts).

So a one-destination multicast over the simulator's route takes exactly the point-to-point time
``sum over hops (latency + n / bandwidth)``; a TE-CCL route with chunks pipelined over several
hops or split over several paths can be faster, never faster than physics allows (every hop pays
its latency and its bytes / bandwidth). At the bucket size the replay is never later than the
epoch model's time plus the latency the epoch model dropped (at most ``0.1 tau`` per hop).

Sends of one multicast share links (the schedule respects link capacity); different multicasts
are timed in isolation (they do not see each other, like ``link_model="ideal"`` transfers).

**Collectives over a group** (:meth:`MulticastTimer.collective_time`, for the collective ops of
:mod:`doppler_gym.sim.multicast`): ``(kind, group, root, nbytes)`` -> the time [s] from the start
of the collective until every member holds its output of ``nbytes``. The schedule is
:func:`doppler_gym.comm.solve` of ``kind`` over ``group`` (``group=``: the other GPUs may relay),
cached per ``(kind, sorted group, root, bucket)``; the same replay times each phase at the exact
size (chunk = buffer / ``output_chunks``, every commodity held at its source at 0), and the time is
that of the last wanted delivery. REDUCE-SCATTER's phase is the ALLGATHER of the reversed topology
run backwards in time (:mod:`doppler_gym.comm.demand`); it is timed by replaying that ALLGATHER
forwards: the replay's time is the longest path through a DAG of sends (a send waits for its chunk
and for its link's previous send), and reversing every dependency keeps the longest path, which is
then the reduction's time when each chunk reaches each GPU once (reductions themselves cost
nothing here: the graph op's own ``flops`` carry them). ALLREDUCE adds its two phases.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from doppler_gym.comm.demand import canonical_kind
from doppler_gym.comm.schedule import Schedule
from doppler_gym.comm.solve import METHODS, PhasedSchedule, solve
from doppler_gym.comm.topology import comm_topology
from doppler_gym.comm.validate import validate

#: Python modules each solver method needs (``pip install doppler-gym[solvers]``).
SOLVER_MODULES = {"milp": ("ortools",), "rounds": ("ortools",), "lp": ("highspy", "scipy"),
                  "auto": ("ortools", "highspy", "scipy")}
MAX_DELAY_ENTRIES = 1 << 18  # exact-size delay cache entries kept before it is cleared


def size_bucket(nbytes: float) -> int:
    """The cache bucket of an output of ``nbytes`` [B]: ``2 ** ceil(log2(nbytes))`` [B], 1 for ``nbytes <= 1``."""
    if not (isinstance(nbytes, (int, float, np.integer, np.floating)) and math.isfinite(nbytes) and nbytes >= 0):
        raise ValueError(f"multicast size must be finite bytes >= 0, got {nbytes!r}")
    if nbytes <= 1:
        return 1
    return 1 << math.ceil(math.log2(float(nbytes)))


@dataclass(frozen=True, eq=False)
class MulticastPlan:
    """One solved multicast (a cache entry of :class:`MulticastTimer`).

    Attributes:
        src: the producer's device.
        dsts: ``(k,) int64`` destination devices, ascending.
        bucket_bytes: the output size the schedule was solved for [B] (a power of two).
        schedule: the TE-CCL :class:`~doppler_gym.comm.schedule.Schedule` (``chunks`` commodities).
        delivery_epoch: ``(chunks, k) int64`` epoch at whose end each destination first holds each chunk.
        epoch_delays: ``(k,) float64`` [s] the epoch model's time ``(max_c delivery_epoch + 1) * tau``
            at ``bucket_bytes`` (latency rounded to epochs, see the module docstring).
    """

    src: int
    dsts: np.ndarray
    bucket_bytes: int
    schedule: Schedule
    delivery_epoch: np.ndarray
    epoch_delays: np.ndarray


class MulticastTimer:
    """Per-destination delays of TE-CCL multicasts on a simulator topology, cached.

    Args:
        topology: the simulator's :class:`doppler_gym.Topology` (devices = GPUs; every pair with
            ``bandwidth > 0`` a directed link).
        epoch: TE-CCL epoch rule, ``"fast"``, ``"slow"`` or seconds (:func:`doppler_gym.comm.solve`).
        method: ``"milp"`` (CP-SAT, copy at GPUs: the multicast model), ``"rounds"``, ``"lp"``, ``"auto"``.
        time_limit: solver budget per multicast [s]; a solve that hits it returns its best valid
            schedule (then results may vary between runs).
        chunks: C, chunks the output is cut into (pipelining; 1 = whole tensors).

    Raises:
        ImportError: the solver ``method`` needs is not installed (names the package to install).

    Attributes:
        solves: number of schedules solved so far (cache misses; a collective's phases count once).
    """

    def __init__(self, topology: object, epoch: str | float = "fast", method: str = "milp",
                 time_limit: float = 30.0, chunks: int = 1) -> None:
        if not (hasattr(topology, "bandwidth") and hasattr(topology, "latency") and hasattr(topology, "n_devices")):
            raise TypeError(f"MulticastTimer: topology must be a doppler_gym.Topology, got {type(topology).__name__}; "
                            "use dg.Topology.preset(name) or dg.Topology.uniform(n)")
        if method not in METHODS:
            raise ValueError(f"MulticastTimer: unknown method {method!r}; use one of {', '.join(METHODS)}")
        missing = [m for m in SOLVER_MODULES[method] if importlib.util.find_spec(m) is None]
        if missing:
            raise ImportError(f"MulticastTimer: method={method!r} needs {', '.join(missing)}, which is not installed; "
                              "run `pip install doppler-gym[solvers]` (or `pip install " + " ".join(missing) + "`), "
                              "or keep SimConfig(multicast='p2p')")
        if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
            raise ValueError(f"MulticastTimer: chunks must be an integer >= 1, got {chunks!r}")
        if not (isinstance(time_limit, (int, float)) and not isinstance(time_limit, bool) and time_limit > 0):
            raise ValueError(f"MulticastTimer: time_limit must be positive seconds, got {time_limit!r}")
        self.topology = topology
        self.comm = comm_topology(topology)
        self.epoch, self.method, self.time_limit, self.chunks = epoch, method, float(time_limit), int(chunks)
        self.n_devices = int(topology.n_devices)  # type: ignore[attr-defined]
        self._plans: dict[tuple[int, frozenset, int], MulticastPlan] = {}
        self._delays: dict[tuple[int, frozenset, float], np.ndarray] = {}
        self._phases: dict[tuple[str, tuple[int, ...], int | None, int], tuple[Schedule, ...]] = {}
        self._times: dict[tuple[str, tuple[int, ...], int | None, float], float] = {}
        self.solves = 0

    # ------------------------------------------------------------------ public
    def delays(self, src_device: int, dst_devices: Iterable[int], nbytes: float) -> np.ndarray:
        """Time from the producer's end until each destination holds the whole output.

        Args:
            src_device: the producer's device.
            dst_devices: ``(k,)`` distinct destination devices, none equal to ``src_device``.
            nbytes: output size [B], >= 0.

        Returns:
            ``(k,) float64`` delays [s], in the order of ``dst_devices`` (module docstring: the replay).
        """
        src, dsts = self._check(src_device, dst_devices)
        size_bucket(nbytes)  # checks nbytes
        key = (src, frozenset(dsts), float(nbytes))
        by_dev = self._delays.get(key)
        if by_dev is None:
            plan = self.plan(src, dsts, nbytes)
            by_dev = np.full(self.n_devices, np.nan)
            by_dev[plan.dsts] = self._replay(plan, float(nbytes))
            by_dev.setflags(write=False)
            if len(self._delays) >= MAX_DELAY_ENTRIES:
                self._delays.clear()
            self._delays[key] = by_dev
        return by_dev[np.asarray(dsts, np.int64)]

    def plan(self, src_device: int, dst_devices: Iterable[int], nbytes: float) -> MulticastPlan:
        """The cached (or newly solved) :class:`MulticastPlan` of ``(src, set(dsts), size_bucket(nbytes))``."""
        src, dsts = self._check(src_device, dst_devices)
        bucket = size_bucket(nbytes)
        key = (src, frozenset(dsts), bucket)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._solve(src, np.array(sorted(dsts), np.int64), bucket)
            self._plans[key] = plan
        return plan

    def collective_time(self, kind: str, group: Iterable[int], nbytes: float, root: int | None = None) -> float:
        """Time [s] of a collective among ``group``, from its start until every member holds its output.

        Args:
            kind: a named collective (:data:`doppler_gym.comm.demand.COLLECTIVES`), any spelling.
            group: the devices taking part (distinct, any order); one device takes 0 s.
            nbytes: the output buffer each member holds at the end [B], >= 0 (REDUCE-SCATTER: its
                shard, so the ALLGATHER buffer its phase is solved for is ``len(group) * nbytes``).
            root: the source device of broadcast/scatter/gather (a member); None otherwise.

        The schedule is cached per ``(kind, sorted group, root, size bucket)`` and replayed at
        ``nbytes`` (module docstring).
        """
        name = canonical_kind(kind)
        members = self._check_group(group, name, root)
        size_bucket(nbytes)  # checks nbytes
        if len(members) == 1:
            return 0.0
        buffer = float(nbytes) * (len(members) if name == "reduce-scatter" else 1)
        key = (name, members, root, buffer)
        t = self._times.get(key)
        if t is None:
            phases = self._collective_phases(name, members, root, size_bucket(buffer))
            t = float(sum(self._replay_held(p, buffer)[p.demand.wants].max() for p in phases))
            if len(self._times) >= MAX_DELAY_ENTRIES:
                self._times.clear()
            self._times[key] = t
        return t

    @property
    def cache_size(self) -> int:
        """Number of cached schedules (multicasts and collectives)."""
        return len(self._plans) + len(self._phases)

    # ------------------------------------------------------------------ internals
    def _check(self, src_device: object, dst_devices: Iterable[int]) -> tuple[int, list[int]]:
        d = self.n_devices
        if isinstance(src_device, bool) or not isinstance(src_device, (int, np.integer)) or not 0 <= src_device < d:
            raise ValueError(f"MulticastTimer: source device {src_device!r} is not in 0..{d - 1}")
        dsts = [int(x) for x in np.asarray(list(dst_devices)).reshape(-1)] if dst_devices is not None else []
        if not dsts:
            raise ValueError("MulticastTimer: no destination devices; give at least one device other than the source")
        if len(set(dsts)) != len(dsts) or any(not 0 <= x < d for x in dsts) or int(src_device) in dsts:
            raise ValueError(f"MulticastTimer: destinations {dsts} must be distinct devices in 0..{d - 1}, "
                             f"none equal to the source {int(src_device)}")
        return int(src_device), dsts

    def _check_group(self, group: Iterable[int], name: str, root: int | None) -> tuple[int, ...]:
        d = self.n_devices
        members = [int(x) for x in np.asarray(list(group)).reshape(-1)] if group is not None else []
        if not members or len(set(members)) != len(members) or any(not 0 <= x < d for x in members):
            raise ValueError(f"MulticastTimer: collective group {members} must be distinct devices in 0..{d - 1}, "
                             "at least one")
        rooted = name in ("broadcast", "scatter", "gather")
        if rooted != (root is not None) or (rooted and int(root) not in members):  # type: ignore[arg-type]
            raise ValueError(f"MulticastTimer: {name} " + (f"needs a root among the group {sorted(members)}, got "
                             f"{root!r}" if rooted else f"takes no root, got {root!r}"))
        return tuple(sorted(members))

    def _collective_phases(self, name: str, members: tuple[int, ...], root: int | None,
                           bucket: int) -> tuple[Schedule, ...]:
        """The cached (or newly solved) phase schedules of ``name`` over ``members`` at ``bucket`` [B]."""
        key = (name, members, root, bucket)
        phases = self._phases.get(key)
        if phases is None:
            result = solve(self.comm, name, float(bucket), chunks=self.chunks, epoch=self.epoch, method=self.method,
                           time_limit=self.time_limit, root=root, group=list(members))
            self.solves += 1
            phases = result.phases if isinstance(result, PhasedSchedule) else (result,)
            self._phases[key] = phases
        return phases

    def _solve(self, src: int, dsts: np.ndarray, bucket: int) -> MulticastPlan:
        schedule = solve(self.comm, {src: [int(x) for x in dsts]}, float(bucket), chunks=self.chunks,
                         epoch=self.epoch, method=self.method, time_limit=self.time_limit)
        self.solves += 1
        report = validate(schedule)
        report.raise_if_invalid()
        # Commodity c of a one-source multicast is chunk c (make_demand's order).
        order = np.argsort(schedule.demand.chunk, kind="stable")
        delivery = report.delivery_epoch[order][:, dsts]
        epoch_delays = (delivery.max(axis=0) + 1) * schedule.tau
        for arr in (dsts, delivery, epoch_delays):
            arr.setflags(write=False)
        return MulticastPlan(src=src, dsts=dsts, bucket_bytes=bucket, schedule=schedule,
                             delivery_epoch=delivery, epoch_delays=epoch_delays)

    def _replay(self, plan: MulticastPlan, nbytes: float) -> np.ndarray:
        """``(k,)`` [s] the replay of ``plan``'s sends at ``nbytes`` (module docstring)."""
        out = self._replay_held(plan.schedule, nbytes)[:, plan.dsts].max(axis=0)
        if not np.all(np.isfinite(out)):  # the validator guarantees delivery: a bug if this fails
            raise RuntimeError(f"MulticastTimer: replay of the multicast from {plan.src} lost a destination")
        return out

    @staticmethod
    def _replay_held(sched: Schedule, nbytes: float) -> np.ndarray:
        """``(n_commodities, n_nodes) float64`` [s]: when each node first holds each commodity when
        ``sched``'s sends are replayed at an output buffer of ``nbytes`` [B] (inf: never)."""
        topo, demand = sched.topology, sched.demand
        chunk = nbytes / demand.output_chunks
        sends = sched.sends.astype(np.int64)
        order = np.lexsort((sends[:, 1], sends[:, 0], sends[:, 2]))  # by epoch, commodity, link
        held = np.full((demand.n_commodities, topo.n_nodes), np.inf)
        held[np.arange(demand.n_commodities), demand.source] = 0.0
        link_free = np.zeros(topo.n_links)
        for x, ln, _k in sends[order]:
            i, j = topo.src[ln], topo.dst[ln]
            start = max(held[x, i], link_free[ln])
            busy = chunk / topo.capacity[ln]
            link_free[ln] = start + busy
            held[x, j] = min(held[x, j], start + busy + topo.alpha[ln])
        return held
