"""How often one restart of the search teacher lands in the best known basin.

The ``best`` recipe's teacher (:func:`agents.training.teacher.search_placement`) is the best of a local
search and up to 16 independent restarts of ``evals // 4`` evaluations each, all from the
critical-path and HEFT placements. One local search ends in one of several basins by luck, so the
teacher is only as steady as the share of restarts that reach the best one. This script runs
``--islands`` restarts of ``--evals`` evaluations per seed (the teacher's own
:func:`~doppler_gym.parallel.search.island_search` call, with its seeds) and counts those that end
below ``--below``. Counts are of evaluations, not seconds: the same on every machine.

    python benchmarks/bench_teacher_basins.py --graph paper/llama-layer --seeds 1,2,3 --islands 32 --below 124
    python benchmarks/bench_teacher_basins.py --islands 16 --option kick=20      # a local_search option varied

``--teacher BATCH`` runs the whole teacher instead (:func:`~agents.training.teacher.search_placement`
with the ``best`` recipe's evaluations and restarts on one graph, ``BATCH`` neighbours per step) and
prints its makespan and seconds per seed:

    python benchmarks/bench_teacher_basins.py --teacher 16 --seeds 0,1,2,3,4,5,6,7,8,9,10,11
"""

from __future__ import annotations

import argparse


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", default="paper/llama-layer")
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--seeds", default="1,2,3", help="teacher seeds, comma-separated")
    ap.add_argument("--islands", type=int, default=32, help="restarts per seed")
    ap.add_argument("--evals", type=int, default=50_000, help="evaluations per restart (the teacher's: 200,000 // 4)")
    ap.add_argument("--below", type=float, default=124.0, help="a restart ending below this makespan is a hit")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="a local_search option of every restart (kick=20, temperature=0.02, patience=50), repeatable")
    ap.add_argument("--teacher", type=int, default=None, metavar="BATCH",
                    help="run the whole search teacher with this batch size per seed instead of the restarts")
    args = ap.parse_args()
    if args.teacher is not None:
        teacher(args.graph, args.devices, [int(s) for s in args.seeds.split(",")], args.teacher)
        return
    options = {}
    for pair in args.option:
        key, _, value = pair.partition("=")
        options[key] = int(value) if value.lstrip("-").isdigit() else float(value)

    import doppler_gym as dg
    from doppler_gym.parallel.search import island_search

    graph = dg.instances.resolve_graph(args.graph)
    topology = dg.instances.resolve_topology(args.devices)
    config = dg.instances.default_config(graph)
    print(f"| seed | restarts below {args.below:g} | best | restarts' makespans (sorted) |")
    print("|---:|---:|---:|---|")
    total = 0
    seeds = [int(s) for s in args.seeds.split(",")]
    for seed in seeds:
        starts = [dg.baselines.run("critical_path", graph, topology, config, seed=seed),
                  dg.baselines.run("heft", graph, topology, config)]
        found = island_search(graph, topology, config, islands=args.islands, max_evals=args.evals, seed=seed,
                              starts=starts, **options)
        ends = sorted(found.info["island_makespans"][0])
        hits = sum(m < args.below for m in ends)
        total += hits
        print(f"| {seed} | {hits} of {args.islands} | {found.makespan:.3f} | {', '.join(f'{m:.1f}' for m in ends)} |",
              flush=True)
    print(f"\n{total} of {args.islands * len(seeds)} restarts ended below {args.below:g}")


def teacher(graph_name: str, devices: int, seeds: list[int], batch_size: int) -> None:
    """The ``best`` recipe's search teacher on one graph, per seed: makespan and seconds."""
    import time

    import doppler_gym as dg
    from agents.training.args import TEACHER_EVALS, TEACHER_RESTARTS
    from agents.training.teacher import search_placement

    graph = dg.instances.resolve_graph(graph_name)
    topology = dg.instances.resolve_topology(devices)
    config = dg.instances.default_config(graph)
    print(f"| seed | teacher makespan ({graph_name}, batch {batch_size}) | seconds |")
    print("|---:|---:|---:|")
    for seed in seeds:
        started = time.perf_counter()
        found = search_placement(graph, topology, config, TEACHER_EVALS["one"], seed, TEACHER_RESTARTS["one"],
                                 batch_size=batch_size)
        print(f"| {seed} | {found['makespan']:.3f} | {time.perf_counter() - started:.1f} |", flush=True)


if __name__ == "__main__":
    main()
