"""Simulator and real backend side by side over a set of placements (``doppler eval --backend real``).

:func:`compare_placements` measures each placement on real devices (:class:`RealBackend`, median
of ``repeats`` runs), next to two predictions: the simulator's on the caller's instance (its own
topology and unit, e.g. the ``doppler eval`` table) and the calibrated simulator's
(:func:`envs_real.calibrate`: op and link times profiled on these devices, in seconds). It reports
the rank agreement of each prediction with the measurements (Kendall tau,
``scipy.stats.kendalltau``) and their mean relative error (``|sim - real| / real``; for the
caller's simulator only when its unit is seconds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology


@dataclass
class SimRealComparison:
    """Simulated vs measured makespans of ``k`` placements.

    Attributes:
        names: ``(k,)`` placement labels.
        simulated: ``(k,) float64`` the caller's simulator [``sim_unit``].
        calibrated: ``(k,) float64`` the calibrated simulator [s].
        measured: ``(k,) float64`` real median makespans [s] (NaN where the run failed).
        errors: per placement, the real run's error or ``None``.
        tau_simulated, tau_calibrated: Kendall tau of each prediction vs the measurements (NaN
            with fewer than two measured placements or constant values).
        mre_simulated: mean relative error of ``simulated`` (``None`` unless ``sim_unit == "s"``).
        mre_calibrated: mean relative error of ``calibrated``.
        sim_unit: unit of ``simulated``.
        devices: what ran the placements.
        notes: caveats (CPU timings, calibration).
    """

    names: list[str]
    simulated: np.ndarray
    calibrated: np.ndarray
    measured: np.ndarray
    errors: list[str | None]
    tau_simulated: float
    tau_calibrated: float
    mre_simulated: float | None
    mre_calibrated: float
    sim_unit: str
    devices: str
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN as ``None``)."""

        def num(x: float | None) -> float | None:
            return None if x is None or not np.isfinite(x) else float(x)

        return {
            "devices": self.devices,
            "sim_unit": self.sim_unit,
            "rows": [
                {"name": n, "simulated": num(s), "calibrated_s": num(c), "measured_s": num(m), "error": e}
                for n, s, c, m, e in zip(self.names, self.simulated, self.calibrated, self.measured, self.errors)
            ],
            "kendall_tau_simulated": num(self.tau_simulated),
            "kendall_tau_calibrated": num(self.tau_calibrated),
            "mean_relative_error_simulated": num(self.mre_simulated),
            "mean_relative_error_calibrated": num(self.mre_calibrated),
            "notes": list(self.notes),
        }


def rank_agreement(predicted: np.ndarray, measured: np.ndarray) -> tuple[float, float | None]:
    """``(Kendall tau, mean relative error)`` over the entries where both are finite."""
    from scipy.stats import kendalltau

    p, m = np.asarray(predicted, np.float64), np.asarray(measured, np.float64)
    ok = np.isfinite(p) & np.isfinite(m) & (m > 0)
    tau = float("nan")
    if ok.sum() >= 2 and np.ptp(p[ok]) > 0 and np.ptp(m[ok]) > 0:
        tau = float(kendalltau(p[ok], m[ok]).statistic)
    mre = float(np.mean(np.abs(p[ok] - m[ok]) / m[ok])) if ok.any() else float("nan")
    return tau, mre


def compare_placements(
    graph: DataflowGraph,
    topology: Topology,
    config: SimConfig,
    placements: Sequence[tuple[str, np.ndarray, np.ndarray | None, float]],
    devices: object = "auto",
    *,
    repeats: int = 3,
    warmup: int = 1,
    calibration_reps: int = 3,
    seed: int = 0,
    backend: Any = None,
) -> SimRealComparison:
    """Measure ``placements`` on ``devices`` next to the caller's and the calibrated simulator.

    Args:
        graph, topology, config: the caller's instance (its simulated makespans are given).
        placements: ``(name, assignment (n_ops,), priorities (n_ops,) or None, simulated makespan)``.
        devices: the real device spec (``"cpu:2"``, ``"cuda:0,1"``, ``"gloo:2"``, ...); its logical
            device count is ``topology.n_devices``.
        repeats, warmup: the real backend's runs per placement.
        calibration_reps: repetitions of each calibration measurement.
        seed: seed of the operands.
        backend: a ready :class:`~envs_real.backend.RealBackend` instead of ``devices``.

    Raises:
        envs_real.estimate.WorkloadTooLarge: the workload is too large for these devices (before
            anything runs; the message says how to shrink it).
    """
    from envs_real.backend import RealBackend
    from envs_real.calibration import calibrate

    be = backend if backend is not None else RealBackend(devices, repeats=repeats, warmup=warmup, seed=seed)
    n_dev = topology.n_devices
    cal = calibrate(
        graph, backend=be, n_devices=n_dev, queue_order=config.queue_order, lanes=config.streams,
        reps=calibration_reps,
    )
    names, sims, cals, reals, errors = [], [], [], [], []
    for name, assign, prio, sim in placements:
        assign = np.asarray(assign, np.int64)
        names.append(name)
        sims.append(float(sim))
        cals.append(cal.simulate(assign, prio))
        tr = be.execute(cal.graph, cal.topology, assign, prio, cal.config)
        reals.append(float(tr.makespan) if tr.error is None else float("nan"))
        errors.append(tr.error)
    s, c, m = np.array(sims), np.array(cals), np.array(reals)
    tau_s, mre_s = rank_agreement(s, m)
    tau_c, mre_c = rank_agreement(c, m)
    notes = list(cal.notes)
    return SimRealComparison(
        names, s, c, m, errors, tau_s, tau_c, mre_s if config.time_unit == "s" else None, mre_c,
        config.time_unit, be.devices.describe(n_dev), notes,
    )


def print_comparison(cmp: SimRealComparison, console: Any) -> None:
    """A rich table (one row per placement) and the headline figures, on ``console``."""
    from rich.table import Table

    table = Table(title=f"simulator vs real on {cmp.devices}")
    for label in ("placement", f"simulated [{cmp.sim_unit}]", "calibrated sim [s]", "measured [s]", "rel. err"):
        table.add_column(label, justify="left" if label == "placement" else "right")
    for name, s, c, m, err in zip(cmp.names, cmp.simulated, cmp.calibrated, cmp.measured, cmp.errors):
        rel = abs(c - m) / m if np.isfinite(m) and m > 0 else float("nan")
        table.add_row(name, f"{s:.6g}", f"{c:.6g}", f"{m:.6g}" if err is None else f"failed: {err[:40]}", f"{rel:.1%}")
    console.print(table)
    mre_s = "n/a (units differ)" if cmp.mre_simulated is None else f"{cmp.mre_simulated:.1%}"
    console.print(
        f"rank agreement with the measurements (Kendall tau): simulator {cmp.tau_simulated:.3f}, calibrated "
        f"simulator {cmp.tau_calibrated:.3f}; mean relative error: simulator {mre_s}, calibrated "
        f"{cmp.mre_calibrated:.1%}"
    )
    for note in cmp.notes:
        console.print(f"note: {note}", style="dim")
