"""Placeto's network (Addanki et al. 2019, adapted): a GNN over the partly placed graph and a device head.

The ops are placed one per step in a fixed topological order. At step ``t`` (current op ``c``)
every op ``v`` has the inputs

- static: the env's 5 op features (compute, b-level, t-level, input and output transfer, as times
  over the graph's compute-only critical path) as ``[log1p(x), z-score within the graph]``
  (:func:`agents.gnn.op_inputs`, 10 values);
- dynamic (Placeto's): one-hot of ``v``'s device if placed (``max_devices``), ``is_current``,
  ``is_placed``,

and the graph is the bidirected DAG with edge features ``[log1p(transfer), is_reverse]`` (the
forward and backward message passing of Placeto in one GINE stack, :class:`agents.gnn.GINEBlock`).
The embeddings are **recomputed at every step** (the placement changes), as in Placeto.

Device head: one scorer shared by the devices, ``score_d = MLP([h_c, mean of c's parents, mean of
c's children, mean of all ops] (4F), [mean embedding of the ops on d (F), share of c's parents on
d, share of the graph's compute on d] -> head -> 1)``. Placeto's is ``FNN(.. -> 32 -> D)`` over
its parent and child context; here the "parallel ops" aggregate of the original is replaced by the
whole-graph mean (O(n) instead of O(n^2) reachability), and the head is per device
(permutation-equivariant) with the two raw per-device numbers as a skip connection of inputs the
GNN already sees: with a ``D``-output FNN, REINFORCE on paper/chainmm drifted to the uniform policy
(random spreading beats any device-biased policy, and a head that must learn "follow the parent,
avoid the loaded device" separately for each output learns it too slowly). Devices
``>= n_devices`` of the instance are masked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from agents.device_mask import NEG_LOGIT, device_mask
from agents.gnn import N_EDGE_INPUTS, N_OP_INPUTS, GINEBlock, pack_graphs
from doppler_gym.envs.context import GraphContext

N_DEVICE_INPUTS = 2  # per device, besides the mean embedding: parents' share there, compute share there


@dataclass
class PlacetoGraph:
    """Per-instance tensors of Placeto (built once per run).

    Attributes:
        x_static: ``(n, 10) float32`` static op inputs.
        edge_index: ``(2, 2E) int64`` bidirected edges of one copy of the graph.
        edge_attr: ``(2E, 2) float32`` ``[log1p(transfer), is_reverse]``.
        order: ``(n,) int64`` the placement order (a topological order).
        parents, children: per op, ``int64`` tensors of its predecessors / successors.
        compute_share: ``(n,) float32`` each op's compute over the graph's total.
        n_devices: devices of the instance (the usable ones: ``0..n_devices-1``).
    """

    x_static: torch.Tensor
    edge_index: torch.Tensor
    edge_attr: torch.Tensor
    order: torch.Tensor
    parents: list[torch.Tensor]
    children: list[torch.Tensor]
    compute_share: torch.Tensor
    n_devices: int
    _tiled: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict, repr=False)

    @property
    def n_ops(self) -> int:
        return int(self.x_static.shape[0])

    @classmethod
    def from_context(cls, ctx: GraphContext, order: np.ndarray) -> PlacetoGraph:
        """The tensors of ``ctx``'s instance, ops placed in ``order`` (``(n_ops,)`` topological)."""
        g = ctx.graph
        n, e = g.n_ops, g.n_edges
        packed = pack_graphs(
            torch.tensor(np.array(ctx.op_features), dtype=torch.float32).unsqueeze(0),
            torch.as_tensor(np.stack([g.src, g.dst]).astype(np.int64)).unsqueeze(0),
            torch.tensor(np.array(ctx.edge_attr), dtype=torch.float32).reshape(1, e, 1),
            torch.tensor([n]), torch.tensor([e]),
        )
        ptr, succ = g.succ_ptr, g.succ
        pptr, pred = g.pred_ptr, g.pred
        children = [torch.as_tensor(succ[ptr[v]: ptr[v + 1]].astype(np.int64)) for v in range(n)]
        parents = [torch.as_tensor(pred[pptr[v]: pptr[v + 1]].astype(np.int64)) for v in range(n)]
        comp = np.asarray(ctx.comp, np.float64)
        share = comp / comp.sum() if comp.sum() > 0 else np.full(n, 1.0 / n)
        return cls(packed.x, packed.edge_index, packed.edge_attr, torch.as_tensor(np.asarray(order, np.int64)),
                   parents, children, torch.tensor(share, dtype=torch.float32), ctx.n_devices)

    def tiled_edges(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(2, batch * 2E)`` edges and ``(batch * 2E, 2)`` attributes of ``batch`` disjoint copies
        (copy ``k``'s nodes at rows ``k * n .. k * n + n - 1``); memoised per batch size."""
        out = self._tiled.get(batch)
        if out is None:
            m = self.edge_index.shape[1]
            offset = (torch.arange(batch) * self.n_ops).repeat_interleave(m)
            out = (self.edge_index.repeat(1, batch) + offset, self.edge_attr.repeat(batch, 1))
            self._tiled[batch] = out
        return out


class PlacetoNet(nn.Module):
    """Placeto's policy network: per-step GNN over the partly placed graph and a device head.

    Args:
        max_devices: width of the device one-hot and of the head's output (an instance may have
            fewer devices; the rest are masked).
        hidden_dim: node embedding width ``F``.
        n_layers: message-passing layers.
        head_dim: hidden width of the device head (Placeto: 32).

    Shapes:
        placement: ``(B, n) int64`` device of each placed op, -1 if unplaced;
        current: the op being placed (an int); returns ``(B, max_devices)`` logits, unusable devices
        at :data:`NEG_LOGIT`.
    """

    def __init__(self, max_devices: int = 4, hidden_dim: int = 32, n_layers: int = 3, head_dim: int = 32) -> None:
        super().__init__()
        if max_devices < 1 or hidden_dim < 1 or n_layers < 0 or head_dim < 1:
            raise ValueError(f"PlacetoNet: max_devices, hidden_dim and head_dim must be >= 1 and n_layers >= 0; "
                             f"got {max_devices}, {hidden_dim}, {head_dim}, {n_layers}")
        self.max_devices, self.hidden_dim = max_devices, hidden_dim
        self.static_in = nn.Linear(N_OP_INPUTS, hidden_dim)
        self.dynamic_in = nn.Linear(max_devices + 2, hidden_dim, bias=False)
        self.in_norm = nn.LayerNorm(hidden_dim)
        self.blocks = nn.ModuleList(GINEBlock(hidden_dim, N_EDGE_INPUTS) for _ in range(n_layers))
        self.head = nn.Sequential(nn.Linear(5 * hidden_dim + N_DEVICE_INPUTS, head_dim), nn.ReLU(),
                                  nn.Linear(head_dim, 1))

    def kwargs(self) -> dict:
        """Constructor arguments (stored in checkpoints)."""
        return {"max_devices": self.max_devices, "hidden_dim": self.hidden_dim, "n_layers": len(self.blocks),
                "head_dim": self.head[0].out_features}

    def device_inputs(self, graph: PlacetoGraph, placement: torch.Tensor, h: torch.Tensor, current: int,
                      onehot: torch.Tensor | None = None) -> torch.Tensor:
        """``(B, D, F + 2)`` per-device inputs of the head: the mean embedding of the ops placed on
        the device, the share of the current op's parents there, the share of the graph's compute there.
        ``onehot``: ``self._onehot(placement)`` when the caller has it."""
        if onehot is None:
            onehot = self._onehot(placement)  # (B, n, D)
        count = onehot.sum(1)  # (B, D)
        mean_h = torch.einsum("bnd,bnf->bdf", onehot, h) / count.clamp_min(1.0).unsqueeze(-1)
        par = graph.parents[current]
        if par.numel():
            parent_share = onehot[:, par].mean(1)
        else:
            parent_share = h.new_zeros(count.shape)
        load = (onehot * graph.compute_share.view(1, -1, 1)).sum(1)
        return torch.cat([mean_h, parent_share.unsqueeze(-1), load.unsqueeze(-1)], dim=-1)

    def device_mask(self, graph: PlacetoGraph) -> torch.Tensor:
        """``(max_devices,) bool``: the usable devices of ``graph``'s instance
        (:func:`agents.device_mask.device_mask`)."""
        return device_mask(graph.n_devices, self.max_devices, "PlacetoNet")

    def _onehot(self, placement: torch.Tensor) -> torch.Tensor:
        """``(B, n, max_devices)`` one-hot device of each placed op, zeros for unplaced ops."""
        onehot = torch.nn.functional.one_hot(placement.clamp_min(0), self.max_devices).float()
        return onehot * (placement >= 0).unsqueeze(-1)

    def embed(self, graph: PlacetoGraph, placement: torch.Tensor, current: int,
              onehot: torch.Tensor | None = None) -> torch.Tensor:
        """``(B, n, F)`` op embeddings of ``B`` partial placements (see the class docstring)."""
        b, n = placement.shape
        placed = placement >= 0
        if onehot is None:
            onehot = self._onehot(placement)
        is_current = torch.zeros(b, n, 1)
        is_current[:, current] = 1.0
        dyn = torch.cat([onehot, is_current, placed.unsqueeze(-1).float()], dim=-1)
        h = torch.relu(self.in_norm(self.static_in(graph.x_static).unsqueeze(0) + self.dynamic_in(dyn)))
        h = h.reshape(b * n, self.hidden_dim)
        edge_index, edge_attr = graph.tiled_edges(b)
        for block in self.blocks:
            h = block(h, edge_index, edge_attr)
        return h.reshape(b, n, self.hidden_dim)

    def forward(self, graph: PlacetoGraph, placement: torch.Tensor, current: int) -> torch.Tensor:
        onehot = self._onehot(placement)  # once per step, for the GNN inputs and the device inputs
        h = self.embed(graph, placement, current, onehot)
        b = h.shape[0]
        zeros = h.new_zeros(b, self.hidden_dim)
        par, chi = graph.parents[current], graph.children[current]
        op_ctx = torch.cat([
            h[:, current],
            h[:, par].mean(1) if par.numel() else zeros,
            h[:, chi].mean(1) if chi.numel() else zeros,
            h.mean(1),
        ], dim=-1)  # (B, 4F)
        dev = self.device_inputs(graph, placement, h, current, onehot)  # (B, D, F + 2)
        d = self.max_devices
        logits = self.head(torch.cat([op_ctx.unsqueeze(1).expand(b, d, -1), dev], dim=-1)).squeeze(-1)
        return logits.masked_fill(~self.device_mask(graph), NEG_LOGIT)
