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
steps (all envs together) per round; the cases take turns in every round (:func:`benchmarks.common.side_by_side`)
and each keeps its best round. Reported: total env steps per second with the random policy's time and without
it, the ratio to the single env, and where ``ClusterVectorEnv``'s time goes. The exit status is always 0
(timings depend on the machine).
"""

from __future__ import annotations

import cProfile
import pstats
import time
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

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


def single_case(kwargs: dict, seed: int) -> Callable[[int], tuple[float, float]]:
    """``run(steps) -> (seconds, policy seconds)`` of one env, reset as its episodes end."""
    env = ClusterEnv(**kwargs)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)

    def run(steps: int) -> tuple[float, float]:
        policy = 0.0
        start = time.perf_counter()
        for _ in range(steps):
            t0 = time.perf_counter()
            valid = np.flatnonzero(env.action_masks())
            action = int(valid[int(rng.random() * valid.size)])
            policy += time.perf_counter() - t0
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
        return time.perf_counter() - start, policy

    return run


def vector_case(envs: gym.vector.VectorEnv, seed: int) -> Callable[[int], tuple[float, float]]:
    """``run(steps) -> (seconds, policy seconds)`` of a vector env (``steps`` over all its envs)."""
    obs, _ = envs.reset(seed=seed)
    rng = np.random.default_rng(seed)
    state = {"obs": obs}

    def run(steps: int) -> tuple[float, float]:
        policy = 0.0
        start = time.perf_counter()
        for _ in range(max(1, steps // envs.num_envs)):
            t0 = time.perf_counter()
            mask = state["obs"]["action_mask"]
            actions = np.argmax(rng.random(mask.shape, dtype=np.float32) * mask, axis=1)  # uniform over the valid
            policy += time.perf_counter() - t0
            state["obs"], *_ = envs.step(actions)
        return time.perf_counter() - start, policy

    return run


PARTS = {  # (file suffix, function) -> label of the breakdown (the functions do not call one another)
    ("envs/cluster.py", "transition"): "env transitions (ClusterEnv.transition: masks and the engine)",
    ("envs/cluster.py", "reset"): "autoresets (ClusterEnv.reset: trace, FIFO baseline run, first event)",
    ("envs/cluster.py", "observation_inputs"): "reading each env's state (ClusterEnv.observation_inputs)",
    ("cluster_vector/observation.py", "write"): "batched observation writes (ObservationBatch.write)",
    ("cluster_vector/env.py", "_add_info"): "vector info merge",
    ("cluster_vector/batch.py", "observation"): "observation copies (copy_obs=True)",
}
INSIDE = {  # parts of the transitions, shown beside them
    ("envs/cluster.py", "_refresh_mask"): "masks (ClusterEnv._refresh_mask, also in resets)",
    ("cluster/simulation.py", "apply_allocation"): "engine: applying an allocation",
    ("cluster/simulation.py", "run_until_decision"): "engine: running to the next event",
}


def breakdown(run: Callable[[int], tuple[float, float]], steps: int) -> tuple[dict[str, float], dict[str, float]]:
    """Where a native vector env's time goes: cProfile's cumulative seconds of :data:`PARTS` over ``steps`` env
    steps, the random policy and the rest, as shares of the whole loop; and those of :data:`INSIDE`."""
    profile = cProfile.Profile()
    profile.enable()
    total, policy = run(steps)
    profile.disable()
    stats = pstats.Stats(profile).stats  # (file, line, name) -> (calls, prim calls, tottime, cumtime, callers)

    def shares(parts: dict[tuple[str, str], str]) -> dict[str, float]:
        out = dict.fromkeys(parts.values(), 0.0)
        for (file, _, name), (*_, cumtime, _) in stats.items():
            for (suffix, function), label in parts.items():
                if file.endswith(suffix) and name == function:
                    out[label] += cumtime
        return out

    top = shares(PARTS)
    top["random policy"] = policy
    top["rest (Python of the step: arguments, autoreset bookkeeping, result arrays)"] = total - sum(top.values())
    return ({label: s / total for label, s in top.items()},
            {label: s / total for label, s in shares(INSIDE).items()})


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

    runs: dict[str, Callable[[int], tuple[float, float]]] = {"ClusterEnv": single_case(kwargs, args.seed)}
    width = {"ClusterEnv": 1}
    for n in sizes:
        width[f"SyncVectorEnv({n})"] = width[f"ClusterVectorEnv({n})"] = n
        runs[f"SyncVectorEnv({n})"] = vector_case(
            gym.vector.SyncVectorEnv([lambda: gym.make("Doppler-Cluster-v0", **kwargs) for _ in range(n)]), args.seed)
        runs[f"ClusterVectorEnv({n})"] = vector_case(ClusterVectorEnv(num_envs=n, **kwargs), args.seed)
    seconds: dict[str, tuple[float, float]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a random valid action is never penalised
        for label, run in runs.items():  # warm up: caches filled, first episodes under way
            run(min(args.steps, 50 * width[label]))

        def measure(label: str) -> Callable[[], float]:
            def once() -> float:
                total, policy = runs[label](args.steps)
                best = seconds.get(label)
                if best is None or total < best[0]:
                    seconds[label] = (total, policy)
                return total
            return once

        common.side_by_side({label: measure(label) for label in runs}, args.rounds)
        top = f"ClusterVectorEnv({max(sizes)})"
        parts, inside = breakdown(runs[top], args.steps)

    rows, results = [], {}
    base = None
    for label, (total, policy) in seconds.items():
        steps = max(1, args.steps // width[label]) * width[label]
        rate = steps / common.finite_positive(total, f"{label}: seconds")
        env_rate = steps / common.finite_positive(total - policy, f"{label}: env seconds")
        base = rate if base is None else base
        results[label] = {"steps_per_s": rate, "env_steps_per_s": env_rate, "vs_single": rate / base}
        rows.append([label, f"{rate:,.0f}", f"{env_rate:,.0f}", f"{rate / base:.2f}x"])
    print()
    print(common.markdown_table(["case", "total steps/s", "steps/s without the policy", "vs one env"], rows))
    sync = results[f"SyncVectorEnv({max(sizes)})"]["steps_per_s"]
    print(f"\n{top}: {results[top]['vs_single']:.2f}x one env's steps/s, "
          f"{results[top]['steps_per_s'] / sync:.2f}x SyncVectorEnv({max(sizes)})'s")
    print(f"\nwhere {top}'s time goes (cProfile over {args.steps:,} env steps, so slower than above):")
    for label, share in parts.items():
        print(f"  {100 * share:5.1f} %  {label}")
    for label, share in inside.items():
        print(f"        of which {100 * share:5.1f} %  {label}")
    results["breakdown"] = parts
    if args.smoke:
        common.check(abs(sum(parts.values()) - 1.0) < 1e-9 and all(
            v >= 0 for k, v in parts.items() if not k.startswith("rest")), f"breakdown shares {parts} do not add up")
        common.check(parts["env transitions (ClusterEnv.transition: masks and the engine)"] > 0,
                     "the breakdown found no env transition")
        for label, figures in results.items():
            if label != "breakdown":
                for key, value in figures.items():
                    common.finite_positive(value, f"{label}: {key}")
    common.write_results(args.out, "bench_cluster_vector", args, results)


if __name__ == "__main__":
    main()
