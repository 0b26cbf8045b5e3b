"""GNN encoder of the static op graph: GINE message passing on the bidirected DAG.

The op graph of an observation is a DAG (``edge_index`` rows: producer, consumer). The encoder runs on
its bidirected version: every edge ``u -> v`` is kept (forward, flag 0) and reversed ``v -> u``
(backward, flag 1); both carry the producer's transfer time, so the edge features are
``[log1p(transfer), is_reverse]`` and a layer can tell a message from an input apart from a message
from a consumer. Op inputs are the 5 static op features of the observation, as ``log1p(x)`` and
z-scored within their graph (DOPPLER z-scores per graph too), so graphs of any scale look alike.

Graphs of a minibatch are packed without PyG's ``Batch.from_data_list`` (a Python loop per sample):
the ``K`` distinct graphs of a padded batch become one disconnected graph of ``K * N`` nodes, node
``(k, v)`` at row ``k * N + v``, edges offset by ``k * N`` (:func:`pack_graphs`). Padding rows are
isolated nodes whose outputs the caller ignores.

Layers: ``h0 = Linear(in -> h)``, then ``n_layers`` times ``h = LayerNorm(h + GINEConv(h))`` with
GINE's MLP ``Linear(h, h) -> ReLU -> Linear(h, h)`` and its edge projection ``Linear(2 -> h)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch_geometric.nn import GINEConv

N_OP_INPUTS = 10  # log1p of the 5 op features + their per-graph z-scores
N_EDGE_INPUTS = 2  # log1p(transfer time), is_reverse
_EPS = 1e-6


@dataclass
class PackedGraphs:
    """``K`` padded graphs packed into one disconnected graph of ``K * N`` nodes.

    Attributes:
        x: ``(K * N, N_OP_INPUTS) float32`` op inputs (zeros on padding rows).
        edge_index: ``(2, 2 * E_total) int64`` bidirected edges, node ids offset by ``k * N``.
        edge_attr: ``(2 * E_total, N_EDGE_INPUTS) float32``.
        valid: ``(K, N) bool`` real ops.
        n_graphs, n_pad: ``K`` and ``N``.
    """

    x: torch.Tensor
    edge_index: torch.Tensor
    edge_attr: torch.Tensor
    valid: torch.Tensor
    n_graphs: int
    n_pad: int


def op_inputs(op_features: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Per-op encoder inputs: ``[log1p(x), zscore_within_graph(x)]``, zeros on padding rows.

    Shapes:
        op_features: ``(K, N, 5)`` nonnegative; valid: ``(K, N) bool``; returns ``(K, N, 10)``.
    """
    x = op_features.clamp_min(0.0)
    m = valid.unsqueeze(-1).to(x.dtype)
    count = m.sum(1, keepdim=True).clamp_min(1.0)
    mean = (x * m).sum(1, keepdim=True) / count
    var = (((x - mean) * m) ** 2).sum(1, keepdim=True) / count
    z = (x - mean) / (var.sqrt() + _EPS)
    return torch.cat([torch.log1p(x), z], dim=-1) * m


_ID_CHUNK = 4096  # ops per block of identity features (each block drawn from its own seed)
_ID_TABLES: dict[int, np.ndarray] = {}


def op_id_features(n: int, width: int) -> np.ndarray:
    """``(n, width) float32`` fixed standard-normal features of op ids ``0..n-1``.

    Op ``i`` gets the same row whatever ``n`` (rows come in seeded blocks of 4096), on every graph
    and machine: random node features that tell apart ops whose costs and neighbourhoods are the
    same, which message passing alone cannot (Sato, Yamada & Kashima, SDM 2021; Abboud et al.,
    IJCAI 2021).
    """
    table = _ID_TABLES.get(width)
    have = 0 if table is None else table.shape[0]
    if have < n:
        blocks = [np.random.default_rng([0x1D, width, c]).standard_normal((_ID_CHUNK, width))
                  for c in range(have // _ID_CHUNK, -(-n // _ID_CHUNK))]
        table = np.concatenate(([table] if table is not None else []) + blocks).astype(np.float32)
        _ID_TABLES[width] = table
    return table[:n]


def pack_graphs(
    op_features: torch.Tensor,
    edge_index: torch.Tensor,
    edge_attr: torch.Tensor,
    n_ops: torch.Tensor,
    n_edges: torch.Tensor,
    id_features: int = 0,
    extra: torch.Tensor | None = None,
) -> PackedGraphs:
    """Pack ``K`` padded observations' static arrays into one bidirected graph (vectorised).

    Args:
        op_features: ``(K, N, 5)`` float.
        edge_index: ``(K, 2, E)`` (any dtype; -1 padded, valid columns first).
        edge_attr: ``(K, E, 1)`` float.
        n_ops, n_edges: ``(K,)`` real sizes.
        id_features: width of the op-identity features (:func:`op_id_features`) appended to
            each op's inputs (0 = none): ``x`` is ``(K * N, N_OP_INPUTS + id_features)``.
        extra: ``(K, N, F)`` more per-op inputs appended last (e.g. the structural features of
            :mod:`agents.structure`; zeroed on padding rows), or None: ``x`` gets ``F`` more columns.
    """
    k, n, _ = op_features.shape
    e = edge_index.shape[-1]
    device = op_features.device
    valid = torch.arange(n, device=device).unsqueeze(0) < n_ops.view(-1, 1)
    x = op_inputs(op_features.float(), valid)
    if id_features:
        ids = torch.from_numpy(op_id_features(n, id_features)).to(device)
        x = torch.cat([x, ids.expand(k, n, id_features) * valid.unsqueeze(-1).to(x.dtype)], dim=-1)
    if extra is not None:
        x = torch.cat([x, extra.to(device=device, dtype=x.dtype) * valid.unsqueeze(-1).to(x.dtype)], dim=-1)
    x = x.reshape(k * n, -1)
    edge_valid = torch.arange(e, device=device).unsqueeze(0) < n_edges.view(-1, 1)  # (K, E)
    offset = (torch.arange(k, device=device) * n).view(k, 1, 1)
    ei = edge_index.long() + offset  # (K, 2, E)
    src = ei[:, 0][edge_valid]
    dst = ei[:, 1][edge_valid]
    comm = torch.log1p(edge_attr[..., 0].float().clamp_min(0.0))[edge_valid]
    zeros, ones = torch.zeros_like(comm), torch.ones_like(comm)
    edges = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
    attr = torch.stack([torch.cat([comm, comm]), torch.cat([zeros, ones])], dim=1)
    return PackedGraphs(x, edges, attr, valid, k, n)


class GINEBlock(nn.Module):
    """``h + GINEConv(h)`` followed by LayerNorm (pre-activation residual block).

    Args:
        dim: node width.
        edge_dim: edge feature width.

    Shapes:
        x: ``(n, dim)``; edge_index: ``(2, m)``; edge_attr: ``(m, edge_dim)``; returns ``(n, dim)``.
    """

    def __init__(self, dim: int, edge_dim: int = N_EDGE_INPUTS) -> None:
        super().__init__()
        mlp = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
        self.conv = GINEConv(mlp, train_eps=True, edge_dim=edge_dim)
        self.norm = nn.LayerNorm(dim)

    def reset_parameters(self) -> None:
        self.conv.reset_parameters()
        self.norm.reset_parameters()

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.conv(x, edge_index, edge_attr))


class GraphEncoder(nn.Module):
    """Static op embeddings ``H`` of packed graphs.

    Args:
        hidden_dim: width ``h`` of every layer.
        n_layers: message-passing layers (GINE blocks).
        in_dim: op input width (:data:`N_OP_INPUTS`).
        edge_dim: edge input width (:data:`N_EDGE_INPUTS`).

    Shapes:
        x: ``(n, in_dim)``; edge_index: ``(2, m)`` int64; edge_attr: ``(m, edge_dim)``;
        returns ``(n, hidden_dim)``.
    """

    def __init__(
        self,
        hidden_dim: int = 64,
        n_layers: int = 4,
        in_dim: int = N_OP_INPUTS,
        edge_dim: int = N_EDGE_INPUTS,
    ) -> None:
        super().__init__()
        if hidden_dim < 1 or n_layers < 0:
            raise ValueError(
                f"GraphEncoder: hidden_dim must be >= 1 and n_layers >= 0, got {hidden_dim}, {n_layers}"
            )
        self.hidden_dim, self.n_layers = hidden_dim, n_layers
        self.input = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(), nn.LayerNorm(hidden_dim))
        self.blocks = nn.ModuleList(GINEBlock(hidden_dim, edge_dim) for _ in range(n_layers))

    def reset_parameters(self) -> None:
        for m in self.input:
            if hasattr(m, "reset_parameters"):
                m.reset_parameters()
        for block in self.blocks:
            block.reset_parameters()

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor) -> torch.Tensor:
        h = self.input(x)
        for block in self.blocks:
            h = block(h, edge_index, edge_attr)
        return h
