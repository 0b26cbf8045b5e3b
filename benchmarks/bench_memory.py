"""Cost of memory tracking: ``simulate`` and ``simulate_batch`` with ``SimConfig(memory=...)`` off,
track and enforce, side by side in one process.

Run from the repository root::

    python benchmarks/bench_memory.py            # 5 rounds
    python benchmarks/bench_memory.py --rounds 3

Per case: one ``simulate`` call [us] under ``memory="off"``, ``"track"`` and ``"enforce"`` (median
of blocks, minimum over rounds), their ratios to ``off``; and ``simulate_batch`` per assignment [us]
off vs enforce (enforce reruns each row once for its times, so expect about the serial cost).
Memory never changes a time: the script also checks that the makespans agree.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

import doppler_gym as dg


def median_block(fn, reps: int, blocks: int = 5) -> float:
    out = []
    for _ in range(blocks):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        out.append((time.perf_counter() - t0) / reps * 1e6)
    return float(np.median(out))


def _call(fn, graph, assignment, topology, config):
    """``fn(graph, assignment, topology=topology, config=config)`` as a no-argument callable."""
    return lambda: fn(graph, assignment, topology=topology, config=config)


def cases() -> list[tuple[str, dg.DataflowGraph, dg.Topology | None, dg.SimConfig]]:
    ref = dg.SimConfig.reference()
    out = [(f"{name} reference", dg.load_graph(name), None, ref) for name in ("paper/ffnn", "paper/llama-layer-8gpu")]
    out.append(("ffnn workload, p100x4", dg.workloads.make("ffnn"), dg.Topology.preset("p100x4"), dg.SimConfig()))
    out.append(("llama-layer workload, v100x8-dgx1, fifo links", dg.workloads.make("llama-layer"),
                dg.Topology.preset("v100x8-dgx1"), dg.SimConfig(link_model="fifo")))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=200, help="assignments per simulate_batch call")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for label, graph, topology, config in cases():
        devices = topology.n_devices if topology is not None else (8 if "8gpu" in label else 4)
        batch = rng.integers(0, devices, size=(args.batch, graph.n_ops)).astype(np.int64)
        one = batch[0].copy()
        modes = {m: dataclasses.replace(config, memory=m) for m in ("off", "track", "enforce")}
        spans = {m: dg.simulate(graph, one, topology=topology, config=c).makespan for m, c in modes.items()}
        assert len(set(spans.values())) == 1, f"{label}: memory changed the makespan: {spans}"
        best = {k: np.inf for k in ("off", "track", "enforce", "batch off", "batch enforce")}
        for _ in range(args.rounds):
            for m, c in modes.items():
                best[m] = min(best[m], median_block(_call(dg.simulate, graph, one, topology, c), reps=200))
            for m in ("off", "enforce"):
                call = _call(dg.simulate_batch, graph, batch, topology, modes[m])
                best[f"batch {m}"] = min(best[f"batch {m}"], median_block(call, reps=1, blocks=3) / args.batch)
        rows.append((label, graph.n_ops, best))
    print(f"{'case':<48}{'ops':>5}{'off':>9}{'track':>9}{'enforce':>9}{'x track':>9}{'x enf':>8}"
          f"{'batch off':>11}{'batch enf':>11}{'x':>7}")
    for label, n, b in rows:
        print(f"{label:<48}{n:>5}{b['off']:>9.1f}{b['track']:>9.1f}{b['enforce']:>9.1f}"
              f"{b['track'] / b['off']:>9.2f}{b['enforce'] / b['off']:>8.2f}"
              f"{b['batch off']:>11.2f}{b['batch enforce']:>11.2f}{b['batch enforce'] / b['batch off']:>7.1f}")
    print("times [us] per simulate call / per batch row; minimum over rounds of the median block")


if __name__ == "__main__":
    main()
