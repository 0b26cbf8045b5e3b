"""The static part of the DOPPLER policy, computed once per distinct graph, and its cache.

Everything that depends only on the graph (the GNN embeddings ``H``, the critical-path context
``P_b @ H`` and ``P_t @ H``, and the heads' projections of those) is the *static part*. A batch of
padded observations is grouped by graph (see :func:`group_batch`), and the static part
is computed **once per distinct graph**:

- **collecting rollouts** (``torch.is_grad_enabled()`` is False): per graph, once, then read from an
  LRU cache keyed by ``graph_id`` and the sizes, each entry checked against the observation's static
  inputs (exact equality) before it is used. The cache notices any parameter change (the
  in-place version counters of the parameters move at every optimiser step, ``load_state_dict``
  and ``copy_``; ``.to()`` clears it) and empties itself, so a stale embedding is never used.
  Writes through ``param.data`` bypass the counters: call :meth:`StaticEncoder.clear_cache` after
  those. A forward with gradients on never reads the cache (IL/RL losses always recompute).
- **training** (gradients on): one batched forward over the distinct graphs of the minibatch, with
  gradients, shared by all the observations of each graph. No cache (the parameters move).

The path structure (:class:`~agents.critical_paths.PathIndex`) is parameter-free; it is computed once per
graph in numpy and kept in its own LRU, in rollouts and training alike.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from agents.critical_paths import PathIndex, pointer_sums
from agents.gnn import N_OP_INPUTS, GraphEncoder, PackedGraphs, pack_graphs
from agents.structure import N_STRUCTURE, structure_from_observation

STATIC_INPUTS = ("op_features", "edge_index", "edge_attr")  # what the static part is computed from
DENSE_PATHS_MAX = 1024  # up to this max_ops, P @ H is a dense (batched) matmul; above, pointer doubling (O(n))
_WEIGHTS: dict[tuple[int, str], torch.Tensor] = {}


def _weights(length: int, device: torch.device) -> torch.Tensor:
    """Fixed odd int64 weights for the position-sensitive integer fingerprint (memoised)."""
    key = (length, str(device))
    w = _WEIGHTS.get(key)
    if w is None:
        i = torch.arange(length, dtype=torch.int64, device=device)
        w = _WEIGHTS[key] = ((i * 2654435761 + 40503) % 2147483647) | 1
    return w


def _bits(x: torch.Tensor) -> torch.Tensor:
    """The IEEE bits of ``x`` as float32 (``(B, L) int64``); exact and order-independent to sum."""
    return x.reshape(x.shape[0], -1).float().contiguous().view(torch.int32).long()


def fingerprint(obs: dict[str, torch.Tensor]) -> torch.Tensor:
    """``(B, 2) int64`` exact content fingerprints of the static inputs of each observation.

    Integer (wrap-around) weighted sums of the float32 bits of ``op_features`` and of
    ``edge_index``/``edge_attr``: the same content always gets the same value, whatever the batch.
    Only used to tell apart graphs whose cheap keys (:func:`cheap_keys`) collide.
    """
    feats = obs["op_features"]
    dev = feats.device
    fb = _bits(feats)
    eb = torch.cat([_bits(obs["edge_index"]), _bits(obs["edge_attr"])], dim=1)
    return torch.stack(
        [(fb * _weights(fb.shape[1], dev)).sum(1), (eb * _weights(eb.shape[1], dev)).sum(1)], 1
    )


def cheap_keys(obs: dict[str, torch.Tensor]) -> list[tuple[int, ...]]:
    """``(max_ops, max_edges, graph_id, n_ops, n_edges)`` of each observation, as Python tuples.

    ``graph_id`` is a 24-bit content hash of the graph, but two graphs can share it (a collision,
    or the same graph under another topology/sim config, whose features differ), so a key is
    always checked against the actual static inputs before an embedding is shared.
    """
    feats = obs["op_features"]
    b = feats.shape[0]
    n, e = feats.shape[1], obs["edge_index"].shape[-1]
    ints = torch.cat([obs[k].reshape(b, -1)[:, :1] for k in ("graph_id", "n_ops", "n_edges")], 1)
    return [(n, e, *row) for row in ints.round().long().tolist()]


@dataclass
class Grouping:
    """A batch grouped by graph: ``group[i]`` is the graph of observation ``i``, ``first[k]`` the
    first observation of graph ``k`` and ``keys[k]`` its key."""

    group: torch.Tensor
    first: list[int]
    keys: list[tuple[int, ...]]


def _group_by(keys: list[tuple]) -> tuple[list[int], list[int]]:
    index: dict[tuple, int] = {}
    group, first = [], []
    for i, key in enumerate(keys):
        g = index.get(key)
        if g is None:
            g = index[key] = len(first)
            first.append(i)
        group.append(g)
    return group, first


def group_batch(obs: dict[str, torch.Tensor]) -> Grouping:
    """Group a batch of observations by graph (exactly: same key AND same static inputs).

    Observations are grouped by :func:`cheap_keys`; when a group holds several observations, their
    static inputs are compared with the group's first one (exact equality) and, if any differs,
    the batch is regrouped with the exact :func:`fingerprint` appended to the keys.
    """
    keys = cheap_keys(obs)
    device = obs["op_features"].device
    group, first = _group_by(keys)
    if len(first) < len(keys):
        if len(first) == 1:
            same = all(bool((obs[name] == obs[name][:1]).all()) for name in STATIC_INPUTS)
        else:
            ref = torch.tensor(first, device=device)[torch.tensor(group, device=device)]
            same = all(bool((obs[name] == obs[name].index_select(0, ref)).all()) for name in STATIC_INPUTS)
        if not same:
            fps = fingerprint(obs).tolist()
            keys = [key + tuple(fp) for key, fp in zip(keys, fps)]
            group, first = _group_by(keys)
    return Grouping(torch.tensor(group, device=device), first, [keys[i] for i in first])


class VerifiedLRU:
    """An LRU dict whose entries remember the static inputs they were computed from; a lookup
    returns the value only when the inputs are equal (``torch.equal``), so a key collision can never
    hand out another graph's value.

    Args:
        size: the most entries kept.
    """

    def __init__(self, size: int) -> None:
        self.size = int(size)
        self._data: OrderedDict[tuple, tuple[tuple[torch.Tensor, ...], object]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        self._data.clear()

    def lookup(self, key: tuple, inputs: tuple[torch.Tensor, ...]) -> tuple[tuple, object | None]:
        """``(key to use, value or None)``. On a collision (same key, other inputs) the key is
        extended with the inputs' exact fingerprint and looked up again."""
        for attempt in range(2):
            entry = self._data.get(key)
            if entry is None:
                return key, None
            if all(torch.equal(a, b) for a, b in zip(entry[0], inputs)):
                self._data.move_to_end(key)
                return key, entry[1]
            if attempt == 0:
                one = {name: x.unsqueeze(0) for name, x in zip(STATIC_INPUTS, inputs)}
                key = key + tuple(fingerprint(one)[0].tolist())
        return key, None  # pragma: no cover - a collision of the exact fingerprint as well

    def put(self, key: tuple, inputs: tuple[torch.Tensor, ...], value: object) -> None:
        self._data[key] = (tuple(x.detach().clone() for x in inputs), value)
        self._data.move_to_end(key)
        while len(self._data) > self.size:
            self._data.popitem(last=False)


@dataclass
class StaticBatch:
    """The static part of a batch of ``B`` observations over ``K`` distinct graphs.

    Attributes:
        group: ``(B,) int64`` the graph (row of ``emb``/``table``) of each observation.
        emb: ``(K, N, 3h)`` per-op embeddings ``[H, LN(P_b @ H), LN(P_t @ H)]`` (zeros on padding).
        table: ``(K, N, F + 2)`` per-op projections the heads read, then the op's compute time
            (``op_features[:, 0]``) and a 1 (zeros on padding).
        table_mean: ``(K, F + 2)`` mean of ``table`` over the real ops.
        valid: ``(K, N) bool`` real ops.
        keys: the ``K`` content keys (tuples of ints).
        cache_hits: how many of the ``K`` graphs came from the cache.
    """

    group: torch.Tensor
    emb: torch.Tensor
    table: torch.Tensor
    table_mean: torch.Tensor
    valid: torch.Tensor
    keys: list[tuple[int, ...]]
    cache_hits: int


class StaticEncoder(nn.Module):
    """GNN + critical-path context + head projections, once per distinct graph (with a cache).

    Args:
        hidden_dim: GNN width ``h``.
        n_layers: GNN layers.
        proj_dim: width ``F`` of the projection table the heads read.
        cache_size: graphs kept in the embedding cache (LRU) [count].
        path_cache_size: graphs whose path structure is kept (LRU) [count].
        id_features: width of the fixed random op-identity inputs (:func:`agents.gnn.op_id_features`;
            0 = none): they let the heads tell apart ops that costs and structure make identical.
        structure: append the :data:`~agents.structure.N_STRUCTURE` structural features of
            :mod:`agents.structure` (hop depth/height/level, t-/b-level over the critical path,
            slack, critical-path membership, degrees, level width, compute share, random-walk
            return probability) to the GNN inputs and the projection's skip input; computed in
            numpy once per graph and cached with the path structure.

    Shapes (:meth:`forward`): a dict of batched padded observation tensors in, a
    :class:`StaticBatch` out.
    """

    def __init__(
        self,
        hidden_dim: int = 64,
        n_layers: int = 4,
        proj_dim: int = 256,
        cache_size: int = 64,
        path_cache_size: int = 4096,
        id_features: int = 0,
        structure: bool = False,
    ) -> None:
        super().__init__()
        if id_features < 0:
            raise ValueError(f"StaticEncoder: id_features must be >= 0, got {id_features}")
        self.hidden_dim, self.proj_dim, self.id_features = hidden_dim, proj_dim, int(id_features)
        self.structure = bool(structure)
        in_dim = N_OP_INPUTS + self.id_features + (N_STRUCTURE if self.structure else 0)
        self.gnn = GraphEncoder(hidden_dim, n_layers, in_dim=in_dim)
        self.b_norm = nn.LayerNorm(hidden_dim)
        self.t_norm = nn.LayerNorm(hidden_dim)
        self.proj = nn.Linear(3 * hidden_dim + in_dim, proj_dim)
        self.cache_size, self.path_cache_size = int(cache_size), int(path_cache_size)
        self.use_cache = True
        self._cache = VerifiedLRU(cache_size)  # key -> (emb, table, table_mean) of one graph, no grad
        self._cache_token: tuple | None = None
        self._params: list[nn.Parameter] | None = None
        self._paths = VerifiedLRU(path_cache_size)  # key -> (PathIndex, dense [P_b; P_t] or None)
        self._structures = VerifiedLRU(path_cache_size)  # key -> (N, N_STRUCTURE) structural features
        self.stats = {"graph_forwards": 0, "cache_hits": 0, "path_builds": 0, "structure_builds": 0}

    @property
    def emb_dim(self) -> int:
        return 3 * self.hidden_dim

    # ---------------------------------------------------------------- cache management
    def clear_cache(self) -> None:
        """Forget every cached embedding (the path structures stay: they do not depend on weights)."""
        self._cache.clear()
        self._cache_token = None

    def _token(self) -> tuple[int, ...]:
        """The parameters' in-place version counters: any optimiser step or load changes them.

        ``Tensor._version`` is autograd's own counter of in-place writes; torch has no public name for
        it, and nothing else tells an in-place ``optimizer.step()`` from no change at no cost."""
        if self._params is None:
            self._params = list(self.parameters())
        return tuple(p._version for p in self._params)

    def _apply(self, fn, *args, **kwargs):  # .to(), .cuda(), .float(): cached tensors would be stale
        self.clear_cache()
        self._paths.clear()
        self._structures.clear()
        self._params = None
        return super()._apply(fn, *args, **kwargs)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_cache"] = VerifiedLRU(self.cache_size)
        state["_cache_token"] = None
        state["_params"] = None
        return state

    def path_index(
        self, key: tuple, inputs: tuple[torch.Tensor, ...], n_ops: int, n_edges: int
    ) -> tuple[PathIndex, torch.Tensor | None]:
        """The :class:`PathIndex` of one graph and, when ``N <= DENSE_PATHS_MAX``, its dense
        ``(2N, N)`` float32 matrix ``[P_b; P_t]`` padded to the observation's ``N`` (cached by key,
        checked against the inputs)."""
        key, value = self._paths.lookup(key, inputs)
        if value is None:
            op_features, edge_index, _ = inputs
            index = PathIndex.from_observation(
                op_features.detach().cpu().numpy(), edge_index.detach().cpu().numpy(), n_ops, n_edges
            )
            n = op_features.shape[0]
            dense = None
            if n <= DENSE_PATHS_MAX:
                dense = torch.zeros(2 * n, n, dtype=torch.float32)
                dense[torch.from_numpy(index.b_rows), torch.from_numpy(index.b_cols)] = 1.0
                dense[torch.from_numpy(index.t_rows + n), torch.from_numpy(index.t_cols)] = 1.0
                dense = dense.to(op_features.device)
            value = (index, dense)
            self.stats["path_builds"] += 1
            self._paths.put(key, inputs, value)
        return value  # type: ignore[return-value]

    def structure_features(
        self, key: tuple, inputs: tuple[torch.Tensor, ...], n_ops: int, n_edges: int
    ) -> torch.Tensor:
        """``(N, N_STRUCTURE) float32`` structural features of one graph (:mod:`agents.structure`),
        padded to the observation's ``N`` (cached by key, checked against the inputs)."""
        key, value = self._structures.lookup(key, inputs)
        if value is None:
            op_features, edge_index, _ = inputs
            value = torch.from_numpy(structure_from_observation(
                op_features.detach().cpu().numpy(), edge_index.detach().cpu().numpy(), n_ops, n_edges
            )).to(op_features.device)
            self.stats["structure_builds"] += 1
            self._structures.put(key, inputs, value)
        return value  # type: ignore[return-value]

    # ---------------------------------------------------------------- computation
    def path_context(
        self, obs: dict[str, torch.Tensor], rows: list[int], keys: list[tuple]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, PackedGraphs]:
        """GNN embeddings and raw critical-path sums of the graphs of observations ``rows``.

        Returns:
            ``(H, P_b @ H, P_t @ H, packed)``: three ``(K * N, h)`` tensors, row ``k * N + v`` for op
            ``v`` of graph ``k``, and the :class:`~agents.gnn.PackedGraphs` they came from.
        """
        rows_t = torch.tensor(rows, dtype=torch.int64, device=obs["op_features"].device)
        feats = obs["op_features"].index_select(0, rows_t)
        eidx = obs["edge_index"].index_select(0, rows_t)
        eattr = obs["edge_attr"].index_select(0, rows_t)
        n_ops = obs["n_ops"].index_select(0, rows_t).reshape(-1).round().long()
        n_edges = obs["n_edges"].index_select(0, rows_t).reshape(-1).round().long()
        k, n = feats.shape[0], feats.shape[1]
        n_list, e_list = n_ops.tolist(), n_edges.tolist()
        extra = None
        if self.structure:
            extra = torch.stack([
                self.structure_features(key, (feats[i], eidx[i], eattr[i]), n_list[i], e_list[i])
                for i, key in enumerate(keys)
            ])
        packed = pack_graphs(feats, eidx, eattr, n_ops, n_edges, self.id_features, extra)
        h = self.gnn(packed.x, packed.edge_index, packed.edge_attr)  # (K*N, h)
        paths = [
            self.path_index(key, (feats[i], eidx[i], eattr[i]), n_list[i], e_list[i])
            for i, key in enumerate(keys)
        ]
        if all(dense is not None for _, dense in paths):  # block-diagonal P @ H as one batched matmul
            mats = paths[0][1].unsqueeze(0) if k == 1 else torch.stack([dense for _, dense in paths])
            sums = torch.bmm(mats.to(h.device, h.dtype), h.view(k, n, -1))  # (K, 2N, h)
            b_sum, t_sum = sums[:, :n].reshape(k * n, -1), sums[:, n:].reshape(k * n, -1)
        else:  # large graphs: the same sums by pointer doubling, O(n log depth) time, O(n h) memory
            def forest(name: str) -> torch.Tensor:  # (K * N,) pointers of every graph, -1 on padding
                nxt = np.full(k * n, -1, np.int64)
                for i, (p, _) in enumerate(paths):
                    ptr = getattr(p, name)
                    nxt[i * n : i * n + ptr.size] = np.where(ptr >= 0, ptr + i * n, -1)
                return torch.from_numpy(nxt)

            real = packed.valid.reshape(k * n, 1).to(h.dtype)  # padding rows sum nothing
            b_sum = pointer_sums(forest("b_next"), h) * real
            t_sum = pointer_sums(forest("t_next"), h) * real
        return h, b_sum, t_sum, packed

    def compute(
        self, obs: dict[str, torch.Tensor], rows: list[int], keys: list[tuple]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The static part of the graphs of observations ``rows`` (one row per distinct graph).

        Returns:
            ``(emb (K, N, 3h), table (K, N, F + 2), table_mean (K, F + 2), valid (K, N) bool)``.
        """
        h, b_sum, t_sum, packed = self.path_context(obs, rows, keys)
        k, n = packed.n_graphs, packed.n_pad
        feats = obs["op_features"][rows]
        mask = packed.valid.reshape(k * n, 1).to(h.dtype)
        emb = torch.cat([h, self.b_norm(b_sum), self.t_norm(t_sum)], dim=1) * mask
        comp = feats[..., 0].reshape(k * n, 1).float().clamp_min(0.0)
        table = (
            torch.cat([self.proj(torch.cat([emb, packed.x], dim=1)), comp, torch.ones_like(comp)], dim=1)
            * mask
        )
        self.stats["graph_forwards"] += k
        table = table.view(k, n, -1)
        table_mean = table.sum(1) / table[..., -1:].sum(1).clamp_min(1.0)
        return emb.view(k, n, -1), table, table_mean, packed.valid

    def forward(self, obs: dict[str, torch.Tensor]) -> StaticBatch:
        """Group the batch by graph and return its static part (cached in no-grad mode)."""
        grp = group_batch(obs)
        keys, first = grp.keys, grp.first
        if torch.is_grad_enabled() or not self.use_cache:
            emb, table, table_mean, valid = self.compute(obs, first, keys)
            return StaticBatch(grp.group, emb, table, table_mean, valid, keys, 0)
        token = self._token()
        if token != self._cache_token:
            self._cache.clear()
            self._cache_token = token
        found: list = [None] * len(keys)
        missing, missing_keys = [], []
        for i, (key, row) in enumerate(zip(keys, first)):
            inputs = tuple(obs[name][row] for name in STATIC_INPUTS)
            key, entry = self._cache.lookup(key, inputs)
            if entry is None:
                missing.append(i)
                missing_keys.append((key, inputs))
            else:
                found[i] = entry
        if missing:
            emb, table, table_mean, _ = self.compute(
                obs, [first[i] for i in missing], [k for k, _ in missing_keys]
            )
            for j, i in enumerate(missing):
                found[i] = (emb[j], table[j], table_mean[j])
                self._cache.put(missing_keys[j][0], missing_keys[j][1], found[i])
        hits = len(keys) - len(missing)
        self.stats["cache_hits"] += hits
        if len(keys) == 1:
            emb, table, table_mean = (x.unsqueeze(0) for x in found[0])
        else:
            emb, table, table_mean = (torch.stack(xs) for xs in zip(*found))
        valid = table[..., -1] > 0.5  # the table's last column is 1 on real ops
        return StaticBatch(grp.group, emb, table, table_mean, valid, keys, hits)
