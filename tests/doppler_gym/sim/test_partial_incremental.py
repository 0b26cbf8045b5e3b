"""``IncrementalPartialMakespan`` equals ``PartialMakespan`` (itself checked against ``dg.simulate`` on the induced
subgraph in test_partial.py), bit for bit, on every prefix of random placement episodes: a random SEL order on
random devices, one op at a time, several slots interleaved; and on rows that do not extend their slot's last one
(a new episode, a moved op, two ops at once, an unchanged row)."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.partial import PartialMakespan
from doppler_gym.sim.partial_incremental import IncrementalPartialMakespan
from tests.doppler_gym.sim.test_partial import sel_order

REF = dg.SimConfig.reference()
CASES = {
    "paper/ffnn 4 dev (reference)": ("paper/ffnn", dg.Topology.uniform(4), REF),
    "paper/chainmm 8 dev (reference)": ("paper/chainmm", dg.Topology.uniform(8), REF),
    "ffnn on p100x4, FIFO links (whole runs)": ("ffnn", dg.Topology.preset("p100x4"), dg.SimConfig(link_model="fifo")),
    "llama-layer on h100x8 (roofline, list kernel)": ("llama-layer", dg.Topology.preset("h100x8-nvswitch"), None),
    "ffnn on dc2-wan (roofline, per-pair links)": ("ffnn", dg.Topology.preset("dc2-wan"), None),
    "ffnn on h100x16-2node (roofline, per-pair links)": ("ffnn", dg.Topology.preset("h100x16-2node"), None),
}


def _instance(name: str):
    graph_name, topology, config = CASES[name]
    graph = dg.load_graph(graph_name) if "/" in graph_name else dg.workloads.make(graph_name)
    return graph, topology, config if config is not None else dg.instances.default_config(graph, topology)


def episodes(graph: DataflowGraph, n_devices: int, n_episodes: int, seed: int) -> list[np.ndarray]:
    """Each episode's ``(n + 1, n)`` rows: nothing placed, then one more op per row (random SEL order and device)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_episodes):
        rows = np.full((graph.n_ops + 1, graph.n_ops), -1, np.int64)
        for k, op in enumerate(sel_order(graph, rng)):
            rows[k + 1 :, op] = rng.integers(0, n_devices)
        out.append(rows)
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_equals_partial_makespan_on_every_prefix(name: str) -> None:
    graph, topology, config = _instance(name)
    whole = PartialMakespan(graph, topology, config)
    inc = IncrementalPartialMakespan(graph, topology, config, n_slots=3)
    eps = episodes(graph, topology.n_devices, 6, seed=7)
    for first in range(0, 6, 3):  # three slots stepped side by side, one batched call per step
        batch = np.stack(eps[first : first + 3], axis=1)  # (n + 1, 3, n)
        for rows in batch:
            got = inc(rows, np.arange(3))
            np.testing.assert_array_equal(got, whole(rows))  # bit for bit
    if inc.incremental:
        calls = 2 * 3 * (graph.n_ops + 1)
        assert inc.whole_runs < calls  # some rows were appended (the rest is the point of the class)
    else:
        assert name.endswith("(whole runs)")


def test_rows_that_do_not_extend_the_slot() -> None:
    graph, topology, config = _instance("paper/ffnn 4 dev (reference)")
    whole = PartialMakespan(graph, topology, config)
    inc = IncrementalPartialMakespan(graph, topology, config, n_slots=1)
    (ep,) = episodes(graph, 4, 1, seed=3)
    half = graph.n_ops // 2
    rows = [ep[half], ep[half], ep[half + 2], ep[10]]  # first sight, unchanged, two ops at once, a new episode
    moved = ep[half + 2].copy()
    moved[np.flatnonzero(moved >= 0)[0]] = (moved[np.flatnonzero(moved >= 0)[0]] + 1) % 4
    rows.append(moved)  # a placed op moved
    for row in rows:
        assert inc(row, 0) == whole(row)
    inc.forget()
    assert inc(ep[half], 0) == whole(ep[half])


def test_bad_input_is_a_clear_error() -> None:
    graph, topology, config = _instance("paper/ffnn 4 dev (reference)")
    inc = IncrementalPartialMakespan(graph, topology, config, n_slots=2)
    row = np.full(graph.n_ops, -1)
    with pytest.raises(ValueError, match=r"slots must be 1 ints in \[0, 2\)"):
        inc(row, 2)
    with pytest.raises(ValueError, match="columns"):
        inc(row[:-1], 0)
    row[0] = 9
    with pytest.raises(ValueError, match="device 9"):
        inc(row, 0)
    with pytest.raises(ValueError, match="n_slots"):
        IncrementalPartialMakespan(graph, topology, config, n_slots=0)
