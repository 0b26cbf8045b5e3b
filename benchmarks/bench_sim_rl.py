"""The shipped recipes on the placement envs: greedy makespans against the heuristics, per seed.

Run from the repository root::

    python -m benchmarks.bench_sim_rl                                   # paper/ffnn and llama-layer, seeds 0-3
    python -m benchmarks.bench_sim_rl --graphs paper/ffnn --seeds 0 1 --minutes 5
    python -m benchmarks.bench_sim_rl --env Doppler-SimAssign-v0 --algo ppo a2c --seeds 0 1 2
    python -m benchmarks.bench_sim_rl --smoke                           # paper/chainmm, a few thousand steps
    python -m benchmarks.bench_sim_rl --smoke --env Doppler-SimAssign-v0 --algo ppo a2c

Each (graph, algorithm, seed) trains ``agents.recipes.train_recipe(algo, env, seed,
env_kwargs_overrides={"graph": graph})`` with the hyperparameters of ``agents/recipes/hyperparams/<algo>.yml``
for the recipe's ``n_timesteps`` or ``--minutes`` of wall time, with a greedy evaluation every ``eval_every``
steps; the model it keeps is the best evaluated one (rl-zoo's ``EvalCallback`` convention).

- ``--env Doppler-Sim-v0`` (default; ``--algo maskable_ppo``): sb3-contrib ``MaskablePPO("MultiInputPolicy")``
  on the SEL/PLC placement MDP (flat observation, the default ``"incremental"`` reward, gamma 0.99).
  References: the critical-path heuristic (the env's ``info["reference_makespan"]``), HEFT, a random masked
  policy (mean of 20 episodes) and the lower bound.
- ``--env Doppler-SimAssign-v0`` (``--algo ppo``, ``a2c`` or both): SB3 PPO / A2C on the one-step assignment
  bandit (the whole ``MultiDiscrete`` assignment in one action; every action is valid, so no masks).
  References: critical path, round robin, a uniformly random assignment (mean of 20) and the lower bound.

Reported per run: the untrained policy's greedy makespan, the best one and when it was reached (seconds,
steps), the last evaluation's, and the references, all on the env's graph, topology (4 devices) and config.
Prints a markdown table.
"""

from __future__ import annotations

import os
import time

import numpy as np

from benchmarks import common

GRAPHS = ("paper/ffnn", "llama-layer")
TOPOLOGY = 4
SIM, ASSIGN = "Doppler-Sim-v0", "Doppler-SimAssign-v0"
DEFAULT_ALGOS = {SIM: ["maskable_ppo"], ASSIGN: ["ppo"]}
DEFAULT_GRAPHS = {SIM: list(GRAPHS), ASSIGN: ["paper/ffnn"]}


def _started(env_class: type, graph: str) -> tuple:
    """``(env, its GraphContext, numpy Generator seeded 0)``: an env of ``env_class`` on ``graph`` and
    :data:`TOPOLOGY`, reset with seed 0."""
    env = env_class(graph=graph, topology=TOPOLOGY)
    env.reset(seed=0)
    return env, env.context, np.random.default_rng(0)


def references(graph: str) -> dict[str, float]:
    """``Doppler-Sim-v0``'s references on ``graph`` (4 devices), in the reported time unit: critical path
    (the env's reference), HEFT, a random masked policy (mean of 20 episodes) and the lower bound."""
    import doppler_gym as dg
    from doppler_gym.envs import PlacementEnv

    env, ctx, rng = _started(PlacementEnv, graph)
    randoms = []
    for k in range(20):
        env.reset(seed=k)
        while True:
            _, _, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
            if terminated or truncated:
                randoms.append(info["makespan"])
                break
    return {
        "critical path": ctx.reference_makespan,
        "HEFT": dg.baselines.run("heft", ctx.graph, ctx.topology, config=ctx.config).makespan,
        "random": float(np.mean(randoms)),
        "lower bound": dg.makespan_lower_bound(ctx.graph, ctx.topology, ctx.config),
    }


def assign_references(graph: str) -> dict[str, float]:
    """``Doppler-SimAssign-v0``'s references on ``graph`` (4 devices), in the reported time unit: critical
    path (the env's reference), round robin, a uniformly random assignment (mean of 20, each op's device
    drawn uniformly; ``numpy`` seed 0) and the lower bound."""
    import doppler_gym as dg
    from doppler_gym.envs import AssignEnv

    env, ctx, rng = _started(AssignEnv, graph)
    randoms = []
    for k in range(20):
        env.reset(seed=k)
        randoms.append(env.step(rng.integers(0, ctx.n_devices, env.action_space.shape))[4]["makespan"])
    return {
        "critical path": ctx.reference_makespan,
        "round robin": dg.baselines.run("round_robin", ctx.graph, ctx.topology, config=ctx.config).makespan,
        "random": float(np.mean(randoms)),
        "lower bound": dg.makespan_lower_bound(ctx.graph, ctx.topology, ctx.config),
    }


def _arguments(argv: list[str] | None):
    parser = common.parser(__doc__, seed=None, writes=False)
    parser.add_argument("--env", choices=[SIM, ASSIGN], default=SIM, help=f"the env id (default {SIM})")
    parser.add_argument("--algo", nargs="+", default=None,
                        help="recipe algorithms (default: maskable_ppo on Doppler-Sim-v0, ppo on Doppler-SimAssign-v0)")
    parser.add_argument("--graphs", nargs="+", default=None,
                        help="graphs (default: paper/ffnn and llama-layer; paper/ffnn on Doppler-SimAssign-v0)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3])
    parser.add_argument("--minutes", type=float, default=10.0, help="wall budget per run [min]")
    args = parser.parse_args(argv)
    args.algo = args.algo or DEFAULT_ALGOS[args.env]
    args.graphs = args.graphs or DEFAULT_GRAPHS[args.env]
    allowed = ["maskable_ppo"] if args.env == SIM else ["ppo", "a2c"]
    bad = sorted(set(args.algo) - set(allowed))
    if bad:
        parser.error(f"--algo {' '.join(bad)}: {args.env} has recipes for {', '.join(allowed)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = _arguments(argv)
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    import torch

    from agents.recipes import train_recipe

    torch.set_num_threads(1)
    steps, every = None, None
    if args.smoke:
        args.graphs, args.seeds, args.minutes = ["paper/chainmm"], [0], 2.0
        steps, every = (4096, 2048) if args.env == SIM else (2048, 1024)
    common.start("bench_sim_rl", args)
    find_references = references if args.env == SIM else assign_references
    rows, names = [], []
    for graph in args.graphs:
        ref = find_references(graph)
        names = list(ref)
        for algo in args.algo:
            for seed in args.seeds:
                t0 = time.perf_counter()
                run = train_recipe(algo, args.env, seed, minutes=args.minutes, n_timesteps=steps, eval_every=every,
                                   env_kwargs_overrides={"graph": graph})
                best = run.best
                reached = "yes" if best.score <= ref["critical path"] * (1 + 1e-9) else "no"
                rows.append([graph, algo, seed, f"{run.initial:.5g}", f"{best.score:.5g}",
                             f"{best.seconds:.0f} s / {best.steps:,}", f"{run.last.score:.5g}",
                             f"{time.perf_counter() - t0:.0f} s", *(f"{v:.5g}" for v in ref.values()), reached])
                print(f"{graph} {algo} seed {seed}: start {run.initial:.5g}, best {best.score:.5g} at "
                      f"{best.seconds:.0f} s, last {run.last.score:.5g}; critical path {ref['critical path']:.5g}",
                      flush=True)
    print()
    header = ["graph", "algorithm", "seed", "start", "best", "best at (time / steps)", "last eval", "run time",
              *names, "best <= critical path"]
    print(common.markdown_table(header, rows))
    for r in rows:
        common.finite_positive(float(r[4]), f"the best greedy makespan of {r[0]} {r[1]} seed {r[2]}")
        common.check(float(r[4]) <= float(r[3]), f"{r[1]} seed {r[2]}: the kept policy ({r[4]}) is worse than "
                     f"the untrained one ({r[3]}), though the best evaluation includes the untrained one")


if __name__ == "__main__":
    main()
