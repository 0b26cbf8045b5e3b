"""Makespans under point-to-point copies vs TE-CCL multicasts, and the solve/cache cost (issue 6).

Run from the repository root::

    python benchmarks/bench_multicast.py                      # llama-layer on v100x8-dgx1, C = 1 and 2
    python benchmarks/bench_multicast.py --graph ffnn --chunks 1 2 4

For a few placements (single device, round robin, critical path, HEFT, two random ones) the table
lists the makespan with ``SimConfig()`` (``multicast="p2p"``) and with
``SimConfig(multicast="teccl", multicast_chunks=C)``, the number of producers whose output goes to
more than one other device (where the two models differ most), and per C the schedules solved and
the wall time of the first (cold: solves) and second (warm: cached) pass over the placements;
then per-destination delays of one 64 MiB output sent from device 0 to a few device sets.
Wall times depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import doppler_gym as dg
from doppler_gym.sim.multicast import timer_for


def _fanouts(graph: dg.DataflowGraph, assignment: np.ndarray) -> int:
    """Producers whose output is consumed on two or more other devices."""
    a = np.asarray(assignment)
    count = 0
    for u in range(graph.n_ops):
        devs = set(a[graph.dst[graph.src == u]].tolist()) - {int(a[u])}
        count += len(devs) >= 2
    return count


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graph", default="llama-layer")
    p.add_argument("--topology", default="v100x8-dgx1")
    p.add_argument("--chunks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    g = dg.workloads.make(args.graph)
    topo = dg.Topology.preset(args.topology)
    rng = np.random.default_rng(args.seed)
    placements = {
        "single device": np.zeros(g.n_ops, np.int32),
        "round robin": np.asarray(dg.baselines.round_robin(g, topo).assignment, np.int32),
        "critical path": np.asarray(dg.baselines.critical_path(g, topo).assignment, np.int32),
        "heft": np.asarray(dg.baselines.heft(g, topo).assignment, np.int32),
        "random 1": rng.integers(0, topo.n_devices, g.n_ops).astype(np.int32),
        "random 2": rng.integers(0, topo.n_devices, g.n_ops).astype(np.int32),
    }
    print(f"{args.graph} ({g.n_ops} ops, {g.n_edges} edges) on {args.topology}; makespans [ms]")
    header = f"{'placement':<14} {'fan-outs':>8} {'p2p':>9}" + "".join(f" {'teccl C=' + str(c):>10}" for c in args.chunks)
    rows = {name: [f"{name:<14} {_fanouts(g, a):>8d} {dg.simulate(g, a, topology=topo).makespan * 1e3:9.3f}"]
            for name, a in placements.items()}
    costs = []
    for c in args.chunks:
        cfg = dg.SimConfig(multicast="teccl", multicast_chunks=c)
        timer = timer_for(topo, cfg)
        solves0 = timer.solves
        t0 = time.perf_counter()
        spans = {name: dg.simulate(g, a, topology=topo, config=cfg).makespan for name, a in placements.items()}
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        for a in placements.values():
            dg.simulate(g, a, topology=topo, config=cfg)
        warm = time.perf_counter() - t0
        batch = dg.simulate_batch(g, np.stack(list(placements.values())), topology=topo, config=cfg)
        assert np.allclose(batch, list(spans.values()), rtol=1e-12), "simulate_batch disagrees with simulate"
        for name, ms in spans.items():
            rows[name].append(f" {ms * 1e3:10.3f}")
        costs.append(f"C={c}: {timer.solves - solves0} schedules solved, {timer.cache_size} cached; "
                     f"{len(placements)} placements cold {cold:.2f} s, warm {warm * 1e3:.1f} ms")
    print(header)
    for parts in rows.values():
        print("".join(parts))
    for line in costs:
        print(line)
    _fan_out_delays(topo, args.chunks)


def _fan_out_delays(topo: dg.Topology, chunks: list[int], nbytes: float = 64 * 2**20) -> None:
    """Per-destination delays [ms] of one 64 MiB output from device 0 to a few destination sets."""
    print(f"\none {nbytes / 2**20:g} MiB output from device 0: delays [ms], p2p vs teccl")
    for dsts in ([1, 2, 3], [5, 6, 7], list(range(1, topo.n_devices))):
        dsts = [d for d in dsts if d < topo.n_devices]
        p2p = [topo.transfer_time(nbytes, 0, d) * 1e3 for d in dsts]
        print(f"  to {dsts}: p2p " + " ".join(f"{x:.3f}" for x in p2p))
        for c in chunks:
            d = timer_for(topo, dg.SimConfig(multicast="teccl", multicast_chunks=c)).delays(0, dsts, nbytes) * 1e3
            print(f"  {'':>{len(str(dsts)) + 4}}C={c} " + " ".join(f"{x:.3f}" for x in d))


if __name__ == "__main__":
    main()
