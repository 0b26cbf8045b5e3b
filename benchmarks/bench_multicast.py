"""Makespans under point-to-point copies vs TE-CCL multicasts, and the solve/cache cost.

Run from the repository root::

    python -m benchmarks.bench_multicast                      # llama-layer on v100x8-dgx1, C = 1 and 2
    python -m benchmarks.bench_multicast --graph ffnn --chunks 1 2 4
    python -m benchmarks.bench_multicast --collectives --placements "round robin" "critical path"
    python -m benchmarks.bench_multicast --smoke              # a 40-op ffnn with collectives, C = 1, two placements

For a few placements (single device, round robin, critical path, HEFT, two random ones) the table
lists the makespan with ``SimConfig()`` (``multicast="p2p"``) and with
``SimConfig(multicast="teccl", multicast_chunks=C)``, the number of producers whose output goes to
more than one other device (where the two models differ most), and per C the schedules solved and
the wall time of the first (cold: solves) and second (warm: cached) pass over the placements;
then per-destination delays of one 64 MiB output sent from device 0 to a few device sets.
``--collectives`` builds the graph with ``collectives=True`` (its partial-output sums become
``"allreduce"`` ops, timed as TE-CCL allreduces over their device groups under ``"teccl"``); the
cost line then also counts the collective schedules. ``--placements`` keeps some placements only.
Wall times depend on the machine and its load. Needs the ``solvers`` extra (OR-Tools CP-SAT).
"""

from __future__ import annotations

import time

import numpy as np

import doppler_gym as dg
from benchmarks import common
from doppler_gym.sim.multicast import timer_for

REQUIRES = ("ortools",)  # the solvers extra: TE-CCL's MILP


def _fanouts(graph: dg.DataflowGraph, assignment: np.ndarray) -> int:
    """Producers whose output is consumed on two or more other devices."""
    a = np.asarray(assignment)
    count = 0
    for u in range(graph.n_ops):
        devs = set(a[graph.dst[graph.src == u]].tolist()) - {int(a[u])}
        count += len(devs) >= 2
    return count


def main(argv: list[str] | None = None) -> None:
    p = common.parser(__doc__, writes=False)
    p.add_argument("--graph", default="llama-layer", help="a workload spec (NAME[:KEY=VALUE,...])")
    p.add_argument("--topology", default="v100x8-dgx1")
    p.add_argument("--chunks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--collectives", action="store_true", help="build the graph with collectives=True")
    p.add_argument("--placements", nargs="+", default=None, help="placement names to keep (default: all)")
    args = p.parse_args(argv)
    if args.smoke:
        args.graph, args.chunks, args.collectives = "ffnn:layers=2,blocks=2", [1], True
        args.placements = ["round robin", "critical path"]
    common.start("bench_multicast", args)
    g = dg.instances.resolve_graph(args.graph, {"collectives": True} if args.collectives else None)
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
    if args.placements:
        placements = {name: placements[name] for name in args.placements}
    print(f"{args.graph} ({g.n_ops} ops, {g.n_edges} edges, {dg.collective_ops(g).size} collective ops) on "
          f"{args.topology}; makespans [ms]")
    header = f"{'placement':<14} {'fan-outs':>8} {'p2p':>9}" + "".join(
        f" {'teccl C=' + str(c):>10}" for c in args.chunks
    )
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
        common.check(bool(np.allclose(batch, list(spans.values()), rtol=1e-12)),
                     "simulate_batch disagrees with simulate")
        for name, ms in spans.items():
            common.finite_positive(ms, f"{name}: makespan under teccl C={c}")
        for name, ms in spans.items():
            rows[name].append(f" {ms * 1e3:10.3f}")
        costs.append(f"C={c}: {timer.solves - solves0} schedules solved, {timer.cache_size} cached; "
                     f"{len(placements)} placements cold {cold:.2f} s, warm {warm * 1e3:.1f} ms "
                     f"({warm * 1e3 / len(placements):.2f} ms per placement)")
    print(header)
    for parts in rows.values():
        print("".join(parts))
    for line in costs:
        print(line)
    if args.collectives:
        _collective_cost(g, topo, placements, args.chunks)
    _fan_out_delays(topo, args.chunks)


def _collective_cost(graph: dg.DataflowGraph, topo: dg.Topology, placements: dict[str, np.ndarray],
                     chunks: list[int]) -> None:
    """The collective ops' share of the cost, on a fresh timer: distinct (kind, group, size) keys
    of the placements, schedules solved and wall time of a cold and a warm pass over them."""
    from doppler_gym.comm.multicast import MulticastTimer

    ops = dg.collective_ops(graph).tolist()
    groups = {(graph.kinds[c], tuple(np.unique(a[np.concatenate(([c], graph.predecessors(c), graph.successors(c)))])
                                     .tolist()), float(graph.out_bytes[c])) for a in placements.values() for c in ops}
    print(f"\n{len(ops)} collective ops, {len(groups)} distinct (kind, group, size) over the placements; "
          "times [ms] of each group size:")
    for c in chunks:
        timer = MulticastTimer(topo, chunks=c)
        t0 = time.perf_counter()
        times = {key: timer.collective_time(key[0], key[1], key[2]) for key in groups}
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        for key in groups:
            timer.collective_time(key[0], key[1], key[2])
        warm = time.perf_counter() - t0
        by_size: dict[int, list[float]] = {}
        for (_, group, _), t in times.items():
            by_size.setdefault(len(group), []).append(t * 1e3)
        spread = ", ".join(f"|G|={k}: {min(v):.3f}-{max(v):.3f}" for k, v in sorted(by_size.items()))
        print(f"  C={c}: {timer.solves} solved, cold {cold:.2f} s, warm {warm * 1e6 / max(len(groups), 1):.1f} us "
              f"per lookup; {spread}")


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
