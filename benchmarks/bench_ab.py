"""Is this tree slower than an earlier commit? Simulator timings of both, measured side by side.

Run from the repository root::

    python benchmarks/bench_ab.py --base bee8d72              # 6 rounds, alternating the two trees
    python benchmarks/bench_ab.py --base HEAD~5 --rounds 3
    python benchmarks/bench_ab.py --base bee8d72 --script bench_policy.py   # any benchmark, alternated

``--base`` is checked out as a detached git worktree in a temporary folder. Each round runs one
fresh process per tree (the order alternates round by round), each process importing its own tree's
``doppler_gym`` (``PYTHONPATH``) with one Numba thread. Reported per case: single ``simulate`` calls
and ``simulate_batch`` per assignment [us], the minimum over the rounds of each process's median
block, and the ratio new / base. On a shared machine run-to-run swings of 2x are common; the
minimum over several rounds is the figure to compare, and a case whose kernel did not change
between the trees shows the noise floor. With ``--script`` the named benchmark of each tree runs
instead, alternated the same way, and its output is printed as is. The exit status is always 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Timed in a child process of each tree; prints {case: [single_us, batch_us]} as JSON.
CHILD = r"""
import dataclasses, json, sys, time
import numpy as np
import doppler_gym as dg

def median_block(fn, reps, blocks=7):
    out = []
    for _ in range(blocks):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        out.append((time.perf_counter() - t0) / reps * 1e6)
    return float(np.median(out))

ref = dg.SimConfig.reference()
cases = [(f"{name} reference", dg.load_graph(name), None, ref)
         for name in ("paper/chainmm", "paper/ffnn", "paper/llama-layer", "paper/llama-layer-8gpu")]
cases += [(f"{name} fifo links, 2 streams", dg.load_graph(name), None,
           dataclasses.replace(ref, link_model="fifo", streams=2))
          for name in ("paper/ffnn", "paper/llama-layer-8gpu")]
cases.append(("llama-layer workload, v100x8-dgx1, fifo links", dg.workloads.make("llama-layer"),
              dg.Topology.preset("v100x8-dgx1"), dg.SimConfig(link_model="fifo")))
rng = np.random.default_rng(0)
out = {}
for label, graph, topology, config in cases:
    devices = 8 if ("8gpu" in label or topology is not None) else 4
    batch = rng.integers(0, devices, size=(2000, graph.n_ops)).astype(np.int64)
    one = batch[0].copy()
    dg.simulate(graph, one, topology=topology, config=config)
    dg.simulate_batch(graph, batch[:10], topology=topology, config=config)
    single = median_block(lambda: dg.simulate(graph, one, topology=topology, config=config), 2000)
    per_row = median_block(lambda: dg.simulate_batch(graph, batch, topology=topology, config=config), 1) / 2000
    out[label] = [single, per_row]
json.dump(out, sys.stdout)
"""


def run_tree(tree: Path, args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree), "NUMBA_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit to compare against (e.g. a hash or HEAD~3)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds, one process per tree each (default 6)")
    parser.add_argument("--script", help="a benchmark file name in benchmarks/ to alternate instead")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    with tempfile.TemporaryDirectory(prefix="doppler-ab-") as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), args.base], check=True)
        try:
            trees = {"base": base, "new": ROOT}
            results: dict[str, list[dict]] = {"base": [], "new": []}
            for r in range(args.rounds):
                for tag in (("base", "new") if r % 2 == 0 else ("new", "base")):
                    child = [str(trees[tag] / "benchmarks" / args.script)] if args.script else ["-c", CHILD]
                    proc = run_tree(trees[tag], child)
                    if proc.returncode != 0:
                        sys.exit(f"{tag} tree failed (round {r + 1}):\n{proc.stderr[-2000:]}")
                    if args.script:
                        print(f"===== round {r + 1}, {tag} ({trees[tag]})\n{proc.stdout}", flush=True)
                    else:
                        results[tag].append(json.loads(proc.stdout))
                        print(f"round {r + 1}/{args.rounds}: {tag} done", file=sys.stderr, flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    if args.script:
        return
    print(f"base {args.base} vs this tree; min over {args.rounds} processes of the median block, one Numba thread [us]")
    print(f"{'case':48s} {'single base':>11s} {'new':>8s} {'ratio':>6s} {'batch base':>11s} {'new':>8s} {'ratio':>6s}")
    for case in results["base"][0]:
        sb, sn = (min(r[case][0] for r in results[t]) for t in ("base", "new"))
        bb, bn = (min(r[case][1] for r in results[t]) for t in ("base", "new"))
        print(f"{case:48s} {sb:11.2f} {sn:8.2f} {sn / sb:6.2f} {bb:11.2f} {bn:8.2f} {bn / bb:6.2f}")


if __name__ == "__main__":
    main()
