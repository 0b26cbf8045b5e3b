"""``doppler collective`` end to end, in-process through ``main([...])``."""

from __future__ import annotations

import json
import struct

import pytest

from doppler_gym.cli.collective_cmd import parse_epoch, parse_methods, parse_size
from doppler_gym.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["collective", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def table(out: str) -> dict[str, list[str]]:
    """Rows of the result table by method."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("method"))
    rows = {}
    for line in lines[start + 1:]:
        parts = line.split()
        if not parts or parts[0] in ("nccl", "result", "plot", "validator"):
            break
        rows[parts[0]] = parts
    return rows


def error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("doppler: error: "), err
    return lines[0]


def test_ring_and_direct_on_dgx1(capsys):
    code, out, _ = run(capsys, "--topology", "dgx1", "--buffer", "1GB", "--method", "ring,direct")
    assert code == 0
    assert "dgx1: 8 GPUs, 0 switches, 32 directed links" in out
    rows = table(out)
    assert list(rows) == ["ring", "direct"]
    # ring: 7 steps of 2.5 ms (125 MB chunks at 50 GB/s); bound 3 epochs
    assert rows["ring"][1:3] == ["7", "3"]
    assert rows["ring"][3:5] == ["2.5", "ms"] and rows["ring"][5:7] == ["17.5", "ms"]
    assert rows["ring"][7] == "57.14"
    assert rows["direct"][1] == "4" and rows["direct"][7] == "100"
    assert rows["ring"][-2:] == ["no", "ok"]
    assert "nccl ring model  17.5 ms" in out


def test_json_output(capsys, tmp_path):
    path = tmp_path / "out" / "ag.json"
    code, out, _ = run(capsys, "--topology", "ndv2-2", "--buffer", "1e9", "--epoch", "slow", "--method", "direct",
                       "--json", str(path))
    assert code == 0 and f"result       {path}" in out
    data = json.loads(path.read_text())
    assert data["topology"] == "ndv2-2" and data["buffer_bytes"] == 1e9 and data["epoch"] == "slow"
    (row,) = data["rows"]
    assert row["method"] == "direct" and row["valid"] and row["epochs"] == 10 and row["lower_bound_epochs"] == 8
    assert row["algo_bandwidth"] == pytest.approx(1e9 / 0.05)
    (phase,) = row["phases"]
    assert phase["chunk_bytes"] == pytest.approx(62.5e6) and phase["tau"] == pytest.approx(5e-3)
    assert len(phase["links"]) == 66 and len(phase["commodities"]) == 16
    assert phase["n_sends"] == len(phase["sends"]) > 0
    assert all(0 <= k < 10 for _, _, k in phase["sends"])


def test_composite_and_doppler_preset(capsys):
    code, out, _ = run(capsys, "--topology", "p100x4", "--collective", "allreduce", "--buffer", "64MB",
                       "--method", "ring")
    assert code == 0
    assert "allreduce (composed: allgather on the reversed topology, backwards then allgather)" in out
    rows = table(out)
    assert rows["ring"][-1] == "ok" and int(rows["ring"][1]) >= 2 * 3


def test_broadcast_with_root(capsys):
    code, out, _ = run(capsys, "--topology", "dgx2-1", "--collective", "broadcast", "--root", "gpu3",
                       "--buffer", "16MB", "--chunks", "4", "--method", "direct")
    assert code == 0 and table(out)["direct"][-1] == "ok"


def test_plot(capsys, tmp_path):
    path = tmp_path / "bw.png"
    code, out, _ = run(capsys, "--topology", "dgx1", "--method", "direct", "--plot", str(path),
                       "--plot-sizes", "1KB,1MB,1GB")
    assert code == 0 and f"plot         {path}" in out
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (700, 450)


def test_milp_end_to_end(capsys):
    pytest.importorskip("ortools", reason="the MILP needs OR-Tools (the solvers extra)")
    code, out, _ = run(capsys, "--topology", "dgx1", "--buffer", "1GB", "--method", "milp", "--time-limit", "60")
    assert code == 0
    row = table(out)["milp"]
    assert row[1] == "3" and row[7] == "133.3" and row[-2:] == ["yes", "ok"]
    # composites come back in phases (reduce-scatter on the reversed topology, then allgather)
    code, out, _ = run(capsys, "--topology", "dgx1", "--collective", "allreduce", "--buffer", "64MB",
                       "--method", "milp,ring", "--time-limit", "60")
    assert code == 0
    rows = table(out)
    assert rows["milp"][1] == "6" and rows["milp"][-1] == "ok"
    assert int(rows["milp"][1]) <= int(rows["ring"][1])


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--buffer", "1XB"], "--buffer '1XB': expected a size like 1GB"),
        (["--buffer", "0"], "--buffer '0': the size must be positive"),
        (["--topology", "dgx3"], "--topology: unknown comm topology 'dgx3'"),
        (["--method", "ring,magic"], "--method 'magic': use one or more of"),
        (["--epoch", "medium"], "--epoch 'medium': use fast, slow"),
        (["--epoch", "-1"], "--epoch '-1': an epoch length must be a positive"),
        (["--root", "1"], "--root applies to broadcast, scatter and gather, not allgather"),
        (["--chunks", "0"], "--chunks 0: use a positive number"),
        (["--collective", "allgathr"], "unknown collective 'allgathr'"),
        (["--plot-sizes", "1KB"], "--plot-sizes needs --plot PNG"),
        (["--time-limit", "0"], "--time-limit 0.0: use a positive number of seconds"),
    ],
)
def test_errors(capsys, argv, match):
    code, _, err = run(capsys, "--method", "ring", *argv)
    assert code == 2
    assert match in error_line(err)


def test_parsers():
    assert parse_size("1KB") == 1e3 and parse_size("1 GB") == 1e9 and parse_size("1e9") == 1e9
    assert parse_size("0.5MB") == 5e5 and parse_size("1GiB") == 2**30 and parse_size("64") == 64
    assert parse_epoch("SLOW") == "slow" and parse_epoch("2.5e-3") == 2.5e-3
    assert parse_methods("ring, milp,ring") == ["ring", "milp"]
