"""How long does a MaskablePPO rollout + update cycle with ``DopplerPolicy`` take per episode?

Run from the repository root::

    python -m benchmarks.bench_policy                       # paper/llama-layer, 4 devices, 8 envs
    python -m benchmarks.bench_policy --n-envs 1 --batch-size 64 --n-epochs 10
    python -m benchmarks.bench_policy --graph paper/ffnn --profile
    python -m benchmarks.bench_policy --smoke               # paper/chainmm, 1 env, one short cycle

An episode of ``paper/llama-layer`` is ``2 * 229 = 458`` env steps. One cycle collects
``n_steps * n_envs`` steps (``DummyVecEnv``), then runs ``n_epochs`` passes of minibatches of
``batch_size`` (forward + backward + Adam step). Reported: seconds per episode for the rollout, for
the update (its share: update time * 458 / steps per cycle) and their sum, against the target of
0.5 s per episode; and the embedding-cache counters (GNN forwards per distinct graph, cache hits).
``--profile`` prints the top functions of a cProfile run. The exit status is always 0.
"""

from __future__ import annotations

import cProfile
import pstats
import time

import gymnasium as gym
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.vec_env import DummyVecEnv

import doppler_gym  # noqa: F401  (registers the env ids)
from agents.policy import DopplerPolicy
from benchmarks import common

TARGET = 0.5  # seconds per episode


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, writes=False)
    ap.add_argument("--graph", default="paper/llama-layer")
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--n-envs", type=int, default=8)
    ap.add_argument("--n-steps", type=int, default=256, help="steps per env per rollout")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--n-epochs", type=int, default=4)
    ap.add_argument(
        "--cycles", type=int, default=2, help="measured rollout+update cycles (after one warm-up)"
    )
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--hidden-dim", type=int, default=64)
    ap.add_argument("--n-layers", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)
    if args.smoke:
        args.graph, args.n_envs, args.n_steps, args.batch_size = "paper/chainmm", 1, 64, 32
        args.n_epochs, args.cycles = 1, 1
        args.hidden_dim, args.n_layers, args.head_dim = 16, 1, 16
    torch.set_num_threads(args.threads)
    common.start("bench_policy", args)

    def make():
        return gym.make(
            "Doppler-Sim-v0",
            graph=args.graph,
            topology=args.devices,
            copy_obs=False,
            disable_env_checker=True,
        )

    venv = DummyVecEnv([make] * args.n_envs)
    n_ops = venv.envs[0].unwrapped.max_ops
    episode = 2 * n_ops
    model = MaskablePPO(
        DopplerPolicy,
        venv,
        n_steps=args.n_steps,
        batch_size=args.batch_size,
        n_epochs=args.n_epochs,
        seed=args.seed,
        device="cpu",
        policy_kwargs={"hidden_dim": args.hidden_dim, "n_layers": args.n_layers, "head_dim": args.head_dim},
    )
    timings = {"rollout": 0.0, "update": 0.0}
    collect, train = model.collect_rollouts, model.train

    def timed_collect(*a, **k):
        t = time.perf_counter()
        out = collect(*a, **k)
        timings["rollout"] += time.perf_counter() - t
        return out

    def timed_train(*a, **k):
        t = time.perf_counter()
        out = train(*a, **k)
        timings["update"] += time.perf_counter() - t
        return out

    model.collect_rollouts, model.train = timed_collect, timed_train
    per_cycle = args.n_steps * args.n_envs
    model.learn(per_cycle)  # warm-up (numba, allocator, first GNN forward)
    timings.update(rollout=0.0, update=0.0)
    stats = model.policy.features_extractor.static.stats
    before = dict(stats)
    prof = cProfile.Profile() if args.profile else None
    if prof:
        prof.enable()
    model.learn(per_cycle * args.cycles, reset_num_timesteps=False)
    if prof:
        prof.disable()
    steps = per_cycle * args.cycles
    episodes = steps / episode
    rollout, update = timings["rollout"] / episodes, timings["update"] / episodes
    n_params = sum(p.numel() for p in model.policy.parameters())
    common.finite_positive(rollout, "rollout seconds per episode")
    common.finite_positive(update, "update seconds per episode")
    print(f"torch {torch.__version__}, {args.threads} thread(s)")
    print(f"{args.graph} on {args.devices} devices: episode = {episode} steps; policy {n_params} parameters")
    print(
        f"n_envs={args.n_envs} n_steps={args.n_steps} batch_size={args.batch_size} n_epochs={args.n_epochs}: "
        f"{steps} steps measured ({episodes:.1f} episodes)"
    )
    print(f"  rollout: {rollout:.3f} s/episode ({timings['rollout'] / steps * 1e3:.3f} ms/step)")
    minibatches = steps * args.n_epochs / args.batch_size
    print(f"  update : {update:.3f} s/episode ({timings['update'] / minibatches * 1e3:.1f} ms/minibatch)")
    verdict = "OK" if rollout + update <= TARGET else "above target"
    print(f"  total  : {rollout + update:.3f} s/episode (target <= {TARGET}: {verdict})")
    print(
        f"  GNN graph forwards {stats['graph_forwards'] - before['graph_forwards']}, cache hits "
        f"{stats['cache_hits'] - before['cache_hits']}, path builds {stats['path_builds']}"
    )
    if prof:
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
