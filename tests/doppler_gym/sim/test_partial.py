"""``PartialMakespan`` (``doppler_gym.sim.partial``) equals ``dg.simulate`` on the subgraph induced by the placed ops,
bit for bit, on the list kernel (the reference config) and on the event loop (priority queues, two streams and
FIFO links), for random topological prefixes: a random SEL order (each step any op whose inputs are all placed),
cut at a random length, on random devices.

The prefixes of ``SEED`` include some (rows 19 and 107 on ``paper/ffnn``, 4 and 8 devices, FIFO queues) on which
the earlier implementation, which parked unplaced ops on device 0 at zero cost, changed SimPy's tie order, hence a
device's FIFO order, and missed the induced subgraph's makespan by 0.25-0.44 %."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.event_loop import run
from doppler_gym.sim.list_kernel import run_list
from doppler_gym.sim.partial import PARALLEL_ROWS, PartialMakespan
from doppler_gym.sim.partial_kernel import partial_rows, partial_rows_parallel

REF = dg.SimConfig.reference()
PHYSICAL = dg.SimConfig(link_model="fifo", streams=2)
ROWS = 240  # random prefixes per case
SEED = 106


def induced(graph: DataflowGraph, ops: np.ndarray) -> DataflowGraph:
    """The subgraph of ``ops`` (sorted ids) and the edges between them, op and edge ids kept in order."""
    new_id = np.full(graph.n_ops, -1)
    new_id[ops] = np.arange(ops.size)
    keep = (new_id[graph.src] >= 0) & (new_id[graph.dst] >= 0)
    return DataflowGraph(src=new_id[graph.src[keep]], dst=new_id[graph.dst[keep]], flops=graph.flops[ops],
                         out_bytes=graph.out_bytes[ops], name="prefix", units=graph.units)


def sel_order(graph: DataflowGraph, rng: np.random.Generator) -> np.ndarray:
    """A random topological order: each step selects any op whose inputs are all selected (the SEL mask)."""
    missing = graph.in_degree.astype(np.int64)
    ready = list(np.flatnonzero(missing == 0))
    order = []
    while ready:
        op = ready.pop(int(rng.integers(len(ready))))
        order.append(op)
        for c in graph.successors(op):
            missing[c] -= 1
            if missing[c] == 0:
                ready.append(int(c))
    return np.array(order)


def random_prefixes(graph: DataflowGraph, n_devices: int, rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, n)`` int64 assignments (-1 unplaced) and ``(rows, n)`` priorities: the SEL position of each placed
    op, noise on the unplaced ones (which the partial run must ignore)."""
    rng = np.random.default_rng(seed)
    n = graph.n_ops
    assign = np.full((rows, n), -1, np.int64)
    prio = rng.normal(size=(rows, n)) * n
    for r in range(rows):
        order = sel_order(graph, rng)
        placed = order[: int(rng.integers(0, n + 1))]
        assign[r, placed] = rng.integers(0, n_devices, placed.size)
        prio[r, placed] = np.arange(placed.size)
    return assign, prio


def reference(graph, topology, config, assignment, priorities) -> float:
    """``dg.simulate``'s makespan of the placed ops' induced subgraph (0 with nothing placed)."""
    ops = np.flatnonzero(assignment >= 0)
    if ops.size == 0:
        return 0.0
    trace = dg.simulate(induced(graph, ops), assignment[ops], topology, priorities=priorities[ops], config=config)
    return trace.makespan


CASES = {
    "paper/ffnn 4 dev fifo (list kernel)": ("paper/ffnn", dg.Topology.uniform(4), REF),
    "paper/ffnn 8 dev fifo (list kernel)": ("paper/ffnn", dg.Topology.uniform(8), REF),
    "paper/ffnn 4 dev priority": ("paper/ffnn", dg.Topology.uniform(4), replace(REF, queue_order="priority")),
    "paper/ffnn 8 dev priority": ("paper/ffnn", dg.Topology.uniform(8), replace(REF, queue_order="priority")),
    "ffnn p100x4 fifo links 2 streams": ("ffnn", dg.Topology.preset("p100x4"), PHYSICAL),
    "ffnn p100x4 fifo links 2 streams priority": ("ffnn", dg.Topology.preset("p100x4"),
                                                  replace(PHYSICAL, queue_order="priority")),
}


def _graph(name: str) -> DataflowGraph:
    return dg.load_graph(name) if name.startswith("paper/") else dg.workloads.make(name)


@pytest.mark.parametrize("case", list(CASES))
def test_random_prefixes_equal_simulate_on_the_induced_subgraph(case):
    name, topology, config = CASES[case]
    graph = _graph(name)
    partial = PartialMakespan(graph, topology, config)
    assign, prio = random_prefixes(graph, topology.n_devices, ROWS, seed=SEED)
    want = np.array([reference(graph, topology, config, a, p) for a, p in zip(assign, prio)])
    np.testing.assert_array_equal(partial(assign, prio), want)
    parallel = np.empty(ROWS)  # the parallel kernel (which a 1-thread Numba never calls), 3 chunks
    assert partial_rows_parallel(*partial._buffers, assign.astype(np.int32), partial._queue_keys(assign, prio),
                                 parallel, 3) == 0
    np.testing.assert_array_equal(parallel, want)
    small = np.concatenate([partial(assign[i : i + 5], prio[i : i + 5]) for i in range(0, 40, 5)])  # serial calls
    np.testing.assert_array_equal(small, want[:40])
    for r in range(0, ROWS, 24):
        assert partial(assign[r], prio[r]) == want[r]
    assert (want > 0).sum() > ROWS * 0.9  # the prefixes are not trivial


def test_fixed_orders_equal_simulate_on_the_induced_subgraph():
    graph, topology, config = dg.load_graph("paper/ffnn"), dg.Topology.uniform(4), replace(REF, queue_order="fixed")
    partial = PartialMakespan(graph, topology, config)
    assign, prio = random_prefixes(graph, 4, 60, seed=3)
    want = [reference(graph, topology, config, a, p) for a, p in zip(assign, prio)]
    np.testing.assert_array_equal(partial(assign, prio), want)


@pytest.mark.parametrize("case", list(CASES))
def test_empty_and_full_prefixes(case):
    name, topology, config = CASES[case]
    graph = _graph(name)
    partial = PartialMakespan(graph, topology, config)
    n = graph.n_ops
    prio = np.arange(n, dtype=np.float64)
    assert partial(np.full(n, -1), prio) == 0.0
    np.testing.assert_array_equal(partial(np.full((3, n), -1), prio), np.zeros(3))
    full = np.random.default_rng(0).integers(0, topology.n_devices, n)
    want = dg.simulate(graph, full, topology, priorities=prio, config=config).makespan
    assert partial(full, prio) == want
    assert partial(np.tile(full, (PARALLEL_ROWS, 1)), prio).tolist() == [want] * PARALLEL_ROWS


def test_batches_equal_rows_one_by_one_and_input_types_do_not_matter():
    graph, topology = dg.load_graph("paper/ffnn"), dg.Topology.uniform(4)
    partial = PartialMakespan(graph, topology, REF)
    assign, _ = random_prefixes(graph, 4, 40, seed=11)
    one_by_one = np.array([partial(a) for a in assign])
    for rows in (assign, assign.astype(np.int32), np.asfortranarray(assign), assign.tolist()):
        np.testing.assert_array_equal(partial(rows), one_by_one)
    for b in (1, 4, PARALLEL_ROWS - 1, PARALLEL_ROWS):
        np.testing.assert_array_equal(partial(assign[:b]), one_by_one[:b])
    read_only = assign.copy()
    read_only.setflags(write=False)
    np.testing.assert_array_equal(partial(read_only), one_by_one)
    # One compiled signature per kernel: int32 assignments and read-only float64 keys whatever the input.
    assert len(partial_rows.signatures) == 1
    assert len(partial_rows_parallel.signatures) <= 1


def test_the_partial_runs_reuse_the_kernels_simulate_compiles_for_int32_assignments():
    """Numba compiles a kernel once per argument type: the partial runs hand the list kernel and the event loop the
    argument types of ``simulate`` with an int32 assignment, so that a cold cache compiles each kernel once."""
    graph, topology = dg.load_graph("paper/ffnn"), dg.Topology.uniform(4)
    assign, prio = random_prefixes(graph, 4, 4, seed=2)
    for config in (REF, replace(REF, queue_order="priority")):  # the list kernel, the event loop
        dg.simulate(graph, np.zeros(graph.n_ops, np.int32), topology, priorities=prio[0], config=config)
        compiled = (set(run_list.signatures), set(run.signatures))
        PartialMakespan(graph, topology, config)(assign, prio)
        assert (set(run_list.signatures), set(run.signatures)) == compiled


def test_the_event_loop_fallbacks_are_exact_too():
    """Two graphs the list kernel sends back to the event loop under the reference config: an op of zero work
    (at packing) and a duration that rounds to zero next to a large start time (per row)."""
    zero_work = DataflowGraph(src=np.array([0, 0, 1, 2, 3]), dst=np.array([1, 2, 3, 3, 4]),
                              flops=np.array([2.0, 0.0, 1.0, 3.0, 1.0]), out_bytes=np.ones(5))
    vanishing = DataflowGraph(src=np.array([0, 0, 1, 2, 1]), dst=np.array([1, 2, 3, 3, 4]),
                              flops=np.array([1e20, 1.0, 3.0, 2.0, 1.0]), out_bytes=np.ones(5))
    topology = dg.Topology.uniform(2)
    for graph in (zero_work, vanishing):
        partial = PartialMakespan(graph, topology, REF)
        assign, prio = random_prefixes(graph, 2, 80, seed=5)
        want = [reference(graph, topology, REF, a, p) for a, p in zip(assign, prio)]
        np.testing.assert_array_equal(partial(assign), want)
        np.testing.assert_array_equal([partial(a) for a in assign], want)


def test_bad_inputs_raise():
    graph = dg.load_graph("paper/ffnn")
    n = graph.n_ops
    partial = PartialMakespan(graph, dg.Topology.uniform(4), REF)
    with pytest.raises(ValueError, match="columns"):
        partial(np.zeros(n - 1, int))
    bad = np.zeros((PARALLEL_ROWS, n), int)
    bad[3, 7] = 4
    for rows in (bad, bad[3]):
        with pytest.raises(ValueError, match="device 4"):
            partial(rows)
    prioritised = PartialMakespan(graph, dg.Topology.uniform(4), replace(REF, queue_order="priority"))
    with pytest.raises(ValueError, match="needs priorities"):
        prioritised(np.zeros(n, int))
    with pytest.raises(ValueError, match="priorities must be"):
        prioritised(np.zeros((3, n), int), np.zeros((2, n)))
