"""The imitation stage's state buffer (observations, masks, teacher sets, returns)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from doppler_gym.envs.observation import STATIC_KEYS

STATIC_TABLE_MIN = 16  # static-table entries before unreferenced ones are dropped


class StateBuffer:
    """Ring buffer of imitation states: observation, valid mask, teacher mask, return.

    Static observation arrays (``op_features``, ``edge_index``, ...: one copy per graph) are kept
    once in a table and referenced by index; the dynamic ones are copied per state (int64 arrays
    stored as int32). Graphs whose states have all been overwritten leave the table when it
    outgrows ``2 x`` the graphs still referenced (a graph mix brings a new graph every episode).
    Shapes: ``dyn[k]`` ``(capacity, *shape)``; ``mask``/``teacher`` ``(capacity, n_actions) int8``;
    ``returns`` ``(capacity,) float32``.
    """

    def __init__(self, capacity: int, observation_space: gym.spaces.Dict) -> None:
        self.capacity = int(capacity)
        self.space = observation_space
        self.static_keys = [k for k in observation_space.spaces if k in STATIC_KEYS]
        self.dyn_keys = [k for k in observation_space.spaces if k not in STATIC_KEYS]
        self.dyn = {k: np.zeros((capacity, *sp.shape), _store_dtype(sp.dtype))
                    for k, sp in observation_space.spaces.items() if k in self.dyn_keys}
        self.static_table: list[dict[str, np.ndarray]] = []
        self._static_stack: dict[str, np.ndarray] | None = None
        self.static_idx = np.zeros(capacity, np.int32)
        self.mask: np.ndarray | None = None  # allocated on the first add
        self.teacher: np.ndarray | None = None
        self.returns = np.zeros(capacity, np.float32)
        self.ptr = 0
        self.size = 0

    def add(self, obs: dict[str, np.ndarray], mask: np.ndarray, teacher: np.ndarray) -> int:
        """Store one state; returns its slot (for :meth:`set_return`)."""
        if self.mask is None:
            self.mask = np.zeros((self.capacity, mask.shape[0]), np.int8)
            self.teacher = np.zeros((self.capacity, mask.shape[0]), np.int8)
        i = self.ptr
        for k in self.dyn_keys:
            self.dyn[k][i] = obs[k]
        self.static_idx[i] = self._static_index(obs)
        self.mask[i] = mask
        self.teacher[i] = teacher
        self.returns[i] = 0.0
        self.ptr = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        return i

    def set_return(self, slots: Sequence[int], returns: Sequence[float]) -> None:
        self.returns[np.asarray(slots, np.int64)] = returns

    def _static_index(self, obs: dict[str, np.ndarray]) -> int:
        table = self.static_table
        # newest first: lockstep envs add states of the graphs they reset to last (entries are distinct,
        # so the match found is the same in any order)
        for j in range(len(table) - 1, -1, -1):
            if all(np.array_equal(table[j][k], obs[k]) for k in self.static_keys):
                return j
        if len(table) >= STATIC_TABLE_MIN:
            used = np.unique(self.static_idx[: self.size])
            if len(table) >= 2 * used.size:
                self._compact_static_table(used)
                table = self.static_table
        table.append({k: np.array(obs[k]) for k in self.static_keys})
        self._static_stack = None
        return len(table) - 1

    def _compact_static_table(self, used: np.ndarray) -> None:
        """Keep the table entries ``used`` (sorted: those stored states refer to); renumber ``static_idx``."""
        remap = np.zeros(len(self.static_table), np.int32)
        remap[used] = np.arange(used.size, dtype=np.int32)
        self.static_table = [self.static_table[j] for j in used.tolist()]
        self.static_idx[: self.size] = remap[self.static_idx[: self.size]]

    def sample(
        self, batch_size: int, rng: np.random.Generator,
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
        """``(obs, mask, teacher, returns)`` of ``batch_size`` states drawn uniformly with replacement."""
        idx = rng.integers(0, self.size, size=batch_size)
        if self._static_stack is None:
            self._static_stack = {k: np.stack([e[k] for e in self.static_table]) for k in self.static_keys}
        obs = {k: self.dyn[k][idx].astype(self.space[k].dtype, copy=False) for k in self.dyn_keys}
        sidx = self.static_idx[idx]
        obs.update({k: self._static_stack[k][sidx] for k in self.static_keys})
        return obs, self.mask[idx], self.teacher[idx], self.returns[idx]

    def state_dict(self) -> dict[str, Any]:
        n = self.size
        return {
            "ptr": self.ptr, "size": n,
            "dyn": {k: torch.from_numpy(v[:n].copy()) for k, v in self.dyn.items()},
            "static_idx": torch.from_numpy(self.static_idx[:n].copy()),
            "static_table": [{k: torch.from_numpy(np.array(v)) for k, v in e.items()} for e in self.static_table],
            "mask": None if self.mask is None else torch.from_numpy(self.mask[:n].copy()),
            "teacher": None if self.teacher is None else torch.from_numpy(self.teacher[:n].copy()),
            "returns": torch.from_numpy(self.returns[:n].copy()),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        n = min(int(state["size"]), self.capacity)
        self.size, self.ptr = n, int(state["ptr"]) % self.capacity
        for k, v in state["dyn"].items():
            if k in self.dyn:
                self.dyn[k][:n] = v.numpy()[:n]
        self.static_idx[:n] = state["static_idx"].numpy()[:n]
        self.static_table = [{k: v.numpy() for k, v in e.items()} for e in state["static_table"]]
        self._static_stack = None
        if state["mask"] is not None:
            self.mask = np.zeros((self.capacity, state["mask"].shape[1]), np.int8)
            self.teacher = np.zeros_like(self.mask)
            self.mask[:n] = state["mask"].numpy()[:n]
            self.teacher[:n] = state["teacher"].numpy()[:n]
        self.returns[:n] = state["returns"].numpy()[:n]


def _store_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.int32) if np.dtype(dtype) == np.int64 else np.dtype(dtype)
