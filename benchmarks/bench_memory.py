"""Cost of memory tracking: ``simulate`` and ``simulate_batch`` with ``SimConfig(memory=...)`` off,
track and enforce, side by side in one process.

Run from the repository root::

    python -m benchmarks.bench_memory            # 5 rounds
    python -m benchmarks.bench_memory --rounds 3
    python -m benchmarks.bench_memory --smoke    # one round of few calls

Per case: one ``simulate`` call [us] under ``memory="off"``, ``"track"`` and ``"enforce"`` (median
of blocks, minimum over rounds), their ratios to ``off``; and ``simulate_batch`` per assignment [us]
off vs enforce (enforce reruns each row once for its times, so expect about the serial cost).
Memory never changes a time: the script also checks that the makespans agree.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

import doppler_gym as dg
from benchmarks import common
from benchmarks.common import median_block, side_by_side


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


def main(argv: list[str] | None = None) -> None:
    parser = common.parser(__doc__, writes=False)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=200, help="assignments per simulate_batch call")
    args = parser.parse_args(argv)
    reps = 200
    if args.smoke:
        args.rounds, args.batch, reps = 1, 8, 5
    common.start("bench_memory", args)
    rng = np.random.default_rng(args.seed)
    rows = []
    for label, graph, topology, config in cases():
        devices = topology.n_devices if topology is not None else (8 if "8gpu" in label else 4)
        batch = rng.integers(0, devices, size=(args.batch, graph.n_ops)).astype(np.int64)
        one = batch[0].copy()
        modes = {m: dataclasses.replace(config, memory=m) for m in ("off", "track", "enforce")}
        spans = {m: dg.simulate(graph, one, topology=topology, config=c).makespan for m, c in modes.items()}
        common.check(len(set(spans.values())) == 1, f"{label}: memory changed the makespan: {spans}")
        timings = {}  # label -> one timing [us]; side_by_side alternates them round by round
        for m, c in modes.items():
            timings[m] = functools.partial(median_block, _call(dg.simulate, graph, one, topology, c), reps)
        for m in ("off", "enforce"):
            call = _call(dg.simulate_batch, graph, batch, topology, modes[m])
            timings[f"batch {m}"] = lambda call=call: median_block(call, reps=1, blocks=3) / args.batch
        rows.append((label, graph.n_ops, side_by_side(timings, args.rounds)))
    print(f"{'case':<48}{'ops':>5}{'off':>9}{'track':>9}{'enforce':>9}{'x track':>9}{'x enf':>8}"
          f"{'batch off':>11}{'batch enf':>11}{'x':>7}")
    for label, n, b in rows:
        print(f"{label:<48}{n:>5}{b['off']:>9.1f}{b['track']:>9.1f}{b['enforce']:>9.1f}"
              f"{b['track'] / b['off']:>9.2f}{b['enforce'] / b['off']:>8.2f}"
              f"{b['batch off']:>11.2f}{b['batch enforce']:>11.2f}{b['batch enforce'] / b['batch off']:>7.1f}")
    print("times [us] per simulate call / per batch row; minimum over rounds of the median block")


if __name__ == "__main__":
    main()
