"""Per-device memory (doppler_gym/sim/memory.py): a hand-computed toy, enforcement, and a brute-force
check of the peak on random DAGs against a second implementation written here."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.memory import memory_profile
from doppler_gym.topology.types import Topology

TRACK = SimConfig(memory="track")
ENFORCE = SimConfig(memory="enforce")


def toy() -> DataflowGraph:
    """0 -> 1, 0 -> 2, 1 -> 3, 2 -> 3; with unit speed and bandwidth, an op takes ``flops`` s and a
    transfer ``out_bytes`` s."""
    return DataflowGraph(
        src=[0, 0, 1, 2], dst=[1, 2, 3, 3], flops=[2, 3, 1, 2], out_bytes=[10, 4, 6, 1],
        workspace_bytes=[0, 5, 0, 7], persistent_bytes=[100, 0, 50, 0], name="toy",
    )


def toy_topology(memory: object = 1e9) -> Topology:
    return Topology(speed=np.ones(2), memory=np.broadcast_to(np.asarray(memory, float), (2,)).copy(),
                    bandwidth=np.ones((2, 2)), latency=np.zeros((2, 2)))


TOY_ASSIGNMENT = np.array([0, 0, 1, 0])
# By hand: op0 [0,2] d0; op1 [2,5] d0; 0->2 moves 10 B: arrives 12; op2 [12,13] d1; 2->3 moves 6 B:
# arrives 19; op3 [19,21] d0. Device 0 holds: persistent 100 [0,21]; op0's output 10 [2,12] (its
# transfer to d1 ends at 12, after op1 ends at 5); op1's workspace 5 [2,5]; op1's output 4 [5,21];
# op2's output received 6 [19,21]; op3's workspace 7 [19,21]; op3's output 1 [21,21].
# Device 1: persistent 50 [0,21]; op0's output received 10 [12,13]; op2's output 6 [13,19] (until
# its transfer is done). Allocations count before frees at one instant.
D0_TIMELINE = [(0, 100), (2, 110), (2, 115), (5, 119), (5, 114), (12, 104), (19, 110), (19, 117), (21, 118),
               (21, 117), (21, 110), (21, 106), (21, 100), (21, 0)]  # the frees at 21 in one of their orders
D1_TIMELINE = [(0, 50), (12, 60), (13, 66), (13, 56), (19, 50), (21, 0)]


def test_toy_times_are_the_hand_computed_ones():
    tr = dg.simulate(toy(), TOY_ASSIGNMENT, topology=toy_topology(), config=TRACK)
    np.testing.assert_array_equal(tr.start, [0, 2, 12, 19])
    np.testing.assert_array_equal(tr.end, [2, 5, 13, 21])
    assert tr.makespan == 21


def test_toy_peak_and_timeline_by_hand():
    tr = dg.simulate(toy(), TOY_ASSIGNMENT, topology=toy_topology(), config=TRACK)
    mem = tr.memory
    np.testing.assert_array_equal(tr.peak_memory, [119, 66])
    np.testing.assert_array_equal(mem.peak_time, [5, 13])
    np.testing.assert_array_equal(mem.persistent, [100, 50])
    for d, want in ((0, D0_TIMELINE), (1, D1_TIMELINE)):
        t, b = mem.timeline(d)
        # events of one instant: allocations first; frees of one instant may come in any order
        assert t[0] == 0 and b[0] == 0
        got = list(zip(t[1:].tolist(), b[1:].tolist()))
        assert [x[0] for x in got] == [x[0] for x in want]
        assert max(got) == max(want) and got[-1] == want[-1]
        for time in {x[0] for x in want}:  # the largest level at each instant is the same
            assert max(v for s, v in got if s == time) == max(v for s, v in want if s == time)
    assert mem.violation is None and tr.feasible


def test_toy_times_unchanged_by_memory_mode():
    g, topo = toy(), toy_topology()
    off = dg.simulate(g, TOY_ASSIGNMENT, topology=topo)
    assert off.memory is None and off.feasible
    for cfg in (TRACK, ENFORCE):
        tr = dg.simulate(g, TOY_ASSIGNMENT, topology=toy_topology(1.0), config=cfg)
        np.testing.assert_array_equal(tr.start, off.start)
        np.testing.assert_array_equal(tr.edge_end, off.edge_end)
        assert tr.makespan == off.makespan
    with pytest.raises(ValueError, match="memory='track'"):
        _ = off.peak_memory


@pytest.mark.parametrize("capacity, fits", [(119.0, True), (118.5, False), (120.0, True)])
def test_enforce_just_below_and_above_the_peak(capacity, fits):
    g = toy()
    tr = dg.simulate(g, TOY_ASSIGNMENT, topology=toy_topology([capacity, 1e9]), config=ENFORCE)
    assert tr.feasible is fits
    batch = dg.simulate_batch(g, TOY_ASSIGNMENT[None, :], topology=toy_topology([capacity, 1e9]), config=ENFORCE)
    assert (batch[0] == 21.0) if fits else (batch[0] == np.inf)
    if not fits:
        v = tr.memory_violation
        assert (v.device, v.time, v.peak, v.capacity) == (0, 5.0, 119.0, capacity)
        assert v.excess == pytest.approx(119.0 - capacity)
        assert "device 0" in str(v)
    tracked = dg.simulate(g, TOY_ASSIGNMENT, topology=toy_topology([capacity, 1e9]), config=TRACK)
    assert tracked.feasible  # track reports, never rejects
    assert (tracked.memory_violation is None) is fits


def test_enforce_reports_the_earliest_device():
    # d0 first exceeds 110 at t=2 (115); d1 first exceeds 55 at t=12 (60): device 0 at t=2 is first.
    tr = dg.simulate(toy(), TOY_ASSIGNMENT, topology=toy_topology([110.0, 55.0]), config=ENFORCE)
    v = tr.memory_violation
    assert (v.device, v.time, v.excess) == (0, 2.0, 9.0)
    np.testing.assert_array_equal(tr.memory.excess, [9.0, 11.0])
    # with room on d0 the violation is d1's, at t=12, peak 66
    v = dg.simulate(toy(), TOY_ASSIGNMENT, topology=toy_topology([1e9, 55.0]), config=ENFORCE).memory_violation
    assert (v.device, v.time, v.peak) == (1, 12.0, 66.0)


def test_paper_graph_has_no_memory_and_keeps_parity():
    g = dg.load_graph("paper/chainmm")
    a = np.arange(g.n_ops) % 4
    ref = SimConfig.reference()
    off = dg.simulate(g, a, config=ref)
    tr = dg.simulate(g, a, config=dataclasses.replace(ref, memory="enforce"))
    assert tr.makespan == off.makespan and tr.feasible
    np.testing.assert_array_equal(tr.peak_memory, np.zeros(4))  # out_bytes are times there, not sizes


# ------------------------------------------------------------------ brute force on random DAGs
def brute_force_peaks(g: DataflowGraph, tr) -> np.ndarray:
    """Peak per device from the module's rules written independently: list every closed interval
    with Python loops, then the largest sum over the intervals containing each endpoint."""
    a = tr.assignment.tolist()
    start, end, arrive = tr.start.tolist(), tr.end.tolist(), tr.edge_end.tolist()
    held = []  # (device, t0, t1, bytes)
    for i in range(g.n_ops):
        out = float(g.out_bytes[i])
        last = end[i]
        copies: dict[int, list[float]] = {}
        for k in range(g.n_edges):
            if g.src[k] != i:
                continue
            j = int(g.dst[k])
            if a[j] == a[i]:
                last = max(last, end[j])
            else:
                last = max(last, arrive[k])
                first, use = copies.get(a[j], [np.inf, -np.inf])
                copies[a[j]] = [min(first, arrive[k]), max(use, end[j])]
        held.append((a[i], end[i], last, out))
        held.extend((r, t0, t1, out) for r, (t0, t1) in copies.items())
        held.append((a[i], start[i], end[i], float(g.workspace_bytes[i])))
        held.append((a[i], 0.0, tr.makespan, float(g.persistent_bytes[i])))
    peaks = np.zeros(tr.n_devices)
    for d in range(tr.n_devices):
        mine = [h for h in held if h[0] == d]
        for t in {h[1] for h in mine} | {h[2] for h in mine}:
            peaks[d] = max(peaks[d], sum(h[3] for h in mine if h[1] <= t <= h[2]))
    return peaks


@pytest.mark.parametrize("seed", range(6))
def test_peak_matches_brute_force_on_random_dags(seed):
    rng = np.random.default_rng(seed)
    base = dg.workloads.make("random", n_ops=int(rng.integers(5, 25)), seed=seed)
    n = base.n_ops
    g = dataclasses.replace(
        base, units="physical",
        out_bytes=rng.integers(0, 50, n).astype(float),  # integer bytes: exact sums, ties in time happen
        workspace_bytes=rng.integers(0, 3, n) * rng.integers(0, 20, n).astype(float),
        persistent_bytes=rng.integers(0, 2, n) * rng.integers(0, 100, n).astype(float),
    )
    d = int(rng.integers(2, 5))
    topo = Topology.uniform(d, speed=1.0, bandwidth=float(rng.choice([1.0, 4.0])),
                            latency=float(rng.choice([0.0, 1.0])))
    configs = [TRACK, SimConfig(memory="track", link_model="fifo"),
               SimConfig(memory="track", compute_jitter=0.3, transfer_jitter=0.3, seed=seed)]
    for cfg in configs:
        for _ in range(3):
            a = rng.integers(0, d, n)
            tr = dg.simulate(g, a, topology=topo, config=cfg)
            want = brute_force_peaks(g, tr)
            np.testing.assert_allclose(tr.peak_memory, want, rtol=1e-12, atol=0)
            again = memory_profile(g, tr, capacity=topo.memory)  # the public helper on a trace
            np.testing.assert_array_equal(again.peak, tr.peak_memory)


def test_batch_enforce_matches_simulate_row_by_row():
    rng = np.random.default_rng(7)
    base = dg.workloads.make("random", n_ops=20, seed=3)
    g = dataclasses.replace(base, units="physical", out_bytes=rng.integers(1, 50, 20).astype(float),
                            persistent_bytes=rng.integers(0, 40, 20).astype(float))
    rows = rng.integers(0, 3, (16, 20))
    loose = Topology.uniform(3, speed=1.0, bandwidth=2.0, latency=0.0)
    worst = [dg.simulate(g, r, topology=loose, config=TRACK).peak_memory.max() for r in rows]
    topo = Topology.uniform(3, speed=1.0, bandwidth=2.0, latency=0.0, memory=float(np.median(worst)))
    cfg = SimConfig(memory="enforce")
    got = dg.simulate_batch(g, rows, topology=topo, config=cfg)
    plain = dg.simulate_batch(g, rows, topology=topo)
    for b in range(rows.shape[0]):
        tr = dg.simulate(g, rows[b], topology=topo, config=cfg)
        assert np.isinf(got[b]) == (not tr.feasible) == (brute_force_peaks(g, tr) > topo.memory).any()
    feasible = np.isfinite(got)
    assert 0 < feasible.sum() < rows.shape[0]  # the instance mixes both
    np.testing.assert_array_equal(got[feasible], plain[feasible])  # enforcing never changes a time
    jitter = SimConfig(memory="enforce", compute_jitter=0.2, seed=1)
    got = dg.simulate_batch(g, rows, topology=topo, config=jitter)
    plain = dg.simulate_batch(g, rows, topology=topo, config=dataclasses.replace(jitter, memory="off"))
    assert np.isinf(got).any()
    np.testing.assert_array_equal(got[np.isfinite(got)], plain[np.isfinite(got)])


def test_memory_mode_is_checked():
    with pytest.raises(ValueError, match="memory must be one of"):
        SimConfig(memory="on")
