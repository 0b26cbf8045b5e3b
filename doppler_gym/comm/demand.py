"""Collective demands: which chunk, held where at epoch 0, must reach which GPUs.

A *commodity* is one chunk: it starts at one source GPU and must reach a set of destination GPUs
(copies may be made on the way). :func:`make_demand` builds the commodities of the usual
collectives with ``C`` chunks per GPU (ALLTOALL: ``C`` per (source, destination) pair).

REDUCE-SCATTER and ALLREDUCE are *composite* (:func:`is_composite`, :func:`composition`): they
are not a single demand. Following SCCL/TACCL, REDUCE-SCATTER is the time-reversed ALLGATHER
schedule of the reversed topology (:func:`reverse_topology`: every link turned around; a chunk
that ALLGATHER sends from GPU a to b in epoch k is, in REDUCE-SCATTER, a partial sum sent from b to
a in epoch K-1-k, reduced on arrival), and ALLREDUCE is REDUCE-SCATTER followed by ALLGATHER.
In-network reduction is not modelled. The solver composes the parts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from doppler_gym.comm.topology import CommTopology, comm_topology, reverse_topology

__all__ = [
    "COLLECTIVES",
    "SIMPLE_COLLECTIVES",
    "Demand",
    "canonical_kind",
    "chunk_bytes_for",
    "composition",
    "is_composite",
    "make_demand",
    "reverse_topology",
]

SIMPLE_COLLECTIVES = ("allgather", "alltoall", "broadcast", "scatter", "gather")
COLLECTIVES = SIMPLE_COLLECTIVES + ("reduce-scatter", "allreduce")
_COMPOSITION: dict[str, tuple[tuple[str, bool], ...]] = {
    "reduce-scatter": (("allgather", True),),
    "allreduce": (("allgather", True), ("allgather", False)),
}


@dataclass(frozen=True, eq=False)
class Demand:
    """The commodities of a collective on one topology.

    Attributes:
        name: the collective, e.g. ``"allgather"`` or ``"multicast"``.
        chunks: ``C``, chunks per source GPU (ALLTOALL: per (source, destination) pair).
        source: ``(n_commodities,) int32`` node id (a GPU) holding the chunk at epoch 0.
        chunk: ``(n_commodities,) int32`` index of the chunk at its source.
        wants: ``(n_commodities, n_nodes) bool``: GPUs that must receive the chunk (never the
            source itself, never a switch).
        output_chunks: chunks in each GPU's output buffer, so the output buffer is
            ``output_chunks * chunk_bytes`` [B] (ALLGATHER/ALLTOALL/SCATTER/GATHER: ``n_gpus * C``,
            BROADCAST: ``C``). 0 (default) means the largest number of commodities one GPU ends up
            with (its own plus those it wants).
    """

    name: str
    chunks: int
    source: np.ndarray
    chunk: np.ndarray
    wants: np.ndarray
    output_chunks: int = 0

    def __post_init__(self) -> None:
        where = f"Demand {self.name!r}"
        source = np.asarray(self.source)
        if source.ndim != 1:
            raise ValueError(f"{where}: source must be 1-D (one node per commodity), got shape {source.shape}")
        n = source.shape[0]
        chunk = np.asarray(self.chunk)
        wants = np.asarray(self.wants)
        if chunk.shape != (n,):
            raise ValueError(f"{where}: chunk must have shape ({n},), got {chunk.shape}")
        if wants.ndim != 2 or wants.shape[0] != n:
            raise ValueError(f"{where}: wants must have shape ({n}, n_nodes), got {wants.shape}")
        if wants.dtype != bool:
            raise TypeError(f"{where}: wants must be a bool array, got dtype {wants.dtype}")
        if n and (source.min() < 0 or source.max() >= wants.shape[1]):
            raise ValueError(f"{where}: source node ids must be in 0..{wants.shape[1] - 1}")
        if n and np.any(wants[np.arange(n), source]):
            x = int(np.flatnonzero(wants[np.arange(n), source])[0])
            raise ValueError(f"{where}: commodity {x} wants its own source node {int(source[x])}; drop that entry")
        if isinstance(self.chunks, bool) or not isinstance(self.chunks, (int, np.integer)) or self.chunks < 1:
            raise ValueError(f"{where}: chunks must be a positive integer, got {self.chunks!r}")
        source = source.astype(np.int32)
        chunk = chunk.astype(np.int32)
        wants = wants.copy()
        out = int(self.output_chunks)
        if out <= 0:
            held = wants.sum(axis=0) + np.bincount(source, minlength=wants.shape[1])
            out = int(held.max()) if held.size else 0
        for arr in (source, chunk, wants):
            arr.setflags(write=False)
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "chunk", chunk)
        object.__setattr__(self, "wants", wants)
        object.__setattr__(self, "chunks", int(self.chunks))
        object.__setattr__(self, "output_chunks", out)

    @property
    def n_commodities(self) -> int:
        """Number of commodities (chunks to deliver)."""
        return int(self.source.shape[0])

    @property
    def n_nodes(self) -> int:
        """Number of topology nodes the demand is defined on."""
        return int(self.wants.shape[1])

    @property
    def n_deliveries(self) -> int:
        """Number of (commodity, destination) pairs."""
        return int(self.wants.sum())

    def __repr__(self) -> str:
        return f"Demand(name={self.name!r}, chunks={self.chunks}, n_commodities={self.n_commodities})"


def canonical_kind(kind: str) -> str:
    """``kind`` in canonical spelling (``"All-Gather"``, ``"all_gather"`` -> ``"allgather"``)."""
    if not isinstance(kind, str):
        raise TypeError(f"collective kind must be a string, got {type(kind).__name__}")
    key = kind.strip().lower().replace("_", "").replace("-", "").replace(" ", "")
    for name in COLLECTIVES:
        if key == name.replace("-", ""):
            return name
    raise ValueError(
        f"unknown collective {kind!r}: use one of {', '.join(COLLECTIVES)} or a {{source: destinations}} mapping"
    )


def is_composite(kind: str) -> bool:
    """True for collectives formed from several ALLGATHER-like parts (REDUCE-SCATTER, ALLREDUCE)."""
    return canonical_kind(kind) in _COMPOSITION


def composition(kind: str) -> tuple[tuple[str, bool], ...]:
    """The parts of a collective in time order, as ``(simple kind, on the reversed topology and run
    backwards in time)``: ``reduce-scatter`` -> ``(("allgather", True),)``, ``allreduce`` ->
    ``(("allgather", True), ("allgather", False))``, a simple kind -> ``((kind, False),)``."""
    name = canonical_kind(kind)
    return _COMPOSITION.get(name, ((name, False),))


def make_demand(
    kind: str | Mapping[object, Iterable[object]],
    topology: object,
    chunks: int = 1,
    root: int | str | None = None,
    group: Iterable[int | str] | None = None,
) -> Demand:
    """The commodities of a collective.

    Args:
        kind: ``"allgather"`` (every GPU's C chunks to every other GPU), ``"alltoall"`` (C distinct
            chunks from each GPU to each other GPU; chunk index ``rank(d) * C + c`` at the source),
            ``"broadcast"`` (the root's C chunks to every other GPU), ``"scatter"`` (C distinct
            chunks from the root to each other GPU), ``"gather"`` (each other GPU's C chunks to the
            root), or a mapping ``{source: destinations}`` (multicast of C chunks per source; ids
            or node names).
        topology: anything :func:`~doppler_gym.comm.topology.comm_topology` accepts.
        chunks: C >= 1.
        root: the root GPU (id or name) of broadcast/scatter/gather; default the first GPU (of the group).
        group: the GPUs (ids or names, at least 2, distinct) taking part in a named collective; the
            default is every GPU. The others neither send nor want data of their own, but a schedule may
            still relay chunks through them (store-and-forward and copy at every GPU, as always), so
            ALLGATHER over ``group`` of ``k`` GPUs has ``output_chunks = k * C``. Not for a mapping,
            which names its GPUs itself.

    Raises ``ValueError`` for composite kinds (REDUCE-SCATTER, ALLREDUCE; see :func:`composition`)
    and when some destination cannot be reached from its source.
    """
    topo = comm_topology(topology)
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
        raise ValueError(f"make_demand: chunks must be a positive integer, got {chunks!r}")
    c = int(chunks)
    gpus = topo.gpus.astype(np.int64) if group is None else _group(group, topo)
    n = topo.n_nodes
    g = gpus.shape[0]
    if isinstance(kind, Mapping):
        if root is not None or group is not None:
            raise ValueError("make_demand: root and group apply to named collectives; a mapping names its GPUs itself")
        return _multicast(kind, topo, c)
    name = canonical_kind(kind)
    if name in _COMPOSITION:
        parts = " then ".join(
            f"{k}{' (reversed topology, backwards in time)' if r else ''}" for k, r in _COMPOSITION[name]
        )
        raise ValueError(
            f"make_demand: {name} is composite ({parts}); build the part demands with make_demand('allgather', "
            f"...) on reverse_topology(topology) / topology, or call doppler_gym.comm.solve which composes them"
        )
    if name in ("broadcast", "scatter", "gather"):
        r = gpus[0] if root is None else topo.node_id(root)
        if topo.is_switch[r]:
            raise ValueError(f"make_demand: root {root!r} is switch {topo.node_names[r]!r}; pick a GPU as root")
        if r not in gpus:
            raise ValueError(f"make_demand: root {root!r} is not in the group {gpus.tolist()}; add it or pick a member")
        others = gpus[gpus != r]
    elif root is not None:
        raise ValueError(f"make_demand: root applies to broadcast, scatter and gather, not {name}")
    if name == "allgather":
        source = np.repeat(gpus, c)
        chunk = np.tile(np.arange(c), g)
        wants = np.zeros((g * c, n), bool)
        wants[:, gpus] = True
        wants[np.arange(g * c), source] = False
        out = g * c
    elif name == "alltoall":
        pairs = [(s, di, d) for s in gpus for di, d in enumerate(gpus) if d != s]
        source = np.array([s for s, _, _ in pairs for _ in range(c)], np.int64)
        chunk = np.array([di * c + k for _, di, _ in pairs for k in range(c)], np.int64)
        dest = np.array([d for _, _, d in pairs for _ in range(c)], np.int64)
        wants = np.zeros((source.shape[0], n), bool)
        wants[np.arange(source.shape[0]), dest] = True
        out = g * c
    elif name == "broadcast":
        source = np.full(c, r)
        chunk = np.arange(c)
        wants = np.zeros((c, n), bool)
        wants[:, others] = True
        out = c
    elif name == "scatter":
        rank = {int(d): i for i, d in enumerate(gpus)}
        source = np.full(others.shape[0] * c, r)
        chunk = np.array([rank[int(d)] * c + k for d in others for k in range(c)], np.int64)
        dest = np.repeat(others, c)
        wants = np.zeros((source.shape[0], n), bool)
        wants[np.arange(source.shape[0]), dest] = True
        out = g * c
    else:  # gather
        source = np.repeat(others, c)
        chunk = np.tile(np.arange(c), others.shape[0])
        wants = np.zeros((source.shape[0], n), bool)
        wants[:, r] = True
        out = g * c
    demand = Demand(name=name, chunks=c, source=source, chunk=chunk, wants=wants, output_chunks=out)
    _check_reachable(demand, topo)
    return demand


def _group(group: Iterable[int | str], topo: CommTopology) -> np.ndarray:
    """``(k,) int64`` ascending node ids of ``group`` (k >= 2 distinct GPUs)."""
    if isinstance(group, (str, int, np.integer)):
        raise TypeError(f"make_demand: group must be a collection of GPUs (ids or names), got {group!r}")
    ids = [topo.node_id(x) for x in group]  # type: ignore[arg-type]
    if len(set(ids)) != len(ids) or len(ids) < 2:
        raise ValueError(f"make_demand: group {list(group)} must name at least 2 distinct GPUs; a collective "
                         "of one GPU moves nothing")
    sw = [x for x in ids if topo.is_switch[x]]
    if sw:
        raise ValueError(f"make_demand: group member {topo.node_names[sw[0]]!r} is a switch; switches hold no data, "
                         "name GPUs")
    return np.array(sorted(ids), np.int64)


def _multicast(spec: Mapping[object, Iterable[object]], topo: CommTopology, c: int) -> Demand:
    if not spec:
        raise ValueError("make_demand: the multicast mapping is empty; give {source: [destinations]}")
    sources, rows = [], []
    for s_key, dests in spec.items():
        s = topo.node_id(s_key)  # type: ignore[arg-type]
        if topo.is_switch[s]:
            raise ValueError(f"make_demand: multicast source {s_key!r} is a switch; sources must be GPUs")
        if isinstance(dests, (str, int, np.integer)):
            dests = [dests]
        ids = sorted({topo.node_id(d) for d in dests})  # type: ignore[arg-type]
        if not ids:
            raise ValueError(f"make_demand: multicast source {s_key!r} has no destinations")
        if s in ids:
            raise ValueError(f"make_demand: multicast source {s_key!r} lists itself as a destination; remove it")
        sw = [d for d in ids if topo.is_switch[d]]
        if sw:
            raise ValueError(
                f"make_demand: multicast destination {topo.node_names[sw[0]]!r} of source {s_key!r} is a switch; "
                f"switches hold no data, name GPUs"
            )
        row = np.zeros(topo.n_nodes, bool)
        row[ids] = True
        sources.append(s)
        rows.append(row)
    source = np.repeat(np.array(sources, np.int64), c)
    chunk = np.tile(np.arange(c), len(sources))
    wants = np.repeat(np.array(rows), c, axis=0)
    demand = Demand(name="multicast", chunks=c, source=source, chunk=chunk, wants=wants)
    _check_reachable(demand, topo)
    return demand


def _check_reachable(demand: Demand, topo: CommTopology) -> None:
    """Raise if some wanted GPU has no directed path from its commodity's source."""
    n = topo.n_nodes
    for s in np.unique(demand.source):
        seen = np.zeros(n, bool)
        seen[s] = True
        frontier = [int(s)]
        while frontier:
            nxt = []
            for i in frontier:
                for j in topo.dst[topo.out_links(i)]:
                    if not seen[j]:
                        seen[j] = True
                        nxt.append(int(j))
            frontier = nxt
        missing = demand.wants[demand.source == s].any(axis=0) & ~seen
        if missing.any():
            d = int(np.flatnonzero(missing)[0])
            raise ValueError(
                f"make_demand: {topo.node_names[d]!r} (node {d}) cannot be reached from source "
                f"{topo.node_names[s]!r} (node {int(s)}) in topology {topo.name!r}; add links or drop that destination"
            )


def chunk_bytes_for(demand: Demand, buffer_bytes: float) -> float:
    """Chunk size [B] for an output buffer of ``buffer_bytes`` [B]: ``buffer_bytes / output_chunks``
    (ALLGATHER on 16 GPUs with C = 1 and a 1 GB buffer: 62.5 MB chunks, as in the paper)."""
    b = float(buffer_bytes)
    if not np.isfinite(b) or b <= 0:
        raise ValueError(f"buffer size must be a positive number of bytes, got {buffer_bytes!r}")
    return b / demand.output_chunks
