"""solve(): names, sizes, methods, composite collectives, validation and errors."""

from __future__ import annotations

import numpy as np
import pytest

from doppler_gym.comm.solve import (
    PhasedSchedule,
    collective_phases,
    parse_bytes,
    phase_demand,
    read_size,
    solve,
)
from doppler_gym.comm.validate import validate
from tests.doppler_gym.comm.tiny_instances import line3, ring4, star

pytest.importorskip("ortools")
pytest.importorskip("highspy")


def test_dgx1_allgather_1gb_fast_is_three_epochs():
    s = solve("dgx1", "allgather", "1GB", epoch="fast")
    assert s.epochs == 3 and s.optimal and s.method == "milp"
    assert s.chunk_bytes == pytest.approx(1e9 / 8)
    assert s.tau == pytest.approx(1e9 / 8 / 50e9)  # one chunk per epoch on a 50 GB/s NVLink pair
    assert s.algo_bandwidth == pytest.approx(1e9 / (3 * s.tau))
    assert validate(s).ok


def test_multicast_mapping_on_a_topology_object():
    s = solve(line3(), {0: [1, 2]}, 1.0, epoch=1.0)  # each GPU ends with 1 chunk: 1-byte chunks
    assert s.demand.name == "multicast"
    assert s.epochs == 2 and validate(s).ok
    twice = solve(line3(), {0: [1, 2]}, 2.0, epoch=1.0)  # 2-byte chunks: kappa = 0.5, 2 epochs a hop
    assert twice.epochs == 4 and validate(twice).ok


def test_auto_picks_lp_for_single_destination_demands():
    s = solve(ring4(bidirectional=True), "alltoall", 4.0, epoch=1.0, method="auto")
    assert s.method == "lp" and s.epochs == 2 and s.optimal
    m = solve(ring4(bidirectional=True), "allgather", 4.0, epoch=1.0, method="auto")
    assert m.method == "milp" and m.epochs == 2


@pytest.mark.parametrize("method", ["milp", "lp", "rounds"])
def test_every_method_returns_a_valid_schedule(method):
    s = solve(star(3, copy=True), "alltoall", 3.0, epoch=1.0, method=method, time_limit=30)
    assert validate(s).ok
    assert s.epochs >= 2  # the in-link bound of the star


def test_reduce_scatter_and_allreduce_are_phased():
    rs = solve(ring4(bidirectional=False), "reduce-scatter", 4.0, epoch=1.0)
    ar = solve(ring4(bidirectional=False), "allreduce", 4.0, epoch=1.0)
    assert isinstance(rs, PhasedSchedule) and rs.backwards == (True,)
    assert rs.phases[0].topology.name.endswith("reversed")
    assert rs.epochs == 3
    assert isinstance(ar, PhasedSchedule) and ar.backwards == (True, False)
    assert ar.epochs == 6 and ar.finish_time == pytest.approx(6.0)
    assert ar.algo_bandwidth == pytest.approx(4.0 / 6.0)
    assert all(validate(p).ok for p in ar.phases)
    assert ar.optimal


def test_group_on_a_subset_of_gpus():
    """ALLGATHER of GPUs 0 and 2 of the DGX-1 (a 25 GB/s NVLink pair): one 0.5 GB chunk each way, one
    epoch of 0.5 GB / 25 GB/s (the slowest link's chunk time, epoch="slow"); the phases of an
    ALLREDUCE over the group validate too."""
    s = solve("dgx1", "allgather", "1GB", epoch="slow", group=[2, 0])
    assert s.chunk_bytes == pytest.approx(0.5e9) and validate(s).ok
    assert set(np.unique(s.demand.source).tolist()) == {0, 2}
    assert s.finish_time == pytest.approx(0.5e9 / 25e9)
    both = solve("dgx1", "allreduce", "1GB", epoch="slow", group=[0, 2])
    assert isinstance(both, PhasedSchedule) and all(validate(p).ok for p in both.phases)
    assert both.finish_time == pytest.approx(2 * s.finish_time)


def test_same_seed_same_schedule():
    a = solve("dgx1", "allgather", "1MB", epoch="slow", seed=5)
    b = solve("dgx1", "allgather", "1MB", epoch="slow", seed=5)
    assert np.array_equal(a.sends, b.sends) and a.epochs == b.epochs


def test_epoch_multiplier_auto_coarsens_tiny_buffers():
    plain = solve("dgx1", "broadcast", "1KB", epoch="fast")
    coarse = solve("dgx1", "broadcast", "1KB", epoch="fast", multiplier="auto")
    assert coarse.tau > plain.tau
    assert coarse.epochs <= plain.epochs


@pytest.mark.parametrize(("text", "value"), [("1GB", 1e9), ("64 KB", 64e3), ("1GiB", 2.0**30), ("512", 512.0),
                                             ("1.5MB", 1.5e6)])
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value
    assert read_size(text) == value


def test_read_size_leaves_checks_to_the_caller():
    assert read_size("0KB") == 0.0 and read_size("1XB") is None and read_size("GB") is None


def test_collective_phases():
    assert collective_phases("allreduce") == ("allreduce", (("allgather", True), ("allgather", False)))
    name, parts = collective_phases({0: [1]})
    assert name == "multicast" and parts[0][1] is False
    topo, demand = phase_demand(ring4(False), "allgather", True)
    assert np.array_equal(topo.src, ring4(False).dst) and demand.n_commodities == 4


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"method": "gurobi"}, ValueError, "unknown method"),
    ({"collective": "allscatter"}, ValueError, "unknown collective"),
    ({"buffer_bytes": "1 parsec"}, ValueError, "not understood"),
    ({"buffer_bytes": -5}, ValueError, "positive"),
    ({"buffer_bytes": True}, TypeError, "bytes"),
    ({"topology": "dgx9"}, ValueError, "unknown comm topology"),
    ({"time_limit": 0}, ValueError, "time_limit"),
    ({"multiplier": "fine"}, ValueError, "multiplier"),
    ({"epoch": "medium"}, ValueError, "epoch"),
])
def test_errors(kwargs, error, match):
    args = {"topology": "dgx1", "collective": "allgather", "buffer_bytes": "1MB"}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        solve(**args)


def test_time_limit_too_small_for_a_search_says_so():
    # a microsecond is used up before the first phase's search can start
    with pytest.raises(RuntimeError, match=r"time_limit=1e-06 s used up before phase 1 of allgather; raise time_limit"):
        solve("ndv2-2", "allgather", "1GB", epoch="fast", time_limit=1e-6)


def test_dg_comm_is_public_and_imports_no_solver():
    import subprocess
    import sys

    code = ("import sys, doppler_gym as dg\n"
            "assert callable(dg.comm.solve) and callable(dg.comm.validate)\n"
            "print(','.join(m for m in ('ortools', 'highspy') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
