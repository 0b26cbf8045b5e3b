"""GPU check of the real backend (``envs_real``), in under 5 minutes.

On a GPU machine::

    python -m benchmarks.gpu_check                      # paper FFNN, every visible GPU
    python -m benchmarks.gpu_check --graph ffnn --n-devices 4 --json out/gpu_check.json
    python -m benchmarks.gpu_check --smoke              # paper/chainmm on 2 devices, one run each, no step 6

Steps (each prints what it found; the run stops early, reporting what it has, when the time
budget is spent):

1. Environment: torch, CUDA, GPUs, NVML.
2. Correctness: a small spec'd FFNN on every placement kind; outputs must equal the
   single-device reference (placement never changes the math), dependencies and the WC order hold.
3. Calibration of the graph on the devices (op times, per-op overhead, link fits).
4. Real runs of several placements (single device, round-robin, blocks, the critical-path
   heuristic, random) with NVML sampling: median makespans, per-run spread, utilisation, power,
   energy, NVLink/PCIe traffic.
5. Fidelity: Kendall tau and mean relative error of the calibrated simulation vs the measurements.
6. torch.distributed (``envs_real.distributed``): with 2 or more GPUs, 2 NCCL ranks (one process
   per GPU): outputs vs the single-device reference, dependencies, and point-to-point transfer
   times fitted by the simulator's link model (``latency + bytes / bandwidth``). With fewer GPUs
   NCCL is skipped (it cannot put two ranks on one GPU; the script says so) and the same code
   path runs on 2 Gloo CPU processes. ``--dist skip`` skips the step.

Works unchanged on one GPU (``--n-devices`` logical devices as stream groups on it, default 4) or
several (one logical device per GPU by default). Without a GPU it runs the CPU path (worker
threads; CPU timings are not GPU timings) so the script itself can be tested anywhere.
Exit status: 0 when every step ran without a failed run, 1 otherwise.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from benchmarks import common


@dataclass
class Args:
    """Command-line arguments.

    Attributes:
        graph: graph to place: a paper graph (``paper/ffnn``), a workload name (``ffnn``) or a file.
        devices: device spec (``auto``, ``cuda``, ``cuda:0,1``, ``cpu:4``).
        n_devices: logical devices (default: number of GPUs, or 4 on a single GPU or CPU).
        repeats: measured runs per placement (median) [count].
        warmup: warm-up runs per placement [count].
        n_random: random placements besides the structured ones [count].
        budget_s: stop starting new steps after this much time [s].
        timeout_s: limit of one run [s].
        dist: ``auto`` (step 6: NCCL on 2 GPUs, else Gloo) or ``skip``.
        json: optional path of a JSON report.
        smoke: a run of seconds (paper/chainmm, 2 devices, one run per placement, no step 6) whose
            failures raise :class:`benchmarks.common.SmokeCheckFailed`.
    """

    graph: str = "paper/ffnn"
    devices: str = "auto"
    n_devices: int = 0
    repeats: int = 5
    warmup: int = 2
    n_random: int = 3
    budget_s: float = 270.0
    timeout_s: float = 60.0
    dist: str = "auto"
    json: str = ""
    smoke: bool = False


def parse_args(argv: list[str] | None = None) -> Args:
    p = common.parser(__doc__, seed=None, writes=False)  # adds --smoke
    for f in fields(Args):
        if f.name != "smoke":
            p.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    args = Args(**vars(p.parse_args(argv)))
    if args.smoke:
        args.graph, args.n_devices, args.repeats, args.warmup, args.n_random = "paper/chainmm", 2, 1, 0, 0
        args.budget_s, args.dist = 120.0, "skip"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    common.start("gpu_check", args)
    t_start = time.perf_counter()
    import warnings

    import torch

    import doppler_gym as dg
    import envs_real
    from envs_real.calibration import sample_placements
    from envs_real.materialize import reference_outputs

    def left() -> float:
        return args.budget_s - (time.perf_counter() - t_start)

    report: dict = {"args": args.__dict__, "steps": {}}
    failures = 0

    # 1. environment ---------------------------------------------------------------------------
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        devs = envs_real.parse_devices(args.devices)
    n_gpu = torch.cuda.device_count() if torch.cuda.is_available() else 0
    n_dev = args.n_devices or (
        len(set(devs.physical)) if devs.kind == "cuda" and len(set(devs.physical)) > 1 else 4
    )
    gpus = [torch.cuda.get_device_name(i) for i in range(n_gpu)]
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {n_gpu} GPU(s): {gpus}")
    print(f"devices: {devs.describe(n_dev)}")
    mon = envs_real.NvmlMonitor(sorted(set(devs.mapping(n_dev))) if devs.kind == "cuda" else ["cpu"], 0.05)
    nvml = mon.start().stop()
    print(f"NVML: {'available' if nvml['available'] else 'unavailable: ' + str(nvml['reason'])}")
    report["steps"]["environment"] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpus": gpus,
        "device_kind": devs.kind,
        "n_devices": n_dev,
        "mapping": list(devs.mapping(n_dev)),
        "nvml_available": nvml["available"],
        "nvml_reason": nvml.get("reason"),
    }
    topo = dg.Topology.uniform(n_dev)

    # 2. correctness ---------------------------------------------------------------------------
    w = dg.workloads.build("ffnn", batch=256, d_in=256, hidden=256, layers=2, blocks=2)
    be = envs_real.RealBackend(
        devs, repeats=1, warmup=0, keep_outputs=True, workload=w, timeout_s=args.timeout_s
    )
    ref = reference_outputs(be.materialized(w.graph))
    worst, ok = 0.0, True
    for name, a, prio in sample_placements(w.graph, topo, n_random=2):
        for cfg in (dg.SimConfig(), dg.SimConfig(queue_order="priority")):
            tr = be.execute(w.graph, topo, a, prio, cfg)
            if tr.error is not None:
                print(f"  correctness {name}/{cfg.queue_order}: FAILED {tr.error}")
                ok = False
                continue
            diff = max(float((be.last_outputs[v] - ref[v]).abs().max()) for v in range(w.graph.n_ops))
            deps = all(tr.start[v] >= tr.end[u] - 1e-9 for u, v in zip(w.graph.src, w.graph.dst))
            worst = max(worst, diff)
            ok &= deps and diff < 1e-3
    print(
        f"correctness: {'ok' if ok else 'FAILED'} (max |real - reference| = {worst:.2e}) "
        f"[{time.perf_counter() - t_start:.1f} s]"
    )
    failures += not ok
    report["steps"]["correctness"] = {"ok": ok, "max_abs_diff": worst}
    be.close()

    # 3. calibration ---------------------------------------------------------------------------
    graph = dg.instances.resolve_graph(args.graph)
    be = envs_real.RealBackend(
        devs,
        repeats=args.repeats,
        warmup=args.warmup,
        timeout_s=args.timeout_s,
        monitor=True,
        monitor_interval_s=0.02,
    )
    t = time.perf_counter()
    try:
        cal = envs_real.calibrate(graph, backend=be, n_devices=n_dev, reps=args.repeats)
    except envs_real.WorkloadTooLarge as exc:  # a GPU-sized workload on the CPU path: say so, stop here
        print(f"calibration refused: {exc}")
        report["steps"]["calibration"] = {"refused": str(exc)}
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(report, indent=1, default=_json_default))
        common.check(not args.smoke, f"calibration refused on {devs.kind}: {exc}")
        return 1
    fits = {
        k: {"latency_us": v["latency_s"] * 1e6, "bandwidth_GBps": v["bandwidth_Bps"] / 1e9}
        for k, v in cal.transfer_fits.items()
    }
    mat = be.materialized(graph)
    print(
        f"calibration of {graph.name} ({graph.n_ops} ops, {mat.synthetic.sum()} synthetic at scale "
        f"{mat.scale:.3g}): ops {cal.op_time.sum() * 1e3:.2f} ms in total, overhead "
        f"{cal.overhead_s * 1e6:.1f} us/op, links {fits} "
        f"[{time.perf_counter() - t:.1f} s]"
    )
    report["steps"]["calibration"] = {
        "graph": graph.name,
        "n_ops": graph.n_ops,
        "synthetic_ops": int(mat.synthetic.sum()),
        "scale": mat.scale,
        "op_time_total_s": float(cal.op_time.sum()),
        "overhead_s": cal.overhead_s,
        "links": fits,
    }

    # 4. placements with NVML ------------------------------------------------------------------
    runs = []
    placements = sample_placements(cal.graph, cal.topology, n_random=args.n_random, config=cal.config)
    measured = []
    for name, a, prio in placements:
        if left() < 20:
            print(f"  (budget: skipping the remaining placements after {len(measured)})")
            break
        tr = be.execute(cal.graph, cal.topology, a, prio, cal.config)
        rep = be.last_report
        sim = cal.simulate(a, prio)
        if tr.error is not None:
            failures += 1
            print(f"  {name:<14} FAILED: {tr.error}")
            runs.append({"placement": name, "error": tr.error})
            continue
        spread = (max(rep.makespans) - min(rep.makespans)) / tr.makespan if tr.makespan > 0 else 0.0
        nv = _nvml_line(rep.monitor)
        print(
            f"  {name:<14} real {tr.makespan * 1e3:9.3f} ms (spread {spread:5.1%})  "
            f"sim {sim * 1e3:9.3f} ms  {nv}"
        )
        measured.append((name, a, prio))
        runs.append(
            {
                "placement": name,
                "real_s": tr.makespan,
                "runs_s": rep.makespans,
                "sim_s": sim,
                "monitor": {k: v for k, v in rep.monitor.items() if k != "devices"}
                | {
                    "devices": [
                        {k: v for k, v in d.items() if k != "series"} for d in rep.monitor.get("devices", [])
                    ]
                },
            }
        )
    report["steps"]["placements"] = runs

    # 5. fidelity ------------------------------------------------------------------------------
    if len(measured) >= 2:
        # re-measure is not needed: fidelity runs each placement again (a second sample of noise)
        if left() > 15:
            fid = envs_real.fidelity(cal, be, placements=measured)
        else:
            from scipy.stats import kendalltau

            s = np.array([r["sim_s"] for r in runs if "sim_s" in r])
            m = np.array([r["real_s"] for r in runs if "real_s" in r])
            tau = kendalltau(s, m)
            fid = envs_real.FidelityReport(
                [r["placement"] for r in runs if "real_s" in r],
                s,
                m,
                float(tau.statistic),
                float(tau.pvalue),
                float(np.mean(np.abs(s - m) / m)),
                float(np.max(np.abs(s - m) / m)),
                devs.kind,
            )
        print("fidelity:")
        print("  " + fid.summary().replace("\n", "\n  "))
        report["steps"]["fidelity"] = {
            "kendall_tau": fid.kendall_tau,
            "p_value": fid.p_value,
            "mean_relative_error": fid.mean_relative_error,
            "max_relative_error": fid.max_relative_error,
            "names": fid.names,
            "simulated_s": fid.simulated.tolist(),
            "measured_s": fid.measured.tolist(),
            "caveat": fid.caveat,
        }
        failures += sum(e is not None for e in fid.errors)
    # 6. torch.distributed ---------------------------------------------------------------------
    if args.dist == "skip":
        print("distributed: skipped (--dist skip)")
        report["steps"]["distributed"] = {"skipped": "--dist skip"}
    elif left() < 60:
        print(f"distributed: skipped (budget: {left():.0f} s left, the step needs about 60 s)")
        report["steps"]["distributed"] = {"skipped": "time budget"}
    else:
        step = _distributed_check(n_gpu, args.timeout_s)
        report["steps"]["distributed"] = step
        failures += not step["ok"]
    total = time.perf_counter() - t_start
    report["total_s"] = total
    print(f"total {total:.1f} s; {'OK' if failures == 0 else f'{failures} failure(s)'}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1, default=_json_default))
    be.close()
    common.check(not args.smoke or failures == 0, f"{failures} failure(s): see the steps above")
    return 0 if failures == 0 else 1


def _distributed_check(n_gpu: int, timeout_s: float) -> dict:
    """Step 6: NCCL ranks on two GPUs, else (saying why) Gloo ranks on CPU processes."""
    import torch

    import doppler_gym as dg
    import envs_real
    from benchmarks.bench_real_dist import SIZES, fit, measure
    from envs_real.calibration import sample_placements
    from envs_real.distributed import shutdown
    from envs_real.materialize import reference_outputs

    t0 = time.perf_counter()
    if n_gpu >= 2:
        spec, skipped = "nccl:0,1", None
    else:
        skipped = (
            f"NCCL path skipped: it needs 2 GPUs and {n_gpu} is visible (NCCL cannot put two ranks on one "
            f"GPU); checking the torch.distributed code path with 2 Gloo CPU processes instead"
        )
        spec = "gloo:2"
        print(f"distributed: {skipped}")
    step: dict = {"devices": spec, "skipped": skipped, "ok": True}
    try:
        w = dg.workloads.build("ffnn", batch=128, d_in=128, hidden=128, layers=2, blocks=2)
        be = envs_real.RealBackend(spec, repeats=1, warmup=1, keep_outputs=True, workload=w, timeout_s=timeout_s)
        topo = dg.Topology.uniform(2)
        device = "cuda:0" if spec.startswith("nccl") else "cpu"
        prev = torch.get_num_threads()
        torch.set_num_threads(1)
        ref = reference_outputs(be.materialized(w.graph), device)
        torch.set_num_threads(prev)
        worst, deps = 0.0, True
        for name, a, prio in sample_placements(w.graph, topo, n_random=1)[1:]:
            tr = be.execute(w.graph, topo, a, prio, dg.SimConfig(queue_order="priority"))
            if tr.error is not None:
                print(f"  {spec} {name}: FAILED {tr.error}")
                step["ok"] = False
                continue
            diffs = [float((be.last_outputs[v] - ref[v].cpu()).abs().max()) for v in range(w.graph.n_ops)]
            worst = max(worst, *diffs)
            deps &= all(tr.start[v] >= tr.end[u] - 1e-9 for u, v in zip(w.graph.src, w.graph.dst))
        step["ok"] &= deps and worst < 1e-3
        step.update(max_abs_diff=worst, dependencies=deps, monitor=be.last_report.monitor.get("available"))
        print(f"distributed {spec}: outputs {'ok' if worst < 1e-3 else 'WRONG'} (max |real - reference| = "
              f"{worst:.2e}), dependencies {'ok' if deps else 'VIOLATED'}")
        res = measure(spec, SIZES, reps=3, timeout_s=timeout_s)
        f = fit(res)
        step["transfers"] = {"sizes_B": res["sizes_B"], "delay_s": res["delay_s"], "transfer_s": res["transfer_s"],
                             "latency_s": f["latency_s"], "bandwidth_Bps": f["bandwidth_Bps"], "r2": f["r2"]}
        print(f"  p2p transfers: latency {f['latency_s'] * 1e6:.0f} us, bandwidth {f['bandwidth_Bps'] / 1e9:.3g} GB/s, "
              f"R^2 {f['r2']:.3f} [{time.perf_counter() - t0:.1f} s]")
    except Exception as exc:  # noqa: BLE001  report and go on
        step["ok"], step["error"] = False, f"{type(exc).__name__}: {exc}"
        print(f"distributed {spec}: FAILED {step['error']}")
    finally:
        shutdown()
    return step


def _nvml_line(mon: dict) -> str:
    if not mon.get("available"):
        return f"NVML: {mon.get('reason')}"
    parts = []
    for d in mon["devices"]:
        u = d["utilization_gpu_pct"]
        p = d["power_w"]
        e = d["energy_j"]
        nl = d["nvlink_tx_bytes"]
        parts.append(
            f"{d['device']}: util {u['mean']:.0f}%/{u['max']:.0f}%" if u else f"{d['device']}: util n/a"
        )
        parts[-1] += f", {p['mean']:.0f} W" if p else ", power n/a"
        parts[-1] += f", {e:.2f} J" if e is not None else ""
        parts[-1] += f", NVLink tx {nl / 1e6:.1f} MB" if nl is not None else ""
    return "; ".join(parts)


def _json_default(obj: object) -> object:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.integer, np.floating)):
        return obj.item()
    return str(obj)


if __name__ == "__main__":
    sys.exit(main())
