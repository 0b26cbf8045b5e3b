"""The final placement measured on the real system, for the summary of a run with a ``real`` stage."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from agents.training.args import TrainArgs
    from agents.training.instance import Instance


def measure_placement(args: TrainArgs, inst: Instance, assignment: Any, order: Any) -> dict[str, Any]:
    """Run a placement once more on the ``real`` stage's env (:func:`agents.training.instance.make_stage_env`)
    and return what it measured.

    The placement (``assignment``: ``(n_ops,)`` devices; ``order``: ``(n_ops,)`` SEL order, the queue
    priorities) goes straight to the env's backend on the env's own instance (for ``Doppler-Real-v0``
    the calibrated graph and topology, so ``simulated`` is the calibrated prediction in the same
    unit as ``makespan``).

    Returns:
        ``{"makespan", "simulated", "time_unit", "error", "real"}``: the measured makespan (the
        backend's median of its repeats), the simulator's on the env's instance, the unit, the
        run's error (``None`` if it ran) and the backend's report (``RunReport.as_info()``) if any.
    """
    from agents.training.instance import make_stage_env
    from doppler_gym.sim.api import simulate

    env = make_stage_env(args, inst, "real")
    try:
        env.reset(seed=args.seed)
        base = env.unwrapped
        assign = np.asarray(assignment, dtype=np.int64)
        priorities = np.empty(assign.shape[0], np.float64)
        priorities[np.asarray(order, dtype=np.int64)] = np.arange(assign.shape[0], dtype=np.float64)
        trace = base.backend.execute(base.graph, base.topology, assign, priorities, base.sim_config)
        sim = simulate(base.graph, assign, base.topology, priorities=priorities, config=base.sim_config)
        report = getattr(base.backend, "last_report", None)
        return {
            "makespan": float(trace.makespan), "simulated": float(sim.makespan), "time_unit": trace.time_unit,
            "error": getattr(trace, "error", None),
            "real": report.as_info() if hasattr(report, "as_info") else None,
        }
    finally:
        env.close()
