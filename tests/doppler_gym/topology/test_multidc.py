"""Multi-datacentre presets: WAN links between gateways, latency from distance, GPU types per site, and
DiLoCo-style training across sites reproducing the utilisation ``H T / (H T + T_sync)``."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.topology.presets import (
    A100_SXM_FP32,
    DC3_DISTANCES_KM,
    H100_SXM_FP32,
    V100_SXM2_FP32,
    WAN_BANDWIDTH,
    multi_datacentre,
    preset_names,
    wan_latency,
)


def test_presets_have_sites_gateways_and_wan_links():
    assert {"dc2-wan", "dc3-wan"} <= set(preset_names())
    t = dg.Topology.preset("dc3-wan")
    assert t.n_devices == 12
    np.testing.assert_array_equal(t.speed, np.repeat([H100_SXM_FP32, A100_SXM_FP32, V100_SXM2_FP32], 4))
    wan = np.array([[k == "wan" for k in row] for row in t.link_kinds])
    assert sorted(map(tuple, np.argwhere(wan).tolist())) == [(0, 4), (0, 8), (4, 0), (4, 8), (8, 0), (8, 4)]
    assert np.all(t.bandwidth[wan] == WAN_BANDWIDTH)
    # latency = 5 us per km of fibre + 20 us at the gateways: New York - London 5570 km -> 27.87 ms
    assert t.latency[0, 8] == pytest.approx(5570 * 5e-6 + 20e-6, rel=1e-12)
    for a in range(3):
        for b in range(3):
            assert t.latency[4 * a, 4 * b] == pytest.approx(
                0.0 if a == b else DC3_DISTANCES_KM[a][b] * 5e-6 + 20e-6, rel=1e-12)
    # a non-gateway GPU reaches another site through both gateways
    assert t.route(5, 10) == [5, 4, 8, 10]
    assert t.route(1, 2) == [1, 2]  # inside a site: direct
    two = dg.Topology.preset("dc2-wan")
    assert two.n_devices == 8 and two.latency[0, 4] == pytest.approx(1000 * 5e-6 + 20e-6)


def test_multi_datacentre_arguments():
    t = multi_datacentre(("a100", "a100", "h100"), gpus_per_site=2, distance_km=100.0, wan_bandwidth=1e9)
    assert t.n_devices == 6 and t.bandwidth[0, 2] == 1e9 and t.bandwidth[2, 4] == 1e9 and t.bandwidth[1, 3] == 0
    assert t.device_names[3] == "dc1/a100-1"
    assert wan_latency(0.0) == 20e-6
    for kwargs, match in [({"sites": ("h100",)}, "at least 2"), ({"sites": ("tpu", "h100")}, "unknown GPU"),
                          ({"gpus_per_site": 0}, "gpus_per_site"), ({"distance_km": [[0, 1], [2, 0]]}, "symmetric"),
                          ({"wan_bandwidth": 0}, "wan_bandwidth")]:
        with pytest.raises(ValueError, match=match):
            multi_datacentre(**kwargs)


def diloco_graph(topology: dg.Topology, devices: list[int], local_steps: int, rounds: int, step_time: float,
                 model_bytes: float) -> tuple[DataflowGraph, np.ndarray]:
    """Data-parallel training across sites, DiLoCo style: per round, each site runs ``local_steps`` steps of
    ``step_time`` seconds on its device (FLOPs scaled to the device's speed, so every site's step takes the
    same time), then sends its ``model_bytes`` pseudo-gradient to every other site; a zero-work merge per
    site waits for all of them and starts the site's next round."""
    src, dst, flops, out_bytes, assignment = [], [], [], [], []

    def op(device: int, work: float, size: float) -> int:
        flops.append(work)
        out_bytes.append(size)
        assignment.append(device)
        return len(flops) - 1

    previous = [None] * len(devices)  # each site's merge of the previous round
    for _ in range(rounds):
        last = []
        for s, d in enumerate(devices):
            prev = previous[s]
            for h in range(local_steps):
                v = op(d, step_time * float(topology.speed[d]), model_bytes if h == local_steps - 1 else 0.0)
                if prev is not None:
                    src.append(prev)
                    dst.append(v)
                prev = v
            last.append(prev)
        merges = [op(d, 0.0, 0.0) for d in devices]
        for u in last:  # all-to-all exchange of the pseudo-gradients
            for m in merges:
                src.append(u)
                dst.append(m)
        previous = merges
    graph = DataflowGraph(src=np.array(src), dst=np.array(dst), flops=np.array(flops), out_bytes=np.array(out_bytes))
    return graph, np.array(assignment)


@pytest.mark.parametrize("local_steps", [1, 4, 16, 100])
@pytest.mark.parametrize("link_model", ["ideal", "fifo"])
def test_diloco_utilisation_matches_the_formula_on_two_sites(local_steps, link_model):
    topo = dg.Topology.preset("dc2-wan")
    step, size, rounds = 0.05, 1e9, 3  # 50 ms steps, a 1 GB pseudo-gradient (0.5 B parameters in bf16)
    t_sync = wan_latency(1000.0) + size / WAN_BANDWIDTH  # gateway to gateway, by hand
    assert topo.transfer_time(size, 0, 4) == pytest.approx(t_sync, rel=1e-12)
    graph, assignment = diloco_graph(topo, [0, 4], local_steps, rounds, step, size)
    tr = dg.simulate(graph, assignment, topology=topo, config=dg.SimConfig(link_model=link_model))
    assert tr.makespan == pytest.approx(rounds * (local_steps * step + t_sync), rel=1e-12)
    expect = local_steps * step / (local_steps * step + t_sync)
    np.testing.assert_allclose(tr.utilisation[[0, 4]], expect, rtol=1e-12)


@pytest.mark.parametrize("local_steps", [2, 32])
def test_diloco_utilisation_three_equidistant_sites_off_the_gateways(local_steps):
    # Heterogeneous sites (H100, A100, V100), 3000 km apart pairwise; training on GPU 1 of each site, so
    # T_sync crosses the site's NVLink to its gateway, the WAN, and the other site's NVLink.
    topo = multi_datacentre(("h100", "a100", "v100"), gpus_per_site=2, distance_km=3000.0)
    devices = [1, 3, 5]
    step, size = 0.2, 4e9
    syncs = [topo.transfer_time(size, a, b) for a in devices for b in devices if a != b]
    t_sync = max(syncs)
    hand = (2e-6 + size / 450e9) + wan_latency(3000.0) + size / WAN_BANDWIDTH + (2e-6 + size / 25e9)
    assert topo.transfer_time(size, 1, 5) == pytest.approx(hand, rel=1e-12)  # H100 site -> V100 site
    graph, assignment = diloco_graph(topo, devices, local_steps, 2, step, size)
    tr = dg.simulate(graph, assignment, topology=topo)
    assert tr.makespan == pytest.approx(2 * (local_steps * step + t_sync), rel=1e-12)
    # every site waits for the slowest incoming pseudo-gradient: one utilisation for all
    np.testing.assert_allclose(tr.utilisation[devices], local_steps * step / (local_steps * step + t_sync), rtol=1e-12)
