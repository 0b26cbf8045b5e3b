"""``doppler place``: the shipped policy's greedy decode and policy-guided search on held-out graphs, and
decode time and memory against graph size.

Run from the repository root (about 12-15 minutes; every search row is wall-clock bound)::

    python -m benchmarks.bench_place --out out/bench_place            # quality and scale
    python -m benchmarks.bench_place --part quality --budgets 2,5      # a smaller grid
    python -m benchmarks.bench_place --part scale --sizes 250,1000,4000,20000
    python -m benchmarks.bench_place --part starts --evals 20000      # local search from decodes vs heuristics
    python -m benchmarks.bench_place --part headroom --evals 50000    # the best of 16 local searches
    python -m benchmarks.bench_place --part oracle --evals 50000      # the best placement as the proposal
    python -m benchmarks.bench_place --smoke --out out/smoke          # every part, one small instance

1. **Quality** (``--part quality``), on graphs outside the policy's training mix (the held-out list
   of ``agents/pretrained/pretrained.json``: every paper graph, the llama-layer family, random DAGs
   above 400 ops, the h100x8-nvswitch topology): 4 and 8 devices, the reference model for the paper
   graphs, topology presets for the rest. Per instance: critical path, HEFT, the policy's greedy
   decode (and its decode time); then for each budget ``S`` plain ``local_search(seconds=S)`` (from
   the best of critical path, HEFT, round robin) against ``agents.place(search_seconds=S)`` (the
   policy's decodes as extra starts), same seed.
2. **Scale** (``--part scale``): per size (random layered DAGs of width ~25, 4 devices), in a fresh
   process: the direct decode's wall-clock and CPU time (``time.process_time``: what it costs on a
   machine shared with other jobs; static part and steps) and the process's peak RSS before and
   after it; the env decode (``Doppler-Sim-v0`` stepped with the policy, padded observations) up to
   ``--env-max`` ops for the ratio, in the same process.
3. **Starts** (``--part starts``): wall-clock free: ``local_search`` with ``--evals`` evaluations from
   the best heuristic start, from the best of the policy's decodes (greedy and 8 samples), the two
   with half the evaluations each ("split"), and a race (a quarter from each, then the leader for
   the other half), on the quality instances up to 1,000 ops.
4. **Headroom** (``--part headroom``): the best of ``--islands`` independent local searches of
   ``--evals`` evaluations each and the makespan lower bound per instance (up to ``--max-ops``),
   against plain local search at each budget of the quality part: how much better than plain local
   search any search with its moves has been seen to get.
5. **Oracle** (``--part oracle``, after a quality run in the same ``--out``): local search whose
   move proposal points every op at its device in the best placement known (``--islands`` x
   ``--evals``), against plain local search, at the evaluations plain local search ran in each
   budget: the most any per-op move proposal (the mechanism a policy guides the search with) can add.

``--seeds-report DIR,DIR,..`` summarises quality runs of several seeds: guided / plain per instance
with the plain search's seed-to-seed spread, Welch's t-test per instance, and the geometric mean
over instances with a 95% bootstrap interval.

Writes ``OUT/results.json`` and prints markdown tables (``--report`` reprints them).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings
from math import isfinite, nan
from pathlib import Path

from scipy.stats import gmean

from benchmarks import common

QUALITY = (  # (graph spec, topology): held out by agents/pretrained/pretrained.json
    ("paper/chainmm", 4), ("paper/ffnn", 4), ("paper/llama-layer", 4), ("paper/llama-block", 8),
    ("llama-layer", "p100x4"), ("llama-layer", "h100x8-nvswitch"),
    ("random:n_ops=600,levels=30,seed=11", "p100x4"), ("random:n_ops=600,levels=30,seed=11", "h100x8-nvswitch"),
    # the sizes of the examples: random 1,000 and 4,000 ops, a wide layered DAG of about 600 ops
    ("random:n_ops=1000,levels=40,seed=3", 4), ("random:n_ops=1000,levels=40,seed=3", 8),
    ("random:n_ops=4000,levels=100,seed=5", 4), ("random:n_ops=605,levels=11,seed=13", 8),
)


def build(spec: str):
    """The graph of an instance spec (``"paper/ffnn"``, ``"random:n_ops=600,levels=30,seed=11"``)."""
    import doppler_gym as dg

    return dg.instances.resolve_graph(spec)


def quality(budgets: list[float], seed: int, instances: list[tuple], policy_path: str | None = None) -> list[dict]:
    import doppler_gym as dg
    from agents.placer import PROBE_SHARE, place, resolve_policy
    from doppler_gym.baselines.local_search import default_starts

    policy, _ = resolve_policy(policy_path)
    rows = []
    for spec, topo_spec in instances:
        g = build(spec)
        topo = dg.instances.resolve_topology(topo_spec)
        config = dg.instances.default_config(g, topo)
        cp = dg.baselines.critical_path(g, topo, config, seed=0).makespan
        heft = dg.baselines.heft(g, topo, config).makespan
        greedy = place(g, topology=topo, policy=policy, seed=seed, reference=False, heuristics=False)
        row = {"graph": spec, "n_ops": g.n_ops, "topology": topo.name, "n_devices": topo.n_devices, "seed": seed,
               "unit": config.time_unit, "critical_path": cp, "heft": heft, "greedy": greedy.makespan,
               "greedy_seconds": greedy.seconds, "search": {}}
        for s in budgets:
            t = time.perf_counter()
            plain = dg.baselines.local_search(g, topo, config, seed=seed, seconds=s)
            plain_wall = time.perf_counter() - t
            guided = place(g, topology=topo, policy=policy, search_seconds=s, seed=seed, reference=False,
                           heuristics=False)
            # the ablation: the same race with the runner-up heuristic in the decode's place
            t = time.perf_counter()
            two = sorted(default_starts(g, topo, config, seed), key=lambda p: p.makespan)[:2]
            left = max(s - (time.perf_counter() - t), 0.0)
            raced = dg.baselines.local_search(g, topo, config, seed=seed, seconds=left, starts=two,
                                              probe_share=PROBE_SHARE)
            row["search"][str(s)] = {"local_search": plain.makespan, "local_search_wall": plain_wall,
                                     "guided": guided.makespan, "guided_wall": guided.seconds,
                                     "guided_start": guided.info.get("start"), "guided_raced": guided.info.get("raced"),
                                     "guided_evals": guided.info.get("evals"), "plain_evals": plain.info["evals"],
                                     "raced_heuristics": raced.makespan, "raced_heuristics_evals": raced.info["evals"]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def instances_up_to(instances: list[tuple], max_ops: int):
    """``(spec, graph, topology, config)`` of each instance with at most ``max_ops`` ops."""
    import doppler_gym as dg

    for spec, topo_spec in instances:
        g = build(spec)
        if g.n_ops <= max_ops:
            topo = dg.instances.resolve_topology(topo_spec)
            yield spec, g, topo, dg.instances.default_config(g, topo)


def starts(evals: int, seed: int, instances: list[tuple], policy_path: str | None = None,
           max_ops: int = 1000) -> list[dict]:
    """Local search from the best heuristic vs the best decode, at a fixed number of evaluations."""
    import doppler_gym as dg
    from agents.decode import DirectDecoder
    from agents.placer import resolve_policy
    from doppler_gym.baselines.common import finish
    from doppler_gym.baselines.local_search import default_starts

    policy, _ = resolve_policy(policy_path)
    rows = []
    for spec, g, topo, config in instances_up_to(instances, max_ops):
        decoder = DirectDecoder(policy, g, topo, config)
        decoded = [decoder.run(greedy=True), decoder.run(samples=8, greedy=False, seed=seed)]
        cands = [finish("decode", g, topo, config, d.assignments[r], d.orders[r], time.perf_counter())
                 for d in decoded for r in range(d.assignments.shape[0])]
        heuristic = min(default_starts(g, topo, config, seed), key=lambda p: p.makespan)
        decode = min(cands, key=lambda p: p.makespan)

        def search(start, n, s=seed, g=g, topo=topo, config=config):
            return dg.baselines.local_search(g, topo, config, seed=s, seconds=None, max_evals=n, starts=[start])

        quarter = evals // 4  # the race: a quarter from each start, then the leader for the rest
        a, b = search(heuristic, quarter), search(decode, quarter, seed + 1)
        leader = a if a.makespan <= b.makespan else b
        row = {"graph": spec, "topology": topo.name, "evals": evals, "heuristic_start": heuristic.makespan,
               "decode_start": decode.makespan, "from_heuristic": search(heuristic, evals).makespan,
               "from_decode": search(decode, evals).makespan,
               "split": min(search(heuristic, evals // 2).makespan, search(decode, evals // 2, seed + 1).makespan),
               "race": min(leader.makespan, search(leader, evals - 2 * quarter, seed + 2).makespan)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def headroom(islands: int, evals: int, seed: int, instances: list[tuple], max_ops: int) -> list[dict]:
    """How much better than plain local search any search with its moves has been seen to do: the
    best of ``islands`` independent local searches of ``evals`` evaluations each (``island_search``,
    one round, from the default starts), and the makespan lower bound, per instance."""
    import doppler_gym as dg
    from doppler_gym.parallel.search import island_search

    rows = []
    for spec, g, topo, config in instances_up_to(instances, max_ops):
        t0 = time.perf_counter()
        best = island_search(g, topo, config, islands=islands, max_evals=evals, seed=seed)
        row = {"graph": spec, "topology": topo.name, "islands": islands, "evals": evals, "seed": seed,
               "best": best.makespan, "assignment": best.assignment.tolist(),
               "island_makespans": best.info["island_makespans"][0],
               "lower_bound": dg.makespan_lower_bound(g, topo, config), "seconds": time.perf_counter() - t0}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def oracle(quality_rows: list[dict], islands: int, evals: int, seed: int, instances: list[tuple], max_ops: int,
           headroom_rows: list[dict] = (), share: float = 0.5, smoothing: float = 0.1) -> list[dict]:
    """An upper bound on what a per-op move proposal (the mechanism a learned policy guides the search
    with) can add: local search whose proposal points every op at its device in the best placement
    known (the best of ``islands`` x ``evals`` local searches, relabelled to agree most with the
    start where that keeps its makespan), against plain local search, at the evaluations plain local
    search ran in each budget of the quality part (``quality_rows``). The best placement of a headroom
    row with the same ``islands``, ``evals`` and ``seed`` (``headroom_rows``) is taken as it is, not
    searched again."""
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    import doppler_gym as dg
    from doppler_gym.baselines.local_search import default_starts
    from doppler_gym.parallel.search import island_search

    plain_evals = {(r["graph"], r["topology"]): {b: s["plain_evals"] for b, s in r["search"].items()}
                   for r in quality_rows}
    known = {(r["graph"], r["topology"]): (r["best"], np.asarray(r["assignment"])) for r in headroom_rows
             if "assignment" in r and (r["islands"], r["evals"], r.get("seed")) == (islands, evals, seed)}
    rows = []
    for spec, g, topo, config in instances_up_to(instances, max_ops):
        d = topo.n_devices
        if (spec, topo.name) in known:
            best_makespan, best = known[(spec, topo.name)]
        else:
            found = island_search(g, topo, config, islands=islands, max_evals=evals, seed=seed)
            best_makespan, best = found.makespan, found.assignment
        start = min(default_starts(g, topo, config, seed), key=lambda p: p.makespan)
        agree = np.zeros((d, d))
        np.add.at(agree, (best, start.assignment), 1)
        relabelled = linear_sum_assignment(-agree)[1][best]  # rows come back as 0..d-1: [1] maps each label
        same = dg.simulate(g, relabelled, topo, config=config).makespan == best_makespan
        target = relabelled if same else best
        proposal = np.full((g.n_ops, d), smoothing / d)
        proposal[np.arange(g.n_ops), target] += 1.0 - smoothing
        row = {"graph": spec, "topology": topo.name, "best": best_makespan, "relabelled": bool(same),
               "share": share, "smoothing": smoothing, "search": {}}
        for budget, n in plain_evals[(spec, topo.name)].items():
            plain, guided = (dg.baselines.local_search(g, topo, config, seed=seed, seconds=None, max_evals=n, **kw)
                             for kw in ({}, {"research": dg.baselines.LocalSearchResearch(proposal=proposal,
                                                                                         proposal_share=share)}))
            row["search"][budget] = {"evals": n, "plain": plain.makespan, "oracle": guided.makespan}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def scale_one(n: int, env_max: int) -> dict:
    """One size of the scale part, meant to run alone in a fresh process (``--scale-one N``): the direct
    decode of a random layered DAG of ``n`` ops on 4 devices (wall-clock and CPU seconds, peak RSS
    before and after it [MB]) and, up to ``env_max`` ops, the env decode of the same policy."""
    import resource

    import numpy as np
    import torch

    import doppler_gym as dg
    from agents import pretrained
    from agents.decode import DirectDecoder

    torch.set_num_threads(1)
    g = dg.workloads.make("random", n_ops=n, levels=max(4, n // 25), skip_prob=0.0, seed=1)
    policy = pretrained.load_policy()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t, c = time.perf_counter(), time.process_time()
    dec = DirectDecoder(policy, g, 4)
    out = dec.run()
    total, cpu = time.perf_counter() - t, time.process_time() - c
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    row = {"n_ops": n, "n_edges": g.n_edges, "static_seconds": dec.static_seconds, "steps_seconds": out.seconds,
           "decode_seconds": total, "decode_cpu_seconds": cpu, "rss_before_mb": rss0, "rss_peak_mb": rss1}
    if n <= env_max:
        import gymnasium as gym

        from agents.training.rollout import decode as env_decode

        env = gym.make("Doppler-Sim-v0", graph=g, topology=4, disable_env_checker=True)
        p = policy.transfer_to(env)
        t, c = time.perf_counter(), time.process_time()
        info = env_decode(p, env, greedy=True, seed=0)
        row["env_decode_seconds"], row["env_decode_cpu_seconds"] = time.perf_counter() - t, time.process_time() - c
        row["same_assignment"] = bool(np.array_equal(info["assignment"], out.assignments[0]))
    return row


def scale(sizes: list[int], env_max: int) -> list[dict]:
    rows = []
    for n in sizes:
        proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_place", "--scale-one", str(n),
                               "--env-max", str(env_max)], capture_output=True, text=True, check=False, cwd=common.ROOT)
        if proc.returncode != 0:
            print(proc.stderr[-2000:], file=sys.stderr)
            continue
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def best_seen(runs: list[list[dict]], extra: list[dict]) -> dict[tuple[str, str], float]:
    """The best makespan seen per ``(graph, topology)``: every plain and guided search of the quality
    ``runs``, and the best placements and searches of ``extra`` results (their ``headroom`` and
    ``oracle`` parts)."""
    best: dict[tuple[str, str], float] = {}

    def see(key: tuple[str, str], value: float) -> None:
        best[key] = min(best.get(key, value), value)

    for run in runs:
        for r in run:
            for cell in r["search"].values():
                see((r["graph"], r["topology"]), min(cell["local_search"], cell["guided"],
                                                     cell.get("raced_heuristics", float("inf"))))
    for results in extra:
        for r in results.get("headroom", []) + results.get("oracle", []):
            see((r["graph"], r["topology"]), r["best"])
            for cell in r.get("search", {}).values():
                see((r["graph"], r["topology"]), min(cell["plain"], cell["oracle"]))
    return best


def seed_summary(runs: list[list[dict]], best: dict[tuple[str, str], float] | None = None,
                 against: str = "local_search", candidate: str = "guided") -> dict[str, dict]:
    """Guided against plain local search (``against``: or another search column of the quality rows,
    e.g. ``"raced_heuristics"``; ``candidate``: the column in guided's place) over several seeds of
    the quality part.

    ``runs``: the ``quality`` rows of each run (one run per seed, the same instances); ``best``: the
    best makespan seen per instance (:func:`best_seen`), for the headroom. Per budget:
    ``rows`` (per instance: plain and guided makespans per seed, the geometric mean of guided / plain
    over the seeds, the plain search's seed-to-seed spread (sample standard deviation / mean), and
    ``beyond_noise``: Welch's t-test of guided against plain at p < 0.05, ``"worse"``/``"better"``
    or ``""``, and ``headroom``: the best seen / the mean of plain over the seeds); ``gmean`` over
    instances and its 95% bootstrap interval (instances resampled, 10,000 resamples, seed 0), and
    ``headroom_gmean``: the geometric mean of the headrooms."""
    import numpy as np
    from scipy.stats import bootstrap, ttest_ind

    keys = [(r["graph"], r["topology"]) for r in runs[0]]
    by_key = [{(r["graph"], r["topology"]): r for r in run} for run in runs]
    out = {}
    for budget in runs[0][0]["search"]:
        rows, ratios = [], []
        for key in keys:
            plain = np.array([run[key]["search"][budget][against] for run in by_key])
            guided = np.array([run[key]["search"][budget][candidate] for run in by_key])
            ratio = float(gmean(guided / plain))
            if np.ptp(plain) == 0 and np.ptp(guided) == 0:
                significant = plain[0] != guided[0]
            else:
                with warnings.catch_warnings():  # scipy warns when the seeds' values are nearly identical
                    warnings.simplefilter("ignore", RuntimeWarning)
                    significant = bool(ttest_ind(guided, plain, equal_var=False).pvalue < 0.05)
            verdict = "" if not significant else ("worse" if guided.mean() > plain.mean() else "better")
            rows.append({"graph": key[0], "topology": key[1], "plain": plain.tolist(), "guided": guided.tolist(),
                         "ratio": ratio, "plain_spread": float(plain.std(ddof=1) / plain.mean()),
                         "beyond_noise": verdict,
                         "headroom": float(best[key] / plain.mean()) if best and key in best else None})
            ratios.append(ratio)
        ci95 = [nan, nan]  # the bootstrap needs two instances or more
        if len(ratios) > 1:
            ci = bootstrap((np.array(ratios),), gmean, n_resamples=10_000, confidence_level=0.95,
                           random_state=0).confidence_interval
            ci95 = [float(ci.low), float(ci.high)]
        rooms = [r["headroom"] for r in rows if r["headroom"] is not None]
        out[budget] = {"rows": rows, "gmean": float(gmean(ratios)), "ci95": ci95,
                       "headroom_gmean": float(gmean(rooms)) if rooms else None}
    return out


def report_seeds(summary: dict[str, dict], runs: list[str], against: str = "plain local search",
                 candidate: str = "Guided", unit: str = "s") -> None:
    budgets = list(summary)
    print(f"\n{candidate} / {against} over the runs {', '.join(runs)}: geometric mean over the seeds per instance; "
          "in brackets the baseline's seed-to-seed spread (sd / mean); * worse, + better than the baseline "
          "beyond noise (Welch's t-test, p < 0.05)")
    print("\n| graph | topology | " + " | ".join(f"{b} {unit}" for b in budgets) + " |")
    print("|---|---|" + "---:|" * len(budgets))
    for i, r in enumerate(summary[budgets[0]]["rows"]):
        cells = []
        for b in budgets:
            c = summary[b]["rows"][i]
            mark = {"worse": " *", "better": " +", "": ""}[c["beyond_noise"]]
            cells.append(f"{c['ratio']:.3f} ({c['plain_spread']:.1%}){mark}")
        print(f"| {r['graph']} | {r['topology']} | " + " | ".join(cells) + " |")
    for b in budgets:
        s = summary[b]
        rows = s["rows"]
        print(f"budget {b} {unit}: geometric mean {s['gmean']:.4f} (95% bootstrap interval {s['ci95'][0]:.4f}-"
              f"{s['ci95'][1]:.4f}); worse beyond noise on {sum(r['beyond_noise'] == 'worse' for r in rows)}, "
              f"better on {sum(r['beyond_noise'] == 'better' for r in rows)} of {len(rows)}")
        if s["headroom_gmean"] is not None:
            print(f"budget {b} {unit}: best seen / mean plain local search (the headroom) geometric mean "
                  f"{s['headroom_gmean']:.4f} over {sum(r['headroom'] is not None for r in rows)} instances")


def report(results: dict) -> None:
    q = results.get("quality", [])
    if q:
        print("\n| graph | ops | topology | critical path | HEFT | greedy (x CP) | decode s |")
        print("|---|---:|---|---:|---:|---:|---:|")
        for r in q:
            print(f"| {r['graph']} | {r['n_ops']} | {r['topology']} | {r['critical_path']:.4g} | {r['heft']:.4g} | "
                  f"{r['greedy']:.4g} ({r['greedy'] / r['critical_path']:.3f}) | {r['greedy_seconds']:.2f} |")
        budgets = list(q[0]["search"])
        print("\n| graph | topology | " + " | ".join(f"LS {b} s | guided {b} s" for b in budgets) + " |")
        print("|---|---|" + "---:|---:|" * len(budgets))
        ratios = {b: [] for b in budgets}
        for r in q:
            cells = []
            for b in budgets:
                s = r["search"][b]
                ratios[b].append(s["guided"] / s["local_search"])
                cells.append(f"{s['local_search']:.4g} | {s['guided']:.4g} ({s['guided'] / s['local_search']:.3f})")
            print(f"| {r['graph']} | {r['topology']} | " + " | ".join(cells) + " |")
        for b in budgets:
            v = ratios[b]
            print(f"budget {b} s: guided / local_search geometric mean {gmean(v):.4f}, "
                  f"worst {max(v):.4f}, best {min(v):.4f}")
    st = results.get("starts", [])
    if st:
        keys = [k for k in ("from_decode", "split", "race") if k in st[0]]
        print(f"\n| graph | topology | best heuristic start | best decode start | LS from heuristic "
              f"({st[0]['evals']} evaluations) | " + " | ".join(k.replace("_", " ") for k in keys) + " |")
        print("|---|---|---:|---:|---:|" + "---:|" * len(keys))
        for r in st:
            h = r["from_heuristic"]
            print(f"| {r['graph']} | {r['topology']} | {r['heuristic_start']:.4g} | {r['decode_start']:.4g} "
                  f"| {h:.4g} | " + " | ".join(f"{r[k]:.4g} ({r[k] / h:.3f})" for k in keys) + " |")
        for key in keys:
            v = [r[key] / r["from_heuristic"] for r in st]
            print(f"{key} / from_heuristic: geometric mean {gmean(v):.4f}")
    orc = results.get("oracle", [])
    if orc:
        budgets = list(orc[0]["search"])
        print("\n| graph | topology | best known | " + " | ".join(
            f"LS {b} s evals: plain | oracle proposal" for b in budgets) + " |")
        print("|---|---|---:|" + "---:|---:|" * len(budgets))
        for r in orc:
            cells = [f"{s['plain']:.4g} | {s['oracle']:.4g} ({s['oracle'] / s['plain']:.3f})"
                     for s in r["search"].values()]
            print(f"| {r['graph']} | {r['topology']} | {r['best']:.4g} | " + " | ".join(cells) + " |")
        for b in budgets:
            v = [r["search"][b]["oracle"] / r["search"][b]["plain"] for r in orc]
            print(f"budget {b} s (its evaluations): oracle proposal / plain geometric mean {gmean(v):.4f}, "
                  f"best {min(v):.4f}")
    hr = results.get("headroom", [])
    if hr:
        plain = {(r["graph"], r["topology"]): r["search"] for r in q}
        budgets = list(q[0]["search"]) if q else []
        print(f"\n| graph | topology | lower bound | best of {hr[0]['islands']} local searches "
              f"({hr[0]['evals']} evaluations each) | " + " | ".join(f"best / LS {b} s" for b in budgets) + " |")
        print("|---|---|---:|---:|" + "---:|" * len(budgets))
        ratios = {b: [] for b in budgets}
        for r in hr:
            cells = []
            for b in budgets:
                ls = plain.get((r["graph"], r["topology"]), {}).get(b, {}).get("local_search")
                cells.append("-" if ls is None else f"{r['best'] / ls:.3f}")
                if ls is not None:
                    ratios[b].append(r["best"] / ls)
            print(f"| {r['graph']} | {r['topology']} | {r['lower_bound']:.4g} | {r['best']:.4g} | "
                  + " | ".join(cells) + " |")
        for b, v in ratios.items():
            if v:
                print(f"budget {b} s: best seen / plain local_search geometric mean "
                      f"{gmean(v):.4f} over {len(v)} instances")
    s = results.get("scale", [])
    if s:
        print("\n| ops | edges | direct decode s wall (static + steps) | CPU s | env decode s wall | CPU s "
              "| same placement | RSS before / peak MB |")
        print("|---:|---:|---:|---:|---:|---:|---|---:|")
        for r in s:
            env = f"{r['env_decode_seconds']:.2f}" if "env_decode_seconds" in r else "-"
            env_cpu = f"{r['env_decode_cpu_seconds']:.2f}" if "env_decode_cpu_seconds" in r else "-"
            cpu = f"{r['decode_cpu_seconds']:.2f}" if "decode_cpu_seconds" in r else "-"
            same = str(r.get("same_assignment", "-"))
            print(f"| {r['n_ops']} | {r['n_edges']} | {r['decode_seconds']:.2f} ({r['static_seconds']:.2f} + "
                  f"{r['steps_seconds']:.2f}) | {cpu} | {env} | {env_cpu} | {same} | "
                  f"{r['rss_before_mb']:.0f} / {r['rss_peak_mb']:.0f} |")


DEFAULT_OUT = "out/bench_place"
SMOKE_INSTANCES = [("random:n_ops=60,levels=6,seed=11", 4)]  # --smoke: one small instance for every part


def smoke_checks(results: dict) -> None:
    """The outputs of a ``--smoke`` run are sane: finite makespans, the direct and env decodes agree."""
    for r in results["quality"]:
        for key in ("critical_path", "heft", "greedy"):
            common.finite_positive(r[key], f"quality {r['graph']}: {key}")
        for budget, cell in r["search"].items():
            for key in ("local_search", "guided", "raced_heuristics"):
                common.finite_positive(cell[key], f"quality {r['graph']} at {budget} s: {key}")
    common.check(len(results["scale"]) == 1 and results["scale"][0].get("same_assignment") is True,
                 f"scale: the direct and the env decode should place alike: {results['scale']}")
    for part in ("starts", "headroom", "oracle"):
        common.check(len(results[part]) == 1, f"{part}: {len(results[part])} rows for one instance")
    common.check(all(isfinite(v) for k, v in results["starts"][0].items() if k.startswith(("from_", "split", "race"))),
                 f"starts: a makespan is not finite: {results['starts'][0]}")
    common.check(results["headroom"][0]["best"] >= results["headroom"][0]["lower_bound"] * (1 - 1e-9),
                 "headroom: the best placement is below the lower bound")


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, out=DEFAULT_OUT)
    ap.add_argument("--part", choices=("quality", "scale", "starts", "headroom", "oracle", "both"), default="both")
    ap.add_argument("--islands", type=int, default=16,
                    help="headroom, oracle: independent local searches per instance for the best placement")
    ap.add_argument("--max-ops", type=int, default=1000, help="starts, headroom, oracle: the largest graph searched")
    ap.add_argument("--evals", type=int, default=20000,
                    help="starts: local-search evaluations per run; headroom, oracle: per independent search")
    ap.add_argument("--budgets", default="2,5,20", help="search budgets [s], comma-separated")
    ap.add_argument("--sizes", default="250,1000,4000,20000")
    ap.add_argument("--env-max", type=int, default=1000, help="largest graph also decoded through the env")
    ap.add_argument("--policy", help="a policy checkpoint (default: the shipped agents/pretrained one)")
    ap.add_argument("--only", help="only the instances whose graph spec contains this text")
    ap.add_argument("--report", action="store_true", help="reprint the tables of OUT/results.json")
    ap.add_argument("--seeds-report", metavar="DIR,DIR,..",
                    help="guided against plain over several quality runs (one seed each), with the noise")
    ap.add_argument("--best-from", metavar="DIR,DIR,..",
                    help="with --seeds-report: also count the best placements of these headroom/oracle runs")
    ap.add_argument("--scale-one", type=int, metavar="N", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.scale_one is not None:  # one size of the scale part, in the fresh process scale() starts
        print(json.dumps(scale_one(args.scale_one, args.env_max)))
        return
    if args.smoke:
        args.budgets, args.sizes, args.env_max, args.evals, args.islands, args.max_ops = "0.3", "60", 60, 200, 2, 60
        if args.out == DEFAULT_OUT:  # keep a measured run's results apart from a smoke run's
            args.out = "out/smoke/bench_place"
    common.start("bench_place", args)
    if args.seeds_report:
        dirs = [Path(d) for d in args.seeds_report.split(",")]
        runs = [json.loads((d / "results.json").read_text()) for d in dirs]
        missing = [str(d) for d, r in zip(dirs, runs) if "quality" not in r]
        if missing:
            sys.exit(f"bench_place: no quality results in {', '.join(missing)}; run --part quality there first")
        extra = [json.loads((Path(d) / "results.json").read_text()) for d in (args.best_from or "").split(",") if d]
        quality_runs = [r["quality"] for r in runs]
        report_seeds(seed_summary(quality_runs, best_seen(quality_runs, extra)), [str(d) for d in dirs])
        if all("raced_heuristics" in r["search"][b] for run in quality_runs for r in run for b in r["search"]):
            report_seeds(seed_summary(quality_runs, against="raced_heuristics"), [str(d) for d in dirs],
                         "the heuristics' race (the same race, the runner-up heuristic in the decode's place)")
        return
    out = Path(args.out)
    path = out / "results.json"
    if args.report:
        report(json.loads(path.read_text()))
        return
    out.mkdir(parents=True, exist_ok=True)
    results = json.loads(path.read_text()) if path.exists() and not args.smoke else {}
    instances = [q for q in (SMOKE_INSTANCES if args.smoke else QUALITY) if args.only is None or args.only in q[0]]
    if args.part in ("scale", "both"):
        results["scale"] = scale([int(x) for x in args.sizes.split(",")], args.env_max)
        path.write_text(json.dumps(results, indent=1))
    if args.part in ("quality", "both"):
        import torch

        torch.set_num_threads(1)
        results["quality"] = quality([float(x) for x in args.budgets.split(",")], args.seed, instances, args.policy)
        path.write_text(json.dumps(results, indent=1))
    if args.part == "starts" or args.smoke:
        results["starts"] = starts(args.evals, args.seed, instances, args.policy, args.max_ops)
        path.write_text(json.dumps(results, indent=1))
    if args.part == "headroom" or args.smoke:
        results["headroom"] = headroom(args.islands, args.evals, args.seed, instances, args.max_ops)
        path.write_text(json.dumps(results, indent=1))
    if args.part == "oracle" or args.smoke:
        if "quality" not in results:
            sys.exit(f"bench_place: --part oracle takes plain local search's evaluations from {path}'s quality "
                     "results; run --part quality with this --out first (or copy its results.json there)")
        results["oracle"] = oracle(results["quality"], args.islands, args.evals, args.seed, instances, args.max_ops,
                                   results.get("headroom", []))
        path.write_text(json.dumps(results, indent=1))
    report(results)
    if args.smoke:
        smoke_checks(results)


if __name__ == "__main__":
    main()
