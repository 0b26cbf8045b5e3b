"""Stragglers: devices and links that run at a fraction of their speed over intervals of time.

A :class:`Straggler` slows one device (its ops compute at ``factor`` times the device's speed) or
one directed link (it moves bytes at ``factor`` times its bandwidth; its latency is unchanged)
from ``start`` to ``end``. Put them in ``SimConfig(stragglers=...)``; the simulator applies them
exactly: an op's end solves ``integral_{start}^{end} speed(t) dt = work`` over the device's
piecewise-constant speed profile (work started before, during or across a slowdown), and each hop of
a transfer serialises its bytes over the link's profile and arrives ``latency`` later
(:mod:`doppler_gym.sim.finish_times`, from the profiles of :mod:`doppler_gym.sim.straggler_profiles`).
Overlapping stragglers of one device or link multiply their factors. A :class:`StragglerModel`
draws stragglers at random (Poisson onsets per device and link, uniform durations and factors)
from a seed. What each straggler of a run cost: :func:`doppler_gym.sim.whatif_analysis.whatif`.

Times are in the *reported* unit of the run (the unit of ``Trace.start``: seconds, or the paper's
units under :meth:`SimConfig.reference`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from doppler_gym.topology.types import Topology

KINDS = ("device", "link")
# The least factor of a slowdown with no end: below it the device or link is stalled in all but name (its work
# would take over a million times as long, or overflow to an infinite makespan).
MIN_OPEN_FACTOR = 1e-6


def _number(value: object, label: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"Straggler.{label} must be a number, got {value!r}")
    return float(value)


def _device_id(value: object, label: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{label} must be a device id (an integer >= 0), got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Straggler:
    """One slowdown of one device or one directed link.

    Attributes:
        kind: ``"device"`` or ``"link"``.
        index: the device id (``kind="device"``), or the link as a ``(src, dst)`` pair of device
            ids (``kind="link"``): a direct link of the topology (with ``cost_model="raw"`` every
            pair of distinct devices is one).
        start: when the slowdown begins [reported time unit], >= 0.
        end: when it ends [reported time unit], > ``start``; ``math.inf``: until the run ends.
        factor: the fraction of its speed (device) or bandwidth (link) it keeps, in ``[0, 1]``;
            0 stalls it (then ``end`` must be finite); with ``end=inf`` it must be at least
            :data:`MIN_OPEN_FACTOR`.
    """

    kind: str
    index: int | tuple[int, int]
    start: float
    end: float
    factor: float

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Straggler.kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind == "device":
            index: int | tuple[int, int] = _device_id(self.index, "Straggler.index of a device")
        else:
            pair = self.index
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise ValueError(f"Straggler.index of a link must be a (src, dst) pair of devices, got {pair!r}")
            index = (_device_id(pair[0], "Straggler link src"), _device_id(pair[1], "Straggler link dst"))
            if index[0] == index[1]:
                raise ValueError(f"Straggler link {index}: src and dst are the same device; a link joins two")
        start, end, factor = (_number(getattr(self, k), k) for k in ("start", "end", "factor"))
        if not (0.0 <= start < math.inf) or not (end > start) or math.isnan(end):
            raise ValueError(f"Straggler interval [{start!r}, {end!r}) must have 0 <= start < end (end may be inf)")
        if not 0.0 <= factor <= 1.0:
            raise ValueError(f"Straggler.factor is the fraction of speed kept, in [0, 1], got {factor!r}")
        if factor == 0.0 and end == math.inf:
            raise ValueError("Straggler.factor=0 stalls the device or link: give a finite end, or the run never ends")
        if factor < MIN_OPEN_FACTOR and end == math.inf:
            raise ValueError(f"Straggler.factor={factor!r} with end=inf all but stalls the device or link for good "
                             f"(its work there would take {1 / factor:.3g} times as long): give a finite end "
                             f"or a factor >= {MIN_OPEN_FACTOR:g}")
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)
        object.__setattr__(self, "factor", factor)

    def label(self) -> str:
        """The CLI form, e.g. ``device:1@0.2-0.5x0.5`` or ``link:0>1@0.2-infx0.5``."""
        where = str(self.index) if self.kind == "device" else f"{self.index[0]}>{self.index[1]}"
        return f"{self.kind}:{where}@{self.start:g}-{self.end:g}x{self.factor:g}"


def as_stragglers(value: object, where: str = "stragglers") -> tuple[Straggler, ...]:
    """``value`` (``None``, or a sequence of :class:`Straggler`) as a tuple; a clear error otherwise."""
    if value is None:
        return ()
    if isinstance(value, Straggler):
        return (value,)
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{where} must be a sequence of Straggler, got {type(value).__name__}; e.g. "
                        f"(Straggler('device', 0, start=0.0, end=1.0, factor=0.5),) or StragglerModel(...).draw(...)")
    out = tuple(value)
    for i, s in enumerate(out):
        if not isinstance(s, Straggler):
            raise TypeError(f"{where}[{i}] must be a Straggler, got {type(s).__name__}")
    return out


def check_indices(stragglers: Sequence[Straggler], n_devices: int, linked: np.ndarray | None) -> None:
    """ValueError unless every straggler names a device in ``[0, n_devices)`` or a direct link.

    ``linked``: ``(D, D) bool`` the direct links (``None``: every pair of distinct devices).
    """
    for i, s in enumerate(stragglers):
        ids = (s.index,) if s.kind == "device" else s.index
        for d in ids:
            if d >= n_devices:
                raise ValueError(f"stragglers[{i}] ({s.label()}): device {d} is not in 0..{n_devices - 1} "
                                 f"(the run has {n_devices} devices)")
        if s.kind == "link" and linked is not None and not linked[s.index]:
            a, b = s.index
            raise ValueError(f"stragglers[{i}] ({s.label()}): there is no direct link {a} -> {b} in the topology; "
                             f"slow one of the links its route crosses instead")


# ---------------------------------------------------------------------------- random model
def _pair(value: object, label: str, low: float, high: float) -> tuple[float, float]:
    try:
        a, b = (float(x) for x in value)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ValueError(f"StragglerModel.{label} must be a (low, high) pair of numbers, got {value!r}") from None
    if not (low <= a <= b <= high):
        raise ValueError(f"StragglerModel.{label}=({a}, {b}) must satisfy {low} <= low <= high <= {high}")
    return a, b


@dataclass(frozen=True)
class StragglerModel:
    """A seeded random model of stragglers over a horizon ``H`` (e.g. one nominal iteration).

    Each device gets ``Poisson(device_rate)`` slowdowns and each direct link ``Poisson(link_rate)``;
    each starts uniformly in ``[0, H)``, lasts ``Uniform(*duration) * H`` and keeps
    ``Uniform(*factor)`` of the speed. Published straggler episodes range from tens of seconds to
    hours and cost 1.34x JCT on average (Alibaba's Falcon); pick the rates and factors to match the
    system you study.

    Attributes:
        device_rate: expected slowdowns per device per horizon (>= 0), or one rate per device (a
            tuple: some machines straggle more often than others).
        link_rate: expected slowdowns per direct link per horizon (>= 0).
        duration: ``(low, high)`` length as a fraction of the horizon, ``0 < low <= high``.
        factor: ``(low, high)`` fraction of speed kept, within ``(0, 1]``.
        horizon: ``H`` [reported time unit]; ``None``: the caller's scale (the env: the instance's
            critical-path heuristic makespan; ``doppler whatif``: the nominal makespan).
    """

    device_rate: float | tuple[float, ...] = 0.5
    link_rate: float = 0.0
    duration: tuple[float, float] = (0.1, 0.5)
    factor: tuple[float, float] = (0.2, 0.8)
    horizon: float | None = None

    def __post_init__(self) -> None:
        for label in ("device_rate", "link_rate"):
            v = getattr(self, label)
            many = label == "device_rate" and isinstance(v, (tuple, list, np.ndarray))
            for x in (v if many else (v,)):
                if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) or not 0 <= x < 1e6:
                    raise ValueError(f"StragglerModel.{label} is an expected count per horizon, >= 0"
                                     f"{' (or one per device)' if label == 'device_rate' else ''}, got {v!r}")
            object.__setattr__(self, label, tuple(float(x) for x in v) if many else float(v))
        duration = _pair(self.duration, "duration", 0.0, math.inf)
        if duration[0] <= 0:
            raise ValueError(f"StragglerModel.duration low must be > 0 (a fraction of the horizon), got {duration}")
        factor = _pair(self.factor, "factor", 0.0, 1.0)
        if factor[0] <= 0:
            raise ValueError(f"StragglerModel.factor low must be > 0 (0 would stall forever), got {factor}")
        object.__setattr__(self, "duration", duration)
        object.__setattr__(self, "factor", factor)
        h = self.horizon
        if h is not None:
            if isinstance(h, bool) or not isinstance(h, (int, float, np.integer, np.floating)) or not 0 < h < math.inf:
                raise ValueError(f"StragglerModel.horizon must be a positive time or None, got {h!r}")
            object.__setattr__(self, "horizon", float(h))

    def draw(
        self, topology: Topology | int, rng: np.random.Generator | int, horizon: float | None = None
    ) -> tuple[Straggler, ...]:
        """One draw of stragglers.

        Args:
            topology: the devices and direct links (an int ``D``: ``D`` devices, every pair linked,
                as under ``cost_model="raw"``).
            rng: a ``numpy`` Generator, or a seed (same seed, same stragglers).
            horizon: ``H`` when the model has none [reported time unit].

        Returns:
            The stragglers, devices first (by id), then links (by ``(src, dst)``).
        """
        h = self.horizon if self.horizon is not None else horizon
        if h is None or not 0 < float(h) < math.inf:
            raise ValueError(f"StragglerModel.draw needs a positive horizon (the model's or the argument), got {h!r}")
        h = float(h)
        if not isinstance(rng, np.random.Generator):
            rng = np.random.default_rng(rng)
        if isinstance(topology, (int, np.integer)) and not isinstance(topology, bool):
            n = int(topology)
            linked = ~np.eye(n, dtype=bool)
        else:
            n = topology.n_devices
            linked = topology.bandwidth > 0
        if isinstance(self.device_rate, tuple) and len(self.device_rate) != n:
            raise ValueError(f"StragglerModel.device_rate gives {len(self.device_rate)} rates but the topology has "
                             f"{n} devices; give one per device, or one number for all")
        out: list[Straggler] = []
        resources = [("device", d) for d in range(n)]
        resources += [("link", (int(a), int(b))) for a, b in np.argwhere(linked)]
        for kind, index in resources:
            if kind == "link":
                rate = self.link_rate
            else:
                rate = self.device_rate[index] if isinstance(self.device_rate, tuple) else self.device_rate
            if rate == 0.0:
                continue
            for _ in range(int(rng.poisson(rate))):
                start = float(rng.uniform(0.0, h))
                length = float(rng.uniform(*self.duration)) * h
                factor = float(rng.uniform(*self.factor))
                out.append(Straggler(kind, index, start, start + length, factor))
        return tuple(out)
