"""``doppler cluster`` on heterogeneous clusters (``--cluster v100:8,p100:16,k80:24/4``) and Gavel-format trace
files (``--trace FILE.trace``), against the library run directly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from doppler_gym import cluster as dc
from doppler_gym.cli.cluster_cmd import parse_cluster
from tests.doppler_gym.cli.cli_helpers import error_line, run

GEN150 = Path(__file__).parents[3] / "benchmarks" / "data" / "gavel" / "t3_gen150.trace"  # Gavel's T3 (MIT)


def test_typed_cluster_specs_build_the_servers_they_name():
    c = parse_cluster("v100:8,p100:16,k80:24/4")
    assert [(nd.gpus, nd.gpu_type) for nd in c.nodes] == [(4, "v100")] * 2 + [(4, "p100")] * 4 + [(4, "k80")] * 6
    c = parse_cluster("V100:8,k80:20")  # 8 per node by default; the last k80 node holds the 4 left over
    assert [(nd.gpus, nd.gpu_type) for nd in c.nodes] == [(8, "v100"), (8, "k80"), (8, "k80"), (4, "k80")]
    assert c.nodes[0].preset == "v100x8-dgx1" and c.nodes[1].preset is None
    assert parse_cluster("4x8:p100").n_gpus == 32  # the uniform form still parses


def test_a_gavel_trace_on_a_typed_cluster_matches_the_library(capsys, tmp_path):
    code, out, err = run(capsys, "cluster", "--trace", str(GEN150), "--cluster", "v100:12,p100:12,k80:12/4",
                         "--scheduler", "fifo", "--out", str(tmp_path))
    assert code == 0, err
    nodes = tuple(dc.Node(4, t, None) for t in ("v100", "p100", "k80") for _ in range(3))
    ref = dc.run(dc.traces.load_gavel_trace(GEN150), dc.Cluster(nodes), "fifo", seed=0)
    m = re.search(r"average JCT\s+[│|]\s+([\d,.]+)", out)
    assert m and m.group(1) == f"{ref.avg_jct:,.1f}"
    assert "36 GPUs in 9 nodes (12 k80, 12 p100, 12 v100)" in out


@pytest.mark.parametrize("cluster,needle", [
    ("a100:8,v100:8", "part 1: GPU type 'a100' has no throughput data (Gavel measured v100, p100, k80)"),
    ("v100:8,p100", "part 2 'p100' is not TYPE:GPUS with GPUS an integer >= 1"),
    ("v100:8,p100:16/x", "GPUs per node after '/' must be an integer >= 1, got 'x'"),
    ("v100:8,v100:4", "GPU type 'v100' is given twice"),
    ("v100:zero", "--cluster 'v100:zero': use uniform:NODESxGPUS[:TYPE]"),
])
def test_a_bad_cluster_string_is_one_error_line(capsys, tmp_path, cluster, needle):
    code, _, err = run(capsys, "cluster", "--trace", "generated:5", "--cluster", cluster, "--scheduler", "fifo",
                       "--out", str(tmp_path))
    assert code == 2
    assert needle in error_line(err)


def test_a_trace_row_with_an_unmeasured_job_type_is_one_error_line(capsys, tmp_path):
    path = tmp_path / "t.trace"
    path.write_text("A3C\tc\td\t-n\t1\t100\t1\t1\t-1\t0\nInception\tc\td\t-n\t1\t100\t1\t1\t-1\t5\n")
    code, _, err = run(capsys, "cluster", "--trace", str(path), "--cluster", "v100:4", "--scheduler", "las",
                       "--out", str(tmp_path))
    assert code == 2
    line = error_line(err)
    assert f"{path}:2: field 1 (job type) 'Inception' was never measured by Gavel" in line and "A3C" in line


def test_a_job_no_type_of_the_cluster_can_run_is_one_error_line(capsys, tmp_path):
    path = tmp_path / "t.trace"  # ResNet-50 at batch 128 on 2 GPUs: Gavel measured 0 steps/s on K80s
    path.write_text("ResNet-50 (batch size 128)\tc\td\t-n\t1\t100\t2\t1\t-1\t0\n")
    code, _, err = run(capsys, "cluster", "--trace", str(path), "--cluster", "k80:8", "--scheduler", "fifo",
                       "--out", str(tmp_path))
    assert code == 2
    assert "Job 0 (ResNet-50 (batch size 128)) cannot run on any GPU type" in error_line(err)
    code, _, err = run(capsys, "cluster", "--trace", str(path), "--cluster", "k80:8,v100:2", "--scheduler", "fifo",
                       "--out", str(tmp_path))
    assert code == 0, err


def test_gavel_policies_run_from_the_cli_as_the_library_runs_them(capsys, tmp_path):
    from doppler_gym.cluster.gavel_engine import run_gavel_policy

    trace = dc.traces.load_gavel_trace(GEN150, limit=30)
    path = tmp_path / "t.trace"
    path.write_text("\n".join(GEN150.read_text().splitlines()[:30]) + "\n")
    code, out, err = run(capsys, "cluster", "--trace", str(path), "--cluster", "v100:8,p100:8,k80:8/4",
                         "--scheduler", "max_min_fairness_perf", "--out", str(tmp_path / "out"))
    assert code == 0, err
    nodes = tuple(dc.Node(4, t, None) for t in ("v100", "p100", "k80") for _ in range(2))
    ref = run_gavel_policy(trace, dc.Cluster(nodes), "max_min_fairness_perf", seed=0)
    m = re.search(r"average JCT\s+[│|]\s+([\d,.]+)", out)
    assert m and m.group(1) == f"{ref.avg_jct:,.1f}" and "max_min_fairness_perf" in out
    code, _, err = run(capsys, "cluster", "--trace", str(path), "--cluster", "v100:4", "--scheduler", "gavel:nope",
                       "--out", str(tmp_path / "out"))
    assert code == 2 and "Gavel has no policy 'nope'" in err and err.count("\n") == 1
