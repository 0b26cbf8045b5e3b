"""Collective ops in graphs: the kind constant, the index helper and the JSON round trip."""

from __future__ import annotations

import numpy as np

import doppler_gym as dg
from doppler_gym.graph.types import DataflowGraph


def _graph(kinds: tuple[str, ...] | None) -> DataflowGraph:
    return DataflowGraph(src=np.array([0, 1, 2]), dst=np.array([2, 2, 3]), flops=np.array([1e9, 1e9, 0.0, 1e9]),
                         out_bytes=np.array([4e6, 4e6, 4e6, 0.0]), kinds=kinds, name="tp")


def test_collective_ops():
    assert dg.COLLECTIVE_KINDS == ("allgather", "reduce-scatter", "allreduce", "alltoall", "broadcast")
    g = _graph(("einsum", "einsum", "allreduce", "broadcast"))
    assert dg.collective_ops(g).tolist() == [2, 3]
    assert dg.collective_ops(_graph(None)).shape == (0,)
    assert dg.collective_ops(_graph(("einsum", "AllReduce", "formation", "x"))).shape == (0,)  # exact spelling


def test_json_round_trip_keeps_collective_kinds(tmp_path):
    g = _graph(("einsum", "einsum", "allreduce", "relu"))
    path = tmp_path / "tp.json"
    dg.save_graph(g, path)
    back = dg.load_graph(path)
    assert back.kinds == g.kinds
    assert dg.collective_ops(back).tolist() == [2]
    np.testing.assert_array_equal(back.out_bytes, g.out_bytes)
