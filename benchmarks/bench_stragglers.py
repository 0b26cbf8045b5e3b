"""Robust vs nominal placements under random stragglers, scored on the same held-out draws.

Run from the repository root::

    python -m benchmarks.bench_stragglers                    # the cases of docs/results/stragglers.md
    python -m benchmarks.bench_stragglers --iters 40 --k 4   # a quick run
    python -m benchmarks.bench_stragglers --smoke            # one case, 3 iterations of 4 neighbours

Per case (graph, topology, straggler model): the horizon ``H`` is the critical-path heuristic's nominal
makespan; ``K`` training draws (seeds ``0..K-1``) and ``M`` held-out draws (seeds ``10_000..``) of the
:class:`~doppler_gym.sim.stragglers.StragglerModel` over ``H``. Two placements come out of the *same*
search (batched stochastic hill climbing from the critical-path placement: each iteration scores
``--batch`` neighbours that move one or two random ops to random devices, and keeps the best if it
improves; same seed, same number of iterations), differing only in the objective:

- **nominal**: the straggler-free makespan;
- **robust**: the mean makespan over the ``K`` training draws (each draw one ``SimConfig``, the batch
  scored by ``simulate_batch`` per draw).

Both (and the critical-path start) are then simulated on the ``M`` held-out draws: mean, 90th
percentile and worst makespan, and the nominal makespan, with the robust/nominal ratio of the held-out
mean, and each search's share of the compute per device (nominal run). Wall-clock times are on the
machine at hand (2 shared cores in docs/results).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

import doppler_gym as dg
from benchmarks import common
from doppler_gym.sim.stragglers import StragglerModel

CASES = {
    "ffnn-p100x4": ("paper/ffnn", "p100x4", StragglerModel(device_rate=1.0, duration=(0.2, 0.6), factor=(0.2, 0.5))),
    "ffnn-p100x4-flaky": (  # device 0 straggles four times as often as the others
        "paper/ffnn", "p100x4",
        StragglerModel(device_rate=(2.0, 0.5, 0.5, 0.5), duration=(0.2, 0.6), factor=(0.2, 0.5)),
    ),
    "llama-block-dc2-wan": (
        "llama-block", "dc2-wan",
        StragglerModel(device_rate=0.5, link_rate=0.5, duration=(0.2, 0.6), factor=(0.1, 0.5)),
    ),
}


def draws(model: StragglerModel, topology: dg.Topology, horizon: float, seeds: range) -> list[tuple]:
    return [model.draw(topology, s, horizon=horizon) for s in seeds]


def score(graph, batch, topology, config, scenarios) -> np.ndarray:
    """``(B,)`` mean makespan of each assignment over the scenarios (one straggler tuple each)."""
    total = np.zeros(batch.shape[0])
    for stragglers in scenarios:
        total += dg.simulate_batch(graph, batch, topology=topology, config=replace(config, stragglers=stragglers))
    return total / len(scenarios)


def hill_climb(graph, topology, config, start, scenarios, iters, batch_size, seed) -> tuple[np.ndarray, float]:
    """Batched stochastic hill climbing on the mean makespan over ``scenarios``; returns (best, its score)."""
    rng = np.random.default_rng(seed)
    n, d = graph.n_ops, topology.n_devices
    best = np.asarray(start, dtype=np.int64).copy()
    best_score = float(score(graph, best[None, :], topology, config, scenarios)[0])
    for _ in range(iters):
        batch = np.repeat(best[None, :], batch_size, axis=0)
        rows = np.arange(batch_size)
        batch[rows, rng.integers(0, n, batch_size)] = rng.integers(0, d, batch_size)
        two = rng.random(batch_size) < 0.5
        batch[rows[two], rng.integers(0, n, int(two.sum()))] = rng.integers(0, d, int(two.sum()))
        scores = score(graph, batch, topology, config, scenarios)
        i = int(np.argmin(scores))
        if scores[i] < best_score:
            best, best_score = batch[i].copy(), float(scores[i])
    return best, best_score


def main(argv: list[str] | None = None) -> None:
    p = common.parser(__doc__, writes=False)
    p.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    p.add_argument("--k", type=int, default=16, help="training draws of the robust objective")
    p.add_argument("--m", type=int, default=200, help="held-out draws")
    p.add_argument("--iters", type=int, default=150, help="hill-climbing iterations (both searches)")
    p.add_argument("--batch", type=int, default=64, help="neighbours per iteration")
    args = p.parse_args(argv)
    if args.smoke:
        args.cases, args.k, args.m, args.iters, args.batch = ["ffnn-p100x4"], 2, 4, 3, 4
    common.start("bench_stragglers", args)
    for name in args.cases:
        graph_name, topo_name, model = CASES[name]
        graph = dg.instances.resolve_graph(graph_name)
        topo = dg.Topology.preset(topo_name)
        config = replace(dg.instances.default_config(graph, topo), stragglers=())
        cp = dg.baselines.run("critical_path", graph, topo, config, seed=0)
        start = np.asarray(cp.assignment, dtype=np.int64)
        horizon = float(cp.makespan)
        train = draws(model, topo, horizon, range(args.k))
        held = draws(model, topo, horizon, range(10_000, 10_000 + args.m))
        t0 = time.perf_counter()
        nominal, nominal_score = hill_climb(graph, topo, config, start, [()], args.iters, args.batch, args.seed)
        t1 = time.perf_counter()
        robust, robust_score = hill_climb(graph, topo, config, start, train, args.iters, args.batch, args.seed)
        common.check(nominal_score <= horizon * (1 + 1e-12),
                     f"{name}: the nominal search ({nominal_score}) ended worse than its start ({horizon})")
        common.finite_positive(robust_score, f"{name}: the robust search's mean makespan")
        t2 = time.perf_counter()
        print(f"\n{name}: {graph_name} ({graph.n_ops} ops) on {topo_name}, {model}")
        print(f"horizon (critical-path nominal makespan) {horizon:.4g} [{config.time_unit}]")
        print(f"search: {args.iters} iterations x {args.batch} neighbours; nominal {t1 - t0:.1f} s, "
              f"robust (K={args.k}) {t2 - t1:.1f} s")
        print(f"held-out: M={args.m} draws, mean {np.mean([len(h) for h in held]):.2f} stragglers each")
        print(f"{'placement':<16}{'nominal':>10}{'mean':>10}{'p90':>10}{'worst':>10}")
        means = {}
        for label, a in (("critical_path", start), ("nominal search", nominal), ("robust search", robust)):
            per_draw = np.array([score(graph, a[None, :], topo, config, [h])[0] for h in held])
            nom = float(score(graph, a[None, :], topo, config, [()])[0])
            means[label] = per_draw.mean()
            print(f"{label:<16}{nom:>10.4g}{per_draw.mean():>10.4g}{np.percentile(per_draw, 90):>10.4g}"
                  f"{per_draw.max():>10.4g}")
        print(f"robust / nominal held-out mean: {means['robust search'] / means['nominal search']:.4f}")
        for label, a in (("nominal search", nominal), ("robust search", robust)):
            busy = dg.simulate(graph, a, topology=topo, config=config).device_busy
            print(f"{label} compute share per device: " + " ".join(f"{x:.0%}" for x in busy / busy.sum()))


if __name__ == "__main__":
    main()
