"""Training on a mix of graphs: graph specs, the per-episode generator, the held-out set.

A **graph spec** is a string ``NAME`` or ``NAME:KEY=VALUE,KEY=VALUE`` (the grammar of
:mod:`doppler_gym.specs`):

- ``NAME`` is a workload generator (``random``, ``chainmm``, ``ffnn``, ``llama-block``,
  ``llama-layer``), a paper graph (``paper/ffnn``) or a ``.txt``/``.json`` file (no parameters);
- a ``VALUE`` may be a range ``LO..HI``: drawn per episode, uniformly (integers when both ends are
  integers, else floats);
- a workload with a ``seed`` parameter that the spec leaves out gets a fresh seed per episode, so
  ``random:n_ops=40..80`` is a new random DAG of 40 to 80 ops at every reset.

``TrainArgs(graph="mix", mix={"graphs": [...]}, evaluation={"held_out": [...]})``: each training episode draws a spec
uniformly, then a graph from it (:class:`GraphMix`, the env's ``graph`` callable). The held-out
graphs ``evaluation.held_out`` are fixed (:func:`held_out_graphs`: no ranges; a free seed becomes
``seed + 100_003 * (index + 1)``; training draws take their seeds from ``[0, 2**31)`` with the env's
generator, so give explicit seeds to rule out a clash). The observation padding (``max_ops``, ``max_edges``)
covers the held-out graphs and a sample of the mix with a margin; a drawn graph that would not fit
is redrawn (at most 50 times, then an error says which spec to shrink or which ``max_ops`` to raise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.specs import Range, parse_spec

MIX = "mix"  # TrainArgs.graph value that selects mix.graphs
PADDING_SAMPLES = 8  # graphs drawn per spec to size the padding
PADDING_MARGIN = 1.25  # padding = this x the largest sampled size (rounded up)
MAX_REDRAWS = 50


@dataclass(frozen=True)
class GraphSpec:
    """One parsed graph spec: ``name`` and ``params`` (a value is fixed or a
    :class:`~doppler_gym.specs.Range` ``(lo, hi)``)."""

    text: str
    name: str
    params: dict[str, Any]

    @classmethod
    def parse(cls, text: str, where: str = "mix.graphs") -> GraphSpec:
        from doppler_gym import workloads

        parsed = parse_spec(str(text), where, usage="NAME or NAME:KEY=VALUE,KEY=VALUE (e.g. random:n_ops=40..80)")
        name, params = parsed.name, dict(parsed.params)
        if params:
            if name not in workloads.names():
                raise ValueError(
                    f"{where}: {text!r}: parameters only apply to workloads ({', '.join(workloads.names())})"
                )
            unknown = sorted(set(params) - set(workloads.params(name)))
            if unknown:
                raise ValueError(f"{where}: {text!r}: unknown parameter(s) {unknown} of {name}; valid: "
                                 f"{', '.join(workloads.params(name))}")
        spec = cls(str(text), name, params)
        spec.build(np.random.default_rng(0))  # fail now, with the spec's name, not in an env reset
        return spec

    @property
    def seeded(self) -> bool:
        """Whether it is a workload with a ``seed`` parameter the spec leaves to the draw."""
        from doppler_gym import workloads

        return self.name in workloads.names() and "seed" in workloads.params(self.name) and "seed" not in self.params

    @property
    def has_ranges(self) -> bool:
        """Whether a parameter is a :class:`~doppler_gym.specs.Range` (drawn per graph)."""
        return any(isinstance(v, Range) for v in self.params.values())

    def build(self, rng: np.random.Generator | None, seed: int | None = None) -> DataflowGraph:
        """A graph of this spec: ranges drawn with ``rng``; ``seed`` (or a draw) for a seeded workload."""
        from doppler_gym import workloads
        from doppler_gym.instances import resolve_graph

        if not self.params and not self.seeded:
            return resolve_graph(self.name, where=f"graph spec {self.text!r}")
        params = {k: _draw(v, rng) for k, v in self.params.items()}
        if self.seeded:
            params["seed"] = int(seed if seed is not None else rng.integers(0, 2**31))
        return workloads.make(self.name, **params)


class GraphMix:
    """The env's ``graph`` callable: ``mix(rng)`` draws a spec uniformly, then a graph from it.

    Args:
        specs: the parsed specs (at least one).
        max_ops, max_edges: the padding a drawn graph must fit (redrawn otherwise).

    Fixed specs (a paper graph, a workload without ranges or free seed) are built once and reused,
    so their embeddings and env contexts are cached across episodes.

    With ``pool``: a varying spec ``i`` draws graph ``j`` uniformly from ``range(pool)``, built from
    ``np.random.default_rng([pool_seed, i, j])`` (its ranges and its free seed), and kept: a finite
    set of ``pool`` graphs per spec, so per-graph work (the search teacher's targets, embeddings)
    is reused across episodes.
    """

    def __init__(self, specs: Sequence[GraphSpec], max_ops: int, max_edges: int, pool: int | None = None,
                 pool_seed: int = 0) -> None:
        if not specs:
            raise ValueError("mix.graphs is empty; give at least one graph spec (e.g. random:n_ops=40..80)")
        if pool is not None and pool < 1:
            raise ValueError(f"GraphMix: pool must be >= 1 or None, got {pool}")
        self.specs = list(specs)
        self.max_ops, self.max_edges = int(max_ops), int(max_edges)
        self.pool, self.pool_seed = pool, int(pool_seed)
        self._fixed = {i: s.build(None) for i, s in enumerate(self.specs) if not s.params and not s.seeded}
        self._pooled: dict[tuple[int, int], DataflowGraph] = {}

    def pooled(self, i: int, j: int) -> DataflowGraph:
        """Graph ``j`` of spec ``i``'s pool (built once, from seed ``(pool_seed, i, j)``)."""
        graph = self._pooled.get((i, j))
        if graph is None:
            graph = self._pooled[(i, j)] = self.specs[i].build(np.random.default_rng([self.pool_seed, i, j]))
        return graph

    def __call__(self, rng: np.random.Generator) -> DataflowGraph:
        for _ in range(MAX_REDRAWS):
            i = int(rng.integers(len(self.specs)))
            if i in self._fixed:
                graph = self._fixed[i]
            elif self.pool is not None:
                graph = self.pooled(i, int(rng.integers(self.pool)))
            else:
                graph = self.specs[i].build(rng)
            if graph.n_ops <= self.max_ops and graph.n_edges <= self.max_edges:
                return graph
        raise ValueError(f"mix.graphs: {MAX_REDRAWS} draws in a row did not fit the padding max_ops={self.max_ops}, "
                         f"max_edges={self.max_edges} (last: {self.specs[i].text!r}, {graph.n_ops} ops, "
                         f"{graph.n_edges} edges); set mix.max_ops / mix.max_edges higher or shrink that spec")


def parse_specs(texts: Sequence[str], where: str) -> list[GraphSpec]:
    """Parse every spec of ``texts`` (a ValueError names the bad one)."""
    if isinstance(texts, str):
        texts = [t for t in texts.split(";") if t.strip()]
    return [GraphSpec.parse(t, f"{where}[{i}]") for i, t in enumerate(texts)]


def held_out_graphs(specs: Sequence[GraphSpec], seed: int) -> list[DataflowGraph]:
    """The fixed held-out graphs: no ranges; a free seed becomes ``seed + 100_003 * (index + 1)``."""
    out = []
    for i, spec in enumerate(specs):
        if spec.has_ranges:
            raise ValueError(f"evaluation.held_out[{i}]: {spec.text!r} has a range; held-out graphs are fixed: "
                             "give one value")
        out.append(spec.build(None, seed=seed + 100_003 * (i + 1)))
    return out


def padding_for(specs: Sequence[GraphSpec], fixed: Sequence[DataflowGraph], seed: int,
                max_ops: int | None = None, max_edges: int | None = None) -> tuple[int, int]:
    """``(max_ops, max_edges)`` covering ``fixed`` and :data:`PADDING_SAMPLES` draws per spec, times
    :data:`PADDING_MARGIN`; given values are kept (and checked against ``fixed``)."""
    rng = np.random.default_rng(seed)
    sample = list(fixed)
    for spec in specs:
        n = PADDING_SAMPLES if (spec.params or spec.seeded) else 1
        sample += [spec.build(rng) for _ in range(n)]
    need_ops = max(g.n_ops for g in sample)
    need_edges = max(g.n_edges for g in sample)
    ops = max_ops if max_ops is not None else math.ceil(PADDING_MARGIN * need_ops)
    edges = max_edges if max_edges is not None else math.ceil(PADDING_MARGIN * need_edges)
    for g in fixed:
        if g.n_ops > ops or g.n_edges > edges:
            raise ValueError(f"held-out graph {g.name!r} ({g.n_ops} ops, {g.n_edges} edges) exceeds max_ops={ops} / "
                             f"max_edges={edges}; raise them")
    return int(ops), max(int(edges), 1)


def _draw(value: Any, rng: np.random.Generator | None) -> Any:
    """A fixed value as is; a :class:`~doppler_gym.specs.Range` drawn uniformly with ``rng`` (an int
    when both ends are ints)."""
    if not isinstance(value, Range):
        return value
    lo, hi = value
    if rng is None:
        raise ValueError(f"range {lo}..{hi} needs a random generator (held-out graphs are fixed)")
    if isinstance(lo, int) and isinstance(hi, int):
        return int(rng.integers(lo, hi + 1))
    return float(rng.uniform(lo, hi))
