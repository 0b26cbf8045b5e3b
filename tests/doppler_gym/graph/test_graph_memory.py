"""The graph's memory fields (workspace_bytes, persistent_bytes): validation and the JSON format."""

from __future__ import annotations

import json

import numpy as np
import pytest

from doppler_gym.graph.io_json import graph_from_dict, graph_to_dict, read_json, write_json
from doppler_gym.graph.types import DataflowGraph


def small(**memory) -> DataflowGraph:
    return DataflowGraph(src=[0, 1], dst=[1, 2], flops=[1, 2, 3], out_bytes=[4, 5, 6], name="small", **memory)


def test_default_is_zeros_and_read_only():
    g = small()
    np.testing.assert_array_equal(g.workspace_bytes, [0, 0, 0])
    np.testing.assert_array_equal(g.persistent_bytes, [0, 0, 0])
    assert not g.has_memory
    with pytest.raises(ValueError):
        g.persistent_bytes[0] = 1.0
    assert small(persistent_bytes=[0, 1, 0]).has_memory


@pytest.mark.parametrize("bad, match", [([1, 2], "has 2 entries but the graph has 3 ops"),
                                        ([1, -2, 0], r"persistent_bytes\[1\] = -2.0"),
                                        ([1, np.nan, 0], "not a finite non-negative"),
                                        ([[1, 2, 3]], "one-dimensional")])
def test_bad_sizes_are_clear_errors(bad, match):
    with pytest.raises(ValueError, match=match):
        small(persistent_bytes=bad)


def test_json_round_trip_keeps_memory(tmp_path):
    g = small(workspace_bytes=[0, 7, 0], persistent_bytes=[2.5, 0, 1e12])
    path = tmp_path / "g.json"
    write_json(g, path)
    ops = json.loads(path.read_text())["ops"]
    assert [("workspace_bytes" in op, "persistent_bytes" in op) for op in ops] == [(False, True), (True, False),
                                                                                   (False, True)]
    back = read_json(path)
    np.testing.assert_array_equal(back.workspace_bytes, g.workspace_bytes)
    np.testing.assert_array_equal(back.persistent_bytes, g.persistent_bytes)


def test_json_without_memory_writes_as_before():
    ops = graph_to_dict(small())["ops"]
    assert all(set(op) == {"flops", "out_bytes"} for op in ops)


def test_json_bad_memory_value_names_the_op():
    data = graph_to_dict(small())
    data["ops"][1]["workspace_bytes"] = -1
    with pytest.raises(ValueError, match=r"ops\[1\]\.workspace_bytes = -1 must be a finite number >= 0"):
        graph_from_dict(data)
