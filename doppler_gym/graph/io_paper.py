"""Read and write the DOPPLER paper's compute-graph ``.txt`` format.

The format (authors' ``utils._read_compute_graph``; see ``doppler_gym/data/paper/README.md``)::

    line 1      T                      total node count, INCLUDING the K graph-input tensors
    line 2      i0, i1, ..., i{K-1}    ids of the input tensors; only their count K matters
    line 3      s0, s1, ..., s{E-1}    edge sources      (edge k is s_k -> d_k)
    line 4      d0, d1, ..., d{E-1}    edge destinations
    line 5..    comp,comm[,optype]     one line per op, n = T - K lines, op ids 0..n-1

The integers of lines 2-4 are found with the regex ``\\d+`` (any separators: ``"16,6, 16"`` is two
ids), so every token between separators must be a plain non-negative integer; anything else is
reported as junk. ``optype`` is the trailing word ``[a-zA-Z_]+$`` of a cost line (only in the
``gdp_`` files); when present it must be present on every cost line. Trailing blank lines after
the cost lines are ignored.

Costs stay exact: ``comp`` and ``comm`` are integers below ``2**53``, held exactly by float64.
The result is a :class:`DataflowGraph` with ``units="paper"``, ``flops = comp``,
``out_bytes = comm``, ``kinds = optypes`` (or ``None``) and ``name`` = the file stem.

Every problem is a ``ValueError`` naming the file and line.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.graph.validate import validate_graph_arrays

MAX_EXACT = 2**53  # integers below this are exact in float64
_SEP = re.compile(r"[,\s]+")
_INT = re.compile(r"\d+")
_OPTYPE = re.compile(r"[a-zA-Z_]+")
_HEADER = ("node count T", "input ids", "edge sources", "edge destinations")

__all__ = ["read_paper", "parse_paper", "write_paper", "format_paper"]


def read_paper(path: str | os.PathLike, name: str | None = None) -> DataflowGraph:
    """Read a DOPPLER paper ``.txt`` graph file.

    Args:
        path: the file.
        name: the graph's name; defaults to the file stem.

    Returns:
        A validated :class:`DataflowGraph` with ``units="paper"``.

    Raises:
        ValueError: a malformed file (missing lines, junk, wrong cost-line count, K > T, costs
            too large for float64) or an invalid graph (edge out of range, self loop, duplicate
            edge, cycle); the message names the file and line.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    return parse_paper(text, source=str(path), name=path.stem if name is None else name)


def parse_paper(text: str, source: str = "<text>", name: str = "graph") -> DataflowGraph:
    """Parse the text of a paper ``.txt`` file; ``source`` labels error messages.

    See :func:`read_paper` for the result and the errors.
    """
    lines = text.splitlines()
    while len(lines) > 4 and not lines[-1].strip():
        lines.pop()
    if len(lines) < 4:
        missing = ", ".join(f"line {i + 1} ({_HEADER[i]})" for i in range(len(lines), 4))
        raise ValueError(
            f"{source}: the file has {len(lines)} lines and lacks {missing}; a paper graph file "
            f"needs 4 header lines (T; input ids; edge sources; edge destinations), then one "
            f"'comp,comm' line per op"
        )
    total = _ints(lines[0], source, 1)
    if len(total) != 1:
        raise ValueError(
            f"{source}, line 1: expected one integer (the total node count T incl. inputs), "
            f"found {len(total)} in {lines[0]!r}"
        )
    t_count = total[0]
    k_inputs = len(_ints(lines[1], source, 2))
    if k_inputs > t_count:
        raise ValueError(
            f"{source}, line 2: {k_inputs} input ids but line 1 gives only T = {t_count} nodes in "
            f"all; T counts the ops plus the inputs, so it must be >= the number of input ids"
        )
    n_ops = t_count - k_inputs
    src = _ints(lines[2], source, 3)
    dst = _ints(lines[3], source, 4)
    if len(src) != len(dst):
        raise ValueError(
            f"{source}, lines 3-4: {len(src)} edge sources (line 3) but {len(dst)} edge "
            f"destinations (line 4); edge k is sources[k] -> destinations[k], so both lines need "
            f"the same count"
        )
    cost_lines = lines[4:]
    if len(cost_lines) != n_ops:
        raise ValueError(
            f"{source}: expected {n_ops} cost lines (T = {t_count} minus K = {k_inputs} inputs) "
            f"from line 5 on, found {len(cost_lines)}; give one 'comp,comm[,optype]' line per op "
            f"or fix T / the input ids"
        )
    comp = np.zeros(n_ops, dtype=np.float64)
    comm = np.zeros(n_ops, dtype=np.float64)
    kinds: list[str | None] = []
    for i, line in enumerate(cost_lines):
        comp[i], comm[i], kind = _cost_line(line, source, i + 5)
        kinds.append(kind)
    has_kind = [k is not None for k in kinds]
    if any(has_kind) and not all(has_kind):
        first_without = has_kind.index(False)
        first_with = has_kind.index(True)
        raise ValueError(
            f"{source}, line {first_without + 5}: no op type, but line {first_with + 5} has one; "
            f"give an op type on every cost line or on none"
        )
    for label, ids, line_no in (("source", src, 3), ("destination", dst, 4)):
        for k, v in enumerate(ids):
            if v >= MAX_EXACT:
                raise ValueError(f"{source}, line {line_no}: edge {k} {label} {v} is far too large")
    src_arr, dst_arr, _, _ = validate_graph_arrays(
        np.array(src, dtype=np.int64),
        np.array(dst, dtype=np.int64),
        comp,
        comm,
        where=f"{source}, lines 3-4 (edges)",
    )
    return DataflowGraph(
        src=src_arr,
        dst=dst_arr,
        flops=comp,
        out_bytes=comm,
        kinds=tuple(kinds) if all(has_kind) and n_ops else None,
        name=name,
        units="paper",
    )


def write_paper(graph: DataflowGraph, path: str | os.PathLike, n_inputs: int = 0) -> None:
    """Write ``graph`` as a paper ``.txt`` file that :func:`read_paper` reads back identically.

    The format stores only edges, integer costs and op kinds: op names, specs and ``units`` are
    not written (the file always reads back with ``units="paper"``, the name becomes the file stem).

    Args:
        graph: the graph; ``flops`` and ``out_bytes`` must be integers below ``2**53`` and kinds,
            if any, must match ``[a-zA-Z_]+``.
        path: the output file.
        n_inputs: K, the number of graph-input tensors to declare. Line 2 then lists K placeholder
            ids ``0..K-1`` (the file format keeps only their count) and line 1 is ``T = n + K``.
            With K = 0 line 2 is empty.

    Raises:
        ValueError: a cost that is not an exact integer, a kind the format cannot hold, or a
            negative ``n_inputs``.
    """
    Path(path).write_text(format_paper(graph, n_inputs=n_inputs), encoding="utf-8")


def format_paper(graph: DataflowGraph, n_inputs: int = 0) -> str:
    """The text :func:`write_paper` writes (one trailing newline)."""
    where = f"graph {graph.name!r}"
    if isinstance(n_inputs, bool) or not isinstance(n_inputs, (int, np.integer)) or n_inputs < 0:
        raise ValueError(f"{where}: n_inputs must be a non-negative integer, got {n_inputs!r}")
    for label, arr in (("flops", graph.flops), ("out_bytes", graph.out_bytes)):
        bad = np.flatnonzero((arr != np.floor(arr)) | (arr >= MAX_EXACT))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"{where}: {label}[{i}] = {arr[i]!r} is not an integer below 2**53; the paper "
                f"format holds exact integer costs only (round or rescale the costs, or save as .json)"
            )
    if graph.kinds is not None:
        for i, kind in enumerate(graph.kinds):
            if not isinstance(kind, str) or not _OPTYPE.fullmatch(kind):
                raise ValueError(
                    f"{where}: kinds[{i}] = {kind!r} cannot be written as a paper op type, which "
                    f"must match [a-zA-Z_]+ (letters and underscores); rename it or save as .json"
                )
    k = int(n_inputs)
    out = [
        str(graph.n_ops + k),
        ", ".join(str(i) for i in range(k)),
        ", ".join(str(int(v)) for v in graph.src),
        ", ".join(str(int(v)) for v in graph.dst),
    ]
    for i in range(graph.n_ops):
        line = f"{int(graph.flops[i])},{int(graph.out_bytes[i])}"
        if graph.kinds is not None:
            line += f",{graph.kinds[i]}"
        out.append(line)
    return "\n".join(out) + "\n"


def _ints(line: str, source: str, line_no: int) -> list[int]:
    """The non-negative integers of a header line; any other token is an error."""
    tokens = [t for t in _SEP.split(line.strip()) if t]
    for t in tokens:
        if not _INT.fullmatch(t):
            raise ValueError(
                f"{source}, line {line_no} ({_HEADER[line_no - 1]}): {t!r} is not a non-negative "
                f"integer; the line must hold only integers separated by commas or spaces"
            )
    return [int(t) for t in tokens]


def _cost_line(line: str, source: str, line_no: int) -> tuple[float, float, str | None]:
    """Parse ``comp,comm[,optype]``; returns exact float costs and the op type (or ``None``)."""
    tokens = [t for t in _SEP.split(line.strip()) if t]
    kind = None
    if tokens and _OPTYPE.fullmatch(tokens[-1]):
        kind = tokens.pop()
    where = f"{source}, line {line_no} (op {line_no - 5})"
    if len(tokens) != 2:
        raise ValueError(
            f"{where}: expected 'comp,comm' or 'comp,comm,optype', got {line!r}; give two "
            f"non-negative integers (compute cost, communication cost) and optionally an op type"
        )
    values = []
    for label, t in zip(("comp", "comm"), tokens):
        if not _INT.fullmatch(t):
            if re.fullmatch(r"-\d+(\.\d*)?", t):
                reason = "negative; costs must be >= 0"
            else:
                reason = "not a non-negative integer"
            raise ValueError(f"{where}: {label} {t!r} is {reason} (line {line!r})")
        v = int(t)
        if v >= MAX_EXACT:
            raise ValueError(
                f"{where}: {label} {v} is not below 2**53 = {MAX_EXACT}, so float64 cannot hold it "
                f"exactly; rescale the file's costs"
            )
        values.append(float(v))
    return values[0], values[1], kind
