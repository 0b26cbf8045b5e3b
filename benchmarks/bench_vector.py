"""Total steps/s of N ``Doppler-Sim-v0`` envs: the native vector env against ``SyncVectorEnv`` and one env.

Run from the repository root::

    python -m benchmarks.bench_vector                 # paper/ffnn on 4 devices, N = 1, 8, 64
    python -m benchmarks.bench_vector --threads 2     # the simulator calls on two Numba threads ('tuned': chosen)
    python -m benchmarks.bench_vector --smoke         # paper/chainmm, a few hundred steps, outputs checked

Every case takes uniformly random valid actions (read from the observation's mask; for the single env
from ``action_masks()``), with the same keywords (the defaults: graph form, ``reward="incremental"``):

* ``PlacementEnv``: one env, stepped in a Python loop;
* ``SyncVectorEnv(N)``: Gymnasium's ``SyncVectorEnv`` over ``N`` single envs;
* ``PlacementVectorEnv(N)``: the native vector env (:mod:`doppler_gym.envs.vector`), one batched call per step.

Each case runs ``--steps`` env steps (all envs together) per round; the cases take turns in every round
(:func:`benchmarks.common.side_by_side`) and each keeps its best round. Reported: total env steps per second
with the random policy's time and without it, and the ratio to the single env. Target: 64 native envs at
least 10x the steps/s of one env. The exit status is always 0 (timings depend on the machine).
"""

from __future__ import annotations

import cProfile
import pstats
import time
import warnings
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from benchmarks import common
from doppler_gym.envs import PlacementEnv
from doppler_gym.envs.vector import PlacementVectorEnv

TARGET = 10.0  # PlacementVectorEnv(64) steps/s over PlacementEnv's


def single_case(kwargs: dict, seed: int) -> Callable[[int], tuple[float, float]]:
    """``run(steps) -> (seconds, policy seconds)`` of one env, reset as its episodes end."""
    env = PlacementEnv(**kwargs)
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


PARTS = {  # (file suffix, function) -> label of the breakdown
    ("kernel.py", "step_rows"): "state transitions and observation writes (Numba kernel)",
    ("partial.py", "__call__"): "partial makespans (PartialMakespan, the 'incremental' reward)",
    ("api.py", "simulate_batch"): "final runs (simulate_batch)",
    ("core.py", "observation"): "observation copies (copy_obs=True)",
}


def breakdown(run: Callable[[int], tuple[float, float]], steps: int) -> dict[str, float]:
    """Where a native vector env's step time goes: cProfile's cumulative seconds of :data:`PARTS` over ``steps``
    env steps, the random policy and the rest, as shares of the whole loop."""
    profile = cProfile.Profile()
    profile.enable()
    total, policy = run(steps)
    profile.disable()
    stats = pstats.Stats(profile).stats  # (file, line, name) -> (calls, prim calls, tottime, cumtime, callers)
    shares = {label: 0.0 for label in PARTS.values()}
    for (file, _, name), (*_, cumtime, _) in stats.items():
        for (suffix, function), label in PARTS.items():
            if file.endswith(suffix) and name == function:
                shares[label] += cumtime
    shares["random policy"] = policy
    shares["rest (Python of the step: rewards, infos, autoreset)"] = total - sum(shares.values())
    return {label: seconds / total for label, seconds in shares.items()}


def main(argv: list[str] | None = None) -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--graph", default="paper/ffnn", help="graph or workload name (default paper/ffnn)")
    parser.add_argument("--devices", type=int, default=4, help="device count (default 4)")
    parser.add_argument("--sizes", default="1,8,64", help="numbers of envs, comma separated (default 1,8,64)")
    parser.add_argument("--steps", type=int, default=12_000, help="env steps per case and round (default 12,000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each case keeps its best (default 3)")
    parser.add_argument("--threads", default="1",
                        help="Numba threads of the native env's simulator calls: a count, or 'tuned' (default 1)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.graph, args.sizes, args.steps, args.rounds = "paper/chainmm", "1,8", 400, 1
    common.start("bench_vector", args)
    sizes = [int(s) for s in args.sizes.split(",")]
    kwargs = {"graph": args.graph, "topology": args.devices}
    print(f"{args.graph} on {args.devices} devices, default keywords (graph form, reward 'incremental'); "
          f"{args.steps:,} env steps per case and round, best of {args.rounds} rounds")

    n_ops = PlacementEnv(**kwargs).reset(seed=args.seed)[1]["n_ops"]
    runs: dict[str, Callable[[int], tuple[float, float]]] = {"PlacementEnv": single_case(kwargs, args.seed)}
    width = {"PlacementEnv": 1}
    for n in sizes:
        width[f"SyncVectorEnv({n})"] = width[f"PlacementVectorEnv({n})"] = n
        runs[f"SyncVectorEnv({n})"] = vector_case(
            gym.vector.SyncVectorEnv([lambda: PlacementEnv(**kwargs) for _ in range(n)]), args.seed)
        runs[f"PlacementVectorEnv({n})"] = vector_case(
            PlacementVectorEnv(num_envs=n, sim_threads=None if args.threads == "tuned" else int(args.threads),
                               **kwargs), args.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a random valid action is never penalised
        for label, run in runs.items():  # warm up past the first episode ends: kernels loaded, caches filled
            run((2 * n_ops + 2) * width[label])
        seconds: dict[str, tuple[float, float]] = {}

        def measure(label: str) -> Callable[[], float]:
            def once() -> float:
                total, policy = runs[label](args.steps)
                best = seconds.get(label)
                if best is None or total < best[0]:
                    seconds[label] = (total, policy)
                return total
            return once

        common.side_by_side({label: measure(label) for label in runs}, args.rounds)

    def steps_done(label: str) -> int:
        return max(1, args.steps // width[label]) * width[label]

    rows, results = [], {}
    base = None
    for label, (total, policy) in seconds.items():
        steps = steps_done(label)
        rate = steps / common.finite_positive(total, f"{label}: seconds")
        env_rate = steps / common.finite_positive(total - policy, f"{label}: env seconds")
        base = rate if base is None else base
        results[label] = {"steps_per_s": rate, "env_steps_per_s": env_rate, "vs_single": rate / base}
        rows.append([label, f"{rate:,.0f}", f"{env_rate:,.0f}", f"{rate / base:.1f}x"])
    print()
    print(common.markdown_table(["case", "total steps/s", "steps/s without the policy", "vs one env"], rows))
    top = f"PlacementVectorEnv({max(sizes)})"
    ratio = results[top]["vs_single"]
    print(f"\n{top}: {ratio:.1f}x one env's steps/s (target {TARGET:.0f}x): "
          f"{'PASS' if ratio >= TARGET else 'FAIL'}")
    parts = breakdown(runs[top], args.steps)
    print(f"\nwhere {top}'s time goes (cProfile over {args.steps:,} env steps, so slower than above):")
    for label, share in parts.items():
        print(f"  {100 * share:5.1f} %  {label}")
    results["breakdown"] = parts
    if args.smoke:
        for label, figures in results.items():
            if label == "breakdown":
                common.check(abs(sum(figures.values()) - 1.0) < 1e-9 and all(v >= 0 for k, v in figures.items()
                                                                              if not k.startswith("rest")),
                             f"breakdown shares {figures} do not add up to 1")
                continue
            for key, value in figures.items():
                common.finite_positive(value, f"{label}: {key}")
        common.check(results["PlacementVectorEnv(8)"]["steps_per_s"] > 0.5 * results["PlacementVectorEnv(1)"]
                     ["steps_per_s"], "PlacementVectorEnv(8) is slower than half of PlacementVectorEnv(1)")
    common.write_results(args.out, "bench_vector", args, results)


if __name__ == "__main__":
    main()
