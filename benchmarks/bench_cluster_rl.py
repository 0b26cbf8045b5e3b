"""A short MaskablePPO training run on ``Doppler-Cluster-v0`` against the heuristic schedulers, on held-out traces.

Run from the repository root::

    python -m benchmarks.bench_cluster_rl                      # 3 minutes of training, 5 held-out traces
    python -m benchmarks.bench_cluster_rl --minutes 1 --eval-traces 3 --png /tmp/cluster_rl.png
    python -m benchmarks.bench_cluster_rl --smoke              # 8 jobs, two PPO updates, one held-out trace

Setup (every number is an argument):

- cluster: ``Cluster.uniform(2, 8)`` (16 V100 in two DGX-1 nodes);
- traces: ``traces.generate(--jobs, seed=s, mean_interarrival=--interarrival)`` (Poisson arrivals,
  log-normal durations with median 30 min and log-sd 1.8, GPU counts 1/2/4/8/16 with probabilities
  0.70/0.10/0.10/0.07/0.03); training draws a new trace at every reset (``resample_trace``, seeds from
  the env's generator), evaluation uses seeds ``100_000 + k`` for ``k < --eval-traces`` (held out:
  a training seed equal to one of them has probability ~1e-9 per episode);
- env: ``ClusterEnv(max_jobs=--max-jobs, known_durations=True, time_scale=36,000 s)``, the action
  modes of ``--modes`` (default all: pack, spread, share, preempt), no failures, no round ticks; the
  reward is minus the increase of the summed time in system, so the return is ``-sum(JCT) / 36,000``;
- agent: sb3-contrib ``MaskablePPO("MultiInputPolicy")`` (n_steps 512, batch 128, gamma 0.995,
  entropy 0.01, seed ``--seed``), trained for ``--minutes`` of wall time on the CPU;
- baselines on the same held-out traces and cluster: ``dg.cluster.run`` with fifo, srtf, las, tiresias
  and gandiva (SRTF knows the durations, as the agent's ``remaining`` feature does), and a uniformly
  random valid policy through the env.

Prints a markdown table of the average JCT per method (mean and standard deviation over the held-out
traces, and the ratio to SRTF) and the learning curve (average JCT of the training episodes), and with
``--png`` draws both. The exit status is always 0.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import Monitor

from benchmarks import common
from doppler_gym import cluster as C
from doppler_gym.envs.cluster import ClusterEnv

HEURISTICS = ("fifo", "srtf", "las", "tiresias", "gandiva")
TIME_SCALE = 36_000.0  # [s]


class _Budget(BaseCallback):
    """Stops training after ``seconds`` of wall time; records (timesteps, seconds, average JCT) per episode."""

    def __init__(self, seconds: float, n_jobs: int) -> None:
        super().__init__()
        self.seconds, self.n_jobs, self.t0, self.curve = seconds, n_jobs, time.perf_counter(), []

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", []):
            if "episode" in info:
                jct = -info["episode"]["r"] * TIME_SCALE / self.n_jobs
                self.curve.append((self.num_timesteps, time.perf_counter() - self.t0, jct))
        return time.perf_counter() - self.t0 < self.seconds


def make_env(args: argparse.Namespace, trace: C.JobTrace | str, seed: int) -> ClusterEnv:
    modes = args.modes.split(",")
    return ClusterEnv(trace, C.Cluster.uniform(2, 8), max_jobs=args.max_jobs, seed=seed, time_scale=TIME_SCALE,
                      known_durations=True, resample_trace=isinstance(trace, str),
                      trace_kwargs={"mean_interarrival": args.interarrival},
                      gpu_choices=tuple(m for m in modes if m in ("pack", "spread")), sharing="share" in modes,
                      preemption="preempt" in modes)


def rollout(env: ClusterEnv, act, seed: int = 0) -> float:
    """Average JCT [s] of one episode under ``act(obs, env) -> action``."""
    obs, _ = env.reset(seed=seed)
    while True:
        obs, _, term, trunc, info = env.step(act(obs, env))
        if term:
            return float(info["avg_jct"])
        if trunc:
            raise RuntimeError("episode truncated")


def main(argv: list[str] | None = None) -> None:
    p = common.parser(__doc__, writes=False)
    p.add_argument("--minutes", type=float, default=3.0, help="training wall time (default 3)")
    p.add_argument("--jobs", type=int, default=30, help="jobs per trace (default 30)")
    p.add_argument("--interarrival", type=float, default=600.0, help="mean time between arrivals [s] (default 600)")
    p.add_argument("--max-jobs", type=int, default=16, help="rows of the env's job window (default 16)")
    p.add_argument("--eval-traces", type=int, default=5, help="held-out traces (default 5)")
    p.add_argument("--modes", default="pack,spread,share,preempt",
                   help="the env's action modes, comma-separated (default pack,spread,share,preempt)")
    p.add_argument("--png", help="write the learning curve and the comparison to this PNG")
    args = p.parse_args(argv)
    n_steps, batch_size, stop_steps = 512, 128, 10**9
    if args.smoke:
        args.minutes, args.jobs, args.eval_traces = 1.0, 8, 1
        n_steps, batch_size, stop_steps = 64, 32, 128  # two rollouts and updates
    torch.set_num_threads(1)  # a tiny MLP: one thread is fastest on a shared machine
    common.start("bench_cluster_rl", args)
    print(f"{args.minutes} min of training, {args.jobs} jobs per trace, mean inter-arrival {args.interarrival:.0f} s, "
          f"16 GPUs, modes {args.modes}, seed {args.seed}")

    train_env = Monitor(make_env(args, f"generated:{args.jobs}", args.seed))
    model = MaskablePPO("MultiInputPolicy", train_env, n_steps=n_steps, batch_size=batch_size, gamma=0.995,
                        ent_coef=0.01, seed=args.seed, device="cpu", verbose=0)
    budget = _Budget(args.minutes * 60.0, args.jobs)
    model.learn(total_timesteps=stop_steps, callback=budget)
    print(f"trained {model.num_timesteps:,} steps ({len(budget.curve)} episodes) in "
          f"{time.perf_counter() - budget.t0:.0f} s")

    traces = [C.traces.generate(args.jobs, seed=100_000 + k, mean_interarrival=args.interarrival)
              for k in range(args.eval_traces)]
    results: dict[str, list[float]] = {name: [] for name in ("ppo", "random", *HEURISTICS)}
    rng = np.random.default_rng(0)
    for trace in traces:
        env = make_env(args, trace, 0)
        results["ppo"].append(rollout(env, lambda obs, e: int(model.predict(obs, action_masks=e.action_masks(),
                                                                            deterministic=True)[0])))
        results["random"].append(rollout(env, lambda obs, e: int(rng.choice(np.flatnonzero(obs["action_mask"])))))
        for name in HEURISTICS:
            results[name].append(C.run(trace, env.cluster, name, seed=0).avg_jct)

    for name, v in results.items():
        common.check(all(np.isfinite(x) and x > 0 for x in v), f"{name}: average JCTs {v} not all finite and > 0")
    ref = np.mean(results["srtf"])
    print("\n| method | avg JCT [s], mean over held-out traces | sd | / srtf | per trace |")
    print("|---|---:|---:|---:|---|")
    for name, v in sorted(results.items(), key=lambda kv: np.mean(kv[1])):
        print(f"| {name} | {np.mean(v):,.0f} | {np.std(v):,.0f} | {np.mean(v) / ref:.2f} | "
              f"{', '.join(f'{x:,.0f}' for x in v)} |")
    curve = np.array(budget.curve) if budget.curve else np.zeros((0, 3))
    print("\nlearning curve (training episodes, each on a new trace): timesteps, seconds, average JCT [s] "
          "(mean of 20-episode windows)")
    for k in range(0, len(curve), 20):
        w = curve[k:k + 20]
        print(f"  {int(w[-1, 0]):>7,} steps  {w[-1, 1]:5.0f} s  {w[:, 2].mean():>9,.0f}")
    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
        if len(curve):
            a.plot(curve[:, 0], curve[:, 2], ".", alpha=0.3, label="episode")
            win = min(20, len(curve))
            a.plot(curve[win - 1:, 0], np.convolve(curve[:, 2], np.ones(win) / win, "valid"), label=f"mean of {win}")
        for name in HEURISTICS:
            a.axhline(np.mean(results[name]), ls="--", lw=0.8, color="grey")
        a.set(xlabel="training steps", ylabel="average JCT [s]", title="MaskablePPO training (new trace each episode)")
        a.legend()
        names = sorted(results, key=lambda k: np.mean(results[k]))
        b.bar(names, [np.mean(results[k]) for k in names], yerr=[np.std(results[k]) for k in names],
              color=["C3" if k == "ppo" else "C0" for k in names])
        b.set(ylabel="average JCT [s]", title=f"{args.eval_traces} held-out traces, 16 GPUs")
        fig.tight_layout()
        fig.savefig(args.png, dpi=90)
        print(f"\nwrote {args.png}")


if __name__ == "__main__":
    main()
