"""load_graph / save_graph: built-in paper graphs, suffix dispatch, round trips."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doppler_gym.graph.io import load_graph, paper_graph_names, save_graph
from doppler_gym.graph.io_json import graph_from_dict, graph_to_dict
from doppler_gym.graph.io_paper import format_paper, parse_paper
from doppler_gym.graph.types import DataflowGraph

# ops / edges from the table in the paper-graphs README
COUNTS = {
    "paper/chainmm": (76, 80),
    "paper/ffnn": (180, 208),
    "paper/llama-block": (182, 234),
    "paper/llama-layer": (229, 284),
    "paper/llama-block-8gpu": (302, 398),
    "paper/llama-layer-8gpu": (367, 470),
    "paper/gdp/chainmm": (76, 80),
    "paper/gdp/ffnn": (180, 208),
    "paper/gdp/llama-block": (182, 234),
    "paper/gdp/llama-layer": (229, 284),
}


def test_paper_graph_names():
    assert set(paper_graph_names()) == set(COUNTS)


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_builtin_graphs_load(name):
    g = load_graph(name)
    assert (g.n_ops, g.n_edges) == COUNTS[name]
    assert g.name == name and g.units == "paper"
    np.testing.assert_array_equal(g.out_bytes, 4 * g.flops)  # comm == 4 x comp in every file
    assert np.all(g.src < g.dst)  # ids are a topological order in every file
    assert (g.kinds is not None) == name.startswith("paper/gdp/")


def test_gdp_op_type_counts():
    assert Counter(load_graph("paper/gdp/chainmm").kinds) == {"einsummable": 56, "formation": 20}
    assert Counter(load_graph("paper/gdp/llama-layer").kinds) == {
        "einsummable": 166,
        "formation": 46,
        "complexer": 12,
        "fill": 2,
        "select": 2,
        "squeezer": 1,
    }


@pytest.mark.parametrize(
    "plain, edge, expected_plain, expected_gdp",
    [
        ("chainmm", 1, (1, 6), (1, 16)),
        ("llama-block", 1, (0, 7), (0, 18)),
        ("llama-layer", 1, (0, 38), (0, 97)),
    ],
)
def test_odd_edge_is_kept(plain, edge, expected_plain, expected_gdp):
    a, b = load_graph(f"paper/{plain}"), load_graph(f"paper/gdp/{plain}")
    assert (int(a.src[edge]), int(a.dst[edge])) == expected_plain
    assert (int(b.src[edge]), int(b.dst[edge])) == expected_gdp
    differ = np.flatnonzero((a.src != b.src) | (a.dst != b.dst))
    assert differ.tolist() == [edge]
    np.testing.assert_array_equal(a.flops, b.flops)


def test_ffnn_plain_and_gdp_edges_agree():
    a, b = load_graph("paper/ffnn"), load_graph("paper/gdp/ffnn")
    np.testing.assert_array_equal(a.dst, b.dst)
    assert (int(a.src[1]), int(a.dst[1])) == (1, 17)


def _same(a: DataflowGraph, b: DataflowGraph) -> None:
    np.testing.assert_array_equal(a.src, b.src)
    np.testing.assert_array_equal(a.dst, b.dst)
    np.testing.assert_array_equal(a.flops, b.flops)
    np.testing.assert_array_equal(a.out_bytes, b.out_bytes)
    assert (a.names, a.kinds, a.specs, a.units) == (b.names, b.kinds, b.specs, b.units)


@pytest.mark.parametrize("name", sorted(COUNTS))
@pytest.mark.parametrize("suffix", [".txt", ".json"])
def test_save_load_round_trip(tmp_path, name, suffix):
    g = load_graph(name)
    path = tmp_path / f"copy{suffix}"
    save_graph(g, path)
    back = load_graph(path)  # a pathlib.Path
    _same(g, back)
    assert back.name == ("copy" if suffix == ".txt" else name)
    assert load_graph(str(path)).n_ops == g.n_ops  # and a str path


def test_load_path_to_shipped_file_matches_builtin():
    from importlib import resources

    with resources.as_file(resources.files("doppler_gym") / "data" / "paper" / "ffnn_192nodes.txt") as p:
        g = load_graph(Path(p))
    assert g.name == "ffnn_192nodes"
    _same(g, load_graph("paper/ffnn"))


def test_unknown_name_lists_builtins(tmp_path):
    with pytest.raises(ValueError) as info:
        load_graph("paper/nope")
    msg = str(info.value)
    assert "'paper/nope'" in msg and "paper/ffnn" in msg and "paper/gdp/llama-layer" in msg
    assert "existing" in msg
    with pytest.raises(ValueError, match="neither a built-in graph name nor an existing file"):
        load_graph(tmp_path / "missing.json")


def test_bad_suffix(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("1,2\n")
    with pytest.raises(ValueError, match=r"'\.csv'.*'\.txt'.*'\.json'"):
        load_graph(path)
    with pytest.raises(ValueError, match=r"'\.csv'.*supported suffixes"):
        save_graph(load_graph("paper/chainmm"), path)
    with pytest.raises(ValueError, match=r"\(none\)"):
        save_graph(load_graph("paper/chainmm"), tmp_path / "noext")


def test_type_errors():
    with pytest.raises(TypeError, match="path or a built-in"):
        load_graph(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="DataflowGraph"):
        save_graph("paper/ffnn", "x.json")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- property round trips
@st.composite
def paper_graphs(draw) -> DataflowGraph:
    n = draw(st.integers(0, 15))
    pairs = [(i, j) for i in range(n) for j in range(n) if i < j]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=30)) if pairs else []
    perm = draw(st.permutations(range(n)))
    costs = st.lists(st.integers(0, 2**53 - 1), min_size=n, max_size=n)
    kinds = draw(st.none() | st.lists(st.from_regex(r"[a-zA-Z_]{1,8}", fullmatch=True), min_size=n, max_size=n))
    return DataflowGraph(
        src=[perm[i] for i, _ in chosen],
        dst=[perm[j] for _, j in chosen],
        flops=draw(costs),
        out_bytes=draw(costs),
        kinds=None if kinds is None or n == 0 else tuple(kinds),
        units="paper",
    )


@settings(max_examples=100, deadline=None)
@given(paper_graphs(), st.integers(0, 5))
def test_random_round_trips(g, n_inputs):
    _same(g, parse_paper(format_paper(g, n_inputs=n_inputs)))
    _same(g, graph_from_dict(graph_to_dict(g)))
