"""The ``stragglers`` option of the placement env: parsed once at construction, drawn per episode."""

from __future__ import annotations

import numpy as np

from doppler_gym.sim.stragglers import Straggler, StragglerModel, as_stragglers
from doppler_gym.topology.types import Topology


def as_straggler_option(value: object, where: str = "stragglers") -> StragglerModel | tuple[Straggler, ...] | None:
    """An env's ``stragglers`` option: ``None`` (none), a :class:`StragglerModel`, a dict of its fields,
    or a fixed sequence of :class:`Straggler`; a clear error otherwise."""
    if value is None or isinstance(value, StragglerModel):
        return value
    if isinstance(value, dict):
        unknown = set(value) - set(StragglerModel.__dataclass_fields__)
        if unknown:
            raise ValueError(f"{where}: unknown StragglerModel field(s) {sorted(unknown)}; valid: "
                             f"{', '.join(StragglerModel.__dataclass_fields__)}")
        return StragglerModel(**value)
    return as_stragglers(value, where)


def draw_stragglers(
    option: StragglerModel | tuple[Straggler, ...] | None, topology: Topology, rng: np.random.Generator,
    horizon: float,
) -> tuple[Straggler, ...]:
    """This episode's stragglers under ``option`` (:func:`as_straggler_option`): a model draws with ``rng``
    over its horizon, else ``horizon`` [reported unit]; a fixed tuple is returned as is."""
    if option is None:
        return ()
    if isinstance(option, StragglerModel):
        return option.draw(topology, rng, horizon=horizon)
    return option
