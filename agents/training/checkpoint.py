"""Atomic checkpoints, loading a trained policy for any env, and the RNG states they carry."""

from __future__ import annotations

import os
import random
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from agents.training.policies import import_object, make_policy, transfer_weights

CHECKPOINT_NAME = "checkpoint.pt"
CHECKPOINT_FORMAT = "doppler-train-checkpoint"
CHECKPOINT_VERSION = 1


# ============================================================================ checkpoints
def save_checkpoint(path: str | os.PathLike, payload: dict[str, Any]) -> None:
    """``torch.save`` to a temporary file, then ``os.replace``: a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        torch.save(payload, tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """A checkpoint written by :func:`save_checkpoint` (tensors and plain Python only)."""
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        raise ValueError(f"checkpoint {str(path)!r} does not exist; give a file written by `doppler train` "
                         f"(DIR/{CHECKPOINT_NAME} or DIR/policy_<stage>.pt) or its folder")
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{str(path)!r} is not a doppler-gym training checkpoint "
                         f"(no format tag {CHECKPOINT_FORMAT!r})")
    return payload


def load_policy(
    checkpoint: str | os.PathLike | dict, env: gym.Env, device: str = "cpu", strict: bool = False,
) -> torch.nn.Module:
    """The checkpoint's policy, rebuilt for ``env``'s spaces (any graph or device count).

    Tensors whose shape differs (a policy whose weights depend on the padding sizes) stay as
    initialised, with a warning; ``strict=True`` raises instead."""
    payload = checkpoint if isinstance(checkpoint, dict) else load_checkpoint(checkpoint)
    cls = import_object(payload["policy_class"])
    policy = make_policy(cls, env.observation_space, env.action_space, 1e-4, payload.get("policy_kwargs"), device)
    loaded, skipped = transfer_weights(policy, payload["policy_state"])
    if skipped:
        msg = (f"load_policy: {len(skipped)} of {len(loaded) + len(skipped)} tensors of {cls.__name__} do not match "
               f"this env's shapes and stay untrained ({', '.join(skipped[:4])}{', ...' if len(skipped) > 4 else ''})")
        if strict:
            raise ValueError(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
    policy.set_training_mode(False)
    return policy


def rng_state() -> dict[str, Any]:
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": [name, torch.as_tensor(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(_tuplify(state["python"]))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])


def _tuplify(x: Any) -> Any:
    return tuple(_tuplify(v) for v in x) if isinstance(x, (list, tuple)) else x


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
