"""GDP's network (Zhou et al. 2019, simplified as in the DOPPLER authors' code): GraphSAGE + attention.

Inputs per op: the env's 5 static op features as ``[log1p(x), z-score within the graph]``
(:func:`agents.gnn.op_inputs`, 10 values) and a sinusoidal encoding of the op's position in a
topological order. The position stands in for GDP's node-order inputs (the original feeds raw
predecessor ids and uses Transformer-XL segments in id order); without it ops with identical
features and neighbourhoods (the parallel branches of ffnn or chainmm) get identical logits, so
the greedy decode would stack them all on one device.

Network:

- ``h = ReLU(Linear(10 -> F)) + PE(position)``;
- ``n_sage`` times ``h = LayerNorm(h + ReLU(SAGEConv(h)))`` on the bidirected graph
  (``torch_geometric.nn.SAGEConv``, max aggregation of projected neighbours, GDP's pooling
  aggregator);
- one transformer encoder layer over all ops of the graph (``n_heads`` heads, feed-forward
  ``ff_dim``, post-norm): GDP's attention over the whole op sequence (full attention instead of
  Transformer-XL's segments of 8 with memory: the graphs here have at most a few hundred ops);
- ``Linear(F -> max_devices)`` logits per op, devices ``>= n_devices`` masked.

The whole assignment is one forward pass: a softmax over devices per op.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch_geometric.nn import SAGEConv

from agents.device_mask import NEG_LOGIT, device_mask
from agents.gnn import N_OP_INPUTS, op_inputs
from doppler_gym.envs.context import GraphContext


@dataclass
class GDPGraph:
    """Per-instance tensors of GDP (built once per run from a ``Doppler-SimAssign-v0`` observation).

    Attributes:
        x: ``(n, 10) float32`` static op inputs.
        position: ``(n,) int64`` each op's position in a topological order.
        edge_index: ``(2, 2E) int64`` bidirected edges.
        n_devices: the instance's device count.
    """

    x: torch.Tensor
    position: torch.Tensor
    edge_index: torch.Tensor
    n_devices: int

    @property
    def n_ops(self) -> int:
        return int(self.x.shape[0])

    @classmethod
    def from_observation(cls, obs: dict[str, np.ndarray], order: np.ndarray) -> GDPGraph:
        """From an ``AssignEnv`` observation (padded static arrays) and a topological ``order``
        (``(n_ops,)``) of its graph."""
        n, e = int(obs["n_ops"][0]), int(obs["n_edges"][0])
        feats = torch.tensor(np.array(obs["op_features"][:n]), dtype=torch.float32)
        x = op_inputs(feats.unsqueeze(0), torch.ones(1, n, dtype=torch.bool))[0]
        ei = torch.tensor(np.array(obs["edge_index"][:, :e]), dtype=torch.int64)
        position = torch.empty(n, dtype=torch.int64)
        position[torch.as_tensor(np.asarray(order, np.int64))] = torch.arange(n)
        return cls(x, position, torch.cat([ei, ei.flip(0)], dim=1), int(obs["n_devices"][0]))

    @classmethod
    def from_context(cls, ctx: GraphContext, order: np.ndarray) -> GDPGraph:
        """From the env's static context of an instance (same tensors as :meth:`from_observation`)."""
        g = ctx.graph
        obs = {"n_ops": np.array([g.n_ops]), "n_edges": np.array([g.n_edges]), "op_features": ctx.op_features,
               "edge_index": np.stack([g.src, g.dst]).astype(np.int64), "n_devices": np.array([ctx.n_devices])}
        return cls.from_observation(obs, order)


def positional_encoding(position: torch.Tensor, dim: int) -> torch.Tensor:
    """``(n, dim)`` sinusoidal encoding of integer positions (Vaswani et al.); ``dim`` even or odd."""
    half = (dim + 1) // 2
    freq = torch.exp(-math.log(10_000.0) * torch.arange(half, dtype=torch.float32) / max(half, 1))
    angle = position.float().unsqueeze(1) * freq.unsqueeze(0)
    return torch.cat([angle.sin(), angle.cos()], dim=1)[:, :dim]


class GDPNet(nn.Module):
    """GDP's policy network: per-op device logits of the whole graph in one pass.

    Args:
        max_devices: output width (an instance may have fewer devices; the rest are masked).
        hidden_dim: embedding width ``F`` (GDP: 64).
        n_sage: GraphSAGE layers.
        n_heads: attention heads (GDP: 4; must divide ``hidden_dim``).
        ff_dim: feed-forward width of the attention layer (GDP: 256).

    Shapes:
        forward(graph) returns ``(n, max_devices)`` logits, unusable devices at :data:`NEG_LOGIT`.
    """

    def __init__(self, max_devices: int = 4, hidden_dim: int = 64, n_sage: int = 2, n_heads: int = 4,
                 ff_dim: int = 256) -> None:
        super().__init__()
        if max_devices < 1 or hidden_dim < 1 or n_sage < 0 or n_heads < 1 or hidden_dim % n_heads:
            raise ValueError(f"GDPNet: need max_devices >= 1, n_sage >= 0 and hidden_dim divisible by n_heads; got "
                             f"max_devices={max_devices}, hidden_dim={hidden_dim}, n_sage={n_sage}, n_heads={n_heads}")
        self.max_devices, self.hidden_dim, self.n_heads, self.ff_dim = max_devices, hidden_dim, n_heads, ff_dim
        self.input = nn.Linear(N_OP_INPUTS, hidden_dim)
        self.sage = nn.ModuleList(SAGEConv(hidden_dim, hidden_dim, aggr="max", project=True) for _ in range(n_sage))
        self.sage_norm = nn.ModuleList(nn.LayerNorm(hidden_dim) for _ in range(n_sage))
        self.attention = nn.TransformerEncoderLayer(hidden_dim, n_heads, ff_dim, dropout=0.0, batch_first=True)
        self.out = nn.Linear(hidden_dim, max_devices)

    def kwargs(self) -> dict:
        """Constructor arguments (stored in checkpoints)."""
        return {"max_devices": self.max_devices, "hidden_dim": self.hidden_dim, "n_sage": len(self.sage),
                "n_heads": self.n_heads, "ff_dim": self.ff_dim}

    def device_mask(self, graph: GDPGraph) -> torch.Tensor:
        """``(max_devices,) bool``: the usable devices of ``graph``'s instance
        (:func:`agents.device_mask.device_mask`)."""
        return device_mask(graph.n_devices, self.max_devices, "GDPNet")

    def forward(self, graph: GDPGraph) -> torch.Tensor:
        h = torch.relu(self.input(graph.x)) + positional_encoding(graph.position, self.hidden_dim)
        for conv, norm in zip(self.sage, self.sage_norm):
            h = norm(h + torch.relu(conv(h, graph.edge_index)))
        h = self.attention(h.unsqueeze(0)).squeeze(0)
        return self.out(h).masked_fill(~self.device_mask(graph), NEG_LOGIT)
