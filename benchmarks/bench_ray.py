"""Ray on this machine: per-task and per-step overheads, the speed-up of 2 workers over 1, and a model of N.

Run from the repository root (needs ``pip install 'doppler-gym[ray]'``)::

    python -m benchmarks.bench_ray                 # a local Ray instance with 2 CPUs (about 3 minutes)
    python -m benchmarks.bench_ray --quick         # smaller tasks (about a minute)
    python -m benchmarks.bench_ray --ray auto      # on the cluster `ray start --head` made
    python -m benchmarks.bench_ray --smoke         # 2 tiny tasks, 2 envs, 5 vector steps

Part 1, tasks (``doppler_gym.parallel.map_tasks``): the round trip of an empty task, then a search
grid (``island_search`` islands: ``local_search`` runs of ``--evals`` evaluations on paper/llama-layer)
in this process, as Ray tasks one at a time (each task reserves 2 CPUs) and two at a time (1 CPU
each); the results must be identical. Every task runs one Numba thread (``connect`` sets
``NUMBA_NUM_THREADS=1`` in the workers; the driver's run sets it too), and the driver's run with
all its Numba threads (``simulate_batch`` is multithreaded) is shown next to them.
Model: a grid of ``K`` tasks of ``t`` seconds and ``o``
seconds of overhead each on ``N`` workers takes ``ceil(K / N) (t + o) + s`` (``s``: the driver's
own serial time), so the speed-up over this process is ``K t / (ceil(K / N) (t + o) + s)``.

Part 2, rollouts (``agents.distributed.RayVecEnv``): a step of ``--envs`` Doppler-Sim-v0 envs in a
``DummyVecEnv`` against a ``RayVecEnv`` with all envs in 1 actor or spread over 2, with random
valid actions. Model (Amdahl): a step costs ``p + n e / N + r`` on ``N`` actors (``p``: the driver's
policy and bookkeeping per step, ``e``: one env step, ``r``: the round trip), against ``p + n e`` in
process; PPO's updates stay in the driver and are not part of it.

Timings depend on the machine and its load; the figures in docs/results/ray.md say which.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import doppler_gym as dg
from benchmarks import common
from benchmarks.common import best_time
from doppler_gym.parallel import island_search, map_tasks

REQUIRES = ("ray",)  # the ray extra


def _noop(x: int) -> int:
    return x


def bench_tasks(args: argparse.Namespace) -> dict[str, float]:
    print("\n== Part 1: tasks (map_tasks) ==")
    n = 20 if args.smoke else 200
    common.check(map_tasks(_noop, range(8), args.ray) == list(range(8)), "map_tasks(_noop) changed its inputs")
    t_noop, _ = best_time(lambda: map_tasks(_noop, range(n), args.ray), 3)
    o = t_noop / n
    print(f"  empty task round trip: {1e3 * o:.2f} ms per task ({n} tasks in {t_noop:.2f} s, best of 3)")

    g = dg.load_graph("paper/llama-layer")  # its searches do not reach the lower bound (no early stop)
    kw = {"islands": args.islands, "max_evals": args.evals, "seed": args.seed}
    warm = {**kw, "max_evals": 256}
    island_search(g, 4, **warm)  # compile and warm the caches here and in every worker before timing
    for cpus in (2.0, 1.0):
        island_search(g, 4, **warm, ray_address=args.ray, task_cpus=cpus)
    import numba

    from doppler_gym.sim.threads import numba_threads

    threads = numba.get_num_threads()
    with numba_threads(1):  # as each Ray worker runs (connect() sets NUMBA_NUM_THREADS=1 there)
        t_local, local = best_time(lambda: island_search(g, 4, **kw), 2)
    t_threads, _ = best_time(lambda: island_search(g, 4, **kw), 2)
    rows = {"this process": t_local, f"this process, {threads} Numba threads": t_threads}
    results = {}
    for label, cpus in (("Ray, 1 task at a time", 2.0), ("Ray, 2 tasks at a time", 1.0)):
        rows[label], results[label] = best_time(lambda cpus=cpus: island_search(g, 4, **kw, ray_address=args.ray,
                                                                             task_cpus=cpus), 2)
    same = all(p.makespan == local.makespan and np.array_equal(p.assignment, local.assignment)
               for p in results.values())
    common.check(same, "the search grid's results differ between this process and Ray")
    t_task = t_local / args.islands
    print(f"  search grid: {args.islands} islands x {args.evals:,} evaluations on paper/llama-layer, 4 devices "
          f"(one task {t_task:.2f} s in this process with 1 Numba thread; best of 2 runs each); "
          f"results identical everywhere: {same}")
    for label, t in rows.items():
        print(f"    {label:<34}{t:>8.2f} s   speed-up over this process {t_local / t:>5.2f}")
    two_over_one = rows["Ray, 1 task at a time"] / rows["Ray, 2 tasks at a time"]
    print(f"  2 workers over 1: {two_over_one:.2f}x (ideal 2.00 for {args.islands} equal tasks)")
    # what Ray added per task on one worker (noisy under load: the difference of two timings)
    o_grid = (rows["Ray, 1 task at a time"] - t_local) / args.islands
    print(f"  Ray's time per task on one worker, over this process's: {1e3 * o_grid:+.1f} ms "
          f"(the empty-task round trip: {1e3 * o:.1f} ms)")
    k = 64
    for t in (t_task, 0.01):
        print(f"  model for a grid of K = {k} tasks of t = {t:.2f} s, o = {1e3 * o:.1f} ms per task, s = 0: "
              "speed-up K t / (ceil(K / N) (t + o))")
        print("    " + "".join(f"{'N=' + str(n_):>9}" for n_ in (1, 2, 4, 8, 16, 32, 64)))
        print("    " + "".join(f"{k * t / (math.ceil(k / n_) * (t + o)):>9.2f}" for n_ in (1, 2, 4, 8, 16, 32, 64)))
    return {"o_noop": o, "o_grid": o_grid, "t_task": t_task, "two_over_one": two_over_one}


def bench_rollouts(args: argparse.Namespace) -> dict[str, float]:
    from stable_baselines3.common.vec_env import DummyVecEnv

    from agents.distributed import RayVecEnv, make_env_fn

    print(f"\n== Part 2: rollouts, {args.envs} envs of Doppler-Sim-v0 (paper/chainmm, 4 devices) ==")
    fns = [make_env_fn("Doppler-Sim-v0", graph="paper/chainmm", topology=4) for _ in range(args.envs)]
    out = {}
    venvs = {"DummyVecEnv (this process)": lambda: DummyVecEnv(fns),
             "RayVecEnv, 1 actor": lambda: RayVecEnv(fns, envs_per_actor=args.envs, ray_address=args.ray),
             "RayVecEnv, 2 actors": lambda: RayVecEnv(fns, envs_per_actor=math.ceil(args.envs / 2),
                                                      ray_address=args.ray)}
    for label, make in venvs.items():
        venv = make()
        rng = np.random.default_rng(0)
        venv.seed(0)
        obs = venv.reset()
        for _ in range(20):  # warm-up: compiled kernels and caches in every process
            masks = obs["action_mask"].astype(bool)
            obs, _, _, _ = venv.step(np.array([rng.choice(np.flatnonzero(m)) for m in masks]))
        steps = 0
        t0 = time.perf_counter()
        while steps < args.steps:
            masks = obs["action_mask"].astype(bool)
            obs, _, _, _ = venv.step(np.array([rng.choice(np.flatnonzero(m)) for m in masks]))
            steps += 1
        out[label] = common.finite_positive((time.perf_counter() - t0) / steps, f"{label}: seconds per step")
        venv.close()
        print(f"    {label:<28}{1e3 * out[label]:>8.2f} ms per vector step ({args.envs} env steps)")
    e = out["DummyVecEnv (this process)"] / args.envs
    r = max(out["RayVecEnv, 1 actor"] - out["DummyVecEnv (this process)"], 0.0)
    print(f"  2 actors over 1: {out['RayVecEnv, 1 actor'] / out['RayVecEnv, 2 actors']:.2f}x; "
          f"one env step e = {1e3 * e:.2f} ms, round trip r = {1e3 * r:.2f} ms")
    print("  model, env stepping only (p = 0): n envs per vector step on N actors, speed-up over in-process "
          "n e / (n e / N + r):")
    print("    " + f"{'n':>6}" + "".join(f"{'N=' + str(n_):>9}" for n_ in (1, 2, 4, 8, 16, 64)))
    for n_envs in (args.envs, 64, 512, 4096):
        print("    " + f"{n_envs:>6}" + "".join(f"{n_envs * e / (n_envs * e / min(n_, n_envs) + r):>9.2f}"
                                              for n_ in (1, 2, 4, 8, 16, 64)))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = common.parser(__doc__, writes=False)
    parser.add_argument("--ray", default="local", metavar="ADDRESS", help="Ray cluster (default: a local instance)")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of a local instance (default 2)")
    parser.add_argument("--islands", type=int, default=4, help="tasks of the search grid")
    parser.add_argument("--evals", type=int, default=40_000, help="local_search evaluations per task")
    parser.add_argument("--envs", type=int, default=8, help="envs of the rollout part")
    parser.add_argument("--steps", type=int, default=200, help="vector steps timed per vector env")
    parser.add_argument("--quick", action="store_true", help="smaller tasks and fewer steps")
    args = parser.parse_args(argv)
    if args.quick:
        args.evals, args.steps = 10_000, 60
    if args.smoke:
        args.islands, args.evals, args.envs, args.steps = 2, 300, 2, 5
    import ray

    common.start("bench_ray", args)
    print(f"ray {ray.__version__}")
    t0 = time.perf_counter()
    if args.ray == "local" and not ray.is_initialized():
        from doppler_gym.parallel import connect

        connect("local", num_cpus=args.cpus)
    print(f"ray.init: {time.perf_counter() - t0:.1f} s; cluster CPUs {ray.cluster_resources().get('CPU', 0):g}")
    started = time.perf_counter()
    bench_tasks(args)
    bench_rollouts(args)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
