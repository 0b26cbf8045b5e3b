"""The five training-step import cases of issue 34 and PyTorch's own FLOP count of each step.

The reference is ``torch.utils.flop_counter.FlopCounterMode`` around ``loss(model(*inputs)).backward()``
on real tensors (fp32; FLOPs do not depend on the dtype), with oneDNN switched off so an LSTM runs its
per-step matmuls (the importer traces it that way; with oneDNN on, ``mkldnn_rnn_layer`` counts 0). On
CPU the attention runs ``_scaled_dot_product_flash_attention_for_cpu`` (and its backward), which the
counter does not cover; the reference maps them to the counter's own formulas for the flash kernels
(``sdpa_flop_count``, ``sdpa_backward_flop_count``: 2 and 5 matmuls), the kernels a GPU runs.

Run ``.venv/bin/python -m tests.doppler_gym.workloads.torch_cases`` for the table of
``docs/results/torch_import.md``.
"""

from __future__ import annotations

import copy
import datetime
import warnings

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from doppler_gym.sim.api import simulate
from doppler_gym.sim.config import SimConfig
from doppler_gym.workloads import from_torch
from doppler_gym.workloads.torch_flops import is_matmul_like


class GPTBlock(nn.Module):
    """Pre-norm decoder block: fused QKV projection split in three, causal SDPA, GELU MLP."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x))))


class TopKMoE(nn.Module):
    """A top-k router over ``n_experts`` two-layer MLP experts with a fixed capacity per expert.

    Each token's router probabilities are kept for its top-``k`` experts (``topk``); each expert takes
    the ``capacity`` tokens with the highest kept weight (``topk`` again), gathers them
    (``index_select``), runs its MLP, scales by the weight and scatters the result back (``index_add``).
    Input ``(tokens, d)``, output ``(tokens, d)``.
    """

    def __init__(self, d: int, n_experts: int, k: int, capacity: int) -> None:
        super().__init__()
        self.k, self.capacity = k, capacity
        self.router = nn.Linear(d, n_experts)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
                                     for _ in range(n_experts))  # fmt: skip

    def forward(self, x):
        probs = self.router(x).softmax(dim=-1)
        top, idx = probs.topk(self.k, dim=-1)
        kept = torch.zeros_like(probs).scatter(1, idx, top)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            weight, tokens = kept[:, e].topk(self.capacity)
            out = out.index_add(0, tokens, expert(x.index_select(0, tokens)) * weight[:, None])
        return out


class MegatronLayer(nn.Module):
    """The GPT layer whose stored activations Korthikanti et al. (2022, section 4.1) count: layer norm,
    fused QKV, ``softmax(q k^T / sqrt(d))``, dropout, ``. v``, projection, dropout, residual; layer norm,
    ``h -> 4h``, GELU, ``4h -> h``, dropout, residual. Input and output ``(b, s, h)``."""

    def __init__(self, h: int, heads: int, p: float = 0.1) -> None:
        super().__init__()
        self.heads, self.p = heads, p
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.fc1, self.fc2 = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (z.reshape(b, s, self.heads, d).transpose(1, 2) for z in (q, k, v))
        att = F.dropout(torch.softmax((q @ k.transpose(-2, -1)) * d**-0.5, dim=-1), self.p)
        y = (att @ v).transpose(1, 2).reshape(b, s, h)
        x = x + F.dropout(self.proj(y), self.p)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), self.p)


def cases() -> dict[str, tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    """``{name: (module, inputs)}`` of the five cases, small enough to trace in about a second each."""
    torch.manual_seed(0)
    cnn = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3),
        nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10),
    )  # fmt: skip
    return {
        "TransformerEncoderLayer": (
            nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True),
            (torch.randn(2, 16, 64),),
        ),
        "GPT block (fused QKV, SDPA)": (GPTBlock(64, 4), (torch.randn(2, 16, 64),)),
        "LSTM": (nn.LSTM(32, 64), (torch.randn(12, 2, 32),)),
        "top-2 MoE router": (TopKMoE(32, 4, 2, 8), (torch.randn(16, 32),)),
        "CNN": (cnn, (torch.randn(2, 3, 16, 16),)),
    }


def mean_loss(outputs) -> torch.Tensor:
    """The importer's ``loss="mean"``: the sum of the means of every floating tensor in the outputs."""
    leaves = [t for t in torch.utils._pytree.tree_leaves(outputs) if torch.is_tensor(t) and t.is_floating_point()]
    return sum(t.float().mean() for t in leaves)


def _cpu_flash(q, k, v, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(q, k, v)


def _cpu_flash_backward(grad_out, q, k, v, *args, out_shape=None, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out, q, k, v)


CPU_ATTENTION = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward,
}


def counted_step_flops(module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> int:
    """FlopCounterMode's total for forward + ``mean_loss`` + backward (see the module docstring)."""
    model = copy.deepcopy(module).train()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="TF32 acceleration on top of oneDNN")  # flags() restoring it
        with (
            torch.backends.mkldnn.flags(enabled=False),
            FlopCounterMode(display=False, custom_mapping=CPU_ATTENTION) as fc,
        ):
            mean_loss(model(*inputs)).backward()
    return fc.get_total_flops()


def graph_flops(g) -> tuple[float, float, float]:
    """``(matmul-like FLOPs of forward + backward, other FLOPs of forward + backward, optimizer FLOPs)``."""
    mm = other = opt = 0.0
    for name, kind, f in zip(g.names, g.kinds, g.flops):
        if name.startswith("opt."):
            opt += f
        elif is_matmul_like(kind):
            mm += f
        else:
            other += f
    return mm, other, opt


def table(precision: str = "bf16", optimizer: str = "adam") -> str:
    """The results page's table: per case, the graph's FLOPs against FlopCounterMode's."""
    rows = ["| case | ops | params | FlopCounterMode fwd+bwd | graph matmul-like fwd+bwd | ratio | "
            "graph other fwd+bwd | optimizer | persistent [B] | peak, 1 device, track [B] |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, (module, inputs) in cases().items():
        g = from_torch(module, inputs, loss="mean", optimizer=optimizer, precision=precision)
        mm, other, opt = graph_flops(g)
        ref = counted_step_flops(module, inputs)
        n_params = sum(p.numel() for p in module.parameters())
        trace = simulate(g, np.zeros(g.n_ops, np.int32), topology=1, config=SimConfig(memory="track"))
        rows.append(f"| {name} | {g.n_ops} | {n_params} | {ref:.4g} | {mm:.4g} | {mm / ref:.4f} | {other:.4g} | "
                    f"{opt:.4g} | {g.persistent_bytes.sum():.4g} | {trace.memory.peak[0]:.4g} |")  # fmt: skip
    return "\n".join(rows)


if __name__ == "__main__":
    print(f"{datetime.date.today()}, 2-core CPU, no GPU, torch {torch.__version__}, precision bf16, Adam\n")
    print(table())
