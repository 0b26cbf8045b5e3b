"""``doppler simulate --memory track|enforce``: peaks per device and the violation, as the API gives them."""

from __future__ import annotations

import json

import numpy as np

import doppler_gym as dg
from doppler_gym.sim.config import SimConfig
from tests.doppler_gym.cli.cli_helpers import png_size, run

# ffnn with 5 layers of width 16384: 4096*16384 + 4*16384**2 (+ biases) parameters, 16 B each with
# Adam: about 18.3 GB, more than one P100's 16 GB; a quarter of it per GPU fits.
ARGS = ("simulate", "ffnn", "--param", "hidden=16384", "--param", "layers=5", "--topology", "p100x4")


def api_trace(kind: str, mode: str):
    g = dg.workloads.make("ffnn", hidden=16384, layers=5)
    assignment = np.zeros(g.n_ops, np.int64) if kind == "single" else np.arange(g.n_ops) % 4
    config = SimConfig(cost_model="roofline", memory=mode)  # the CLI's default for a workload on a GPU preset
    return g, dg.simulate(g, assignment, topology=dg.Topology.preset("p100x4"), config=config)


def test_enforce_reports_the_violation(capsys, tmp_path):
    out_json = tmp_path / "r.json"
    code, out, _ = run(capsys, *ARGS, "--assignment", "single", "--memory", "enforce", "--json", str(out_json))
    assert code == 0
    g, tr = api_trace("single", "enforce")
    v = tr.memory_violation
    assert v is not None and v.device == 0 and not tr.feasible
    params = 4096 * 16384 + 4 * 16384**2 + 5 * 16384
    assert tr.memory.persistent[0] == params * 16
    line = next(ln for ln in out.splitlines() if ln.startswith("memory "))
    assert "INFEASIBLE" in line and "gpu0" in line
    data = json.loads(out_json.read_text())["memory"]
    assert data["feasible"] is False
    assert data["violation"]["device"] == 0
    assert data["violation"]["time"] == v.time
    assert data["violation"]["excess_bytes"] == v.excess > 0
    np.testing.assert_array_equal(data["peak_bytes"], tr.peak_memory)


def test_track_round_robin_fits_and_prints_each_peak(capsys, tmp_path):
    png = tmp_path / "g.png"
    code, out, _ = run(capsys, *ARGS, "--memory", "track", "--gantt", str(png))
    assert code == 0
    _, tr = api_trace("round-robin", "track")
    assert tr.memory_violation is None
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("gpu") and "GB" in ln]
    assert len(rows) == 4
    for d, row in enumerate(rows):
        assert float(row[1]) == float(f"{tr.peak_memory[d] / 1e9:.3g}")
    assert "fits on every device" in out
    width, height = png_size(png)
    assert width > 0 and height > 0


def test_memory_off_prints_no_memory(capsys):
    code, out, _ = run(capsys, *ARGS)
    assert code == 0 and "peak memory" not in out
