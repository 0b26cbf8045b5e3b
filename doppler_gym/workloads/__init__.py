"""Workload graphs: built-in generators by name, and an importer for torch modules.

>>> from doppler_gym import workloads
>>> g = workloads.make("ffnn", layers=4)          # a DataflowGraph
>>> w = workloads.build("chainmm", n=64)          # a Workload: graph + input/output tiling
>>> workloads.names()
('chainmm', 'ffnn', 'llama-block', 'llama-layer', 'pipeline', 'random')

Families (ops at the defaults): ``chainmm`` (108), ``ffnn`` (160), ``llama-block`` (156),
``llama-layer`` (232), ``pipeline`` (176: F and B of 4 stages x 16 microbatches and 48 sends; its
``Workload`` carries a pipeline schedule), ``random`` (100). :func:`params` lists each family's parameters with their
defaults; the generator docstrings give their units. :func:`from_torch` imports a ``torch.nn.Module``:
its forward (``torch.export``, ``torch.fx`` as fallback), or with ``loss=`` / ``optimizer=`` a whole
training step (forward, backward, optimizer update, parameter and optimizer-state memory).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.workloads import chainmm, ffnn, llama, pipeline, random_dag
from doppler_gym.workloads.torch_fx import from_torch
from doppler_gym.workloads.workload import Workload

_FAMILIES: dict[str, Callable[..., Workload]] = {
    "chainmm": chainmm.build,
    "ffnn": ffnn.build,
    "llama-block": llama.build_block,
    "llama-layer": llama.build_layer,
    "pipeline": pipeline.build,
    "random": random_dag.build,
}


def names() -> tuple[str, ...]:
    """Names of the built-in workload families, sorted."""
    return tuple(sorted(_FAMILIES))


def params(name: str) -> dict[str, object]:
    """``{parameter: default}`` of family ``name``."""
    return {p.name: p.default for p in inspect.signature(_generator(name)).parameters.values()}


def build(name: str, **kwargs: object) -> Workload:
    """Generate family ``name`` with ``kwargs`` overriding its defaults; returns a :class:`Workload`.

    Raises:
        ValueError: an unknown family or parameter (listing the valid ones), or a bad value.
    """
    unknown = sorted(set(kwargs) - set(params(name)))
    if unknown:
        valid = ", ".join(f"{k}={v!r}" for k, v in params(name).items())
        raise ValueError(f"workload {name!r}: unknown parameter(s) {unknown}; valid (with defaults): {valid}")
    return _generator(name)(**kwargs)


def make(name: str, **kwargs: object) -> DataflowGraph:
    """The :class:`DataflowGraph` of family ``name`` (``build(name, **kwargs).graph``): what
    :func:`~doppler_gym.simulate`, the baselines and the envs take. :func:`build` returns the whole
    :class:`Workload` instead, which a pipeline needs (its schedule's assignment, priorities and config)."""
    return build(name, **kwargs).graph


def _generator(name: str) -> Callable[..., Workload]:
    try:
        return _FAMILIES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown workload {name!r}; valid names: {', '.join(names())}") from None


__all__ = ["Workload", "build", "from_torch", "make", "names", "params"]
