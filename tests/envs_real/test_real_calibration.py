"""Calibration and fidelity on CPU workers: structure and units (CPU timings are not GPU timings,
so no accuracy is asserted here; the GPU check reports it)."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from envs_real import Calibration, FidelityReport, RealBackend, calibrate, fidelity, sample_placements
from envs_real.calibration import _fit_affine, critical_path_placement
from tests.envs_real.real_helpers import cost_only_graph, small_ffnn


def test_fit_affine_recovers_latency_and_bandwidth():
    x = np.array([1e3, 1e4, 1e5, 1e6])
    lat, bw = _fit_affine(x, 2e-5 + x / 5e9)
    assert lat == pytest.approx(2e-5) and bw == pytest.approx(5e9)
    lat, bw = _fit_affine(x, np.full(4, 1e-5))  # no size dependence: latency only, bandwidth huge
    assert lat == pytest.approx(1e-5) and bw > 1e12


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


def test_fidelity_report():
    g = cost_only_graph("paper")
    be = RealBackend("cpu:2", repeats=1, warmup=0)
    cal = calibrate(g, backend=be, reps=2)
    rep = fidelity(cal, be, n_random=2, seed=1)
    assert isinstance(rep, FidelityReport)
    k = len(rep.names)
    assert rep.simulated.shape == rep.measured.shape == (k,) and k == 6  # single, rr, blocks, cp, 2 random
    assert np.all(np.isfinite(rep.measured)) and all(e is None for e in rep.errors)
    assert np.isnan(rep.kendall_tau) or -1 <= rep.kendall_tau <= 1
    assert np.isfinite(rep.mean_relative_error) and rep.mean_relative_error >= 0
    assert "CPU timings are not GPU timings" in rep.caveat
    assert "Kendall tau" in rep.summary()
    # a plain graph: tau only, the units differ
    raw = fidelity(
        g,
        be,
        placements=[np.zeros(g.n_ops, int), np.arange(g.n_ops) % 2],
        topology=dg.Topology.uniform(2),
        config=dg.SimConfig(cost_model="raw"),
    )
    assert np.isnan(raw.mean_relative_error) and len(raw.names) == 2
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
