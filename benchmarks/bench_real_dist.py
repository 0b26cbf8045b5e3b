"""Gloo (or NCCL) transfer times of the torch.distributed real backend vs the simulator's link model.

    python -m benchmarks.bench_real_dist                       # 2 Gloo ranks on this host
    python -m benchmarks.bench_real_dist --devices nccl:0,1    # two GPUs, NCCL
    python -m benchmarks.bench_real_dist --out out/bench_real_dist
    python -m benchmarks.bench_real_dist --smoke               # 2 Gloo ranks, three sizes, one chain each

A chain of synthetic ops alternates between rank 0 and rank 1, so each edge is one point-to-point
transfer (``isend`` on the producer's rank, ``irecv`` on the consumer's) of a chosen size. Per
size the median over ``--reps`` chains of:

- **transfer**: ``irecv`` completion minus ``isend`` post (both ranks on one host share one clock);
- **delay**: consumer start minus producer end (the transfer plus the hand-off to the consumer).

The simulator's link model is ``latency + bytes / bandwidth`` (``Topology``, ``link_model="ideal"``).
It is fitted to the delays by least squares (:func:`envs_real.calibration.fit_latency_bandwidth`),
reported with R^2 and each size's relative error, and a held-out check: a chain with mixed sizes is
simulated on the fitted topology (op times from the measured op durations) and compared with its
measured makespan. With ``--compare-threads`` the same chain runs on the threaded backend
(``cpu:2``, a clone per transfer) for reference.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from benchmarks import common

SIZES = (4e3, 64e3, 1e6, 4e6, 16e6)  # [B]


def chain_graph(sizes: list[float], name: str = "p2p-probe"):
    """A chain whose edge ``k`` carries ``sizes[k]`` bytes (synthetic ops of 2 FLOP)."""
    import doppler_gym as dg

    n = len(sizes) + 1
    out = np.array([*sizes, 4.0], dtype=np.float64)
    return dg.DataflowGraph(src=np.arange(n - 1), dst=np.arange(1, n), flops=np.full(n, 2.0), out_bytes=out,
                            name=name, units="physical")


def measure(devices: str, sizes: tuple[float, ...], reps: int, timeout_s: float = 60.0) -> dict:
    """Per size, the median transfer and delay [s] over ``reps`` alternating chains (one call)."""
    import doppler_gym as dg
    from envs_real import RealBackend

    per_size = [float(s) for s in sizes for _ in range(2)]  # each size twice per chain: both directions
    g = chain_graph(per_size)
    assign = np.arange(g.n_ops) % 2
    one = RealBackend(devices, repeats=1, warmup=0, synthetic_scale=1.0, timeout_s=timeout_s,
                      max_estimated_seconds=None)
    t0 = time.perf_counter()
    one.execute(g, dg.Topology.uniform(2), assign)  # warm-up (and, for ranks, their start)
    transfers: dict[float, list[float]] = {float(s): [] for s in sizes}
    delays: dict[float, list[float]] = {float(s): [] for s in sizes}
    op_times: list[float] = []
    makespans: list[float] = []
    for _ in range(reps):
        t = one.execute(g, dg.Topology.uniform(2), assign)
        if t.error is not None:
            raise RuntimeError(f"{devices}: the probe failed: {t.error}")
        makespans.append(float(t.makespan))
        for k in range(g.n_edges):
            size = per_size[k]
            transfers[size].append(float(t.edge_end[k] - t.edge_start[k]))
            delays[size].append(float(t.start[k + 1] - t.end[k]))
        op_times.extend((t.end - t.start).tolist())
    return {
        "devices": devices,
        "sizes_B": [float(s) for s in sizes],
        "transfer_s": [float(np.median(transfers[float(s)])) for s in sizes],
        "delay_s": [float(np.median(delays[float(s)])) for s in sizes],
        "op_time_s": float(np.median(op_times)),
        "chain_makespan_s": float(np.median(makespans)),
        "wall_s": time.perf_counter() - t0,
    }


def fit(result: dict, relative: bool = False) -> dict:
    """``latency + bytes / bandwidth`` fitted to the delays: the fit, R^2 and per-size errors.

    ``relative=False``: least squares on the delays (what :func:`envs_real.calibrate` does, dominated
    by the largest transfers); ``True``: least squares on the relative errors (weights ``1/delay``),
    so small transfers count as much as large ones."""
    from envs_real.calibration import fit_latency_bandwidth

    x, y = np.array(result["sizes_B"]), np.array(result["delay_s"])
    if relative:
        slope, icpt = np.polyfit(x, y, 1, w=1.0 / y)
        lat, bw = max(0.0, float(icpt)), 1.0 / max(float(slope), 1e-15)
    else:
        lat, bw = fit_latency_bandwidth(x, y)
    pred = lat + x / bw
    ss_res, ss_tot = float(np.sum((y - pred) ** 2)), float(np.sum((y - y.mean()) ** 2))
    return {"latency_s": lat, "bandwidth_Bps": bw, "r2": 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan"),
            "predicted_s": pred.tolist(), "relative_error": (np.abs(pred - y) / y).tolist()}


def held_out(devices: str, model: dict, op_time_s: float, seed: int = 0, repeats: int = 3) -> dict:
    """A chain of mixed sizes: simulated on the fitted link model vs measured (median of ``repeats``)."""
    import doppler_gym as dg
    from envs_real import RealBackend

    rng = np.random.default_rng(seed)
    sizes = list(np.exp(rng.uniform(np.log(8e3), np.log(8e6), 12)))
    g = chain_graph(sizes, "p2p-held-out")
    assign = np.arange(g.n_ops) % 2
    be = RealBackend(devices, repeats=repeats, warmup=1, synthetic_scale=1.0, max_estimated_seconds=None)
    tr = be.execute(g, dg.Topology.uniform(2), assign)
    topo = dg.Topology.uniform(2, speed=1.0, bandwidth=model["bandwidth_Bps"], latency=model["latency_s"])
    timed = dg.DataflowGraph(src=g.src, dst=g.dst, flops=np.full(g.n_ops, op_time_s), out_bytes=g.out_bytes,
                             name=g.name, units="physical")
    sim = float(dg.simulate(timed, assign, topo, config=dg.SimConfig(cost_model="topology")).makespan)
    return {"simulated_s": sim, "measured_s": float(tr.makespan),
            "relative_error": abs(sim - tr.makespan) / tr.makespan if tr.error is None else None,
            "error": tr.error}


def report(name: str, res: dict, f: dict) -> None:
    print(f"\n{name}: {res['devices']}  (one op {res['op_time_s'] * 1e6:.0f} us)")
    print(f"{'size':>10} {'transfer':>12} {'delay':>12} {'model':>12} {'rel.err':>8}")
    for s, t, d, p, e in zip(res["sizes_B"], res["transfer_s"], res["delay_s"], f["predicted_s"],
                             f["relative_error"]):
        print(f"{s / 1e3:>8.0f}kB {t * 1e6:>10.0f}us {d * 1e6:>10.0f}us {p * 1e6:>10.0f}us {e:>8.1%}")
    print(f"fit: latency {f['latency_s'] * 1e6:.0f} us, bandwidth {f['bandwidth_Bps'] / 1e9:.3g} GB/s, "
          f"R^2 {f['r2']:.3f}")


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__)
    p.add_argument("--devices", default="gloo:2", help="two ranks: gloo:2 or nccl:0,1")
    p.add_argument("--reps", type=int, default=5, help="chains per size (medians)")
    p.add_argument("--compare-threads", action="store_true", help="also the threaded backend (cpu:2)")
    a = p.parse_args(argv)
    sizes, repeats = SIZES, 3
    if a.smoke:
        sizes, a.reps, repeats = SIZES[:3], 1, 1
    common.start("bench_real_dist", a)
    from envs_real.distributed import shutdown

    out: dict = {"runs": {}}
    try:
        t0 = time.perf_counter()
        res = measure(a.devices, sizes, a.reps)
        f, fr = fit(res), fit(res, relative=True)
        report("torch.distributed, least-squares fit", res, f)
        report("torch.distributed, relative fit", res, fr)
        hos = {}
        for label, model in (("least-squares", f), ("relative", fr)):
            ho = hos[label] = held_out(a.devices, model, res["op_time_s"], a.seed, repeats)
            print(f"held-out mixed-size chain ({label} fit): simulated {ho['simulated_s'] * 1e3:.2f} ms, measured "
                  f"{ho['measured_s'] * 1e3:.2f} ms, relative error "
                  f"{ho['relative_error']:.1%}" if ho["relative_error"] is not None else f"failed: {ho['error']}")
        out["runs"][a.devices] = {"measure": res, "fit": f, "fit_relative": fr, "held_out": hos}
        if a.smoke:
            for name, value in (("transfer", min(res["transfer_s"])), ("delay", min(res["delay_s"])),
                                ("fitted bandwidth", f["bandwidth_Bps"])):
                common.finite_positive(value, f"{a.devices}: {name}")
            common.check(all(ho["error"] is None for ho in hos.values()), f"held-out chain failed: {hos}")
        if a.compare_threads:
            res_t = measure("cpu:2", sizes, a.reps)
            f_t, fr_t = fit(res_t), fit(res_t, relative=True)
            report("threads (clone per transfer), least-squares fit", res_t, f_t)
            report("threads (clone per transfer), relative fit", res_t, fr_t)
            out["runs"]["cpu:2"] = {"measure": res_t, "fit": f_t, "fit_relative": fr_t}
        print(f"\ntotal {time.perf_counter() - t0:.1f} s")
    finally:
        shutdown()
    common.write_results(a.out, "bench_real_dist", a, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
