"""doppler-gym JSON reader/writer: error cases and exact round trips."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from doppler_gym.graph.io_json import graph_from_dict, graph_to_dict, read_json, write_json
from doppler_gym.graph.spec import OpSpec
from doppler_gym.graph.types import DataflowGraph


def _doc() -> dict:
    return {
        "format": "doppler-gym-graph",
        "version": 1,
        "name": "tiny",
        "units": "physical",
        "ops": [
            {"name": "a", "flops": 1.0, "out_bytes": 8},
            {"name": "b", "flops": 2, "out_bytes": 16},
            {"name": "c", "flops": 3.5, "out_bytes": 0},
        ],
        "edges": [[0, 1], [1, 2]],
    }


def _write(tmp_path: Path, doc, name: str = "g.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def _same(a: DataflowGraph, b: DataflowGraph) -> None:
    np.testing.assert_array_equal(a.src, b.src)
    np.testing.assert_array_equal(a.dst, b.dst)
    np.testing.assert_array_equal(a.flops, b.flops)
    np.testing.assert_array_equal(a.out_bytes, b.out_bytes)
    assert (a.names, a.kinds, a.specs, a.name, a.units) == (b.names, b.kinds, b.specs, b.name, b.units)


def test_reads_a_small_file(tmp_path):
    g = read_json(_write(tmp_path, _doc()))
    assert g.name == "tiny" and g.units == "physical"
    assert g.names == ("a", "b", "c") and g.kinds is None and g.specs is None
    assert g.flops.tolist() == [1.0, 2.0, 3.5]
    assert g.src.tolist() == [0, 1] and g.dst.tolist() == [1, 2]


def test_name_defaults_to_stem_and_names_are_optional(tmp_path):
    doc = _doc()
    del doc["name"]
    for op in doc["ops"]:
        del op["name"]
    g = read_json(_write(tmp_path, doc, "stem.json"))
    assert g.name == "stem" and g.names is None


def _set(path: str, value):
    def edit(doc):
        *keys, last = path.split("/")
        obj = doc
        for k in keys:
            obj = obj[int(k)] if isinstance(obj, list) else obj[k]
        if value is _DELETE:
            del obj[last]
        else:
            obj[int(last) if isinstance(obj, list) else last] = value
        return doc

    return edit


_DELETE = object()


@pytest.mark.parametrize(
    "edit, needles",
    [
        (_set("ops/1/flops", float("nan")), ["ops[1].flops", "nan", "finite"]),
        (_set("ops/0/out_bytes", float("inf")), ["ops[0].out_bytes", "finite"]),
        (_set("ops/2/flops", -1), ["ops[2].flops", ">= 0"]),
        (_set("ops/2/flops", "3"), ["ops[2].flops", "JSON number"]),
        (_set("ops/2/flops", True), ["ops[2].flops", "JSON number"]),
        (_set("ops/2/flops", 2**53 + 1), ["ops[2].flops", "2**53"]),
        (_set("ops/1/out_bytes", _DELETE), ["ops[1]", "missing key 'out_bytes'"]),
        (_set("ops/1/outbytes", 3), ["ops[1]", "unknown key 'outbytes'", "allowed keys"]),
        (_set("ops/1/name", _DELETE), ["ops[1] has no 'name'", "ops[0] has one"]),
        (_set("ops/1/kind", "einsum"), ["ops[0] has no 'kind'"]),
        (_set("ops/1/name", 7), ["ops[1].name", "string"]),
        (_set("ops/1", [1, 2]), ["ops[1]", "object"]),
        (_set("ops/1/spec", {"fn": "einsum"}), ["ops[1].spec", "operand_shapes"]),
        (_set("ops/1/spec", "mm"), ["ops[1].spec", "OpSpec"]),
        (_set("edges/1", [1, 5]), ["edges[1]", "dst 5", "0..2"]),
        (_set("edges/1", [-1, 2]), ["edges[1]", "src -1"]),
        (_set("edges/1", [1, 2, 3]), ["edges[1]", "pair"]),
        (_set("edges/1", [1.0, 2]), ["edges[1]", "integer"]),
        (_set("edges/1", [1, 1]), ["edge 1", "self loop"]),
        (_set("edges/1", [0, 1]), ["edges 0 and 1", "op 0 -> op 1"]),
        (_set("edges", [[0, 1], [1, 2], [2, 0]]), ["'edges'", "cycle through ops"]),
        (_set("edges", {"0": 1}), ["'edges'", "list"]),
        (_set("ops", _DELETE), ["'ops'", "list"]),
        (_set("format", "other"), ["'format'", "doppler-gym-graph"]),
        (_set("version", 2), ["version 2", "upgrade"]),
        (_set("version", "1"), ["'version'", "integer"]),
        (_set("units", "si"), ["'units'", "physical", "paper"]),
        (_set("name", 3), ["'name'", "string"]),
        (_set("extra", 3), ["top level", "unknown key 'extra'"]),
    ],
)
def test_errors_name_file_and_place(tmp_path, edit, needles):
    path = _write(tmp_path, json.dumps(edit(copy.deepcopy(_doc()))), "bad.json")
    with pytest.raises(ValueError) as info:
        read_json(path)
    msg = str(info.value)
    assert "bad.json" in msg, msg
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"


def test_invalid_json_and_wrong_top_level(tmp_path):
    with pytest.raises(ValueError, match=r"bad\.json: not valid JSON.*line 1"):
        read_json(_write(tmp_path, "{nope", "bad.json"))
    with pytest.raises(ValueError, match="top level must be a JSON object"):
        read_json(_write(tmp_path, "[1, 2]", "bad.json"))


def _rich_graph() -> DataflowGraph:
    mm = OpSpec("einsum", ((4, 8), (8, 2)), (-1, -1), (4, 2), equation="ij,jk->ik")
    sm = OpSpec("softmax", ((4, 2),), (0,), (4, 2), dtype="float16")
    return DataflowGraph(
        src=[0, 1, 0],
        dst=[1, 2, 2],
        flops=[128.0, 0.1, 1e300],
        out_bytes=[32.0, 2.0**53 + 2, 0.0],
        names=("mm", "soft", "sink"),
        kinds=("einsum", "softmax", "identity"),
        specs=(mm, sm, None),
        name="rich",
        units="physical",
    )


def test_round_trip_with_specs_and_kinds(tmp_path):
    g = _rich_graph()
    path = tmp_path / "rich.json"
    write_json(g, path)
    _same(g, read_json(path))
    doc = json.loads(path.read_text())
    assert doc["ops"][0]["flops"] == 128 and isinstance(doc["ops"][0]["flops"], int)
    assert doc["ops"][2]["spec"] is None


@pytest.mark.parametrize("specs", [None, (None, None)])
def test_round_trip_keeps_specs_none_vs_all_none(specs):
    g = DataflowGraph(src=[0], dst=[1], flops=[1.0, 2.0], out_bytes=[3.0, 4.0], specs=specs, units="paper")
    back = graph_from_dict(json.loads(json.dumps(graph_to_dict(g))))
    _same(g, back)


def test_read_json_name_override(tmp_path):
    path = tmp_path / "rich.json"
    write_json(_rich_graph(), path)
    assert read_json(path, name="other").name == "other"
