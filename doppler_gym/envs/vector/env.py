"""``gym.make_vec("Doppler-Sim-v0", num_envs=N, vectorization_mode="vector_entry_point", ...)``: a native
Gymnasium vector env of ``N`` placement envs, stepped in one batched call.

:class:`PlacementVectorEnv` returns what ``gymnasium.vector.SyncVectorEnv`` over ``N`` single
``Doppler-Sim-v0`` envs with the same keywords returns (observations, rewards, terminations, truncations
and infos, equal for the same seeds and actions), in Gymnasium's default next-step autoreset mode, at a
fraction of the cost (``docs/results/bench_vector.md``). The batched core is
:class:`~doppler_gym.envs.vector.core.PlacementBatch`; seeding, autoreset and infos are
:class:`~doppler_gym.envs.batched.BatchVectorEnv`'s.

>>> envs = PlacementVectorEnv(num_envs=8, graph="paper/ffnn", topology=4)  # doctest: +SKIP
>>> obs, infos = envs.reset(seed=0)                                         # env i seeded with 0 + i
>>> obs, rewards, terminated, truncated, infos = envs.step(actions)         # (8,) arrays; obs["op_state"]: (8, 180, 3)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from doppler_gym.envs.batched import BatchVectorEnv
from doppler_gym.envs.vector.core import PlacementBatch


class PlacementVectorEnv(BatchVectorEnv):
    """``num_envs`` ``Doppler-Sim-v0`` envs in one batch (a ``gymnasium.vector.VectorEnv``).

    Args:
        num_envs: number of envs ``N``.
        sim_threads: Numba threads of the batched simulator calls (default 1; ``None``: tuned while stepping; see
            :class:`~doppler_gym.envs.vector.core.PlacementBatch`).
        **kwargs: :class:`~doppler_gym.envs.placement.PlacementEnv`'s keywords, the same for every env
            (``graph``, ``topology``, ``sim_config``, ``reward``, ``observation``, ``invalid_action``, ...).
            Refused with a ``ValueError`` that names the ``SyncVectorEnv`` path: ``stragglers``, memory
            tracking (``SimConfig(memory=...)``), a backend other than the simulator, a ``render_mode``.
            ``copy_obs=False`` returns the live batch arrays (valid until the next step or reset) instead
            of copies.

    Spaces: ``single_observation_space`` / ``single_action_space`` are the single env's;
    ``observation_space`` / ``action_space`` their batched forms (``Dict`` of ``(N, ...)`` boxes,
    ``MultiDiscrete([A] * N)`` with ``A = max_ops + max_devices``).

    Seeding: ``reset(seed=s)`` seeds env ``i`` with ``s + i`` (a list: one seed per env), as ``SyncVectorEnv``.
    Autoreset (``metadata["autoreset_mode"]``, next step): the step after an env terminates or truncates
    resets it (its action ignored), with reward 0, ``terminated = truncated = False`` and the reset info.
    ``reset(options={"reset_mask": (N,) bool})`` resets only the envs marked; the other options
    (``graph``/``topology``, as ``PlacementEnv.reset``) go to every env reset. Infos are Gymnasium's vector
    info dicts (``infos["makespan"]`` ``(N,)`` with the mask ``infos["_makespan"]``); where envs on graphs of
    different sizes finish in one step, the per-op entries (``assignment``, ``order``) are object arrays.
    """

    def __init__(self, num_envs: int = 1, sim_threads: int | None = 1, **kwargs: Any) -> None:
        super().__init__(PlacementBatch(num_envs, sim_threads=sim_threads, **kwargs))

    def _reset_envs(self, rows: np.ndarray, seeds: list[int | None], options: dict[str, Any] | None,
                    autoreset: bool) -> list[dict[str, Any]]:
        """Every env of ``rows`` gets the same ``options`` (``graph``/``topology``, as ``PlacementEnv.reset``)."""
        return self.core.reset(rows, seeds, [options] * rows.size)
