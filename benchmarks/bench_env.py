"""How many env steps per second does ``Doppler-Sim-v0`` take, and where does a step's time go?

Run from the repository root::

    python -m benchmarks.bench_env             # paper/llama-layer on 4 devices, 60 episodes per case
    python -m benchmarks.bench_env --quick     # 10 episodes per case
    python -m benchmarks.bench_env --graph paper/ffnn --devices 8
    python -m benchmarks.bench_env --smoke     # paper/chainmm, 2 episodes per case

A uniformly random *valid* action is taken at every step (the mask read from ``action_masks()``),
so every episode has ``2 * n_ops`` steps and ends with one simulator run. Cases:

* ``PlacementEnv`` with ``copy_obs=True`` (the default: fresh observation arrays every step) and
  ``copy_obs=False`` (the live arrays);
* the same through ``gym.make`` (its ``OrderEnforcing`` and ``PassiveEnvChecker`` wrappers);
* the ``PlaceOnly`` / ``SelectOnly`` wrappers (agent steps, each one two inner steps).

Reported per case: steps/s of the whole loop (policy included) and of the env alone (the time of
the random policy subtracted). Target: >= 20,000 env steps/s on paper/llama-layer. Then a per-step
breakdown: what the device features, the placement update, the observation copies, the final
simulation and ``reset`` cost, measured one by one, and the rest (Python in ``step``).
The exit status is always 0 (timings depend on the machine).
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

import doppler_gym as dg
from benchmarks import common
from doppler_gym.envs import PlacementEnv, PlaceOnly, SelectOnly
from doppler_gym.sim.estimate import EstimatedSchedule

TARGET = 20_000.0  # env steps per second


def run_episodes(env, episodes: int, seed: int = 0) -> tuple[int, float, float]:
    """``(steps, total seconds, seconds spent in the random policy)``."""
    rng = np.random.default_rng(seed)
    masks = env.get_wrapper_attr("action_masks")
    env.reset(seed=seed)
    steps, policy_time = 0, 0.0
    start = time.perf_counter()
    for _ in range(episodes):
        env.reset()
        done = False
        while not done:
            t0 = time.perf_counter()
            valid = np.flatnonzero(masks())
            action = int(valid[int(rng.random() * valid.size)])
            policy_time += time.perf_counter() - t0
            _, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
            steps += 1
    return steps, time.perf_counter() - start, policy_time


def breakdown(graph: str, devices: int, episodes: int) -> None:
    """Time the parts of a step one by one, replaying the same random episodes."""
    env = PlacementEnv(graph=graph, topology=devices)
    rng = np.random.default_rng(1)
    orders, assignments = [], []
    for _ in range(episodes):
        env.reset(seed=int(rng.integers(2**31)))
        done = False
        while not done:
            valid = np.flatnonzero(env.action_masks())
            *_, done, _, info = env.step(int(valid[int(rng.random() * valid.size)]))
        orders.append(info["order"])
        assignments.append(info["assignment"])
    ctx = env.context
    n = ctx.n_ops
    es = EstimatedSchedule(ctx.graph, ctx.topology, ctx.config)
    t_feat = t_place = 0.0
    for order, assign in zip(orders, assignments):
        es.reset()
        for v in order.tolist():
            t0 = time.perf_counter()
            feats = es.device_features(v)
            t1 = time.perf_counter()
            es.place(v, int(assign[v]), feats[:, 4])
            t_place += time.perf_counter() - t1
            t_feat += t1 - t0
    steps = 2 * n * episodes
    builder = env.observation_builder
    reps = 20_000
    timings = {}
    for copy in (True, False):
        builder.copy = copy
        t0 = time.perf_counter()
        for _ in range(reps):
            builder.observation()
        timings[copy] = (time.perf_counter() - t0) / reps
    builder.copy = True
    backend, prio = env.backend, np.arange(n, dtype=np.float64)
    t0 = time.perf_counter()
    for assign in assignments:
        backend.execute(ctx.graph, ctx.topology, assign, prio, ctx.config)
    t_sim = (time.perf_counter() - t0) / episodes
    t0 = time.perf_counter()
    for _ in range(episodes):
        env.reset()
    t_reset = (time.perf_counter() - t0) / episodes
    full_steps, full_time, full_policy = run_episodes(env, episodes)
    per_step = (full_time - full_policy) / full_steps
    parts = {
        "device features (SEL steps: EstimatedSchedule.device_features)": t_feat / steps,
        "placement estimate (PLC steps: EstimatedSchedule.place)": t_place / steps,
        "observation copies (copy_obs=True)": timings[True],
        f"final simulation ({t_sim * 1e6:.0f} us per episode)": t_sim / (2 * n),
        f"reset ({t_reset * 1e6:.0f} us per episode)": t_reset / (2 * n),
    }
    parts["rest: Python in step (masks, flags, successors, rewards)"] = per_step - sum(parts.values())
    print(
        f"\nper-step breakdown, {graph} on {devices} devices "
        f"({per_step * 1e6:.2f} us per env step, copy_obs=True):"
    )
    for label, value in parts.items():
        print(f"  {value * 1e6:7.2f} us  {100 * value / per_step:5.1f} %  {label}")
    print(f"  (observation without copies: {timings[False] * 1e6:.2f} us per step)")


def main(argv: list[str] | None = None) -> None:
    parser = common.parser(__doc__, writes=False)
    parser.add_argument(
        "--graph", default="paper/llama-layer", help="graph or workload name (default paper/llama-layer)"
    )
    parser.add_argument("--devices", type=int, default=4, help="device count (default 4)")
    parser.add_argument("--episodes", type=int, default=60, help="episodes per case (default 60)")
    parser.add_argument("--quick", action="store_true", help="10 episodes per case")
    args = parser.parse_args(argv)
    episodes = 10 if args.quick else args.episodes
    if args.smoke:
        args.graph, episodes = "paper/chainmm", 2
    common.start("bench_env", args)

    g = dg.load_graph(args.graph) if args.graph.startswith("paper/") else dg.workloads.make(args.graph)
    print(
        f"doppler-gym env benchmark: {args.graph} ({g.n_ops} ops, {g.n_edges} edges), "
        f"{args.devices} devices, "
        f"{episodes} episodes per case"
    )
    cases = {
        "PlacementEnv, copy_obs=True (default)": lambda: PlacementEnv(graph=g, topology=args.devices),
        "PlacementEnv, copy_obs=False": lambda: PlacementEnv(graph=g, topology=args.devices, copy_obs=False),
        "gym.make('Doppler-Sim-v0'), copy_obs=True": lambda: gym.make(
            "Doppler-Sim-v0", graph=g, topology=args.devices
        ),
        "PlaceOnly(PlacementEnv) [agent steps]": lambda: PlaceOnly(
            PlacementEnv(graph=g, topology=args.devices)
        ),
        "SelectOnly(PlacementEnv) [agent steps]": lambda: SelectOnly(
            PlacementEnv(graph=g, topology=args.devices)
        ),
    }
    run_episodes(PlacementEnv(graph=g, topology=args.devices), 2, args.seed)  # warm up (numba, caches)
    print(f"\n{'case':<46}{'steps/s (loop)':>16}{'steps/s (env)':>16}   target {TARGET:,.0f}")
    for label, make in cases.items():
        env = make()
        run_episodes(env, 1)
        steps, total, policy = run_episodes(env, episodes, args.seed)
        common.check(steps == episodes * (2 * g.n_ops if "agent steps" not in label else g.n_ops),
                     f"{label}: {steps} steps in {episodes} episodes of {g.n_ops} ops")
        loop, env_only = steps / total, steps / common.finite_positive(total - policy, f"{label}: env seconds")
        verdict = "" if "agent steps" in label else ("PASS" if env_only >= TARGET else "FAIL")
        print(f"{label:<46}{loop:>16,.0f}{env_only:>16,.0f}   {verdict}")
    breakdown(args.graph, args.devices, max(episodes // 2, 5))


if __name__ == "__main__":
    main()
