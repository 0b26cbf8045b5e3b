"""Training-step graphs of published model architectures, built from their configurations.

The models are made by Hugging Face ``transformers`` or by ``torchvision`` from a configuration alone
(random weights, no download) and captured with :func:`doppler_gym.workloads.from_torch` as one whole
training step (``loss``: the mean of the fp32 logits; Adam; bf16 mixed precision). The graphs are
shipped as JSON in ``doppler_gym/data/torch/`` (provenance and licences in its README), so
:func:`load` needs none of these packages; :func:`build` regenerates one
(``pip install doppler-gym[models]``)::

    python -m doppler_gym.workloads.torch_models            # rewrites doppler_gym/data/torch/*.json

========================  ==================================================================  =========
name                      configuration                                                       step
========================  ==================================================================  =========
``gpt2-small``            GPT-2 124M (Radford et al. 2019): 12 layers, d 768, 12 heads,       b 1, s 1024
                          vocabulary 50257, dropout 0.1 (``transformers.GPT2Config()``)
``smollm2-135m``          Llama architecture, SmolLM2-135M's published configuration: 30      b 1, s 2048
                          layers, d 576, 9 heads, 3 key-value heads (GQA), MLP 1536,
                          vocabulary 49152, tied embeddings
``resnet18``              ``torchvision.models.resnet18()`` (He et al. 2016), 1000 classes    b 32, 224 x 224
``vit-b-16``              ``torchvision.models.vit_b_16()`` (Dosovitskiy et al. 2021), 1000   b 32, 224 x 224
                          classes
========================  ==================================================================  =========
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from importlib import resources
from typing import Any

from doppler_gym.graph.io_json import read_json, write_json
from doppler_gym.graph.types import DataflowGraph

SHIPPED = ("gpt2-small", "smollm2-135m", "resnet18", "vit-b-16")
"""Names of the shipped graphs (:func:`load`)."""


def load(name: str) -> DataflowGraph:
    """The shipped training-step graph ``name`` (one of :data:`SHIPPED`); no torch needed.

    Raises:
        ValueError: an unknown name (the message lists the shipped ones).
    """
    if name not in SHIPPED:
        raise ValueError(f"torch_models.load: unknown graph {name!r}; shipped: {', '.join(SHIPPED)}")
    path = resources.files("doppler_gym") / "data" / "torch" / f"{name}.json"
    with resources.as_file(path) as file:
        return read_json(file)


def build(name: str) -> DataflowGraph:
    """Build and capture training-step graph ``name`` (one of :data:`SHIPPED`): needs torch and
    transformers (language models) or torchvision (vision models).

    Raises:
        ImportError: the package is not installed (the message says how to install it).
        ValueError: an unknown name.
    """
    if name not in SHIPPED:
        raise ValueError(f"torch_models.build: unknown graph {name!r}; known: {', '.join(SHIPPED)}")
    package = "torchvision.models" if name in _VISION else "transformers"
    try:
        import importlib

        import torch

        module = importlib.import_module(package)
    except ImportError as exc:
        raise ImportError(
            f"torch_models.build needs torch and {package.split('.')[0]} ({exc}); install them with "
            f"`pip install doppler-gym[models]`, or use torch_models.load({name!r}) for the shipped graph"
        ) from None
    from doppler_gym.workloads.torch_fx import from_torch

    generator = torch.Generator().manual_seed(0)
    if name in _VISION:
        model = _VISION[name](module)
        images = torch.randn(32, 3, 224, 224, generator=generator)
        return from_torch(model, (images,), name=name, loss="mean", optimizer="adam", precision="bf16")
    model, batch, seq, vocab = _MODELS[name](module)
    ids = torch.randint(0, vocab, (batch, seq), generator=generator)
    return from_torch(model, (ids,), name=name, loss=_mean_logits, optimizer="adam", precision="bf16")


def _mean_logits(outputs: Any) -> Any:
    return outputs.logits.float().mean()


_VISION: dict[str, Callable[[Any], Any]] = {
    "resnet18": lambda models: models.resnet18(),  # torchvision.models, as the package builds them
    "vit-b-16": lambda models: models.vit_b_16(),
}


def _gpt2(transformers: Any) -> tuple[Any, int, int, int]:
    config = transformers.GPT2Config(attn_implementation="sdpa")  # GPT-2 small's defaults
    return transformers.GPT2LMHeadModel(config), 1, 1024, config.vocab_size


def _smollm2(transformers: Any) -> tuple[Any, int, int, int]:
    config = transformers.LlamaConfig(
        hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
        num_key_value_heads=3, vocab_size=49152, rms_norm_eps=1e-5, tie_word_embeddings=True,
        attn_implementation="sdpa",
    )  # fmt: skip
    return transformers.LlamaForCausalLM(config), 1, 2048, config.vocab_size


_MODELS: dict[str, Callable[[Any], tuple[Any, int, int, int]]] = {"gpt2-small": _gpt2, "smollm2-135m": _smollm2}


def main(argv: list[str] | None = None) -> None:
    """Regenerate the shipped JSON graphs (``--out`` folder, default the package's ``data/torch``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(resources.files("doppler_gym") / "data" / "torch"))
    parser.add_argument("names", nargs="*", default=list(SHIPPED))
    args = parser.parse_args(argv)
    for name in args.names:
        graph = build(name)
        write_json(graph, f"{args.out}/{name}.json")
        print(f"{name}: {graph.n_ops} ops, {graph.n_edges} edges, {graph.total_flops:.4g} FLOP")


if __name__ == "__main__":
    main()
