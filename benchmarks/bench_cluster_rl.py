"""The shipped MaskablePPO recipe on ``Doppler-Cluster-v0`` against the heuristic schedulers, on held-out traces.

Run from the repository root::

    python -m benchmarks.bench_cluster_rl                          # training seeds 0 and 1, 20 held-out traces
    python -m benchmarks.bench_cluster_rl --seeds 0 --eval-traces 5 --png docs/results/cluster_rl.png
    python -m benchmarks.bench_cluster_rl --smoke                  # 8 jobs, one short PPO update, 2 traces

Setup: everything comes from the recipe, ``agents/recipes/hyperparams/maskable_ppo.yml``'s
``Doppler-Cluster-v0`` entry, read by :func:`agents.recipes.load_hyperparams`:

- training: for each seed of ``--seeds``, ``model, vec_env = agents.recipes.make_model("maskable_ppo",
  "Doppler-Cluster-v0", seed=s)`` and ``model.learn(n_timesteps)`` (the recipe's budget unless
  ``--timesteps``). The recipe's env draws a new ``"generated:N"`` trace at every reset
  (``resample_trace``), from seeds its generator draws; the benchmark records them all;
- held-out traces: ``traces.generate(N, seed=--eval-seed + k, **trace_kwargs)`` for
  ``k < --eval-traces``, with the recipe's N and ``trace_kwargs``. The benchmark checks that no held-out
  seed was a training seed (it exits with an error otherwise);
- the agent on each held-out trace: one episode of ``gym.make("Doppler-Cluster-v0", trace=<that trace>,
  **env_kwargs)`` (the recipe's other env arguments), greedy (``model.predict(obs,
  action_masks=env.action_masks(), deterministic=True)``);
- baselines on the same traces and cluster, with the env's ``preemption_cost`` (no failures, as in the
  env): ``dg.cluster.run`` with fifo, srtf, las, tiresias and gandiva (SRTF knows the durations, as the
  agent's ``remaining`` feature does with ``known_durations``), and a uniformly random valid policy
  through the env (seeded by ``--seed``).

Prints a markdown table of the average JCT [s] per method (mean and standard deviation over the
held-out traces, the ratio to FIFO's mean, and on how many traces the method beats FIFO), one row per
training seed and one for all seeds together, and the learning curves (average JCT of the training
episodes, and its ratio to the reward baseline's on the same trace). ``--png`` draws both.
``--smoke`` checks that every average JCT is finite and > 0; the exit status is otherwise 0 whatever
the agent reaches.
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback

from agents.recipes import load_hyperparams, make_model
from benchmarks import common
from doppler_gym import cluster as C

ALGO, ENV_ID = "maskable_ppo", "Doppler-Cluster-v0"
HEURISTICS = ("fifo", "srtf", "las", "tiresias", "gandiva")
REQUIRES = ("sb3_contrib", "yaml")


class TrainingLog(BaseCallback):
    """Records, during ``model.learn``, each finished training episode's ``(timesteps, seconds, avg JCT [s],
    avg JCT / the reward baseline's on the same trace)`` in :attr:`curve` (the ratio is NaN unless
    ``reward="relative"``) and the seed of every trace the envs drew in :attr:`trace_seeds`."""

    def __init__(self) -> None:
        super().__init__()
        self.t0 = time.perf_counter()
        self.curve: list[tuple[int, float, float, float]] = []
        self.trace_seeds: set[int] = set()

    def _on_training_start(self) -> None:
        self._record_seeds()  # the traces of the first reset

    def _record_seeds(self) -> None:
        for seed in self.training_env.get_attr("trace_seed"):  # any SB3 VecEnv (DummyVecEnv, ClusterVecEnv)
            if seed is not None:
                self.trace_seeds.add(int(seed))

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", []):
            if "avg_jct" in info:  # a terminal step (the vec env has already reset this env)
                ratio = info["avg_jct"] / info["baseline_avg_jct"] if "baseline_avg_jct" in info else np.nan
                self.curve.append((self.num_timesteps, time.perf_counter() - self.t0, float(info["avg_jct"]),
                                   float(ratio)))
        if any(self.locals.get("dones", [])):
            self._record_seeds()
        return True


def eval_env_kwargs(env_kwargs: dict, trace: C.JobTrace) -> dict:
    """The recipe's env arguments for one episode on the fixed ``trace`` (no resampling, no generator arguments)."""
    out = {k: v for k, v in env_kwargs.items() if k not in ("trace", "resample_trace", "trace_kwargs", "seed")}
    return {**out, "trace": trace}


def rollout(env: gym.Env, act, seed: int = 0) -> float:
    """Average JCT [s] of one episode of ``env`` under ``act(obs, env) -> action``."""
    obs, _ = env.reset(seed=seed)
    while True:
        obs, _, term, trunc, info = env.step(act(obs, env))
        if term:
            return float(info["avg_jct"])
        if trunc:
            raise RuntimeError("episode truncated")


def greedy(model):
    """The trained model's greedy masked action, as ``act(obs, env)``."""
    def act(obs, env) -> int:
        return int(model.predict(obs, action_masks=env.unwrapped.action_masks(), deterministic=True)[0])
    return act


def heldout_traces(hp: dict, n_jobs: int, count: int, first_seed: int) -> list[C.JobTrace]:
    """``count`` traces of the recipe's generator, seeds ``first_seed + k``."""
    kw = hp["env_kwargs"].get("trace_kwargs") or {}
    return [C.traces.generate(n_jobs, seed=first_seed + k, **kw) for k in range(count)]


def evaluate(model, hp: dict, traces: list[C.JobTrace]) -> list[float]:
    """The greedy agent's average JCT [s] on each trace."""
    return [rollout(gym.make(ENV_ID, **eval_env_kwargs(hp["env_kwargs"], t)), greedy(model)) for t in traces]


def baselines(hp: dict, traces: list[C.JobTrace], seed: int) -> dict[str, list[float]]:
    """Average JCT [s] per trace of each heuristic (``dg.cluster.run``) and of a random valid policy (env)."""
    out: dict[str, list[float]] = {name: [] for name in (*HEURISTICS, "random")}
    rng = np.random.default_rng(seed)
    for trace in traces:
        env = gym.make(ENV_ID, **eval_env_kwargs(hp["env_kwargs"], trace))
        u = env.unwrapped
        for name in HEURISTICS:
            out[name].append(C.run(trace, u.cluster, name, seed=0, preemption_cost=u.preemption_cost,
                                   interference=u.interference).avg_jct)
        out["random"].append(rollout(env, lambda obs, e: int(rng.choice(np.flatnonzero(obs["action_mask"])))))
    return out


def train(seed: int, timesteps: int, env_kwargs_overrides: dict | None = None, n_envs: int | None = None):
    """``(model, log)``: the recipe's model trained for ``timesteps`` steps with ``seed``."""
    model, _ = make_model(ALGO, ENV_ID, seed=seed, env_kwargs_overrides=env_kwargs_overrides, n_envs=n_envs)
    log = TrainingLog()
    model.learn(total_timesteps=timesteps, callback=log)
    return model, log


def main(argv: list[str] | None = None) -> None:
    p = common.parser(__doc__, writes=False)
    p.add_argument("--seeds", default="0,1", help="training seeds, comma-separated (default 0,1)")
    p.add_argument("--timesteps", type=int, help="training steps per seed (default: the recipe's n_timesteps)")
    p.add_argument("--eval-traces", type=int, default=20, help="held-out traces (default 20)")
    p.add_argument("--eval-seed", type=int, default=100_000,
                   help="seed of the first held-out trace; the others follow (default 100000)")
    p.add_argument("--png", help="write the learning curves and the comparison to this PNG")
    args = p.parse_args(argv)
    hp = load_hyperparams(ALGO, ENV_ID)
    seeds = [int(s) for s in args.seeds.split(",")]
    timesteps = args.timesteps or hp["n_timesteps"]
    overrides, n_envs = None, None
    if args.smoke:  # 8-job traces, one env, one rollout and update
        seeds, timesteps, args.eval_traces, overrides, n_envs = [args.seed], 64, 2, {"trace": "generated:8"}, 1
    torch.set_num_threads(1)  # small MLPs: one thread is fastest on a shared machine
    common.start("bench_cluster_rl", args)
    probe = gym.make(ENV_ID, **{**hp["env_kwargs"], **(overrides or {})}).unwrapped
    n_jobs = probe.n_jobs
    print(f"recipe {ALGO}.yml[{ENV_ID}]: env_kwargs {hp['env_kwargs']}"
          + (f", overridden by {overrides} and n_envs={n_envs}" if overrides else "")
          + f"; {timesteps:,} steps per training seed, "
          f"seeds {seeds}; {args.eval_traces} held-out traces of {n_jobs} jobs, seeds {args.eval_seed}..."
          f"{args.eval_seed + args.eval_traces - 1}; {probe.cluster.n_gpus} GPUs")

    traces = heldout_traces(hp, n_jobs, args.eval_traces, args.eval_seed)
    results = baselines(hp, traces, args.seed)
    curves = {}
    for s in seeds:
        model, log = train(s, timesteps, overrides, n_envs)
        t_train = time.perf_counter() - log.t0
        clash = log.trace_seeds & set(range(args.eval_seed, args.eval_seed + args.eval_traces))
        if clash:
            raise SystemExit(f"training seed {s} drew held-out trace seeds {sorted(clash)}: pick another --eval-seed")
        results[f"agent seed {s}"] = evaluate(model, hp, traces)
        curves[s] = np.array(log.curve) if log.curve else np.zeros((0, 4))
        print(f"seed {s}: trained {model.num_timesteps:,} steps ({len(log.curve)} episodes on "
              f"{len(log.trace_seeds)} traces, none held out) in {t_train:.0f} s", flush=True)
    agent = np.array([results[f"agent seed {s}"] for s in seeds])  # (seeds, traces)
    if len(seeds) > 1:
        results["agent, all seeds"] = agent.ravel().tolist()

    for name, v in results.items():
        common.check(all(np.isfinite(x) and x > 0 for x in v), f"{name}: average JCTs {v} not all finite and > 0")
    fifo = np.array(results["fifo"])  # (traces,)
    rows = []
    for name, v in sorted(results.items(), key=lambda kv: np.mean(kv[1])):
        v = np.asarray(v)
        wins = (v.reshape(-1, len(traces)) < fifo).sum()
        rows.append([name, f"{v.mean():,.0f}", f"{v.std():,.0f}", f"{v.mean() / fifo.mean():.3f}",
                     f"{wins}/{v.size}"])
    print()
    print(common.markdown_table(["method", "avg JCT [s], mean over traces", "sd", "/ fifo", "beats fifo on"], rows))
    print(f"\nagent / fifo: {agent.mean() / fifo.mean():.3f} (mean over seeds and held-out traces); "
          f"per seed: {', '.join(f'{a.mean() / fifo.mean():.3f}' for a in agent)}")
    print("\nlearning curves (training episodes, each on a new trace, stochastic policy): timesteps, seconds, "
          "average JCT [s], average JCT / the reward baseline's on the same trace (means of 40-episode windows)")
    for s, curve in curves.items():
        print(f"seed {s}:")
        for k in range(0, len(curve), 40):
            w = curve[k:k + 40]
            print(f"  {int(w[-1, 0]):>7,} steps  {w[-1, 1]:5.0f} s  {w[:, 2].mean():>9,.0f}  {w[:, 3].mean():.3f}")
    if args.png:
        plot(args.png, curves, results, len(traces), probe.cluster.n_gpus)


def plot(path: str, curves: dict[int, np.ndarray], results: dict[str, list[float]], n_traces: int,
         n_gpus: int) -> None:
    """Left: each seed's training episodes' average JCT / the reward baseline's on the same trace (means of
    40 episodes) and the heuristics' held-out mean / FIFO's (dashed); right: mean and sd of the average JCT
    per method on the held-out traces."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.2))
    fifo = np.mean(results["fifo"])
    for s, curve in curves.items():
        if len(curve):
            win = min(40, len(curve))
            a.plot(curve[win - 1:, 0], np.convolve(curve[:, 3], np.ones(win) / win, "valid"),
                   label=f"seed {s} (mean of {win} episodes)")
    for k, name in enumerate(HEURISTICS):
        a.axhline(np.mean(results[name]) / fifo, ls="--", lw=0.8, color=f"C{k + 2}", label=f"{name} (held out)")
    a.set(xlabel="training steps", ylabel="average JCT / FIFO's on the same trace",
          title="MaskablePPO recipe: training episodes")
    a.legend(fontsize=7)
    names = sorted(results, key=lambda k: np.mean(results[k]))
    b.bar(names, [np.mean(results[k]) for k in names], yerr=[np.std(results[k]) for k in names],
          color=["C3" if k.startswith("agent") else "C0" for k in names])
    b.tick_params(axis="x", rotation=30, labelsize=8)
    b.set(ylabel="average JCT [s]", title=f"{n_traces} held-out traces, {n_gpus} GPUs")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
