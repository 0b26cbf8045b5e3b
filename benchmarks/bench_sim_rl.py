"""The shipped MaskablePPO recipe on ``Doppler-Sim-v0``: greedy makespans against the heuristics, per seed.

Run from the repository root::

    python -m benchmarks.bench_sim_rl                                   # paper/ffnn and llama-layer, seeds 0-3
    python -m benchmarks.bench_sim_rl --graphs paper/ffnn --seeds 0 1 --minutes 5
    python -m benchmarks.bench_sim_rl --smoke                           # paper/chainmm, a few thousand steps

Each (graph, seed) trains ``agents.recipes.train_recipe("maskable_ppo", "Doppler-Sim-v0", seed,
env_kwargs_overrides={"graph": graph})`` (sb3-contrib ``MaskablePPO("MultiInputPolicy")`` with the
hyperparameters of ``agents/recipes/hyperparams/maskable_ppo.yml``: flat observation, the default
``"incremental"`` reward, gamma 0.99) for the recipe's ``n_timesteps`` or ``--minutes`` of wall time, with a
greedy evaluation every ``eval_every`` steps; the model it keeps is the best evaluated one (rl-zoo's
``EvalCallback`` convention). Reported per run: the untrained policy's greedy makespan, the best one and
when it was reached (seconds, steps), the last evaluation's, next to the critical-path heuristic (the
reference, ``info["reference_makespan"]``), HEFT, a random masked policy (mean of 20 episodes) and the lower
bound, all on the env's graph, topology and config. Prints a markdown table.
"""

from __future__ import annotations

import os
import time

import numpy as np

from benchmarks import common

GRAPHS = ("paper/ffnn", "llama-layer")
TOPOLOGY = 4


def references(graph: str) -> dict[str, float]:
    """Critical path (the env's reference), HEFT, random masked (mean of 20) and the lower bound on ``graph``."""
    import doppler_gym as dg
    from doppler_gym.envs import PlacementEnv

    env = PlacementEnv(graph=graph, topology=TOPOLOGY)
    env.reset(seed=0)
    ctx = env.context
    rng = np.random.default_rng(0)
    randoms = []
    for k in range(20):
        env.reset(seed=k)
        while True:
            _, _, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
            if terminated or truncated:
                randoms.append(info["makespan"])
                break
    return {
        "critical_path": ctx.reference_makespan,
        "heft": dg.baselines.run("heft", ctx.graph, ctx.topology, config=ctx.config).makespan,
        "random": float(np.mean(randoms)),
        "lower_bound": dg.makespan_lower_bound(ctx.graph, ctx.topology, ctx.config),
    }


def main(argv: list[str] | None = None) -> None:
    parser = common.parser(__doc__, seed=None, writes=False)
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3])
    parser.add_argument("--minutes", type=float, default=10.0, help="wall budget per run [min]")
    args = parser.parse_args(argv)
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    import torch

    from agents.recipes import train_recipe

    torch.set_num_threads(1)
    steps = None
    if args.smoke:
        args.graphs, args.seeds, args.minutes, steps = ["paper/chainmm"], [0], 2.0, 4096
    common.start("bench_sim_rl", args)
    rows = []
    for graph in args.graphs:
        ref = references(graph)
        for seed in args.seeds:
            t0 = time.perf_counter()
            run = train_recipe("maskable_ppo", "Doppler-Sim-v0", seed, minutes=args.minutes, n_timesteps=steps,
                               eval_every=2048 if args.smoke else None, env_kwargs_overrides={"graph": graph})
            best = run.best
            reached = "yes" if best.score <= ref["critical_path"] * (1 + 1e-9) else "no"
            rows.append([graph, seed, f"{run.initial:.5g}", f"{best.score:.5g}",
                         f"{best.seconds:.0f} s / {best.steps:,}", f"{run.last.score:.5g}",
                         f"{time.perf_counter() - t0:.0f} s", f"{ref['critical_path']:.5g}", f"{ref['heft']:.5g}",
                         f"{ref['random']:.5g}", f"{ref['lower_bound']:.5g}", reached])
            print(f"{graph} seed {seed}: start {run.initial:.5g}, best {best.score:.5g} at {best.seconds:.0f} s, "
                  f"last {run.last.score:.5g}; critical path {ref['critical_path']:.5g}", flush=True)
    print()
    print(common.markdown_table(
        ["graph", "seed", "start", "best", "best at (time / steps)", "last eval", "run time", "critical path",
         "HEFT", "random", "lower bound", "best <= critical path"], rows))
    for r in rows:
        common.finite_positive(float(r[3]), f"the best greedy makespan of {r[0]} seed {r[1]}")


if __name__ == "__main__":
    main()
