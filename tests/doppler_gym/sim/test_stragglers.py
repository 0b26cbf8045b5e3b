"""Stragglers (``SimConfig(stragglers=...)``): hand-computed toys, exact integrals of the speed
profile, the time-warp identity on random DAGs, the what-if costs, the random model, bad input."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.straggler_profiles import advance, profile_arrays
from doppler_gym.sim.stragglers import MIN_OPEN_FACTOR, Straggler, StragglerModel
from doppler_gym.sim.whatif_analysis import whatif
from tests.doppler_gym.sim.sim_dag_helpers import random_edges

RAW = dg.SimConfig(cost_model="raw")


def _chain(flops, out_bytes) -> DataflowGraph:
    n = len(flops)
    return DataflowGraph(src=np.arange(n - 1), dst=np.arange(1, n), flops=np.array(flops, float),
                         out_bytes=np.array(out_bytes, float))


def _speed(stragglers, kind, index, t):
    """Speed factor of one device or link at time ``t``, from the straggler list itself (product of the
    covering factors): independent of the packed profile."""
    f = 1.0
    for s in stragglers:
        if s.kind == kind and s.index == index and s.start <= t < s.end:
            f *= s.factor
    return f


def _integral(stragglers, kind, index, a, b):
    """``integral_a^b speed dt``, summed piece by piece between the stragglers' boundaries."""
    cuts = sorted({a, b} | {x for s in stragglers if s.kind == kind and s.index == index
                            for x in (s.start, s.end) if a < x < b})
    return sum((hi - lo) * _speed(stragglers, kind, index, 0.5 * (lo + hi)) for lo, hi in zip(cuts[:-1], cuts[1:]))


# ---------------------------------------------------------------------------- hand-computed toys
def test_op_spanning_a_device_slowdown_ends_exactly():
    # op0 (4 units) on device 0 from 0; device 0 at half speed on [1, 3): 1 unit by 1, 1 more by 3,
    # the last 2 by 5. Its output (3 units) reaches device 1 at 8; op1 (2 units) ends at 10.
    g = _chain([4.0, 2.0], [3.0, 0.0])
    cfg = replace(RAW, stragglers=(Straggler("device", 0, 1.0, 3.0, 0.5),))
    tr = dg.simulate(g, np.array([0, 1]), config=cfg)
    assert tr.end[0] == 5.0 and tr.edge_end[0] == 8.0 and tr.makespan == 10.0
    # started inside the slowdown: op1 on device 1, slowed to a quarter on [0, 8.5) -> 0.125 unit
    # by 8.5 of 2, the remaining 1.875 at full speed -> 10.375
    cfg = replace(cfg, stragglers=cfg.stragglers + (Straggler("device", 1, 0.0, 8.5, 0.25),))
    assert dg.simulate(g, np.array([0, 1]), config=cfg).makespan == 10.375


def test_overlapping_stragglers_multiply():
    # [0, 2) at 0.5 and [1, 3) at 0.5: 0.5 by 1, 0.25 by 2, 0.5 by 3, then full speed: 4 units end at 5.75
    g = _chain([4.0], [0.0])
    cfg = replace(RAW, stragglers=(Straggler("device", 0, 0.0, 2.0, 0.5), Straggler("device", 0, 1.0, 3.0, 0.5)))
    assert dg.simulate(g, np.array([0]), config=cfg).makespan == 5.75


def test_stalled_device_resumes_after_the_stall():
    g = _chain([2.0], [0.0])
    cfg = replace(RAW, stragglers=(Straggler("device", 0, 1.0, 4.0, 0.0),))
    assert dg.simulate(g, np.array([0]), config=cfg).makespan == 5.0


@pytest.mark.parametrize("link_model", ["ideal", "fifo"])
def test_transfer_spanning_a_link_slowdown(link_model):
    # Topology costs: 1 FLOP/s devices, links of 1 B/s and 0.5 s latency. op0 (4 FLOP) ends at 4; its
    # 3 B leave over link 0 -> 1, at a quarter of the bandwidth on [5, 6): 1 B by 5, 0.25 B by 6, the
    # last 1.75 B by 7.75, arriving 0.5 s later at 8.25; op1 (2 FLOP) ends at 10.25.
    topo = dg.Topology.uniform(2, speed=1.0, bandwidth=1.0, latency=0.5)
    g = _chain([4.0, 2.0], [3.0, 0.0])
    cfg = dg.SimConfig(link_model=link_model, stragglers=(Straggler("link", (0, 1), 5.0, 6.0, 0.25),))
    tr = dg.simulate(g, np.array([0, 1]), topology=topo, config=cfg)
    assert tr.edge_start[0] == 4.0 and tr.edge_end[0] == 8.25 and tr.makespan == 10.25
    # the reverse link is not slowed
    cfg_back = replace(cfg, stragglers=(Straggler("link", (1, 0), 5.0, 6.0, 0.25),))
    assert dg.simulate(g, np.array([0, 1]), topology=topo, config=cfg_back).makespan == 9.5


@pytest.mark.parametrize("link_model", ["ideal", "fifo"])
def test_multi_hop_route_slows_only_on_its_slowed_hop(link_model):
    # Ring of 3 (1 B/s, no latency): 0 -> 1 is direct... use a ring of 4 so 0 -> 2 goes 0 -> 1 -> 2
    # (store-and-forward). op0 (1 FLOP/s device, 1 FLOP) ends at 1; 2 B: hop 0->1 takes [1, 3); hop 1->2 at
    # half bandwidth on [0, 4): 0.5 B by 4, 1.5 B more by 5.5; op1 (1 FLOP) ends at 6.5.
    topo = dg.Topology.ring(4, speed=1.0, bandwidth=1.0, latency=0.0)
    assert topo.route(0, 2) in ([0, 1, 2], [0, 3, 2])
    mid = tuple(topo.route(0, 2)[1:])
    g = _chain([1.0, 1.0], [2.0, 0.0])
    cfg = dg.SimConfig(link_model=link_model, stragglers=(Straggler("link", mid, 0.0, 4.0, 0.5),))
    tr = dg.simulate(g, np.array([0, 2]), topology=topo, config=cfg)
    assert tr.edge_end[0] == 5.5 and tr.makespan == 6.5


def test_straggler_on_an_idle_device_or_unused_link_costs_nothing():
    g = _chain([4.0, 2.0], [3.0, 0.0])
    stragglers = (Straggler("device", 2, 0.0, 100.0, 0.1), Straggler("link", (1, 0), 0.0, 100.0, 0.1),
                  Straggler("device", 0, 1.0, 3.0, 0.5))
    w = whatif(g, np.array([0, 1]), topology=dg.Topology.uniform(3), config=replace(RAW, stragglers=stragglers))
    assert w.nominal_makespan == 9.0 and w.makespan == 10.0
    assert w.cost.tolist() == [0.0, 0.0, 1.0]
    assert w.trace.straggler_cost is w.cost and w.trace.nominal_makespan == 9.0
    assert w.slowdown == w.trace.straggler_slowdown == pytest.approx(10.0 / 9.0)


def test_whatif_leave_one_out_and_alone():
    # op0 and op1 (4 units each) in parallel on devices 0 and 1, joined by op2 (1 unit) on device 0;
    # no bytes move. Nominal: 5. Both devices at half speed all run: 8 + 2 = 10. Without device 0's
    # straggler: op1 ends at 8, op2 at 9 (cost 1); without device 1's: op0 ends at 8, op2 at 10 (cost 0).
    # Alone: device 0's gives 10 (cost 5), device 1's gives 9 (cost 4).
    g = DataflowGraph(src=np.array([0, 1]), dst=np.array([2, 2]), flops=np.array([4.0, 4.0, 1.0]),
                      out_bytes=np.zeros(3))
    s = (Straggler("device", 0, 0.0, math.inf, 0.5), Straggler("device", 1, 0.0, math.inf, 0.5))
    a = np.array([0, 1, 0])
    loo = whatif(g, a, config=RAW, stragglers=s)
    alone = whatif(g, a, config=RAW, stragglers=s, method="alone")
    assert (loo.nominal_makespan, loo.makespan, loo.method) == (5.0, 10.0, "leave_one_out")
    assert loo.cost.tolist() == [1.0, 0.0]
    assert alone.cost.tolist() == [5.0, 4.0]
    # the config's own stragglers are studied when none are given
    assert whatif(g, a, config=replace(RAW, stragglers=s)).cost.tolist() == [1.0, 0.0]


# ---------------------------------------------------------------------------- exact integrals
def test_each_op_and_transfer_does_its_work_over_the_speed_profile():
    """On random overlapping stragglers, every op's ``integral_start^end speed`` equals its compute time at
    full speed, and every transfer's bytes / bandwidth equals the link's integral over
    ``[edge_start, edge_end - latency]`` (the integrals summed piece by piece from the straggler list)."""
    rng = np.random.default_rng(7)
    n = 12
    flops = rng.uniform(1.0, 5.0, n)
    out_bytes = rng.uniform(1.0, 5.0, n)
    g = _chain(flops, out_bytes)
    assignment = np.arange(n) % 2  # alternate: every edge crosses 0 -> 1 or 1 -> 0
    topo = dg.Topology.uniform(2, speed=1.0, bandwidth=2.0, latency=0.25)
    stragglers = []
    for _ in range(10):
        kind = "device" if rng.random() < 0.5 else "link"
        index = int(rng.integers(2)) if kind == "device" else ((0, 1), (1, 0))[int(rng.integers(2))]
        start = float(rng.uniform(0.0, 30.0))
        stragglers.append(Straggler(kind, index, start, start + float(rng.uniform(0.5, 8.0)),
                                    float(rng.uniform(0.1, 1.0))))
    for link_model in ("ideal", "fifo"):
        cfg = dg.SimConfig(link_model=link_model, stragglers=tuple(stragglers))
        tr = dg.simulate(g, assignment, topology=topo, config=cfg)
        nominal = dg.simulate(g, assignment, topology=topo, config=dg.SimConfig(link_model=link_model))
        assert tr.makespan > nominal.makespan
        for o in range(n):
            done = _integral(stragglers, "device", int(assignment[o]), tr.start[o], tr.end[o])
            assert done == pytest.approx(flops[o], rel=1e-12)
        for e in range(n - 1):
            link = (int(assignment[e]), int(assignment[e + 1]))
            sent = _integral(stragglers, "link", link, tr.edge_start[e], tr.edge_end[e] - 0.25)
            assert sent == pytest.approx(out_bytes[e] / 2.0, rel=1e-12)


# ---------------------------------------------------------------------------- time warp on random DAGs
WARP = ((2.0, 5.0, 0.5), (7.0, 9.0, 0.25), (12.0, 20.0, 0.5))  # (start, end, factor), disjoint


def _warp_inverse(x: float) -> float:
    """The time ``t`` with ``integral_0^t speed = x`` for the profile ``WARP`` (written directly)."""
    t = 0.0
    for s, e, f in WARP:
        if x <= s - t:
            return t + x
        x -= s - t
        if x <= (e - s) * f:
            return s + x / f
        x -= (e - s) * f
        t = e
    return t + x


def _warp_config(config: dg.SimConfig, n_devices: int) -> dg.SimConfig:
    """``config`` with every device and every link on the profile ``WARP``."""
    resources = [("device", d) for d in range(n_devices)]
    resources += [("link", (a, b)) for a in range(n_devices) for b in range(n_devices) if a != b]
    return replace(config, stragglers=tuple(Straggler(k, i, s, e, f) for k, i in resources for s, e, f in WARP))


@pytest.mark.parametrize("model", ["fifo queues", "fifo links", "2 streams", "priority"])
@pytest.mark.parametrize("seed", [0, 1])
def test_one_profile_everywhere_warps_time(model, seed):
    """Every device and link on one speed profile (raw costs: no latency) runs the nominal schedule in warped
    time: each start and end is ``tau^-1`` of the nominal one, ``tau(t) = integral_0^t speed``. Integer costs
    and dyadic factors keep the arithmetic exact, so same-time ties (and their order) survive."""
    rng, src, dst = random_edges(30, seed)
    g = DataflowGraph(src=src, dst=dst, flops=rng.integers(1, 4, 30).astype(float),
                      out_bytes=rng.integers(0, 3, 30).astype(float))
    assignment = rng.integers(0, 3, 30)
    base = {"fifo queues": RAW, "fifo links": replace(RAW, link_model="fifo"), "2 streams": replace(RAW, streams=2),
            "priority": replace(RAW, queue_order="priority")}[model]
    prio = rng.permutation(30).astype(float)
    nominal = dg.simulate(g, assignment, topology=dg.Topology.uniform(3), priorities=prio, config=base)
    warped = dg.simulate(g, assignment, topology=dg.Topology.uniform(3), priorities=prio, config=_warp_config(base, 3))
    assert nominal.makespan > 12.0  # the profile matters
    expect = np.vectorize(_warp_inverse)
    np.testing.assert_array_equal(warped.start, expect(nominal.start))
    np.testing.assert_array_equal(warped.end, expect(nominal.end))
    np.testing.assert_array_equal(warped.edge_end, expect(nominal.edge_end))


def test_whole_run_factor_scales_every_time():
    """Factor f on every device (and link) from 0 to inf: every time is the nominal one / f."""
    g = dg.load_graph("paper/chainmm")
    cfg = dg.SimConfig.reference()
    a = np.random.default_rng(3).integers(0, 4, g.n_ops)
    nominal = dg.simulate(g, a, config=cfg)
    f = 0.25
    slow = (tuple(Straggler("device", d, 0.0, math.inf, f) for d in range(4))
            + tuple(Straggler("link", (x, y), 0.0, math.inf, f) for x in range(4) for y in range(4) if x != y))
    tr = dg.simulate(g, a, config=replace(cfg, stragglers=slow))
    np.testing.assert_array_equal(tr.end, nominal.end / f)
    assert tr.makespan == nominal.makespan / f


def test_factor_one_and_late_stragglers_change_nothing():
    """A straggler of factor 1 changes no time (to rounding); one that starts after the run ends changes none
    at all: the event loop then agrees bit for bit with the list kernel of the reference mode."""
    g = dg.load_graph("paper/ffnn")
    cfg = dg.SimConfig.reference()
    a = np.random.default_rng(5).integers(0, 4, g.n_ops)
    nominal = dg.simulate(g, a, config=cfg)
    late = replace(cfg, stragglers=(Straggler("device", 0, 2 * nominal.makespan, math.inf, 0.1),
                                    Straggler("link", (0, 1), 2 * nominal.makespan, math.inf, 0.1)))
    tr = dg.simulate(g, a, config=late)
    for field in ("start", "end", "edge_start", "edge_end"):
        np.testing.assert_array_equal(getattr(tr, field), getattr(nominal, field))
    unit = replace(cfg, stragglers=(Straggler("device", 1, 0.0, nominal.makespan / 2, 1.0),
                                    Straggler("link", (1, 2), 0.0, nominal.makespan / 2, 1.0)))
    np.testing.assert_allclose(dg.simulate(g, a, config=unit).end, nominal.end, rtol=1e-12)


def test_simulate_batch_matches_simulate_with_stragglers():
    g = dg.workloads.make("ffnn")
    topo = dg.Topology.preset("p100x4")
    batch = np.random.default_rng(2).integers(0, 4, (6, g.n_ops))
    nominal = dg.simulate(g, batch[0], topology=topo).makespan
    model = StragglerModel(device_rate=1.0, link_rate=0.3)
    cfg = dg.SimConfig(link_model="fifo", stragglers=model.draw(topo, 11, horizon=nominal))
    assert cfg.stragglers
    out = dg.simulate_batch(g, batch, topology=topo, config=cfg)
    assert out.tolist() == [dg.simulate(g, row, topology=topo, config=cfg).makespan for row in batch]


# ---------------------------------------------------------------------------- random model and profiles
def test_random_model_is_deterministic_by_seed():
    topo = dg.Topology.preset("v100x8-dgx1")
    model = StragglerModel(device_rate=0.7, link_rate=0.2, duration=(0.1, 0.3), factor=(0.3, 0.6))
    a = model.draw(topo, 42, horizon=2.0)
    assert a == model.draw(topo, np.random.default_rng(42), horizon=2.0)
    assert a != model.draw(topo, 43, horizon=2.0)
    for s in a:
        assert 0.0 <= s.start < 2.0 and 0.2 - 1e-12 <= s.end - s.start <= 0.6 + 1e-12 and 0.3 <= s.factor <= 0.6
        if s.kind == "link":
            assert topo.bandwidth[s.index] > 0  # only real links
    # the mean count per resource is the rate (Poisson): 400 draws of 8 devices, 32 links
    counts = np.array([[sum(s.kind == k for s in model.draw(topo, seed, horizon=1.0)) for k in ("device", "link")]
                       for seed in range(400)])
    n_links = int((topo.bandwidth > 0).sum())
    assert counts[:, 0].mean() / 8 == pytest.approx(0.7, abs=0.05)
    assert counts[:, 1].mean() / n_links == pytest.approx(0.2, abs=0.03)


def test_profile_arrays_merge_overlaps():
    s = (Straggler("device", 1, 1.0, 3.0, 0.5), Straggler("device", 1, 2.0, 4.0, 0.5),
         Straggler("link", (0, 1), 0.0, 1.0, 0.25))
    ptr, seg = profile_arrays(s, 2, divisor=10.0)
    assert ptr.tolist() == [0, 0, 3, 3, 4, 4, 4]  # device 1: 3 segments; link 0 -> 1 (resource 2 + 1): 1
    k = 4
    assert seg[:k].tolist() == [10.0, 20.0, 30.0, 0.0] and seg[k : 2 * k].tolist() == [20.0, 30.0, 40.0, 10.0]
    assert seg[2 * k :].tolist() == [0.5, 0.25, 0.5, 0.25]
    # 25 units from 0: 10 by 10, 5 more by 20, 2.5 by 30, 5 by 40, the last 2.5 by 42.5
    assert advance(ptr, seg, 1, 0.0, 25.0) == 42.5


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs, match", [
    ({"kind": "gpu", "index": 0}, "kind"),
    ({"index": -1}, "device id"),
    ({"kind": "link", "index": 3}, "pair"),
    ({"kind": "link", "index": (1, 1)}, "same device"),
    ({"start": 2.0, "end": 1.0}, "start < end"),
    ({"factor": 1.5}, r"\[0, 1\]"),
    ({"factor": 0.0, "end": math.inf}, "finite end"),
    ({"factor": 1e-300, "end": math.inf}, "1e-300 with end=inf"),
])
def test_bad_stragglers_are_clear_errors(kwargs, match):
    fields = {"kind": "device", "index": 0, "start": 0.0, "end": 1.0, "factor": 0.5, **kwargs}
    with pytest.raises(ValueError, match=match):
        Straggler(**fields)


def test_a_tiny_factor_needs_a_finite_end_and_the_least_open_factor_runs():
    g = dg.load_graph("paper/chainmm")
    a = np.arange(g.n_ops) % 4
    assert Straggler("device", 0, 0.0, 1.0, 1e-300).factor == 1e-300  # a stall that ends
    with pytest.raises(ValueError, match="factor >= 1e-06"):
        Straggler("device", 0, 0.0, math.inf, 0.5e-6)
    least = (Straggler("device", 0, 0.0, math.inf, MIN_OPEN_FACTOR),)
    slow = dg.simulate(g, a, config=dg.SimConfig(stragglers=least)).makespan
    assert math.isfinite(slow) and slow > dg.simulate(g, a).makespan


def test_stragglers_outside_the_run_are_clear_errors():
    g = _chain([1.0, 1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="device 5 is not in 0..1"):
        dg.simulate(g, np.array([0, 1]), config=replace(RAW, stragglers=(Straggler("device", 5, 0, 1, 0.5),)))
    ring = dg.Topology.ring(4)
    with pytest.raises(ValueError, match="no direct link 0 -> 2"):
        dg.simulate(g, np.array([0, 2]), topology=ring,
                    config=dg.SimConfig(stragglers=(Straggler("link", (0, 2), 0, 1, 0.5),)))
    with pytest.raises(TypeError, match="sequence of Straggler"):
        dg.SimConfig(stragglers="device:0")
    with pytest.raises(ValueError, match="teccl"):
        dg.SimConfig(multicast="teccl", stragglers=(Straggler("link", (0, 1), 0, 1, 0.5),))
    with pytest.raises(ValueError, match="horizon"):
        StragglerModel().draw(4, 0)
    with pytest.raises(ValueError, match="method"):
        whatif(g, np.array([0, 1]), config=RAW, method="both")


def test_config_with_stragglers_is_hashable_and_a_list_becomes_a_tuple():
    s = [Straggler("device", 0, 0.0, 1.0, 0.5)]
    a, b = dg.SimConfig(stragglers=s), dg.SimConfig(stragglers=tuple(s))
    assert a.stragglers == tuple(s) and hash(a) == hash(b) and a == b
    assert dg.SimConfig().stragglers == ()


def test_random_model_per_device_rates():
    model = StragglerModel(device_rate=(3.0, 0.0, 0.0), duration=(0.1, 0.1), factor=(0.5, 0.5))
    drawn = [model.draw(3, seed, horizon=1.0) for seed in range(200)]
    assert all(s.index == 0 for d in drawn for s in d)  # only device 0 ever straggles
    assert np.mean([len(d) for d in drawn]) == pytest.approx(3.0, abs=0.3)
    with pytest.raises(ValueError, match="one per device"):
        model.draw(4, 0, horizon=1.0)
    with pytest.raises(ValueError, match="device_rate"):
        StragglerModel(device_rate=(1.0, -1.0))
