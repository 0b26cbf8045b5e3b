"""Total steps/s of N ``Doppler-Sim-v0`` envs: the native vector env against ``SyncVectorEnv`` and one env.

Run from the repository root::

    python -m benchmarks.bench_vector                 # paper/ffnn on 4 devices, N = 1, 8, 64
    python -m benchmarks.bench_vector --threads 2     # the simulator calls on two Numba threads ('tuned': chosen)
    python -m benchmarks.bench_vector --no-copy       # every env returns its live arrays (copy_obs=False)
    python -m benchmarks.bench_vector --smoke         # paper/chainmm, a few hundred steps, outputs checked

Every case takes uniformly random valid actions (read from the observation's mask; for the single env
from ``action_masks()``), with the same keywords (the defaults: graph form, ``reward="incremental"``):

* ``PlacementEnv``: one env, stepped in a Python loop;
* ``SyncVectorEnv(N)``: Gymnasium's ``SyncVectorEnv`` over ``N`` single envs;
* ``PlacementVectorEnv(N)``: the native vector env (:mod:`doppler_gym.envs.vector`), one batched call per step.

Each case runs ``--steps`` env steps (all envs together) per round; the cases take turns in every round
(:func:`benchmarks.common.best_rounds`) and each keeps its best round. Reported: total env steps per second
with the random policy's time and without it, and the ratio to the single env. Target: 64 native envs at
least 10x the steps/s of one env. The exit status is always 0 (timings depend on the machine).
"""

from __future__ import annotations

import warnings

import gymnasium as gym

from benchmarks import common
from doppler_gym.envs import PlacementEnv
from doppler_gym.envs.vector import PlacementVectorEnv

TARGET = 10.0  # PlacementVectorEnv(64) steps/s over PlacementEnv's

PARTS = {  # (file suffix, function) -> label of the breakdown
    ("kernel.py", "step_rows"): "state transitions and observation writes (Numba kernel)",
    ("partial_incremental.py", "__call__"): "partial makespans and resumed final runs (IncrementalPartialMakespan)",
    ("api.py", "simulate_batch"): "final runs not resumed (simulate_batch)",
    ("envs/batched.py", "observation"): "observation copies (copy_obs=True)",
}


def breakdown(run: common.StepsRun, steps: int) -> dict[str, float]:
    """Where a native vector env's step time goes: cProfile's cumulative seconds of :data:`PARTS` over ``steps``
    env steps, the random policy and the rest, as shares of the whole loop."""
    total, policy, stats = common.profiled(run, steps)
    return common.loop_shares(total, policy, common.cumulative_seconds(stats, PARTS),
                              "rest (Python of the step: rewards, infos, autoreset)")


def main(argv: list[str] | None = None) -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--graph", default="paper/ffnn", help="graph or workload name (default paper/ffnn)")
    parser.add_argument("--devices", type=int, default=4, help="device count (default 4)")
    parser.add_argument("--sizes", default="1,8,64", help="numbers of envs, comma separated (default 1,8,64)")
    parser.add_argument("--steps", type=int, default=None,
                        help="env steps per case and round (default: one whole episode of every env of the largest "
                             "N, 2 n_ops steps each, so that every round covers whole episodes of every case)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each case keeps its best (default 3)")
    parser.add_argument("--no-copy", action="store_true",
                        help="every env with copy_obs=False: the live observation arrays instead of fresh copies "
                             "(valid until the next step; SB3's vector envs copy them into their own buffers)")
    parser.add_argument("--threads", default="1",
                        help="Numba threads of the native env's simulator calls: a count, or 'tuned' (default 1)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.graph, args.sizes, args.steps, args.rounds = "paper/chainmm", "1,8", 400, 1
    common.start("bench_vector", args)
    sizes = [int(s) for s in args.sizes.split(",")]
    kwargs = {"graph": args.graph, "topology": args.devices, "copy_obs": not args.no_copy}
    n_ops = PlacementEnv(**kwargs).reset(seed=args.seed)[1]["n_ops"]
    if args.steps is None:
        args.steps = max(sizes) * 2 * n_ops
    print(f"{args.graph} on {args.devices} devices, default keywords (graph form, reward 'incremental')"
          f"{', copy_obs=False' if args.no_copy else ''}; "
          f"{args.steps:,} env steps per case and round, best of {args.rounds} rounds")

    runs: dict[str, common.StepsRun] = {"PlacementEnv": common.random_env_run(PlacementEnv(**kwargs), args.seed)}
    width = {"PlacementEnv": 1}
    for n in sizes:
        width[f"SyncVectorEnv({n})"] = width[f"PlacementVectorEnv({n})"] = n
        runs[f"SyncVectorEnv({n})"] = common.random_vector_run(
            gym.vector.SyncVectorEnv([lambda: PlacementEnv(**kwargs) for _ in range(n)]), args.seed)
        runs[f"PlacementVectorEnv({n})"] = common.random_vector_run(
            PlacementVectorEnv(num_envs=n, sim_threads=None if args.threads == "tuned" else int(args.threads),
                               **kwargs), args.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a random valid action is never penalised
        for label, run in runs.items():  # warm up past the first episode ends: kernels loaded, caches filled
            run((2 * n_ops + 2) * width[label])
        seconds = common.best_rounds(runs, args.steps, args.rounds)

    rates = common.step_rates(seconds, width, args.steps)
    print()
    print(common.rates_table(rates, digits=1))
    top = f"PlacementVectorEnv({max(sizes)})"
    ratio = rates[top]["vs_single"]
    print(f"\n{top}: {ratio:.1f}x one env's steps/s (target {TARGET:.0f}x): "
          f"{'PASS' if ratio >= TARGET else 'FAIL'}")
    parts = breakdown(runs[top], args.steps)
    print(f"\nwhere {top}'s time goes (cProfile over {args.steps:,} env steps, so slower than above):")
    for label, share in parts.items():
        print(f"  {100 * share:5.1f} %  {label}")
    if args.smoke:
        common.check_shares(parts)
        common.check_rates(rates)
        eight, one = rates["PlacementVectorEnv(8)"]["steps_per_s"], rates["PlacementVectorEnv(1)"]["steps_per_s"]
        common.check(eight > 0.5 * one, "PlacementVectorEnv(8) is slower than half of PlacementVectorEnv(1)")
    common.write_results(args.out, "bench_vector", args, {**rates, "breakdown": parts})


if __name__ == "__main__":
    main()
