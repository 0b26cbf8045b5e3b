"""GPU sharing: the fraction of its solo speed each of two co-located jobs keeps.

Two models behind one call, ``model(type_a, type_b, gpu_type) -> (f_a, f_b)`` (``None`` when the pair
cannot share):

- :class:`GavelInterference`: Gavel's measured pairwise co-location throughputs (Narayanan et al.,
  OSDI 2020, MIT licence; ``data/README.md`` and ``data/GAVEL_LICENSE`` in this package), for the
  Gavel job types (``"ResNet-18 (batch size 32)"``, ...) on ``k80``/``p100``/``v100``; pairs it never
  measured, or measured at zero, cannot share. Types it does not know fall back to the parametric model.
- :class:`ParametricInterference`: each job keeps ``fraction`` of its solo speed (default 0.68, the
  median over Gavel's V100 pairs; the pair then delivers 1.36x one job alone).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


@dataclass(frozen=True)
class ParametricInterference:
    """Each of two co-located jobs keeps ``fraction`` of its solo speed (0 < fraction <= 1)."""

    fraction: float = 0.68

    def __post_init__(self) -> None:
        if not (0 < self.fraction <= 1):
            raise ValueError(f"ParametricInterference.fraction must be in (0, 1], got {self.fraction!r}")

    def __call__(self, type_a: str, type_b: str, gpu_type: str) -> tuple[float, float] | None:
        return (self.fraction, self.fraction)


@lru_cache(maxsize=1)
def gavel_table() -> dict:
    """The shipped Gavel throughputs: ``{gpu_type: {"solo_steps_per_s": ..., "pair_fraction": ...}}``."""
    text = resources.files("doppler_gym.cluster").joinpath("data/gavel_throughputs.json").read_text("utf-8")
    return json.loads(text)


class GavelInterference:
    """Gavel's measured pairwise fractions; unknown job or GPU types use ``fallback``."""

    def __init__(self, fallback: ParametricInterference | None = None) -> None:
        self.fallback = fallback or ParametricInterference()
        self._table = gavel_table()

    def __call__(self, type_a: str, type_b: str, gpu_type: str) -> tuple[float, float] | None:
        table = self._table.get(gpu_type)
        if table is None or type_a not in table["solo_steps_per_s"] or type_b not in table["solo_steps_per_s"]:
            return self.fallback(type_a, type_b, gpu_type)
        pair = table["pair_fraction"].get(f"{type_a}|{type_b}")
        if pair is None:
            rev = table["pair_fraction"].get(f"{type_b}|{type_a}")
            pair = None if rev is None else (rev[1], rev[0])
        return None if pair is None else (float(pair[0]), float(pair[1]))
