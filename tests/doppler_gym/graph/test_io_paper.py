"""DOPPLER paper .txt reader/writer: error cases, edge cases and round trips."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from doppler_gym.graph.io_paper import format_paper, parse_paper, read_paper, write_paper
from doppler_gym.graph.types import DataflowGraph


def _write(tmp_path: Path, text: str, name: str = "g.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# 3 ops, 2 inputs: 0 -> 1 -> 2
GOOD = "5\n0, 1, \n0, 1, \n1, 2, \n10,40\n20,80\n30,120\n"


def test_reads_a_small_file(tmp_path):
    g = read_paper(_write(tmp_path, GOOD, "small.txt"))
    assert g.name == "small" and g.units == "paper" and g.kinds is None
    assert g.src.tolist() == [0, 1] and g.dst.tolist() == [1, 2]
    assert g.flops.tolist() == [10.0, 20.0, 30.0]
    assert g.out_bytes.tolist() == [40.0, 80.0, 120.0]
    assert g.flops.dtype == np.float64 and g.src.dtype == np.int32


def test_separators_do_not_matter(tmp_path):
    # The authors' regex \d+ reads "16,6" as two ids; no space needed.
    g = read_paper(_write(tmp_path, "3\n\n0,1,0\n1,2, 2\n1,4\n2,8\n3 , 12\n"))
    assert g.src.tolist() == [0, 1, 0] and g.dst.tolist() == [1, 2, 2]


def test_op_types_and_trailing_blank_lines(tmp_path):
    g = read_paper(_write(tmp_path, "2\n\n0\n1\n1,4,einsummable\n2,8,formation\n\n\n"))
    assert g.kinds == ("einsummable", "formation")


def test_no_inputs_empty_line_2(tmp_path):
    g = read_paper(_write(tmp_path, "2\n\n0\n1\n1,4\n2,8"))  # no trailing newline either
    assert g.n_ops == 2 and g.n_edges == 1


def test_exact_large_integers(tmp_path):
    big = 2**53 - 1
    g = read_paper(_write(tmp_path, f"1\n\n\n\n{big},{big - 2}\n"))
    assert int(g.flops[0]) == big and int(g.out_bytes[0]) == big - 2


@pytest.mark.parametrize(
    "text, needles",
    [
        ("3\n\n0, 1\n1, 5\n1,1\n1,1\n1,1\n", ["edge 1", "destination 5", "0..2"]),
        ("3\n\n0, 1\n1, 1\n1,1\n1,1\n1,1\n", ["self loop", "op 1"]),
        ("3\n\n0, 0\n1, 1\n1,1\n1,1\n1,1\n", ["edges 0 and 1", "op 0 -> op 1"]),
        ("3\n\n0\n1\n1,1\n-5,20\n1,1\n", ["line 6", "op 1", "comp", "negative"]),
        ("3\n\n0\n1\n1,1\n5,-20\n1,1\n", ["line 6", "comm", "negative"]),
        ("3\n\n0\n1\n1,1\n1.5,20\n1,1\n", ["line 6", "'1.5'", "integer"]),
        ("3\n\n0\n1\n1,1\n1,1\n", ["expected 3 cost lines", "found 2"]),
        ("3\n\n0\n1\n1,1\n1,1\n1,1\n1,1\n", ["expected 3 cost lines", "found 4"]),
        ("3\n", ["line 2", "line 3", "line 4", "lacks"]),
        ("3\n\n0\n", ["lacks line 4 (edge destinations)"]),
        ("", ["line 1"]),
        ("1\n0, 1\n\n\n", ["line 2", "2 input ids", "T = 1"]),
        ("3\n\n0, 1\n1\n1,1\n1,1\n1,1\n", ["2 edge sources", "1 edge destinations"]),
        ("3\n\n0, x, 1\n1, 2, 2\n1,1\n1,1\n1,1\n", ["line 3", "'x'"]),
        ("3 4\n\n\n\n1,1\n1,1\n1,1\n", ["line 1", "one integer"]),
        ("abc\n\n\n\n", ["line 1", "'abc'"]),
        ("2\n\n0\n1\n1,1\n1,1,2\n", ["line 6", "comp,comm"]),
        ("2\n\n0\n1\n1,1,einsummable\n1,1\n", ["line 6", "no op type", "line 5"]),
        (f"1\n\n\n\n{2**53},1\n", ["line 5", "2**53"]),
    ],
)
def test_errors_name_file_and_line(tmp_path, text, needles):
    path = _write(tmp_path, text, "bad.txt")
    with pytest.raises(ValueError) as info:
        read_paper(path)
    msg = str(info.value)
    assert "bad.txt" in msg, msg
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"


def test_cycle_error_lists_the_cycle_ops(tmp_path):
    # 0 -> 1 -> 2 -> 3 -> 1: the cycle is 1, 2, 3; op 0 only feeds it.
    path = _write(tmp_path, "4\n\n0, 1, 2, 3\n1, 2, 3, 1\n1,1\n1,1\n1,1\n1,1\n", "cyc.txt")
    with pytest.raises(ValueError, match=r"cyc\.txt, lines 3-4.*cycle") as info:
        read_paper(path)
    ops = re.search(r"through ops ([\d >-]+);", str(info.value)).group(1).split(" -> ")
    assert ops[0] == ops[-1] and sorted(set(ops)) == ["1", "2", "3"]


def _same(a: DataflowGraph, b: DataflowGraph) -> None:
    assert a.n_ops == b.n_ops and a.n_edges == b.n_edges
    np.testing.assert_array_equal(a.src, b.src)
    np.testing.assert_array_equal(a.dst, b.dst)
    np.testing.assert_array_equal(a.flops, b.flops)
    np.testing.assert_array_equal(a.out_bytes, b.out_bytes)
    assert a.kinds == b.kinds and a.units == b.units


@pytest.mark.parametrize("n_inputs", [0, 3])
def test_round_trip(tmp_path, n_inputs):
    g = DataflowGraph(
        src=[0, 0, 2, 1],
        dst=[1, 2, 3, 3],
        flops=[2**52 + 1, 0, 7, 1e12],
        out_bytes=[4, 8, 0, 4e12],
        kinds=("einsummable", "fill", "select", "formation"),
        name="x",
        units="paper",
    )
    path = tmp_path / "rt.txt"
    write_paper(g, path, n_inputs=n_inputs)
    lines = path.read_text().splitlines()
    assert lines[0] == str(4 + n_inputs)
    assert lines[1] == ("" if n_inputs == 0 else "0, 1, 2")
    back = read_paper(path)
    _same(g, back)
    assert back.name == "rt"


def test_round_trip_empty_graph(tmp_path):
    g = DataflowGraph(src=[], dst=[], flops=[], out_bytes=[], units="paper")
    path = tmp_path / "empty.txt"
    write_paper(g, path)
    _same(g, read_paper(path))


def test_write_refuses_what_the_format_cannot_hold():
    frac = DataflowGraph(src=[], dst=[], flops=[1.5], out_bytes=[1.0])
    with pytest.raises(ValueError, match=r"flops\[0\].*integer"):
        format_paper(frac)
    big = DataflowGraph(src=[], dst=[], flops=[2.0**60], out_bytes=[1.0])
    with pytest.raises(ValueError, match="2\\*\\*53"):
        format_paper(big)
    bad_kind = DataflowGraph(src=[], dst=[], flops=[1.0], out_bytes=[1.0], kinds=("mat mul2",))
    with pytest.raises(ValueError, match=r"kinds\[0\]"):
        format_paper(bad_kind)
    with pytest.raises(ValueError, match="n_inputs"):
        format_paper(frac, n_inputs=-1)


def test_parse_paper_labels_source():
    with pytest.raises(ValueError, match="<mine>"):
        parse_paper("x", source="<mine>")
