"""Calibration and fidelity on CPU workers: structure and units (CPU timings are not GPU timings,
so no accuracy is asserted here; the GPU check reports it)."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from envs_real import Calibration, FidelityReport, RealBackend, calibrate, fidelity, sample_placements
from envs_real.calibration import critical_path_placement, fit_latency_bandwidth
from tests.envs_real.real_helpers import cost_only_graph, small_ffnn


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b by counting pairs (the textbook definition, ties corrected); NaN when one
    side is constant."""
    conc = disc = ties_x = ties_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif dx == dy:
                conc += 1
            else:
                disc += 1
    denom = np.sqrt((conc + disc + ties_x) * (conc + disc + ties_y))
    return (conc - disc) / denom if denom > 0 else float("nan")


def test_fit_latency_bandwidth_recovers_latency_and_bandwidth():
    x = np.array([1e3, 1e4, 1e5, 1e6])  # [B]
    lat, bw = fit_latency_bandwidth(x, 2e-5 + x / 5e9)
    assert lat == pytest.approx(2e-5) and bw == pytest.approx(5e9)
    # no size dependence: the latency only, and a bandwidth at which the largest transfer costs a
    # thousandth of the largest delay: 1e6 B / (1e-5 s * 1e-3) = 1e14 B/s
    lat, bw = fit_latency_bandwidth(x, np.full(4, 1e-5))
    assert lat == pytest.approx(1e-5) and bw == pytest.approx(1e14)
    # delays that shrink with size: the intercept is the latency, the bandwidth the negligible one
    y = 1e-3 - x / 1e9  # largest delay 1e-3 - 1e-6 s
    lat, bw = fit_latency_bandwidth(x, y)
    assert lat == pytest.approx(1e-3) and bw == pytest.approx(1e6 / ((1e-3 - 1e-6) * 1e-3))
    lat, bw = fit_latency_bandwidth(x, -1e-6 + x / 1e9)  # a negative intercept: no negative latency
    assert lat == 0.0 and bw == pytest.approx(1e9)


def test_kendall_tau_b_by_hand():
    assert kendall_tau_b(np.array([1, 2, 3]), np.array([3, 2, 1])) == -1.0
    # pairs (0,1) discordant, (0,2) and (1,2) concordant: (2 - 1) / 3
    assert kendall_tau_b(np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 2.0])) == pytest.approx(1 / 3)
    # one pair tied in y, five concordant: 5 / sqrt(5 * 6)
    assert kendall_tau_b(np.arange(4.0), np.array([1.0, 1.0, 2.0, 3.0])) == pytest.approx(5 / np.sqrt(30))
    assert np.isnan(kendall_tau_b(np.array([1.0, 2.0]), np.array([5.0, 5.0])))


def test_calibrate_builds_a_seconds_instance():
    w = small_ffnn()
    be = RealBackend("cpu:2", repeats=2, warmup=1, workload=w)
    cal = calibrate(w.graph, backend=be, reps=3)
    assert isinstance(cal, Calibration)
    g, topo = cal.graph, cal.topology
    assert g.n_ops == w.graph.n_ops and np.array_equal(g.src, w.graph.src) and g.specs == w.graph.specs
    assert g.units == "physical" and np.all(g.flops > 0) and np.all(np.isfinite(g.flops))
    np.testing.assert_array_equal(g.out_bytes, [4 * np.prod(s.output_shape) for s in w.graph.specs])
    assert topo.n_devices == 2 and np.all(topo.speed == 1.0)
    assert topo.bandwidth[0, 1] > 0 and topo.latency[0, 1] >= 0
    assert set(cal.transfer_fits) == {"cpu"} and len(cal.transfer_fits["cpu"]["samples"]) > 0
    assert cal.config.cost_model == "topology" and cal.config.time_unit == "s"
    assert be.source(cal.graph) is w.graph  # the backend runs the real ops for the calibrated graph
    # one device, one lane: the simulation is the sum of calibrated op times
    assert cal.simulate(np.zeros(g.n_ops, np.int64)) == pytest.approx(g.flops.sum())
    tr = be.execute(cal.graph, topo, np.zeros(g.n_ops, np.int64), None, cal.config)
    assert tr.error is None and tr.time_unit == "s"


def _same(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or a == pytest.approx(b, rel=1e-12, abs=1e-15)


def test_fidelity_report():
    """The report's figures are recomputed from its own columns by hand (tau-b by counting pairs,
    relative errors), and its simulated column from the simulator on the same placements."""
    g = cost_only_graph("paper")
    be = RealBackend("cpu:2", repeats=1, warmup=0)
    cal = calibrate(g, backend=be, reps=2)
    items = sample_placements(cal.graph, cal.topology, 2, 1, cal.config)
    rep = fidelity(cal, be, n_random=2, seed=1)
    assert isinstance(rep, FidelityReport)
    assert rep.names == [name for name, _, _ in items]  # single, rr, blocks, cp, 2 random
    assert rep.simulated.shape == rep.measured.shape == (6,)
    for (_name, assign, prio), sim in zip(items, rep.simulated):
        assert sim == dg.simulate(cal.graph, assign, cal.topology, prio, cal.config).makespan
    assert np.all(np.isfinite(rep.measured)) and np.all(rep.measured > 0) and all(e is None for e in rep.errors)
    assert _same(rep.kendall_tau, kendall_tau_b(rep.simulated, rep.measured))
    rel = np.abs(rep.simulated - rep.measured) / rep.measured
    assert rep.mean_relative_error == pytest.approx(rel.mean(), rel=1e-12)
    assert rep.max_relative_error == pytest.approx(rel.max(), rel=1e-12)
    assert "CPU timings are not GPU timings" in rep.caveat
    assert f"Kendall tau {rep.kendall_tau:.3f}" in rep.summary()
    # a plain graph: tau only (the units differ), on the placements given
    plain = [np.zeros(g.n_ops, int), np.arange(g.n_ops) % 2]
    topo, raw_cfg = dg.Topology.uniform(2), dg.SimConfig(cost_model="raw")
    raw = fidelity(g, be, placements=plain, topology=topo, config=raw_cfg)
    assert len(raw.names) == 2 and np.isnan(raw.mean_relative_error) and np.isnan(raw.max_relative_error)
    np.testing.assert_array_equal(raw.simulated, [dg.simulate(g, a, topo, None, raw_cfg).makespan for a in plain])
    assert _same(raw.kendall_tau, kendall_tau_b(raw.simulated, raw.measured))
    with pytest.raises(ValueError, match="topology"):
        fidelity(g, be)


def test_sample_placements_are_valid():
    g = small_ffnn().graph
    topo = dg.Topology.uniform(3)
    items = sample_placements(g, topo, n_random=2)
    assert [n for n, _, _ in items][:4] == ["single", "round_robin", "blocks", "critical_path"]
    for _, a, p in items:
        assert a.shape == (g.n_ops,) and a.min() >= 0 and a.max() < 3
        assert sorted(p) == list(range(g.n_ops))
    a, p = critical_path_placement(g, topo)
    # priorities follow the SEL order: every op after its inputs
    assert np.all(p[g.src] < p[g.dst])
