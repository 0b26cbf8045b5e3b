"""``doppler cluster`` end to end, in-process through ``main([...])``, against ``dg.cluster.run`` directly."""

from __future__ import annotations

import csv
import re

import pytest

from doppler_gym import cluster as dc
from tests.doppler_gym.cli.cli_helpers import error_line, png_size, run

ARGS = ("--trace", "generated:40", "--cluster", "uniform:2x4", "--scheduler", "las", "--seed", "3")


def metric(out: str, label: str) -> str:
    """The value column of a row of the printed metrics table."""
    m = re.search(rf"{re.escape(label)}\s+[│|]\s+([\d,.]+)\s+[│|]", out)
    assert m, f"no {label!r} row in:\n{out}"
    return m.group(1)


def test_generated_trace_matches_the_library_and_writes_csv_and_png(capsys, tmp_path):
    out_dir = tmp_path / "run"
    code, out, err = run(capsys, "cluster", *ARGS, "--mtbf-hours", "50", "--checkpoint-every", "300",
                         "--checkpoint-cost", "10", "--out", str(out_dir))
    assert code == 0, err
    # an independent path through the library: the same trace, cluster, scheduler, failures and seed
    trace = dc.traces.generate(40, seed=3, checkpoint_every=300, checkpoint_cost=10.0)
    ref = dc.run(trace, dc.Cluster.uniform(2, 4, preset=None), "las", seed=3,
                 failures=dc.FailureModel(gpu_mtbf=50 * 3600.0))
    assert metric(out, "average JCT") == f"{ref.avg_jct:,.1f}"
    assert metric(out, "p99 JCT") == f"{ref.p99_jct:,.1f}"
    assert metric(out, "interruptions") == str(ref.interruptions)
    assert ref.interruptions > 0  # the failure flags reached the run

    with open(out_dir / "jobs.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 40 == ref.n_jobs
    assert [float(r["completion"]) for r in rows] == pytest.approx(ref.jobs["completion"].tolist(), rel=1e-12)
    assert str(out_dir / "jobs.csv") in out and str(out_dir / "utilisation.png") in out
    w, h = png_size(out_dir / "utilisation.png")
    assert 400 <= w <= 2000 and 200 <= h <= 1500


def test_young_checkpoints_and_shipped_trace_prefix(capsys, tmp_path):
    code, out, err = run(capsys, "cluster", "--trace", "gavel-msr:30", "--cluster", "4x8", "--scheduler", "fifo",
                         "--mtbf-hours", "100", "--checkpoint", "young", "--checkpoint-cost", "5",
                         "--out", str(tmp_path))
    assert code == 0, err
    ref = dc.run(dc.traces.load("gavel-msr", limit=30, checkpoint_cost=5.0), dc.Cluster.uniform(4, 8), "fifo",
                 seed=0, failures=dc.FailureModel(gpu_mtbf=100 * 3600.0), checkpoints="young")
    assert metric(out, "average JCT") == f"{ref.avg_jct:,.1f}"
    with open(tmp_path / "jobs.csv", newline="", encoding="utf-8") as f:
        assert len(list(csv.DictReader(f))) == 30


def test_pollux_trace_elastic_scheduler_preemption_cost_and_racks(capsys, tmp_path):
    code, out, err = run(capsys, "cluster", "--trace", "pollux-workload-1:60", "--cluster", "16x4", "--scheduler",
                         "elastic", "--preemption-cost", "20", "--node-uplink-gbps", "10", "--rack-size", "4",
                         "--rack-uplink-gbps", "20", "--out", str(tmp_path))
    assert code == 0, err
    cluster = dc.Cluster.uniform(16, 4, preset=None, node_uplink_bandwidth=10e9, rack_size=4,
                                 rack_uplink_bandwidth=20e9)
    ref = dc.run(dc.traces.load("pollux-workload-1", limit=60), cluster, "elastic", seed=0, preemption_cost=20.0)
    assert metric(out, "average JCT") == f"{ref.avg_jct:,.1f}"
    free = dc.run(dc.traces.load("pollux-workload-1", limit=60), cluster, "elastic", seed=0)
    assert ref.avg_jct > free.avg_jct  # the restore cost reached the run


@pytest.mark.parametrize(("argv", "needle"), [
    (("--trace", "philly"), "unknown trace"),
    (("--trace", "generated:0"), "positive number of jobs"),
    (("--scheduler", "lottery"), "unknown scheduler"),
    (("--cluster", "dgx-superpod"), "uniform:NODESxGPUS"),
    (("--cluster", "2x4:h100"), "unknown GPU type"),
    (("--cluster", "0x4"), ">= 1"),
    (("--seed", "-1"), "--seed"),
    (("--mtbf-hours", "-5"), "--mtbf-hours"),
    (("--checkpoint-every", "-2"), "--checkpoint-every"),
    (("--checkpoint-cost", "-1"), "--checkpoint-cost"),
    (("--restart-delay", "-1"), "--restart-delay"),
    (("--checkpoint", "young"), "needs --mtbf-hours"),
    (("--cluster", "1x2", "--trace", "generated:40"), "GPUs"),  # a 16-GPU job on 2 GPUs
    (("--preemption-cost", "-1"), "--preemption-cost"),
    (("--rack-size", "0"), "--rack-size"),
    (("--rack-uplink-gbps", "0"), "--rack-uplink-gbps"),
    (("--node-uplink-gbps", "-3"), "--node-uplink-gbps"),
])
def test_bad_input_is_one_error_line_with_exit_2(capsys, tmp_path, argv, needle):
    base = dict(zip(ARGS[::2], ARGS[1::2]))
    base.update(zip(argv[::2], argv[1::2]))
    flat = [x for kv in base.items() for x in kv]
    code, _, err = run(capsys, "cluster", *flat, "--out", str(tmp_path / "never"))
    assert code == 2
    assert needle in error_line(err)
    assert not (tmp_path / "never").exists()


def test_help_lists_units(capsys):
    code, out, _ = run(capsys, "cluster", "--help")
    assert code == 0
    for text in ("[h]", "[s]", "uniform:NODESxGPUS", "generated"):
        assert text in out
