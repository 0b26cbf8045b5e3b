"""The MILP teacher of ``Doppler-Collective-v0``: the optimal schedule, replayed epoch by epoch.

:func:`teacher_sends` solves the instance once with ``dg.comm.solve_demand(..., method="milp")``
(CP-SAT, minimum epochs) and cleans the schedule for replay in the env: for each
(commodity, GPU) only the send with the earliest arrival is kept (later copies are redundant,
and the env masks a send to a GPU that already holds or expects the chunk); sends into the
commodity's source are dropped. The result keeps the optimum's epoch count.

The MILP needs OR-Tools (CP-SAT), from the ``solvers`` extra: ``pip install doppler-gym[solvers]``.
Without it the env runs; only the teacher raises ``ImportError`` saying so.
"""

from __future__ import annotations

import importlib.util

import numpy as np

from doppler_gym.comm.schedule import Schedule
from doppler_gym.comm.solve import solve_demand
from doppler_gym.envs.collective.types import CollectiveInstance


def milp_schedule(inst: CollectiveInstance, time_limit: float = 60.0, seed: int = 0) -> Schedule:
    """The validated minimum-epoch MILP schedule of ``inst`` (same chunk size and ``tau``).

    Args:
        inst: the env's instance.
        time_limit: the solver's budget [s].
        seed: CP-SAT's random seed.

    Raises:
        ImportError: OR-Tools is not installed (``pip install doppler-gym[solvers]``).
    """
    if importlib.util.find_spec("ortools") is None:
        raise ImportError("Doppler-Collective-v0's teacher (teacher_schedule, teacher_actions, teacher_mask) solves "
                          "the collective's MILP with OR-Tools (CP-SAT), which is not installed; run "
                          "`pip install doppler-gym[solvers]` (or `pip install ortools`). The env itself runs "
                          "without it.")
    sched = solve_demand(inst.topology, inst.demand, inst.buffer_bytes, epoch=inst.epoch, method="milp",
                         time_limit=time_limit, seed=seed, multiplier=inst.multiplier)
    if not (np.isclose(sched.tau, inst.tau) and np.isclose(sched.chunk_bytes, inst.chunk_bytes)):
        raise RuntimeError(f"teacher: the MILP used tau={sched.tau}, chunk={sched.chunk_bytes} but the env "
                           f"tau={inst.tau}, chunk={inst.chunk_bytes} (a bug)")
    return sched


def teacher_sends(inst: CollectiveInstance, schedule: Schedule) -> np.ndarray:
    """``(n_sends, 3) int64`` rows ``(commodity, link, epoch)`` of ``schedule`` to replay, sorted by
    epoch, without redundant deliveries (see the module docstring)."""
    topo = inst.topology
    sends = schedule.sends.astype(np.int64)
    if sends.size == 0:
        return np.zeros((0, 3), np.int64)
    x, link, k = sends[:, 0], sends[:, 1], sends[:, 2]
    head = topo.dst[link].astype(np.int64)
    arrive = k + inst.offset[link]
    keep = np.ones(len(sends), bool)
    to_gpu = ~topo.is_switch[head]
    keep &= ~(to_gpu & (head == inst.demand.source[x]))
    rows = np.flatnonzero(keep & to_gpu)
    # earliest arrival first (ties: earliest send, then lowest link) -> keep the first per (x, head)
    order = rows[np.lexsort((link[rows], k[rows], arrive[rows]))]
    _, first = np.unique(x[order] * topo.n_nodes + head[order], return_index=True)
    drop = np.setdiff1d(order, order[first])
    keep[drop] = False
    out = sends[keep]
    return out[np.argsort(out[:, 2], kind="stable")]
