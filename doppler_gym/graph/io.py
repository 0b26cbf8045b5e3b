"""Load and save graphs by file suffix, and the built-in DOPPLER paper graphs by name.

Suffixes: ``.txt`` is the DOPPLER paper format (:mod:`doppler_gym.graph.io_paper`), ``.json`` is
our format (:mod:`doppler_gym.graph.io_json`).

Built-in names (files shipped in ``doppler_gym/data/paper``, unchanged from the authors' repo):

==========================  =========================================  =====  =====
name                        file                                       ops    edges
==========================  =========================================  =====  =====
``paper/chainmm``           ``chain_mm_112nodes.txt``                  76     80
``paper/ffnn``              ``ffnn_192nodes.txt``                      180    208
``paper/llama-block``       ``transformer_block_215nodes.txt``         182    234
``paper/llama-layer``       ``full_transformer_layer_261nodes.txt``    229    284
``paper/llama-block-8gpu``  ``8gpu_transformer_block.txt``             302    398
``paper/llama-layer-8gpu``  ``8gpu_full_transformer.txt``              367    470
``paper/gdp/<name>``        ``gdp_<file>`` for the first four          same   same
==========================  =========================================  =====  =====

The plain files are loaded as they are, including the one odd edge each of chainmm,
llama-block and llama-layer has compared with its ``gdp_`` twin (e.g. chainmm edge 1 is 1->6,
the gdp_ twin has 1->16); the paper's runs used the plain files. The ``gdp_`` twins carry an op
type per op (``graph.kinds``).
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from doppler_gym.graph.io_json import read_json, write_json
from doppler_gym.graph.io_paper import parse_paper, read_paper, write_paper
from doppler_gym.graph.types import DataflowGraph

__all__ = ["load_graph", "save_graph", "paper_graph_names", "SUFFIXES"]

SUFFIXES = (".txt", ".json")

_PAPER_FILES = {
    "paper/chainmm": "chain_mm_112nodes.txt",
    "paper/ffnn": "ffnn_192nodes.txt",
    "paper/llama-block": "transformer_block_215nodes.txt",
    "paper/llama-layer": "full_transformer_layer_261nodes.txt",
    "paper/llama-block-8gpu": "8gpu_transformer_block.txt",
    "paper/llama-layer-8gpu": "8gpu_full_transformer.txt",
    "paper/gdp/chainmm": "gdp_chain_mm_112nodes.txt",
    "paper/gdp/ffnn": "gdp_ffnn_192nodes.txt",
    "paper/gdp/llama-block": "gdp_transformer_block_215nodes.txt",
    "paper/gdp/llama-layer": "gdp_full_transformer_layer_261nodes.txt",
}


PAPER_EXPERIMENTS = (
    ("paper/chainmm", 4),
    ("paper/ffnn", 4),
    ("paper/llama-block", 4),
    ("paper/llama-layer", 4),
    ("paper/llama-block-8gpu", 8),
    ("paper/llama-layer-8gpu", 8),
)
"""The DOPPLER paper's experiments: (built-in graph name, number of GPUs it was placed on)."""


def paper_graph_names() -> tuple[str, ...]:
    """Names of the built-in paper graphs accepted by :func:`load_graph`, e.g. ``"paper/ffnn"``."""
    return tuple(_PAPER_FILES)


def load_graph(path_or_name: str | os.PathLike) -> DataflowGraph:
    """Load a graph from a file or a built-in name; the result is validated.

    Args:
        path_or_name: a built-in name (see :func:`paper_graph_names`; the graph is named after
            it), or the path (``str`` or ``os.PathLike``) of a ``.txt`` paper file or ``.json``
            file (the graph is named by the file: its stem, or the JSON ``"name"``).

    Raises:
        ValueError: an unknown name that is not an existing file, an unsupported suffix, or a
            malformed file (the message names the file and line/op/edge).
    """
    if isinstance(path_or_name, str) and path_or_name in _PAPER_FILES:
        res = resources.files("doppler_gym").joinpath("data", "paper", _PAPER_FILES[path_or_name])
        text = res.read_text(encoding="utf-8")
        return parse_paper(text, source=f"{path_or_name} ({_PAPER_FILES[path_or_name]})", name=path_or_name)
    if not isinstance(path_or_name, (str, os.PathLike)):
        raise TypeError(
            f"load_graph: expected a path or a built-in graph name, got {type(path_or_name).__name__}"
        )
    path = Path(path_or_name)
    if not path.is_file():
        raise ValueError(
            f"load_graph: {str(path_or_name)!r} is neither a built-in graph name nor an existing "
            f"file; built-in names are {list(_PAPER_FILES)}, and a path must point to an existing "
            f"{' or '.join(SUFFIXES)} file"
        )
    suffix = _suffix(path, "load_graph")
    if suffix == ".txt":
        return read_paper(path)
    return read_json(path)


def save_graph(graph: DataflowGraph, path: str | os.PathLike) -> None:
    """Save ``graph`` to ``path``, in the format its suffix names.

    ``.json`` keeps everything (names, kinds, specs, units). ``.txt`` (paper format) keeps edges,
    integer costs and kinds only, with no declared inputs (K = 0); see
    :func:`doppler_gym.graph.io_paper.write_paper` to declare inputs.

    Raises:
        ValueError: an unsupported suffix, or a graph the paper format cannot hold.
    """
    if not isinstance(graph, DataflowGraph):
        raise TypeError(f"save_graph: expected a DataflowGraph, got {type(graph).__name__}")
    path = Path(path)
    if _suffix(path, "save_graph") == ".txt":
        write_paper(graph, path)
    else:
        write_json(graph, path)


def _suffix(path: Path, caller: str) -> str:
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(
            f"{caller}: {str(path)!r} has suffix {path.suffix or '(none)'!r}; supported suffixes are "
            f"'.txt' (DOPPLER paper format) and '.json' (doppler-gym JSON); rename the file"
        )
    return suffix
