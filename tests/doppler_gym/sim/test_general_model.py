"""The simulator's GENERAL model (every ``SimConfig`` knob) and the API's boundary checks.

The oracle is ``general_reference.py``, a plain heapq event simulation written from the
documented model (it shares no code with the Numba kernels). Covered:

* exact agreement (rtol 1e-12) of ``dg.simulate`` with the reference on random DAGs with
  continuous random costs, for every cost model x link model x streams {1, 2, 3} x queue order, on
  a uniform topology, a heterogeneous 3-device line (2-hop routes) and the presets
  ``v100x8-dgx1`` and ``h100x16-2node`` (multi-hop routes); plus hypothesis-drawn DAGs;
* hand-computed toys: a diamond on 2 devices (ideal links; FIFO links where two transfers queue
  on one link; two streams), a 3-device line where a 2-hop transfer queues at its second hop,
  and a priority example that changes both the order and the makespan;
* brute force over all assignments of tiny graphs: ``simulate_batch`` == ``simulate`` per
  assignment == the reference, and a known optimum (two equal chains on two devices);
* hypothesis invariants: lower and upper makespan bounds, precedence + transfer times, stream
  capacity, work conservation, queue order, determinism, ``simulate_batch`` rows;
* jitter: seeded determinism, mean-one lognormal factors, a jittered run is the deterministic
  model with scaled durations, batch determinism independent of the thread count;
* ``Trace`` fields, and every boundary error (type and message).

"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import doppler_gym as dg
from doppler_gym.graph.analysis import critical_path
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.topology.types import Topology
from tests.doppler_gym.sim.general_reference import (
    compute_time,
    reference_simulate,
    resolve_topology,
    transfer_time,
)

RTOL = 1e-12
COST_MODELS = ("topology", "raw")
LINK_MODELS = ("ideal", "fifo")
STREAMS = (1, 2, 3)
QUEUE_ORDERS = ("fifo", "priority")

# ---------------------------------------------------------------------------------------- helpers
def _graph(src, dst, flops, out_bytes, name="toy") -> DataflowGraph:
    return DataflowGraph(
        src=np.array(src, dtype=np.int64),
        dst=np.array(dst, dtype=np.int64),
        flops=np.array(flops, dtype=np.float64),
        out_bytes=np.array(out_bytes, dtype=np.float64),
        name=name,
    )


def _line3() -> Topology:
    """Devices 0 - 1 - 2 in a line (no direct 0 <-> 2 link), heterogeneous speeds and links."""
    bw = np.array([[0.0, 12e9, 0.0], [10e9, 0.0, 20e9], [0.0, 25e9, 0.0]])  # [B/s]
    lat = np.array([[0.0, 5e-6, 0.0], [4e-6, 0.0, 3e-6], [0.0, 2e-6, 0.0]])  # [s]
    return Topology(speed=[9e12, 4.5e12, 14e12], memory=16e9, bandwidth=bw, latency=lat, name="line3")


TOPOLOGIES = {
    "uniform4": lambda: Topology.uniform(4),
    "line3": _line3,
    "v100x8-dgx1": lambda: Topology.preset("v100x8-dgx1"),
    "h100x16-2node": lambda: Topology.preset("h100x16-2node"),
}
_TOPO_CACHE: dict[str, Topology] = {}


def _topology(name: str) -> Topology:
    if name not in _TOPO_CACHE:
        _TOPO_CACHE[name] = TOPOLOGIES[name]()
    return _TOPO_CACHE[name]


def _random_graph(seed: int, cost_model: str, n_ops: int = 30) -> DataflowGraph:
    """A random layered DAG with continuous costs: physical units, or raw times of order 1..10."""
    if cost_model == "raw":
        ranges = {"flops_range": (1.0, 10.0), "bytes_range": (0.5, 8.0)}
    else:
        ranges = {"flops_range": (1e10, 1e12), "bytes_range": (1e7, 1e9)}
    return dg.workloads.make(
        "random", n_ops=n_ops, levels=5, edge_prob=0.3, skip_prob=0.05, seed=seed, **ranges
    )


def _random_assignment(rng: np.random.Generator, n_ops: int, n_devices: int, k: int) -> np.ndarray:
    """Every op on one of ``min(k, D)`` random devices (few devices: more queueing and contention)."""
    devices = rng.choice(n_devices, size=min(k, n_devices), replace=False)
    return devices[rng.integers(0, devices.size, n_ops)].astype(np.int64)


def _assert_same(tr, ref, what: str) -> None:
    for name in ("start", "end", "edge_start", "edge_end"):
        np.testing.assert_allclose(
            getattr(tr, name),
            getattr(ref, name),
            rtol=RTOL,
            atol=0,
            equal_nan=True,
            err_msg=f"{what}: {name}",
        )
    np.testing.assert_allclose(tr.makespan, ref.makespan, rtol=RTOL, atol=0, err_msg=f"{what}: makespan")


def _compute_times(g: DataflowGraph, a: np.ndarray, topo: Topology | None, cost_model: str) -> np.ndarray:
    topo_used, _ = resolve_topology(topo, [int(x) for x in a], cost_model)
    return np.array([compute_time(g, o, int(a[o]), topo_used, cost_model) for o in range(g.n_ops)])


def _transfer_times(g: DataflowGraph, a: np.ndarray, topo: Topology | None, cost_model: str) -> np.ndarray:
    """``(n_edges,)`` uncontended transfer time of each edge (0 on one device)."""
    topo_used, _ = resolve_topology(topo, [int(x) for x in a], cost_model)
    return np.array(
        [
            transfer_time(g, e, int(a[g.src[e]]), int(a[g.dst[e]]), topo_used, cost_model)
            for e in range(g.n_edges)
        ]
    )


def _max_concurrency(start: np.ndarray, end: np.ndarray) -> int:
    """Most intervals ``[start, end)`` open at once (an end at t comes before a start at t)."""
    events = sorted([(float(t), 1) for t in start] + [(float(t), -1) for t in end])
    best = running = 0
    for _, delta in events:
        running += delta
        best = max(best, running)
    return best


# ---------------------------------------------------------------------------------------- exact agreement
def _agreement_cases(topo_name: str, cost_model: str, queue_order: str) -> list[str]:
    """Run every link model x streams combination; return a description of each mismatch.

    Coverage guards (so that agreement is not vacuous): some FIFO-link transfer queued behind
    another, some device ran several ops at once with streams > 1, and in priority mode some
    schedule differs from the FIFO-queue one.
    """
    topo = _topology(topo_name)
    failures: list[str] = []
    fifo_queued = streams_overlapped = priority_mattered = False
    for link_model, streams in itertools.product(LINK_MODELS, STREAMS):
        cfg = dg.SimConfig(
            cost_model=cost_model, link_model=link_model, streams=streams, queue_order=queue_order
        )
        for seed in range(2):
            g = _random_graph(seed, cost_model)
            rng = np.random.default_rng([seed, streams, list(TOPOLOGIES).index(topo_name)])
            for k in (2, 3, 16):
                a = _random_assignment(rng, g.n_ops, topo.n_devices, k)
                prio = rng.random(g.n_ops) if queue_order == "priority" else None
                tr = dg.simulate(g, a, topology=topo, priorities=prio, config=cfg)
                ref = reference_simulate(g, a, topo, prio, cfg)
                what = f"{topo_name} {cfg} graph seed {seed} assignment {a.tolist()}"
                try:
                    _assert_same(tr, ref, what)
                except AssertionError as err:
                    failures.append(str(err))
                if link_model == "fifo":
                    uncontended = _transfer_times(g, a, topo, cost_model)
                    moved = tr.transfers
                    waited = tr.edge_end[moved] - tr.end[g.src[moved]] - uncontended[moved]
                    fifo_queued |= bool(np.any(waited > 1e-9 * tr.makespan))
                if streams > 1:
                    streams_overlapped |= any(
                        _max_concurrency(tr.start[a == d], tr.end[a == d]) > 1 for d in range(topo.n_devices)
                    )
                if queue_order == "priority":
                    plain = dg.simulate(g, a, topology=topo, config=replace(cfg, queue_order="fifo"))
                    priority_mattered |= not np.array_equal(plain.start, tr.start)
    where = f"{topo_name}/{cost_model}/{queue_order}"
    assert fifo_queued, f"{where}: no FIFO-link case had a transfer queue; strengthen the cases"
    assert streams_overlapped, f"{where}: no device ever ran two ops at once; strengthen the cases"
    assert priority_mattered or queue_order == "fifo", f"{where}: priorities never changed a schedule"
    return failures


@pytest.mark.parametrize("topo_name", list(TOPOLOGIES))
@pytest.mark.parametrize("cost_model", COST_MODELS)
@pytest.mark.parametrize(
    "queue_order",
    ["fifo", "priority"],
)
def test_simulate_matches_reference(topo_name, cost_model, queue_order):
    """Documented model: every link model x streams x 2 graphs x 3 assignments, per-op and per-edge."""
    failures = _agreement_cases(topo_name, cost_model, queue_order)
    assert not failures, f"{len(failures)} mismatches; first:\n{failures[0]}"


@st.composite
def continuous_instances(draw):
    """A hypothesis-shaped small DAG whose costs come from a seeded RNG (continuous: no ties)."""
    n = draw(st.integers(1, 12))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    mask = draw(st.lists(st.booleans(), min_size=len(pairs), max_size=len(pairs)))
    edges = [p for p, keep in zip(pairs, mask) if keep]
    edges = draw(st.permutations(edges)) if edges else edges
    relabel = np.array(draw(st.permutations(range(n))), dtype=np.int64)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    cost_model = draw(st.sampled_from(COST_MODELS))
    topo_name = draw(st.sampled_from(list(TOPOLOGIES)))
    topo = _topology(topo_name)
    scale = (1.0, 1.0) if cost_model == "raw" else (1e11, 1e8)
    g = _graph(
        relabel[[u for u, _ in edges]] if edges else [],
        relabel[[v for _, v in edges]] if edges else [],
        rng.uniform(0.5, 5.0, n) * scale[0],
        rng.uniform(0.5, 5.0, n) * scale[1],
    )
    a = _random_assignment(rng, n, topo.n_devices, draw(st.integers(1, 4)))
    cfg = dg.SimConfig(
        cost_model=cost_model,
        link_model=draw(st.sampled_from(LINK_MODELS)),
        streams=draw(st.sampled_from(STREAMS)),
        queue_order="fifo",
    )
    return g, a, topo, cfg


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(continuous_instances())
def test_hypothesis_dags_match_reference(instance):
    g, a, topo, cfg = instance
    _assert_same(
        dg.simulate(g, a, topology=topo, config=cfg), reference_simulate(g, a, topo, None, cfg), f"{cfg}"
    )


def test_default_topology_is_uniform_over_used_devices():
    g = _random_graph(3, "topology")
    a = np.random.default_rng(0).integers(0, 3, g.n_ops)
    a[0] = 2
    for cfg in (dg.SimConfig(), dg.SimConfig(link_model="fifo", streams=2)):
        tr = dg.simulate(g, a, config=cfg)
        _assert_same(tr, dg.simulate(g, a, topology=Topology.uniform(3), config=cfg), "topology=None")
        _assert_same(tr, reference_simulate(g, a, None, None, cfg), "topology=None vs reference")
        assert tr.n_devices == 3


def test_time_divisor_scales_every_reported_time():
    g = _random_graph(4, "raw")
    a = np.random.default_rng(1).integers(0, 3, g.n_ops)
    base = dg.simulate(g, a, config=dg.SimConfig(cost_model="raw", link_model="fifo"))
    scaled = dg.simulate(g, a, config=dg.SimConfig(cost_model="raw", link_model="fifo", time_divisor=1e3))
    for name in ("start", "end", "edge_start", "edge_end", "makespan"):
        np.testing.assert_allclose(getattr(scaled, name), np.asarray(getattr(base, name)) / 1e3, rtol=1e-15)
    assert base.time_unit == "cost" and scaled.time_unit == "cost/1000"
    assert dg.simulate(g, a, topology=Topology.uniform(3)).time_unit == "s"


# ---------------------------------------------------------------------------------------- hand-computed toys
RAW = dg.SimConfig(cost_model="raw")


def _diamond() -> DataflowGraph:
    """A(0) -> B(1), A -> C(2), B -> D(3), C -> D; raw compute 2, 3, 4, 1; outputs 5, 1, 2, 0.

    Edges: e0 A->B, e1 A->C, e2 B->D, e3 C->D. Placement: A, D on device 0; B, C on device 1.
    """
    return _graph([0, 0, 1, 2], [1, 2, 3, 3], [2.0, 3.0, 4.0, 1.0], [5.0, 1.0, 2.0, 0.0], name="diamond")


DIAMOND_ASSIGNMENT = np.array([0, 1, 1, 0])


def _check_toy(tr, start, end, edge_start, edge_end, makespan) -> None:
    np.testing.assert_array_equal(tr.start, start)
    np.testing.assert_array_equal(tr.end, end)
    np.testing.assert_array_equal(tr.edge_start, edge_start)
    np.testing.assert_array_equal(tr.edge_end, edge_end)
    assert tr.makespan == makespan


def test_diamond_ideal_links():
    # A [0,2]; e0, e1 both 2 -> 7 (no contention); B, C ready at 7 on device 1: B first (edge
    # order), [7,10]; C [10,14]; e2 10 -> 11; e3 14 -> 16; D ready 16, [16,17].
    g = _diamond()
    for cfg in (RAW, dg.SimConfig(cost_model="raw", queue_order="priority")):
        tr = dg.simulate(g, DIAMOND_ASSIGNMENT, priorities=[0.0, 1.0, 1.0, 0.0], config=cfg)
        _check_toy(tr, [0, 7, 10, 16], [2, 10, 14, 17], [2, 2, 10, 14], [7, 7, 11, 16], 17.0)
        _assert_same(
            tr, reference_simulate(g, DIAMOND_ASSIGNMENT, None, [0.0, 1.0, 1.0, 0.0], cfg), "diamond"
        )


def test_diamond_fifo_links_queue_two_transfers_on_one_link():
    # e0 and e1 both need link 0->1 at t=2: e0 [2,7], e1 waits, [7,12]. B [7,10]; C ready 12,
    # [12,16]; e2 (1->0) [10,11]; e3 [16,18]; D [18,19].
    g = _diamond()
    cfg = dg.SimConfig(cost_model="raw", link_model="fifo")
    tr = dg.simulate(g, DIAMOND_ASSIGNMENT, config=cfg)
    _check_toy(tr, [0, 7, 12, 18], [2, 10, 16, 19], [2, 7, 10, 16], [7, 12, 11, 18], 19.0)
    _assert_same(tr, reference_simulate(g, DIAMOND_ASSIGNMENT, None, None, cfg), "diamond fifo")


def test_diamond_two_streams_run_b_and_c_together():
    # Ideal links, 2 streams: B [7,10] and C [7,11] overlap; e2 10 -> 11; e3 11 -> 13; D [13,14].
    g = _diamond()
    cfg = dg.SimConfig(cost_model="raw", streams=2)
    tr = dg.simulate(g, DIAMOND_ASSIGNMENT, config=cfg)
    _check_toy(tr, [0, 7, 7, 13], [2, 10, 11, 14], [2, 2, 10, 11], [7, 7, 11, 13], 14.0)
    assert dg.simulate_batch(g, DIAMOND_ASSIGNMENT[None, :], config=cfg)[0] == 14.0


def test_diamond_on_one_device_is_serial_and_free_of_transfers():
    g = _diamond()
    tr = dg.simulate(g, np.zeros(4, dtype=np.int64), config=RAW)
    _check_toy(tr, [0, 2, 5, 9], [2, 5, 9, 10], [np.nan] * 4, [2, 2, 5, 9], 10.0)


def _line_toy() -> tuple[DataflowGraph, np.ndarray, Topology]:
    """Devices 0 - 1 - 2 (no direct 0 <-> 2 link), speeds 1, 2, 4 [FLOP/s], every link latency 0.5 s.

    Bandwidth [B/s]: 0->1 = 2, 1->2 = 1 (and 1->0 = 2, 2->1 = 1). Ops: op0 (2 FLOP, dev 0) -> op1
    (8 FLOP, dev 2), output 4 B: hops 0->1 = 0.5 + 4/2 = 2.5 s and 1->2 = 0.5 + 4/1 = 4.5 s.
    op2 (12 FLOP, dev 1) -> op3 (4 FLOP, dev 2), output 3 B: hop 1->2 = 0.5 + 3/1 = 3.5 s.
    """
    bw = np.array([[0.0, 2.0, 0.0], [2.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    topo = Topology(speed=[1.0, 2.0, 4.0], memory=1.0, bandwidth=bw, latency=0.5, name="toy-line")
    g = _graph([0, 2], [1, 3], [2.0, 8.0, 12.0, 4.0], [4.0, 0.0, 3.0, 0.0], name="line-toy")
    return g, np.array([0, 2, 1, 2]), topo


def test_line_topology_two_hop_route_ideal():
    # op0 [0,2]; e0 over 0->1->2: 2 + 2.5 + 4.5 = 9; op1 [9,11]. op2 [0,6]; e1 [6,9.5];
    # op3 ready 9.5 but device 2 is busy until 11: [11,12].
    g, a, topo = _line_toy()
    assert topo.route(0, 2) == [0, 1, 2]
    tr = dg.simulate(g, a, topology=topo)
    _check_toy(tr, [0, 9, 0, 11], [2, 11, 6, 12], [2, 6], [9, 9.5], 12.0)


def test_line_topology_fifo_store_and_forward_queues_at_second_hop():
    # e0 holds 0->1 over [2,4.5], then 1->2 over [4.5,9]. e1 asks for 1->2 at 6: waits until 9,
    # [9,12.5]. op1 [9,11]; op3 [12.5,13.5].
    g, a, topo = _line_toy()
    cfg = dg.SimConfig(link_model="fifo")
    tr = dg.simulate(g, a, topology=topo, config=cfg)
    _check_toy(tr, [0, 9, 0, 12.5], [2, 11, 6, 13.5], [2, 9], [9, 12.5], 13.5)
    _assert_same(tr, reference_simulate(g, a, topo, None, cfg), "line toy fifo")


def _priority_toy() -> DataflowGraph:
    """op0 W (1, sink), op1 Z (5, sink), op2 X (1) -> op3 Y (10, on device 1); X's output 1."""
    return _graph([2], [3], [1.0, 5.0, 1.0, 10.0], [0.0, 0.0, 1.0, 0.0], name="priority-toy")


def test_priority_changes_order_and_makespan():
    # All sources ready at 0 on device 0; W takes the stream (lowest priority anyway).
    # FIFO (ready order = op id): Z [1,6], X [6,7], Y [8,18] -> 18.
    # Priority X < Z: X [1,2], Z [2,7], Y [3,13] -> 13.
    g = _priority_toy()
    a = np.array([0, 0, 0, 1])
    prio = np.array([-1.0, 1.0, 0.0, 0.0])
    fifo = dg.simulate(g, a, priorities=prio, config=RAW)
    _check_toy(fifo, [0, 1, 6, 8], [1, 6, 7, 18], [7], [8], 18.0)
    cfg = dg.SimConfig(cost_model="raw", queue_order="priority")
    tr = dg.simulate(g, a, priorities=prio, config=cfg)
    _check_toy(tr, [0, 2, 1, 3], [1, 7, 2, 13], [2], [3], 13.0)
    batch = dg.simulate_batch(g, np.stack([a, a]), priorities=np.stack([prio, -prio]), config=cfg)
    np.testing.assert_array_equal(batch, [13.0, 17.0])  # -prio: Z [0,5] < X [5,6] < W [6,7]; Y [7,17]


def test_priority_breaks_same_time_ready_ties():
    # Z (op0, 5, sink) and X (op1, 1) -> Y (op2, 10, device 1) are both ready
    # at t=0 on device 0 and X has the lower priority, so X runs first: X [0,1], Z [1,6], Y [2,12].
    # SimPy-style immediate grants would start Z at 0 (the first to ask): makespan 17.
    g = _graph([1], [2], [5.0, 1.0, 10.0], [0.0, 1.0, 0.0])
    cfg = dg.SimConfig(cost_model="raw", queue_order="priority")
    tr = dg.simulate(g, [0, 0, 1], priorities=[1.0, 0.0, 0.0], config=cfg)
    np.testing.assert_array_equal(tr.start, [1.0, 0.0, 2.0])
    assert tr.makespan == 12.0


def test_priority_sees_consumers_ready_when_a_stream_frees():
    # op0 (1) -> op1 (1) and op2 (5) on one device, priorities 0, 0, 1. op0
    # ends at 1, op1 becomes ready at 1 and beats the waiting op2: op1 [1,2], op2 [2,7].
    # Immediate grants would give the freed stream to op2 before op1 joins: op2 [1,6], op1 [6,7].
    g = _graph([0], [1], [1.0, 1.0, 5.0], [1.0, 1.0, 1.0])
    cfg = dg.SimConfig(cost_model="raw", queue_order="priority")
    tr = dg.simulate(g, [0, 0, 0], priorities=[0.0, 0.0, 1.0], config=cfg)
    np.testing.assert_array_equal(tr.start, [0.0, 1.0, 2.0])


# ---------------------------------------------------------------------------------------- brute force
def _all_assignments(n_ops: int, n_devices: int) -> np.ndarray:
    return np.array(list(itertools.product(range(n_devices), repeat=n_ops)), dtype=np.int64)


def test_two_equal_chains_on_two_devices_known_optimum():
    # Chains 0->1->2 (compute 1, 2, 3) and 3->4->5 (compute 2, 2, 2), every output 1: one chain
    # per device runs both without transfers in 6 = total work / 2, the optimum.
    g = _graph([0, 1, 3, 4], [1, 2, 4, 5], [1.0, 2.0, 3.0, 2.0, 2.0, 2.0], [1.0] * 6, name="two-chains")
    allas = _all_assignments(6, 2)
    ms = dg.simulate_batch(g, allas, config=RAW)
    assert ms.min() == 6.0 == dg.makespan_lower_bound(g, 2, RAW)
    best = {tuple(int(x) for x in allas[i]) for i in np.flatnonzero(ms == ms.min())}
    assert best == {(0, 0, 0, 1, 1, 1), (1, 1, 1, 0, 0, 0)}
    assert ms.max() == 12.0  # everything on one device (no placement is slower: transfers overlap)
    np.testing.assert_array_equal(ms, [dg.simulate(g, a, config=RAW).makespan for a in allas])


@pytest.mark.parametrize(
    "n_ops, n_devices, cfg, topo_name",
    [
        (7, 3, dg.SimConfig(cost_model="raw"), None),
        (8, 2, dg.SimConfig(cost_model="raw", link_model="fifo", streams=2), None),
        (6, 3, dg.SimConfig(cost_model="topology", link_model="fifo"), "line3"),
        (7, 3, dg.SimConfig(cost_model="topology", link_model="ideal", streams=3), "line3"),
    ],
)
def test_brute_force_optimum(n_ops, n_devices, cfg, topo_name):
    """Every assignment of a tiny graph: batch == per-assignment simulate == reference; same optimum."""
    g = _random_graph(7 + n_ops, cfg.cost_model, n_ops=n_ops)
    topo = _topology(topo_name) if topo_name else Topology.uniform(n_devices)
    allas = _all_assignments(n_ops, n_devices)
    ms = dg.simulate_batch(g, allas, topology=topo, config=cfg)
    single = np.array([dg.simulate(g, a, topology=topo, config=cfg).makespan for a in allas])
    np.testing.assert_array_equal(ms, single)
    ref = np.array([reference_simulate(g, a, topo, None, cfg).makespan for a in allas])
    np.testing.assert_allclose(ms, ref, rtol=RTOL, atol=0)
    assert ms.argmin() == ref.argmin()
    assert ms.min() >= dg.makespan_lower_bound(g, topo, cfg) * (1 - 1e-12)


# ---------------------------------------------------------------------------------------- properties
@st.composite
def instances(draw, jitterless: bool = True):
    """Small DAG (hypothesis costs: ties and zeros allowed), assignment, topology, config, priorities."""
    n = draw(st.integers(1, 10))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    mask = draw(st.lists(st.booleans(), min_size=len(pairs), max_size=len(pairs)))
    edges = [p for p, keep in zip(pairs, mask) if keep]
    edges = draw(st.permutations(edges)) if edges else edges
    relabel = np.array(draw(st.permutations(range(n))), dtype=np.int64)
    costs = st.lists(st.floats(0.0, 10.0, allow_nan=False, allow_infinity=False), min_size=n, max_size=n)
    cost_model = draw(st.sampled_from(COST_MODELS))
    scale = (1.0, 1.0) if cost_model == "raw" else (1e11, 1e9)
    g = _graph(
        relabel[[u for u, _ in edges]] if edges else [],
        relabel[[v for _, v in edges]] if edges else [],
        np.array(draw(costs)) * scale[0],
        np.array(draw(costs)) * scale[1],
    )
    kind = draw(st.sampled_from(["uniform", "line3"]))
    if kind == "line3":
        topo = _line3()
    else:
        topo = Topology.uniform(
            draw(st.integers(1, 3)),
            speed=draw(st.sampled_from([1e12, 9.3e12])),
            bandwidth=draw(st.sampled_from([1e9, 12e9])),
            latency=draw(st.sampled_from([0.0, 1e-5])),
        )
    a = np.array(draw(st.lists(st.integers(0, topo.n_devices - 1), min_size=n, max_size=n)), dtype=np.int64)
    cfg = dg.SimConfig(
        cost_model=cost_model,
        link_model=draw(st.sampled_from(LINK_MODELS)),
        streams=draw(st.sampled_from(STREAMS)),
        queue_order=draw(st.sampled_from(QUEUE_ORDERS)),
    )
    prio = np.array(draw(st.lists(st.floats(-5, 5, allow_nan=False), min_size=n, max_size=n)))
    return g, a, topo, cfg, prio


PROPERTY = settings(
    max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY
@given(instances())
def test_makespan_bounds(instance):
    g, a, topo, cfg, prio = instance
    tr = dg.simulate(g, a, topology=topo, priorities=prio, config=cfg)
    comp = _compute_times(g, a, topo, cfg.cost_model)
    trans = _transfer_times(g, a, topo, cfg.cost_model)
    # Upper: at every instant before the end some op computes or some transfer moves.
    assert tr.makespan <= (comp.sum() + trans.sum()) * (1 + 1e-9)
    # Lower: critical path, and the total work over all streams.
    assert tr.makespan >= dg.makespan_lower_bound(g, topo, cfg) * (1 - 1e-12)
    if cfg.cost_model == "raw":
        cp, _ = critical_path(g)
        assert tr.makespan >= max(cp, g.total_flops / (topo.n_devices * cfg.streams)) * (1 - 1e-12)
    else:
        assert tr.makespan >= comp.max(initial=0.0) * (1 - 1e-12)
    assert tr.makespan == tr.end.max(initial=0.0)


@PROPERTY
@given(instances())
def test_precedence_and_transfer_times(instance):
    g, a, topo, cfg, prio = instance
    tr = dg.simulate(g, a, topology=topo, priorities=prio, config=cfg)
    comp = _compute_times(g, a, topo, cfg.cost_model)
    trans = _transfer_times(g, a, topo, cfg.cost_model)
    np.testing.assert_allclose(tr.end - tr.start, comp, rtol=1e-9, atol=1e-12 * (1 + tr.makespan))
    assert np.all(tr.start >= 0)
    for e in range(g.n_edges):
        p, c = int(g.src[e]), int(g.dst[e])
        slack = 1e-9 * (1 + abs(tr.end[p]))
        if a[p] == a[c]:
            assert np.isnan(tr.edge_start[e]) and tr.edge_end[e] == tr.end[p]
        else:
            assert tr.end[p] <= tr.edge_start[e] <= tr.edge_end[e]
            assert tr.edge_end[e] >= tr.end[p] + trans[e] - slack
            if cfg.link_model == "ideal":
                assert tr.edge_start[e] == tr.end[p]
                np.testing.assert_allclose(tr.edge_end[e], tr.end[p] + trans[e], rtol=1e-12)
        assert tr.start[c] >= tr.edge_end[e]


@PROPERTY
@given(instances())
def test_streams_work_conservation_and_queue_order(instance):
    g, a, topo, cfg, prio = instance
    tr = dg.simulate(g, a, topology=topo, priorities=prio, config=cfg)
    ready = np.zeros(g.n_ops)
    np.maximum.at(ready, g.dst, tr.edge_end)
    for d in range(topo.n_devices):
        ops = np.flatnonzero(a == d)
        running = ops[tr.end[ops] > tr.start[ops]]  # zero-length ops occupy no time
        assert _max_concurrency(tr.start[running], tr.end[running]) <= cfg.streams
        for o in ops:
            # Work conservation: while o waits, all streams of its device are busy.
            points = {ready[o]} | {
                t for t in np.concatenate([tr.start[running], tr.end[running]]) if ready[o] < t < tr.start[o]
            }
            for t in points:
                if t < tr.start[o]:
                    busy = np.count_nonzero((tr.start[running] <= t) & (t < tr.end[running]))
                    assert busy >= cfg.streams, f"op {o} ready at {ready[o]} waits at {t} with a free stream"
            # Queue order among ops that were waiting when o started.
            waited = ops[(ready[ops] < tr.start[o]) & (tr.start[ops] > tr.start[o])]
            if cfg.queue_order == "fifo":
                assert np.all(ready[waited] >= ready[o]), f"op {o} overtook an op ready earlier"
            else:
                assert np.all(prio[waited] >= prio[o]), f"op {o} started before a lower-priority waiting op"


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(instances(), st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_determinism_and_batch_rows(instance, n_rows, seed):
    g, a, topo, cfg, prio = instance
    t1 = dg.simulate(g, a, topology=topo, priorities=prio, config=cfg)
    t2 = dg.simulate(g, a, topology=topo, priorities=prio, config=cfg)
    for name in ("start", "end", "edge_start", "edge_end"):
        np.testing.assert_array_equal(getattr(t1, name), getattr(t2, name))
    rng = np.random.default_rng(seed)
    rows = np.vstack([a, rng.integers(0, topo.n_devices, size=(n_rows, g.n_ops))])
    prios = np.vstack([prio, rng.normal(size=(n_rows, g.n_ops))])
    batch = dg.simulate_batch(g, rows, topology=topo, priorities=prios, config=cfg)
    single = [
        dg.simulate(g, r, topology=topo, priorities=p, config=cfg).makespan for r, p in zip(rows, prios)
    ]
    np.testing.assert_array_equal(batch, single)
    shared = dg.simulate_batch(g, rows, topology=topo, priorities=prio, config=cfg)
    np.testing.assert_array_equal(
        shared, [dg.simulate(g, r, topology=topo, priorities=prio, config=cfg).makespan for r in rows]
    )


# ---------------------------------------------------------------------------------------- jitter
def _jitter_case(n_ops=2000):
    g = dg.workloads.make("random", n_ops=n_ops, levels=40, edge_prob=0.05, skip_prob=0.001, seed=11)
    topo = Topology.uniform(4)
    a = np.random.default_rng(5).integers(0, 4, g.n_ops)
    return g, topo, a


def test_jitter_same_seed_same_trace_different_seed_differs():
    g, topo, a = _jitter_case(300)
    cfg = dg.SimConfig(compute_jitter=0.2, transfer_jitter=0.2, link_model="fifo", seed=7)
    t1 = dg.simulate(g, a, topology=topo, config=cfg)
    t2 = dg.simulate(g, a, topology=topo, config=cfg)
    for name in ("start", "end", "edge_start", "edge_end"):
        np.testing.assert_array_equal(getattr(t1, name), getattr(t2, name))
    t3 = dg.simulate(
        g,
        a,
        topology=topo,
        config=dg.SimConfig(compute_jitter=0.2, transfer_jitter=0.2, link_model="fifo", seed=8),
    )
    assert t3.makespan != t1.makespan and not np.array_equal(t3.end, t1.end)
    plain = dg.simulate(g, a, topology=topo, config=dg.SimConfig(link_model="fifo"))
    assert not np.array_equal(plain.end, t1.end)
    # Without jitter the seed is irrelevant.
    other = dg.simulate(g, a, topology=topo, config=dg.SimConfig(link_model="fifo", seed=123))
    np.testing.assert_array_equal(plain.end, other.end)


def test_jitter_factors_are_mean_one_lognormal():
    g, topo, a = _jitter_case()
    sigma = 0.3
    tr = dg.simulate(
        g, a, topology=topo, config=dg.SimConfig(compute_jitter=sigma, transfer_jitter=sigma, seed=3)
    )
    comp_f = (tr.end - tr.start) / _compute_times(g, a, topo, "topology")
    moved = tr.transfers
    edge_f = (tr.edge_end[moved] - tr.edge_start[moved]) / _transfer_times(g, a, topo, "topology")[moved]
    assert moved.size > 1000
    for f in (comp_f, edge_f):
        assert abs(f.mean() - 1.0) < 0.03, f.mean()
        assert abs(np.log(f).mean() + sigma**2 / 2) < 0.03
        assert abs(np.log(f).std() - sigma) < 0.03
    # Only the compute side jitters when only compute_jitter is set, and vice versa.
    only_c = dg.simulate(g, a, topology=topo, config=dg.SimConfig(compute_jitter=sigma, seed=3))
    np.testing.assert_allclose(
        only_c.edge_end[moved] - only_c.edge_start[moved],
        _transfer_times(g, a, topo, "topology")[moved],
        rtol=1e-9,
    )
    only_t = dg.simulate(g, a, topology=topo, config=dg.SimConfig(transfer_jitter=sigma, seed=3))
    np.testing.assert_allclose(only_t.end - only_t.start, _compute_times(g, a, topo, "topology"), rtol=1e-9)


@pytest.mark.parametrize("link_model, streams", [("ideal", 1), ("fifo", 1), ("fifo", 2)])
def test_jittered_run_is_the_model_with_scaled_durations(link_model, streams):
    """Factors recovered from an ideal-link run (same seed, same draws) drive the reference."""
    g, topo, a = _jitter_case(200)
    jit = {"compute_jitter": 0.4, "transfer_jitter": 0.4, "seed": 21}
    probe = dg.simulate(g, a, topology=topo, config=dg.SimConfig(**jit))
    comp_f = (probe.end - probe.start) / _compute_times(g, a, topo, "topology")
    trans = _transfer_times(g, a, topo, "topology")
    edge_f = np.ones(g.n_edges)
    moved = probe.transfers
    edge_f[moved] = (probe.edge_end[moved] - probe.edge_start[moved]) / trans[moved]
    cfg = dg.SimConfig(link_model=link_model, streams=streams, **jit)
    tr = dg.simulate(g, a, topology=topo, config=cfg)
    ref = reference_simulate(g, a, topo, None, cfg, comp_factor=comp_f, edge_factor=edge_f)
    for name in ("start", "end", "edge_start", "edge_end"):
        np.testing.assert_allclose(
            getattr(tr, name), getattr(ref, name), rtol=1e-9, equal_nan=True, err_msg=name
        )


def test_batch_with_jitter_is_deterministic_and_thread_independent():
    g, topo, a = _jitter_case(200)
    cfg = dg.SimConfig(compute_jitter=0.3, transfer_jitter=0.3, link_model="fifo", seed=5)
    rows = np.vstack([a] * 6 + [np.random.default_rng(2).integers(0, 4, size=(70, g.n_ops))])
    b1 = dg.simulate_batch(g, rows, topology=topo, config=cfg)
    b2 = dg.simulate_batch(g, rows, topology=topo, config=cfg)
    np.testing.assert_array_equal(b1, b2)
    assert np.unique(b1[:6]).size == 6  # identical rows draw their own factors
    previous = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        b3 = dg.simulate_batch(g, rows, topology=topo, config=cfg)
    finally:
        numba.set_num_threads(previous)
    np.testing.assert_array_equal(b1, b3)
    other_seed = dg.simulate_batch(
        g,
        rows,
        topology=topo,
        config=dg.SimConfig(compute_jitter=0.3, transfer_jitter=0.3, link_model="fifo", seed=6),
    )
    assert not np.array_equal(b1, other_seed)


# ---------------------------------------------------------------------------------------- Trace fields
@pytest.mark.parametrize("streams", STREAMS)
@pytest.mark.parametrize("link_model", LINK_MODELS)
def test_trace_fields(link_model, streams):
    topo = _topology("v100x8-dgx1")
    g = _random_graph(5, "topology", n_ops=60)
    cfg = dg.SimConfig(link_model=link_model, streams=streams)
    rng = np.random.default_rng(streams)
    for _ in range(3):
        a = rng.integers(0, topo.n_devices, g.n_ops)
        tr = dg.simulate(g, a, topology=topo, config=cfg)
        comp = _compute_times(g, a, topo, "topology")
        assert tr.n_devices == topo.n_devices and tr.time_unit == "s"
        assert tr.assignment.dtype == np.int32 and np.array_equal(tr.assignment, a)
        assert tr.start.shape == tr.end.shape == (g.n_ops,)
        assert tr.edge_start.shape == tr.edge_end.shape == (g.n_edges,)
        busy = tr.device_busy
        assert busy.shape == (topo.n_devices,)
        np.testing.assert_allclose(busy, np.bincount(a, weights=comp, minlength=topo.n_devices), rtol=1e-9)
        np.testing.assert_allclose(busy.sum(), comp.sum(), rtol=1e-9)
        np.testing.assert_array_equal(tr.transfers, np.flatnonzero(a[g.src] != a[g.dst]))
        assert tr.transfers.dtype.kind == "i"
        moved = tr.transfers
        assert np.all(tr.edge_end[moved] >= tr.edge_start[moved])
        assert not np.any(np.isnan(tr.edge_end))
        util = tr.utilisation
        assert util.shape == (topo.n_devices,)
        assert np.all(util >= 0) and np.all(util <= streams * (1 + 1e-12))
        if streams == 1:
            assert np.all(util <= 1 + 1e-12)
        np.testing.assert_allclose(util, busy / tr.makespan, rtol=1e-12)


def test_trace_of_an_empty_schedule_has_zero_utilisation():
    g = _graph([], [], [0.0, 0.0], [0.0, 0.0])
    tr = dg.simulate(g, [0, 1], config=RAW)
    assert tr.makespan == 0.0
    np.testing.assert_array_equal(tr.utilisation, [0.0, 0.0])


# ---------------------------------------------------------------------------------------- boundary errors
_G = _graph([0, 0], [1, 2], [1.0, 2.0, 3.0], [1.0, 1.0, 1.0], name="three")
_T2 = Topology.uniform(2)
_PRIO = dg.SimConfig(queue_order="priority")

BOUNDARY_CASES = {
    "assignment too short": (
        lambda: dg.simulate(_G, [0, 1], topology=_T2),
        ValueError,
        r"shape \(2,\).*3 ops",
    ),
    "assignment too long": (lambda: dg.simulate(_G, [0, 1, 1, 0], topology=_T2), ValueError, r"3 ops"),
    "assignment scalar": (lambda: dg.simulate(_G, 0, topology=_T2), ValueError, r"one assignment of shape"),
    "negative device": (lambda: dg.simulate(_G, [0, -1, 1], topology=_T2), ValueError, r"negative|0 <= id"),
    "negative device int32": (
        lambda: dg.simulate(_G, np.array([0, -1, 1], np.int32), topology=_T2),
        ValueError,
        r"negative|0 <= id",
    ),
    "fractional float device": (
        lambda: dg.simulate(_G, [0.0, 1.5, 1.0], topology=_T2),
        ValueError,
        r"1\.5.*not an integer device",
    ),
    "nan device": (
        lambda: dg.simulate(_G, [0.0, np.nan, 1.0], topology=_T2),
        ValueError,
        r"not an integer device",
    ),
    "bool dtype": (
        lambda: dg.simulate(_G, np.array([True, False, True]), topology=_T2),
        ValueError,
        r"integer device ids.*bool",
    ),
    "string dtype": (
        lambda: dg.simulate(_G, ["0", "1", "1"], topology=_T2),
        ValueError,
        r"integer device ids",
    ),
    "device out of topology": (
        lambda: dg.simulate(_G, [0, 2, 1], topology=_T2),
        ValueError,
        r"assignment\[1\] = 2.*2 devices",
    ),
    "device beyond int32": (lambda: dg.simulate(_G, [0, 2**40, 1]), ValueError, r"device id"),
    "graph not a DataflowGraph": (
        lambda: dg.simulate("ffnn", [0, 1, 1]),
        TypeError,
        r"expected a DataflowGraph.*load_graph",
    ),
    "graph in batch not a DataflowGraph": (
        lambda: dg.simulate_batch(None, [[0]]),
        TypeError,
        r"DataflowGraph",
    ),
    "topology a string": (
        lambda: dg.simulate(_G, [0, 1, 1], topology="p100x4"),
        TypeError,
        r"Topology.preset",
    ),
    "topology in batch wrong type": (
        lambda: dg.simulate_batch(_G, [[0, 1, 1]], topology=2.0),  # a device count is an int (DESIGN: topology=4)
        TypeError,
        r"topology must be a Topology",
    ),
    "priority mode without priorities": (
        lambda: dg.simulate(_G, [0, 1, 1], config=_PRIO),
        ValueError,
        r"needs priorities",
    ),
    "priorities too short": (
        lambda: dg.simulate(_G, [0, 1, 1], priorities=[0.0, 1.0], config=_PRIO),
        ValueError,
        r"priorities has shape \(2,\)",
    ),
    "priorities 2-D in simulate": (
        lambda: dg.simulate(_G, [0, 1, 1], priorities=np.zeros((2, 3)), config=_PRIO),
        ValueError,
        r"priorities has shape",
    ),
    "priorities NaN": (
        lambda: dg.simulate(_G, [0, 1, 1], priorities=[0.0, np.nan, 1.0], config=_PRIO),
        ValueError,
        r"finite",
    ),
    "priorities inf": (
        lambda: dg.simulate(_G, [0, 1, 1], priorities=[0.0, np.inf, 1.0], config=_PRIO),
        ValueError,
        r"finite",
    ),
    "batch priorities wrong row count": (
        lambda: dg.simulate_batch(_G, np.zeros((2, 3), int), priorities=np.zeros((3, 3)), config=_PRIO),
        ValueError,
        r"priorities has shape \(3, 3\).*\(2, 3\)",
    ),
    "batch priority mode without priorities": (
        lambda: dg.simulate_batch(_G, np.zeros((2, 3), int), config=_PRIO),
        ValueError,
        r"needs priorities",
    ),
    "batch 1-D": (lambda: dg.simulate_batch(_G, [0, 1, 1]), ValueError, r"\(B, 3\).*use simulate\(\)"),
    "batch 3-D": (lambda: dg.simulate_batch(_G, np.zeros((2, 2, 3), int)), ValueError, r"\(B, 3\)"),
    "batch wrong row length": (lambda: dg.simulate_batch(_G, np.zeros((2, 4), int)), ValueError, r"3 ops"),
    "batch negative device": (
        lambda: dg.simulate_batch(_G, [[0, 0, 0], [0, -2, 0]]),
        ValueError,
        r"negative|0 <= id",
    ),
    "batch device out of topology": (
        lambda: dg.simulate_batch(_G, [[0, 0, 0], [0, 0, 5]], topology=_T2),
        ValueError,
        r"2 devices",
    ),
    "batch fractional device": (
        lambda: dg.simulate_batch(_G, [[0, 0, 0.5]]),
        ValueError,
        r"not an integer device",
    ),
}
CONFIG_CASES = {
    "unknown link_model": ({"link_model": "shared"}, r"link_model must be one of"),
    "unknown cost_model": ({"cost_model": "flops"}, r"cost_model must be one of"),
    "unknown queue_order": ({"queue_order": "lifo"}, r"queue_order must be one of"),
    "streams 0": ({"streams": 0}, r"streams must be an integer >= 1"),
    "streams negative": ({"streams": -2}, r"streams must be an integer >= 1"),
    "streams float": ({"streams": 1.5}, r"streams must be an integer"),
    "streams bool": ({"streams": True}, r"streams must be an integer"),
    "negative compute jitter": ({"compute_jitter": -0.1}, r"compute_jitter is a lognormal sigma"),
    "NaN transfer jitter": ({"transfer_jitter": float("nan")}, r"transfer_jitter"),
    "huge jitter": ({"compute_jitter": 50.0}, r"compute_jitter"),
    "string jitter": ({"transfer_jitter": "0.1"}, r"transfer_jitter"),
    "float seed": ({"seed": 1.5}, r"seed must be an integer"),
    "zero time_divisor": ({"time_divisor": 0}, r"time_divisor must be a positive"),
    "negative time_divisor": ({"time_divisor": -1.0}, r"time_divisor"),
    "NaN time_divisor": ({"time_divisor": float("nan")}, r"time_divisor"),
}


@pytest.mark.parametrize("case", list(BOUNDARY_CASES))
def test_boundary_errors(case):
    call, exc, match = BOUNDARY_CASES[case]
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("case", list(CONFIG_CASES))
def test_simconfig_rejects_bad_values(case):
    kwargs, match = CONFIG_CASES[case]
    with pytest.raises(ValueError, match=match):
        dg.SimConfig(**kwargs)


@pytest.mark.parametrize("shape", [(2, 3), (1, 3)])
def test_simulate_rejects_2d_assignment(shape):
    with pytest.raises(ValueError, match=r"simulate_batch"):
        dg.simulate(_G, np.zeros(shape, dtype=np.int64), topology=_T2)


def test_simconfig_rejects_negative_seed():
    with pytest.raises(ValueError, match=r"SimConfig.seed"):
        dg.SimConfig(compute_jitter=0.1, seed=-1)


def test_simconfig_rejects_infinite_time_divisor():
    with pytest.raises(ValueError, match=r"time_divisor"):
        dg.SimConfig(time_divisor=float("inf"))


def test_valid_inputs_in_other_forms_are_accepted():
    ref = dg.simulate(_G, np.array([0, 1, 1]), topology=_T2).makespan
    for form in (
        [0, 1, 1],
        (0, 1, 1),
        np.array([0.0, 1.0, 1.0]),
        np.array([0, 1, 1], np.uint8),
        np.array([0, 1, 1], np.int32),
    ):
        assert dg.simulate(_G, form, topology=_T2).makespan == ref
    assert dg.simulate_batch(_G, [[0, 1, 1]], topology=_T2)[0] == ref
    assert dg.simulate_batch(_G, np.zeros((0, 3), int), topology=_T2).shape == (0,)
    # Priorities are ignored (not even checked) outside priority mode.
    assert dg.simulate(_G, [0, 1, 1], topology=_T2, priorities=[1.0]).makespan == ref


# ---------------------------------------------------------------------------------------- fast path
FAST_PATH_ERRORS = {
    "int64 too short": (lambda: dg.simulate(_G, np.array([0, 1]), topology=_T2), ValueError, r"3 ops"),
    "int32 too long": (lambda: dg.simulate(_G, np.zeros(4, np.int32)), ValueError, r"3 ops"),
    "int64 negative": (lambda: dg.simulate(_G, np.array([0, -1, 1])), ValueError, r"negative|0 <= id"),
    "int64 out of topology": (
        lambda: dg.simulate(_G, np.array([0, 2, 1]), topology=_T2),
        ValueError,
        r"assignment\[1\] = 2.*2 devices",
    ),
    "int64 beyond int32": (lambda: dg.simulate(_G, np.array([0, 2**40, 1])), ValueError, r"device id"),
    "int64 beyond implicit devices": (lambda: dg.simulate(_G, np.array([0, 300, 1])), ValueError, r"explicit Topology"),
    "int32 topology a string": (
        lambda: dg.simulate(_G, np.array([0, 1, 1], np.int32), topology="p100x4"),
        TypeError,
        r"Topology.preset",
    ),
    "int64 graph a string": (lambda: dg.simulate("ffnn", np.array([0, 1, 1])), TypeError, r"DataflowGraph"),
    "int64 config a dict": (lambda: dg.simulate(_G, np.array([0, 1, 1]), config={}), TypeError, r"SimConfig"),
    "int64 priority mode without priorities": (
        lambda: dg.simulate(_G, np.array([0, 1, 1]), config=_PRIO),
        ValueError,
        r"needs priorities",
    ),
}


@pytest.mark.parametrize("case", list(FAST_PATH_ERRORS))
def test_fast_path_errors(case):
    call, exc, match = FAST_PATH_ERRORS[case]
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("config", [dg.SimConfig(), dg.SimConfig.reference(), dg.SimConfig(compute_jitter=0.3, seed=4)])
def test_every_assignment_form_gives_the_same_trace(config):
    g = _random_graph(11, "topology", n_ops=40)
    rng = np.random.default_rng(3)
    a = rng.integers(0, 3, g.n_ops)
    ref = dg.simulate(g, a.tolist(), config=config)  # the fully checked path
    wide = np.stack([a, a]).T.astype(np.int32)
    for form in (a, a.astype(np.int32), wide[:, 0], a.astype(np.int16), a.astype(np.float64), tuple(a.tolist())):
        tr = dg.simulate(g, form, config=config)
        assert tr.makespan == ref.makespan
        assert tr.assignment.dtype == np.int32 and tr.assignment.flags.c_contiguous
        for name in ("start", "end", "edge_start", "edge_end"):
            np.testing.assert_array_equal(getattr(tr, name), getattr(ref, name))
        assert tr.n_devices == ref.n_devices and tr.time_unit == ref.time_unit


def test_read_only_assignments_reach_the_kernels_as_writable_arrays():
    # Numba types a read-only array apart and would compile (about a minute) and cache a second copy
    # of each kernel for it: `doppler place` once spent 75 s of a 2 s budget doing so.
    from doppler_gym.sim.dispatch import run_many, run_packed, value_range

    g = _random_graph(14, "topology", n_ops=30)
    a = np.random.default_rng(6).integers(0, 3, g.n_ops)
    ref = dg.simulate(g, a.tolist()).makespan
    batch_ref = dg.simulate_batch(g, np.stack([a, a[::-1]]).tolist())
    for dtype in (np.int64, np.int32):
        one, rows = a.astype(dtype), np.stack([a, a[::-1]]).astype(dtype)
        one.setflags(write=False)
        rows.setflags(write=False)
        for _ in range(2):  # the first call packs the problem, the second takes the cached one
            assert dg.simulate(g, one).makespan == ref
        np.testing.assert_array_equal(dg.simulate_batch(g, rows), batch_ref)
    for dispatcher, arg in ((run_packed, 3), (run_many, 6), (value_range, 0)):
        assert dispatcher.signatures, dispatcher
        for signature in dispatcher.signatures:
            assert signature[arg].mutable, (dispatcher, signature)


def test_trace_from_the_fast_path_behaves_like_a_dataclass():
    import copy
    import dataclasses
    import pickle

    tr = dg.simulate(_G, np.array([0, 1, 1]), topology=_T2)
    fields = {f.name for f in dataclasses.fields(tr)}
    assert set(dataclasses.asdict(tr)) == fields
    again = dataclasses.replace(tr)
    for other in (again, pickle.loads(pickle.dumps(tr)), copy.deepcopy(tr)):
        assert other.makespan == tr.makespan
        np.testing.assert_array_equal(other.end, tr.end)
        np.testing.assert_array_equal(other.edge_start, tr.edge_start)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tr.nope  # noqa: B018
    with pytest.raises(dataclasses.FrozenInstanceError):
        tr.makespan = 1.0


def test_lazy_trace_divides_times_once_whatever_is_read_first():
    import copy
    import pickle

    g = _random_graph(12, "raw", n_ops=30)
    a = np.random.default_rng(5).integers(0, 3, g.n_ops)
    cfg = dg.SimConfig(cost_model="raw", time_divisor=1e3)
    raw = dg.simulate(g, a, config=dg.SimConfig(cost_model="raw"))
    for first in ("start", "end", "edge_start", "edge_end"):
        tr = dg.simulate(g, a, config=cfg)
        frozen = pickle.loads(pickle.dumps(tr))  # copied before any field was read
        copied = copy.deepcopy(tr)
        getattr(tr, first)
        for other in (tr, frozen, copied):
            for name in ("start", "end", "edge_start", "edge_end", first):
                np.testing.assert_array_equal(getattr(other, name), getattr(raw, name) / 1e3)
        assert tr.makespan == raw.makespan / 1e3


def test_repeated_calls_recheck_devices_on_the_cached_problem():
    # The second and later calls of one (graph, topology, config) take the kernel's own range check.
    g = _random_graph(13, "raw", n_ops=25)
    cfg = dg.SimConfig(cost_model="raw")
    rng = np.random.default_rng(9)
    for topology in (None, Topology.uniform(5)):
        for _ in range(3):
            for high in (4, 2, 3, 4, 1):
                a = rng.integers(0, high + 1, g.n_ops)
                a[0] = high
                for form in (a, a.astype(np.int32)):
                    tr = dg.simulate(g, form, topology=topology, config=cfg)
                    ref = dg.simulate(g, a.tolist(), topology=topology, config=cfg)
                    assert tr.makespan == ref.makespan and tr.n_devices == ref.n_devices
                    assert tr.n_devices == (high + 1 if topology is None else 5)
                    np.testing.assert_array_equal(tr.end, ref.end)
                    assert tr.assignment.dtype == np.int32
        bad = a.copy()
        bad[3] = -1
        with pytest.raises(ValueError, match=r"negative|0 <= id"):
            dg.simulate(g, bad, topology=topology, config=cfg)
        with pytest.raises(ValueError, match=r"negative|0 <= id"):
            dg.simulate(g, bad.astype(np.int32), topology=topology, config=cfg)
        bad[3] = 2**40
        with pytest.raises(ValueError, match=r"device id|devices|Topology"):
            dg.simulate(g, bad, topology=topology, config=cfg)
        with pytest.raises(ValueError, match=r"3 ops|25 ops"):
            dg.simulate(g, a[:3], topology=topology, config=cfg)
    with pytest.raises(ValueError, match=r"5 devices"):
        dg.simulate(g, np.full(g.n_ops, 5), topology=Topology.uniform(5), config=cfg)
