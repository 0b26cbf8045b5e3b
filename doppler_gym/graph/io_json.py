"""Read and write doppler-gym's JSON graph format.

Format (version 1)::

    {
      "format": "doppler-gym-graph",        # required, exactly this string
      "version": 1,                         # required; readers refuse newer versions
      "name": "ffnn",                       # optional; defaults to the file stem
      "units": "physical",                  # required: "physical" (FLOP, bytes) or "paper"
      "ops": [                              # one object per op; op id = position in the list
        {"name": "mm0",                     # optional (all ops or none)
         "flops": 2.0e9,                    # required: compute cost, finite, >= 0 [FLOP or paper units]
         "out_bytes": 4194304,              # required: output size, finite, >= 0 [B or paper units]
         "kind": "einsum",                  # optional (all ops or none)
         "workspace_bytes": 0,              # optional, default 0: scratch memory while the op runs [B]
         "persistent_bytes": 0,             # optional, default 0: memory held the whole run [B]
         "io_bytes": 0,                     # optional, default 0: device-memory traffic of the op [B]
         "precision": "bf16",               # optional (all ops or none): fp32, tf32, bf16, fp16, fp8
         "spec": {...} or null},            # optional: OpSpec.to_dict(); null = this op has none
        ...
      ],
      "edges": [[0, 1], [1, 2], ...]        # required: [producer, consumer] op ids; edge id = position
    }

Rules:

- Costs are JSON numbers (integers or floats; no strings, booleans, NaN or Infinity). Integers
  must be exactly representable in float64 (below ``2**53`` unless a float64 value). The writer
  writes integral costs below ``2**53`` as JSON integers and the rest with ``repr`` precision,
  so a write/read round trip is exact.
- ``"spec"``: if any op has the key, the graph has specs; ops with ``null`` (or without the key)
  have none. If no op has the key the graph has no specs (``specs is None``).
- ``"workspace_bytes"``, ``"persistent_bytes"`` (see :mod:`doppler_gym.sim.memory`) and ``"io_bytes"`` are
  written only on ops where they are not 0, so a graph without memory writes as before.
- Unknown keys are errors (they are usually typos, e.g. ``"outbytes"``).
- The graph must be a valid DAG (ids in range, no self loops, no duplicate edges, no cycle).

Every problem is a ``ValueError`` naming the file and the op index, edge index or key.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from doppler_gym.graph.spec import OpSpec
from doppler_gym.graph.types import UNITS, DataflowGraph
from doppler_gym.graph.validate import validate_graph_arrays

FORMAT = "doppler-gym-graph"
VERSION = 1
_TOP_KEYS = ("format", "version", "name", "units", "ops", "edges")
_OP_KEYS = (
    "name", "flops", "out_bytes", "kind", "spec", "workspace_bytes", "persistent_bytes", "io_bytes", "precision"
)
_MEMORY_KEYS = ("workspace_bytes", "persistent_bytes", "io_bytes")
_MAX_EXACT = 2**53

__all__ = ["FORMAT", "VERSION", "read_json", "write_json", "graph_from_dict", "graph_to_dict"]


def read_json(path: str | os.PathLike, name: str | None = None) -> DataflowGraph:
    """Read a graph from our JSON format (see the module docstring).

    Args:
        path: the ``.json`` file.
        name: overrides the file's ``"name"``; if both are absent the file stem is used.

    Raises:
        ValueError: invalid JSON, a wrong or missing key, a bad value, or an invalid graph; the
            message names the file and the op/edge index or key.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    graph = graph_from_dict(data, source=str(path), default_name=path.stem)
    if name is not None:
        graph = dataclasses.replace(graph, name=name)
    return graph


def write_json(graph: DataflowGraph, path: str | os.PathLike) -> None:
    """Write ``graph`` to ``path`` in our JSON format; :func:`read_json` reads it back identically."""
    text = json.dumps(graph_to_dict(graph), indent=1, allow_nan=False)
    Path(path).write_text(text + "\n", encoding="utf-8")


def graph_to_dict(graph: DataflowGraph) -> dict[str, Any]:
    """The JSON-ready dict of ``graph`` (inverse of :func:`graph_from_dict`)."""
    ops = []
    for i in range(graph.n_ops):
        op: dict[str, Any] = {}
        if graph.names is not None:
            op["name"] = graph.names[i]
        op["flops"] = _number(graph.flops[i])
        op["out_bytes"] = _number(graph.out_bytes[i])
        if graph.kinds is not None:
            op["kind"] = graph.kinds[i]
        if graph.precisions is not None:
            op["precision"] = graph.precisions[i]
        for key in _MEMORY_KEYS:
            if getattr(graph, key)[i] != 0:
                op[key] = _number(getattr(graph, key)[i])
        if graph.specs is not None:
            spec = graph.specs[i]
            op["spec"] = None if spec is None else spec.to_dict()
        ops.append(op)
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": graph.name,
        "units": graph.units,
        "ops": ops,
        "edges": [[int(s), int(d)] for s, d in zip(graph.src, graph.dst)],
    }


def graph_from_dict(data: Any, source: str = "<dict>", default_name: str = "graph") -> DataflowGraph:
    """Build a validated :class:`DataflowGraph` from a dict in our JSON format.

    Args:
        data: the parsed JSON document.
        source: label for error messages (a file name).
        default_name: the graph's name when ``data`` has no ``"name"``.
    """
    if not isinstance(data, dict):
        raise ValueError(f"{source}: the top level must be a JSON object, got {type(data).__name__}")
    _check_keys(data, _TOP_KEYS, source, "top level")
    if data.get("format") != FORMAT:
        raise ValueError(
            f"{source}: key 'format' must be {FORMAT!r}, got {data.get('format')!r}; this does not "
            f"look like a doppler-gym graph file"
        )
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise ValueError(f"{source}: key 'version' must be an integer (1), got {version!r}")
    if version > VERSION:
        raise ValueError(
            f"{source}: version {version} is newer than this reader's version {VERSION}; upgrade "
            f"doppler-gym to read it"
        )
    if version < 1:
        raise ValueError(f"{source}: key 'version' must be 1, got {version}")
    name = data.get("name", default_name)
    if not isinstance(name, str):
        raise ValueError(f"{source}: key 'name' must be a string, got {name!r}")
    units = data.get("units")
    if units not in UNITS:
        raise ValueError(
            f"{source}: key 'units' must be one of {list(UNITS)} ('physical' = FLOP and bytes, "
            f"'paper' = the DOPPLER files' abstract costs), got {units!r}"
        )
    ops = data.get("ops")
    if not isinstance(ops, list):
        raise ValueError(f"{source}: key 'ops' must be a list of op objects, got {_kind(ops)}")
    edges = data.get("edges")
    if not isinstance(edges, list):
        raise ValueError(f"{source}: key 'edges' must be a list of [src, dst] pairs, got {_kind(edges)}")

    n = len(ops)
    flops = np.zeros(n, dtype=np.float64)
    out_bytes = np.zeros(n, dtype=np.float64)
    memory = {key: np.zeros(n, dtype=np.float64) for key in _MEMORY_KEYS}
    names: list[str | None] = []
    kinds: list[str | None] = []
    precisions: list[str | None] = []
    specs: list[OpSpec | None] = []
    has_spec_key = False
    for i, op in enumerate(ops):
        where = f"{source}: ops[{i}]"
        if not isinstance(op, dict):
            raise ValueError(f"{where} must be an object with keys 'flops', 'out_bytes', ..., got {_kind(op)}")
        _check_keys(op, _OP_KEYS, source, f"ops[{i}]")
        flops[i] = _cost(op, "flops", where)
        out_bytes[i] = _cost(op, "out_bytes", where)
        for key, column in memory.items():
            if key in op:
                column[i] = _cost(op, key, where)
        names.append(_optional_str(op, "name", where))
        kinds.append(_optional_str(op, "kind", where))
        precisions.append(_optional_str(op, "precision", where))
        if "spec" in op:
            has_spec_key = True
            spec = op["spec"]
            if spec is None:
                specs.append(None)
            elif isinstance(spec, dict):
                try:
                    specs.append(OpSpec.from_dict(spec, where=f"{where}.spec"))
                except (TypeError, ValueError) as exc:
                    raise ValueError(f"{where}.spec is not a valid op spec: {exc}") from None
            else:
                raise ValueError(f"{where}.spec must be an OpSpec object (OpSpec.to_dict()) or null")
        else:
            specs.append(None)
    names_t = _all_or_none(names, "name", source)
    kinds_t = _all_or_none(kinds, "kind", source)
    precisions_t = _all_or_none(precisions, "precision", source)

    src = np.zeros(len(edges), dtype=np.int64)
    dst = np.zeros(len(edges), dtype=np.int64)
    for k, edge in enumerate(edges):
        if (
            not isinstance(edge, list)
            or len(edge) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) for v in edge)
        ):
            raise ValueError(
                f"{source}: edges[{k}] = {edge!r} must be a pair [src, dst] of integer op ids"
            )
        for label, v in zip(("src", "dst"), edge):
            if not 0 <= v < n:
                raise ValueError(
                    f"{source}: edges[{k}] {label} {v} is outside the op range 0..{n - 1}; op ids are "
                    f"positions in 'ops'"
                )
        src[k], dst[k] = edge
    src_arr, dst_arr, _, _ = validate_graph_arrays(src, dst, flops, out_bytes, where=f"{source} ('edges')")
    return DataflowGraph(
        src=src_arr,
        dst=dst_arr,
        flops=flops,
        out_bytes=out_bytes,
        names=names_t,
        kinds=kinds_t,
        specs=tuple(specs) if has_spec_key else None,
        name=name,
        units=units,
        workspace_bytes=memory["workspace_bytes"],
        persistent_bytes=memory["persistent_bytes"],
        io_bytes=memory["io_bytes"],
        precisions=precisions_t,
    )


# ---------------------------------------------------------------------- helpers
def _constant(token: str) -> float:
    """json's hook for NaN/Infinity: keep the value so the cost check reports where it is."""
    return float(token)


def _number(value: float) -> int | float:
    """A cost as a JSON number: integral values below 2**53 as ints, else the float (exact repr)."""
    v = float(value)
    if v.is_integer() and abs(v) < _MAX_EXACT:
        return int(v)
    return v


def _cost(op: dict, key: str, where: str) -> float:
    if key not in op:
        raise ValueError(f"{where}: missing key {key!r}; every op needs 'flops' and 'out_bytes'")
    v = op[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{where}.{key} = {v!r} must be a JSON number")
    if isinstance(v, int) and float(v) != v:
        raise ValueError(
            f"{where}.{key} = {v} is an integer that float64 cannot hold exactly (>= 2**53); "
            f"write it as a float, e.g. {float(v):.6e}"
        )
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{where}.{key} = {v!r} must be a finite number >= 0")
    return float(v)


def _optional_str(op: dict, key: str, where: str) -> str | None:
    if key not in op:
        return None
    v = op[key]
    if not isinstance(v, str):
        raise ValueError(f"{where}.{key} = {v!r} must be a string")
    return v


def _all_or_none(values: list[str | None], key: str, source: str) -> tuple[str, ...] | None:
    present = [v is not None for v in values]
    if not any(present):
        return None
    if not all(present):
        i = present.index(False)
        j = present.index(True)
        raise ValueError(
            f"{source}: ops[{i}] has no {key!r} but ops[{j}] has one; give {key!r} on every op or on none"
        )
    return tuple(values)  # type: ignore[arg-type]


def _check_keys(obj: dict, allowed: tuple[str, ...], source: str, where: str) -> None:
    unknown = [k for k in obj if k not in allowed]
    if unknown:
        raise ValueError(
            f"{source}: {where} has unknown key {unknown[0]!r}; allowed keys are {list(allowed)}"
        )


def _kind(value: Any) -> str:
    return "null or missing" if value is None else type(value).__name__
