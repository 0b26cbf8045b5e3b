"""Total steps/s of N ``Doppler-Cluster-v0`` envs: the native vector env against ``SyncVectorEnv`` and one env.

Run from the repository root::

    python -m benchmarks.bench_cluster_vector                    # the MaskablePPO recipe's env, N = 1, 8, 64
    python -m benchmarks.bench_cluster_vector --config default   # the env's default keywords (16 jobs, 16 GPUs)
    python -m benchmarks.bench_cluster_vector --smoke            # N = 1, 4, a few hundred steps, outputs checked

Every case takes uniformly random valid actions (read from the observation's mask; for the single env from
``action_masks()``), with the same keywords:

* ``ClusterEnv``: one env, stepped in a Python loop;
* ``SyncVectorEnv(N)``: Gymnasium's ``SyncVectorEnv`` over ``N`` ``gym.make("Doppler-Cluster-v0")`` envs, as a
  user batches them;
* ``ClusterVectorEnv(N)``: the native vector env (:mod:`doppler_gym.envs.cluster_vector`): one step call, each
  env's transition in turn, all observations written into ``(N, ...)`` arrays in one batched pass.

``--config recipe`` (default) is ``agents/recipes/hyperparams/maskable_ppo.yml``'s ``Doppler-Cluster-v0`` env:
30-job generated traces (a new one each episode), 16 GPUs, a 16-job window, known durations, the reward relative
to FIFO's run of the same trace (one FIFO simulation per reset), pack and preempt. Each case runs ``--steps`` env
steps (all envs together) per round; the cases take turns in every round (:func:`benchmarks.common.best_rounds`)
and each keeps its best round. Reported: total env steps per second with the random policy's time and without
it, the ratio to the single env, and where ``ClusterVectorEnv``'s time goes. The exit status is always 0
(timings depend on the machine).
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym

import doppler_gym  # noqa: F401  (registers the env ids)
from benchmarks import common
from doppler_gym.envs.cluster import ClusterEnv
from doppler_gym.envs.cluster_vector import ClusterVectorEnv

CONFIGS: dict[str, dict[str, Any]] = {
    "recipe": {"trace": "generated:30", "cluster": "2x8", "max_jobs": 16, "known_durations": True,
               "resample_trace": True, "trace_kwargs": {"mean_interarrival": 600.0}, "reward": "relative",
               "reward_baseline": "fifo", "gpu_choices": ["pack"], "sharing": False, "preemption": True},
    "default": {},
}


PARTS = {  # (file suffix, function) -> label of the breakdown (the functions do not call one another)
    ("envs/cluster.py", "transition"): "env transitions (ClusterEnv.transition: masks and the engine)",
    ("envs/cluster.py", "reset"): "autoresets (ClusterEnv.reset: trace, FIFO baseline run, first event)",
    ("envs/cluster.py", "observation_inputs"): "reading each env's state (ClusterEnv.observation_inputs)",
    ("cluster_vector/observation.py", "write"): "batched observation writes (ObservationBatch.write)",
    ("envs/batched.py", "_merge_infos"): "vector info merge",
    ("envs/batched.py", "observation"): "observation copies (copy_obs=True)",
}
INSIDE = {  # parts of the transitions, shown beside them
    ("envs/cluster.py", "_refresh_mask"): "masks (ClusterEnv._refresh_mask, also in resets)",
    ("cluster/simulation.py", "apply_allocation"): "engine: applying an allocation",
    ("cluster/simulation.py", "run_until_decision"): "engine: running to the next event",
}


def breakdown(run: common.StepsRun, steps: int) -> tuple[dict[str, float], dict[str, float]]:
    """Where a native vector env's time goes: cProfile's cumulative seconds of :data:`PARTS` over ``steps`` env
    steps, the random policy and the rest, as shares of the whole loop; and those of :data:`INSIDE`."""
    total, policy, stats = common.profiled(run, steps)
    top = common.loop_shares(total, policy, common.cumulative_seconds(stats, PARTS),
                             "rest (Python of the step: arguments, autoreset bookkeeping, result arrays)")
    return top, {label: s / total for label, s in common.cumulative_seconds(stats, INSIDE).items()}


def main(argv: list[str] | None = None) -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--config", choices=sorted(CONFIGS), default="recipe",
                        help="the env's keywords: the MaskablePPO recipe's (default) or the env's defaults")
    parser.add_argument("--sizes", default="1,8,64", help="numbers of envs, comma separated (default 1,8,64)")
    parser.add_argument("--steps", type=int, default=6_000, help="env steps per case and round (default 6,000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each case keeps its best (default 3)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.steps, args.rounds = "1,4", 400, 1
    common.start("bench_cluster_vector", args)
    sizes = [int(s) for s in args.sizes.split(",")]
    kwargs = CONFIGS[args.config]
    print(f"--config {args.config}: {kwargs or 'the defaults'}; {args.steps:,} env steps per case and round, "
          f"best of {args.rounds} rounds")

    runs: dict[str, common.StepsRun] = {"ClusterEnv": common.random_env_run(ClusterEnv(**kwargs), args.seed)}
    width = {"ClusterEnv": 1}
    for n in sizes:
        width[f"SyncVectorEnv({n})"] = width[f"ClusterVectorEnv({n})"] = n
        runs[f"SyncVectorEnv({n})"] = common.random_vector_run(
            gym.vector.SyncVectorEnv([lambda: gym.make("Doppler-Cluster-v0", **kwargs) for _ in range(n)]), args.seed)
        runs[f"ClusterVectorEnv({n})"] = common.random_vector_run(ClusterVectorEnv(num_envs=n, **kwargs), args.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a random valid action is never penalised
        for label, run in runs.items():  # warm up: caches filled, first episodes under way
            run(min(args.steps, 50 * width[label]))
        seconds = common.best_rounds(runs, args.steps, args.rounds)
        top = f"ClusterVectorEnv({max(sizes)})"
        parts, inside = breakdown(runs[top], args.steps)

    rates = common.step_rates(seconds, width, args.steps)
    print()
    print(common.rates_table(rates, digits=2))
    sync = rates[f"SyncVectorEnv({max(sizes)})"]["steps_per_s"]
    print(f"\n{top}: {rates[top]['vs_single']:.2f}x one env's steps/s, "
          f"{rates[top]['steps_per_s'] / sync:.2f}x SyncVectorEnv({max(sizes)})'s")
    print(f"\nwhere {top}'s time goes (cProfile over {args.steps:,} env steps, so slower than above):")
    for label, share in parts.items():
        print(f"  {100 * share:5.1f} %  {label}")
    for label, share in inside.items():
        print(f"        of which {100 * share:5.1f} %  {label}")
    if args.smoke:
        common.check_shares(parts)
        common.check(parts["env transitions (ClusterEnv.transition: masks and the engine)"] > 0,
                     "the breakdown found no env transition")
        common.check_rates(rates)
    common.write_results(args.out, "bench_cluster_vector", args, {**rates, "breakdown": parts})


if __name__ == "__main__":
    main()
