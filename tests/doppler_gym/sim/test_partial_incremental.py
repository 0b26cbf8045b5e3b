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
from tests.doppler_gym.sim.sim_dag_helpers import random_edges
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


def _fan_out(width: int) -> DataflowGraph:
    """Op 0 feeds ``width`` ops of equal work, which all feed op ``width + 1``: on one device the fan-out ops are
    ready at the same time (ties broken by CSR slot), and each one's end is another's ready time."""
    middle = np.arange(1, width + 1)
    return DataflowGraph(src=np.concatenate([np.zeros(width, int), middle]),
                         dst=np.concatenate([middle, np.full(width, width + 1)]),
                         flops=np.full(width + 2, 1e9), out_bytes=np.full(width + 2, 1e9))


def _tied_dag(seed: int) -> DataflowGraph:
    """A random DAG of 60 ops with costs from {1, 2} x 1e9, so that most events share their time with another."""
    rng, src, dst = random_edges(60, seed)
    return DataflowGraph(src=src, dst=dst, flops=rng.integers(1, 3, 60) * 1e9, out_bytes=rng.integers(1, 3, 60) * 1e9)


def _many_sources(seed: int) -> DataflowGraph:
    """40 ops, the first 8 sources, each later op fed by 1 to 3 earlier ones; costs from {1, 2} x 1e9. Sources placed
    out of id order still request in id order."""
    rng = np.random.default_rng(seed)
    src, dst = [], []
    for v in range(8, 40):
        for u in rng.choice(v, size=int(rng.integers(1, 4)), replace=False):
            src.append(int(u))
            dst.append(v)
    return DataflowGraph(src=np.array(src), dst=np.array(dst), flops=rng.integers(1, 3, 40) * 1e9,
                         out_bytes=rng.integers(1, 3, 40) * 1e9)


@pytest.mark.parametrize(("graph", "n_devices"), [(_fan_out(12), 1), (_fan_out(12), 3), (_tied_dag(0), 2),
                                                  (_tied_dag(1), 4), (_many_sources(0), 2), (_many_sources(1), 3)],
                         ids=["fan-out 1 dev", "fan-out 3 dev", "tied dag 2 dev", "tied dag 4 dev",
                              "8 sources 2 dev", "8 sources 3 dev"])
def test_resumed_runs_on_same_time_ties_equal_partial_makespan(graph: DataflowGraph, n_devices: int) -> None:
    """Every prefix of random episodes, bit for bit, where most new ops tie with placed ones: both kinds of resumed
    row occur (an op fitting an idle stretch of its device, and one the later requests run again after). Half the
    episodes start a third of the way in, so that resumed runs also start from whole runs of many ops."""
    topology = dg.Topology.uniform(n_devices)
    whole = PartialMakespan(graph, topology, REF)
    inc = IncrementalPartialMakespan(graph, topology, REF, n_slots=2)
    eps = episodes(graph, n_devices, 8, seed=11)
    skip = graph.n_ops // 3
    for first in range(0, 8, 2):
        start = skip if first % 4 else 0
        for rows in np.stack(eps[first : first + 2], axis=1)[start:]:
            np.testing.assert_array_equal(inc(rows, np.arange(2)), whole(rows))
    assert inc.whole_runs == 8  # each episode's first row; every later row adds one op to its slot's last
    assert inc.resumed_runs == 8 * graph.n_ops - 4 * skip
    assert 0 < inc.drained_runs < inc.resumed_runs


def test_a_new_op_requested_before_a_tied_one_runs_the_later_requests_again() -> None:
    """Fan-out of 2 on one device, placed 0, 2, then 1: ops 1 and 2 are ready at the same time, and 1 (CSR slot 0 of
    op 0) is requested first, so 2 moves one op later: the makespan is 3 op durations (a hand computation, to the
    rounding of the reported unit's division; ``PartialMakespan``'s bit for bit), where it was 2."""
    graph = _fan_out(2)
    topology = dg.Topology.uniform(1)
    inc = IncrementalPartialMakespan(graph, topology, REF, n_slots=1)
    row = np.full(graph.n_ops, -1)
    row[0] = 0
    t = inc(row, 0)
    row[2] = 0
    assert inc(row, 0) == pytest.approx(2 * t, rel=1e-15)
    assert (inc.resumed_runs, inc.drained_runs) == (1, 0)  # op 2 fits after op 0
    row[1] = 0
    got = inc(row, 0)
    assert got == PartialMakespan(graph, topology, REF)(row)
    assert got == pytest.approx(3 * t, rel=1e-15)
    assert (inc.resumed_runs, inc.drained_runs) == (2, 1)


def test_a_duration_that_rounds_to_zero_goes_to_the_event_loop() -> None:
    """Op 0's 1e20 flops make op 3's and op 4's durations round to zero after it (``test_partial.py``'s graph): the
    list kernel does not serve those rows, resumed or whole, and ``PartialMakespan``'s event loop answers them."""
    graph = DataflowGraph(src=np.array([0, 0, 1, 2, 1]), dst=np.array([1, 2, 3, 3, 4]),
                          flops=np.array([1e20, 1.0, 3.0, 2.0, 1.0]), out_bytes=np.ones(5))
    topology = dg.Topology.uniform(2)
    whole = PartialMakespan(graph, topology, REF)
    inc = IncrementalPartialMakespan(graph, topology, REF, n_slots=1)
    for ep in episodes(graph, 2, 20, seed=5):
        for row in ep:
            assert inc(row, 0) == whole(row)
    assert inc.resumed_runs > 0
