"""The ``doppler`` command line, run in-process through ``main([...])`` (plus one real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import doppler_gym as dg
from tests.doppler_gym.cli.cli_helpers import error_line, png_size, run

FFNN_LB = 56.6957965312  # lower bound of paper/ffnn on 4 devices, paper units (data README: 56.7)
FFNN_RR = 84.1824141312  # round-robin makespan of paper/ffnn on 4 devices, reference simulator


def field(out: str, key: str) -> str:
    """The value printed after ``key`` at the start of a line."""
    for line in out.splitlines():
        if line.startswith(key + " "):
            return line[len(key):].strip()
    raise AssertionError(f"no line {key!r} in:\n{out}")


# ---------------------------------------------------------------------- graph info
def test_graph_info_paper_name(capsys):
    code, out, _ = run(capsys, "graph", "info", "paper/ffnn")
    assert code == 0
    assert field(out, "ops").startswith("180")
    assert field(out, "edges") == "208"
    assert field(out, "total work").startswith("226.78 paper units")
    assert field(out, "critical path").startswith("14.17 paper units over 12 ops")
    assert field(out, "lower bound").startswith("56.70 paper units on uniform4")
    assert "op kinds" not in out  # the plain paper files carry no op types


def test_graph_info_kinds_and_devices(capsys):
    code, out, _ = run(capsys, "graph", "info", "paper/gdp/ffnn", "--devices", "8")
    assert code == 0
    assert field(out, "lower bound").startswith("28.35 paper units on uniform8")
    assert field(out, "op kinds") == "einsummable 128, formation 52"


def test_graph_info_workload_with_params(capsys):
    code, out, _ = run(capsys, "graph", "info", "ffnn", "--param", "layers=2", "--param", "blocks=2")
    g = dg.workloads.make("ffnn", layers=2, blocks=2)
    assert code == 0
    assert field(out, "ops").startswith(str(g.n_ops))
    assert field(out, "edges") == str(g.n_edges)
    assert "units: physical" in field(out, "graph")
    assert "FLOP" in field(out, "total work")
    bound = dg.makespan_lower_bound(g, dg.Topology.uniform(4))
    assert field(out, "lower bound").startswith(f"{bound * 1e3:.4g} ms")
    assert "einsum" in field(out, "op kinds")


def test_graph_info_json_path(capsys, tmp_path):
    path = tmp_path / "small.json"
    dg.save_graph(dg.workloads.make("chainmm", k=1, blocks=2), path)
    code, out, _ = run(capsys, "graph", "info", str(path), "--topology", "p100x4")
    assert code == 0
    assert field(out, "ops").startswith("12")  # 1 * (2**3 + 2**2)
    assert "on p100x4 (4 devices)" in field(out, "lower bound")


def test_graph_info_on_a_gpu_preset_uses_the_roofline(capsys):
    """On ``h100x8-nvswitch`` a workload's work and bound are roofline times: every op's time on one H100 (the
    roofline module's table), spread over the 8 GPUs, and the bound under ``SimConfig(cost_model="roofline")``."""
    from doppler_gym.cli.common import fmt_time
    from doppler_gym.sim.roofline import op_times
    from doppler_gym.topology.gpus import gpu_spec

    code, out, _ = run(capsys, "graph", "info", "ffnn", "--param", "layers=2", "--topology", "h100x8-nvswitch")
    g = dg.workloads.make("ffnn", layers=2)
    assert code == 0
    assert f"({fmt_time(op_times(g, gpu_spec('h100-sxm')).sum() / 8, 's')} spread over" in field(out, "total work")
    bound = dg.makespan_lower_bound(g, dg.Topology.preset("h100x8-nvswitch"), dg.SimConfig(cost_model="roofline"))
    assert field(out, "lower bound").startswith(fmt_time(bound, "s"))
    assert "cost_model='roofline'" in field(out, "time unit")


def test_graph_list(capsys):
    code, out, _ = run(capsys, "graph", "list")
    assert code == 0
    assert "paper/ffnn" in out and "chainmm" in out and "p100x4" in out


# ---------------------------------------------------------------------- simulate
@pytest.mark.parametrize(
    ("kind", "expected"),
    [("round-robin", FFNN_RR), ("single", 226.7831861248), ("random", None)],
)
def test_simulate_kinds(capsys, tmp_path, kind, expected):
    out_json = tmp_path / "r.json"
    code, out, _ = run(capsys, "simulate", "paper/ffnn", "--devices", "4", "--assignment", kind,
                       "--seed", "5", "--json", str(out_json))
    assert code == 0
    data = json.loads(out_json.read_text())
    g = dg.load_graph("paper/ffnn")
    if kind == "random":
        a = np.random.default_rng(5).integers(0, 4, size=g.n_ops)
        assert data["assignment"] == a.tolist()
        expected = dg.simulate(g, a, config=dg.SimConfig.reference()).makespan
    assert data["makespan"] == pytest.approx(expected, rel=1e-12)
    assert field(out, "makespan") == f"{expected:.2f} paper units"
    assert field(out, "lower bound").startswith(f"56.70 paper units  (makespan / bound = {expected / FFNN_LB:.3f})")
    assert "dev3" in out and "%" in out
    chain = data["critical_chain"]
    assert data["end"][chain[-1]] == pytest.approx(data["makespan"]) and data["start"][chain[0]] == 0.0
    if kind == "single":  # one device, never idle: every op is on the chain, computing all the time
        assert sorted(chain) == list(range(g.n_ops))
        assert field(out, "critical chain").startswith(f"{g.n_ops} ops computing {expected:.2f} paper units (100.0%")


def test_simulate_file_input_text_and_json(capsys, tmp_path):
    g = dg.load_graph("paper/ffnn")
    a = np.arange(g.n_ops) % 3
    text = tmp_path / "a.txt"
    text.write_text("# three devices\n" + ",".join(map(str, a[:90])) + "\n" + " ".join(map(str, a[90:])) + "\n")
    lst = tmp_path / "a.json"
    lst.write_text(json.dumps(a.tolist()))
    want = dg.simulate(g, a, config=dg.SimConfig.reference()).makespan
    for path in (text, lst):
        code, out, _ = run(capsys, "simulate", "paper/ffnn", "--devices", "3", "--assignment", str(path))
        assert code == 0
        assert field(out, "makespan") == f"{want:.2f} paper units"


def test_simulate_json_roundtrip(capsys, tmp_path):
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    code, _, _ = run(capsys, "simulate", "paper/chainmm", "--assignment", "random", "--seed", "1", "--json", str(first))
    assert code == 0
    assert run(capsys, "simulate", "paper/chainmm", "--assignment", str(first), "--json", str(second))[0] == 0
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    for key in ("makespan", "assignment", "start", "end", "lower_bound", "time_unit"):
        assert a[key] == b[key]
    g = dg.load_graph("paper/chainmm")
    assert len(a["start"]) == len(a["end"]) == len(a["assignment"]) == g.n_ops
    assert max(a["end"]) == pytest.approx(a["makespan"])


def test_simulate_gantt(capsys, tmp_path):
    png = tmp_path / "sub" / "gantt.png"
    code, out, _ = run(capsys, "simulate", "paper/ffnn", "--gantt", str(png))
    assert code == 0 and field(out, "gantt chart") == str(png)
    width, height = png_size(png)
    assert 800 <= width <= 3000 and 200 <= height <= 2000
    assert png.stat().st_size > 10_000


def test_simulate_with_teccl_multicast(capsys, tmp_path):
    pytest.importorskip("ortools")
    argv = ["simulate", "ffnn", "--param", "layers=2", "--topology", "v100x8-dgx1", "--assignment", "round-robin"]
    results = {}
    for mode in ("p2p", "teccl"):
        out_json = tmp_path / f"{mode}.json"
        code, _, _ = run(capsys, *argv, "--multicast", mode, "--json", str(out_json))
        assert code == 0
        data = json.loads(out_json.read_text())
        assert data["config"]["multicast"] == mode
        results[mode] = data["makespan"]
    g = dg.workloads.make("ffnn", layers=2)
    topo = dg.Topology.preset("v100x8-dgx1")
    roofline_teccl = dg.SimConfig(cost_model="roofline", multicast="teccl")  # a workload on a GPU preset: the roofline
    expected = dg.simulate(g, np.arange(g.n_ops) % 8, topo, config=roofline_teccl).makespan
    assert results["teccl"] == pytest.approx(expected, rel=1e-12) and results["teccl"] != results["p2p"]


def test_simulate_workload_with_sim_flags(capsys, tmp_path):
    out_json = tmp_path / "r.json"
    code, out, _ = run(capsys, "simulate", "llama-block", "--param", "blocks=2", "--topology", "v100x8-dgx1",
                       "--link-model", "fifo", "--streams", "2", "--queue-order", "priority",
                       "--jitter", "0.1", "--seed", "3", "--json", str(out_json))
    assert code == 0
    data = json.loads(out_json.read_text())
    assert data["time_unit"] == "s" and data["n_devices"] == 8
    assert data["config"] == {  # a workload on a GPU preset: the roofline by default
        "cost_model": "roofline", "link_model": "fifo", "streams": 2, "queue_order": "priority",
        "compute_jitter": 0.1, "transfer_jitter": 0.1, "seed": 3, "time_divisor": 1.0,
        "multicast": "p2p", "multicast_chunks": 1, "multicast_epoch": "fast", "multicast_time_limit": 30.0,
        "memory": "off", "stragglers": [], "precision": "bf16",
    }
    assert field(out, "makespan").endswith(("ms", "us", "s"))


def test_simulate_reference_flag_on_workload(capsys, tmp_path):
    out_json = tmp_path / "r.json"
    code, _, _ = run(capsys, "simulate", "ffnn", "--param", "layers=1", "--reference", "--json", str(out_json))
    assert code == 0
    assert json.loads(out_json.read_text())["time_unit"] == "paper"


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["graph", "info", "paper/ffnx"], "did you mean 'paper/ffnn'"),
        (["graph", "info", "nosuch"], "unknown graph 'nosuch'"),
        (["graph", "info", "missing.json"], "does not exist"),
        (["graph", "info", "paper/ffnn", "--param", "layers=2"], "--param only applies to workload"),
        (["graph", "info", "ffnn", "--param", "nope=1"], "unknown parameter(s) ['nope']"),
        (["simulate", "paper/ffnn", "--topology", "nosuch"], "unknown topology preset 'nosuch'"),
        (["simulate", "paper/ffnn", "--streams", "0"], "streams must be an integer >= 1"),
        (["simulate", "paper/ffnn", "--assignment", "roundrobin"], "neither round-robin, random, single"),
    ],
)
def test_errors_are_one_line(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert needle in error_line(err)


def test_assignment_file_wrong_length(capsys, tmp_path):
    path = tmp_path / "short.txt"
    path.write_text("0 1 2 3\n")
    code, _, err = run(capsys, "simulate", "paper/ffnn", "--assignment", str(path))
    assert code == 2
    assert "4 device ids but graph 'paper/ffnn' has 180 ops" in error_line(err)


def test_assignment_device_out_of_range(capsys, tmp_path):
    path = tmp_path / "big.txt"
    path.write_text(" ".join(["0"] * 179 + ["4"]))
    code, _, err = run(capsys, "simulate", "paper/ffnn", "--devices", "4", "--assignment", str(path))
    assert code == 2
    assert "assignment[179] = 4 but topology 'uniform4' has 4 devices" in error_line(err)


def test_assignment_file_bad_token(capsys, tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("0, 1, two")
    code, _, err = run(capsys, "simulate", "paper/ffnn", "--assignment", str(path))
    assert code == 2 and "entry 2 is 'two'" in error_line(err)


def test_usage_error_exit_code(capsys):
    code, _, err = run(capsys, "simulate")
    assert code == 2 and "required: GRAPH" in err


# ---------------------------------------------------------------------- entry point
def test_module_entry_point_subprocess():
    proc = subprocess.run(
        [sys.executable, "-m", "doppler_gym.cli.main", "graph", "info", "paper/chainmm"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "lower bound" in proc.stdout and "76" in proc.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "doppler_gym.cli.main", "graph", "info", "nosuch"],
        capture_output=True, text=True, timeout=120,
    )
    assert bad.returncode == 2
    assert error_line(bad.stderr).startswith("doppler: error: unknown graph 'nosuch'")


def test_simulate_defaults_to_the_roofline_on_a_gpu_preset_and_the_cost_model_flag_overrides_it(capsys, tmp_path):
    """A workload on ``h100x8-nvswitch`` runs under the roofline, on ``--devices 8`` (no GPU models) under the
    FLOP-rate model, and ``--cost-model`` picks either; each makespan is the API's under that explicit model."""
    g = dg.workloads.make("ffnn", layers=1)
    rr = np.arange(g.n_ops) % 8
    h100 = dg.Topology.preset("h100x8-nvswitch")
    cases = (
        (("--topology", "h100x8-nvswitch"), h100, dg.SimConfig(cost_model="roofline")),
        (("--topology", "h100x8-nvswitch", "--cost-model", "topology"), h100, dg.SimConfig()),
        (("--devices", "8"), dg.Topology.uniform(8), dg.SimConfig()),
    )
    makespans = []
    for i, (flags, topo, config) in enumerate(cases):
        out_json = tmp_path / f"r{i}.json"
        code, _, _ = run(capsys, "simulate", "ffnn", "--param", "layers=1", *flags, "--assignment", "round-robin",
                         "--json", str(out_json))
        assert code == 0
        data = json.loads(out_json.read_text())
        assert data["config"]["cost_model"] == config.cost_model
        assert data["makespan"] == pytest.approx(dg.simulate(g, rr, topo, config=config).makespan, rel=1e-12)
        makespans.append(data["makespan"])
    assert makespans[0] != makespans[1]  # the two models charge the same placement differently
