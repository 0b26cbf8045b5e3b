"""Atomic checkpoints, loading a trained policy for any env, and the RNG states they carry."""

from __future__ import annotations

import os
import random
import re
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from agents.training.policies import make_policy, registered_policy, transfer_weights
from doppler_gym.processes import pid_alive

CHECKPOINT_NAME = "checkpoint.pt"
CHECKPOINT_FORMAT = "doppler-train-checkpoint"
CHECKPOINT_VERSION = 1
POLICY_KEYS = ("policy_class", "policy_state")  # what a payload needs to rebuild its policy
RESUME_KEYS = (*POLICY_KEYS, "progress", "rng", "trainer_rng")  # what a resume needs
_TMP_PID = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.tmp$")  # save_checkpoint's temporary files


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


def load_checkpoint(path: str | os.PathLike, needs: tuple[str, ...] = ()) -> dict[str, Any]:
    """A checkpoint written by :func:`save_checkpoint` (tensors and plain Python only:
    ``torch.load(weights_only=True)``, which runs no code a file carries).

    Args:
        path: the file, or a folder meaning its ``checkpoint.pt``.
        needs: entries the caller uses (e.g. :data:`POLICY_KEYS`); a payload without one is refused.

    Raises:
        ValueError: the file is missing, unreadable as a torch file (empty, truncated, random bytes, a
            pickle carrying code), not a doppler-gym checkpoint, or lacks an entry of ``needs``; the
            message names the file and what to do.
    """
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        raise ValueError(f"checkpoint {str(path)!r} does not exist; give a file written by `doppler train` "
                         f"(DIR/{CHECKPOINT_NAME} or DIR/policy_<stage>.pt) or its folder")
    payload = _torch_load(path)
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{str(path)!r} is not a doppler-gym training checkpoint "
                         f"(no format tag {CHECKPOINT_FORMAT!r}); give a file written by `doppler train`")
    missing = [k for k in needs if k not in payload]
    if missing:
        what = f"a {payload['agent']} checkpoint" if isinstance(payload.get("agent"), str) else "incomplete"
        raise ValueError(f"checkpoint {str(path)!r} is {what}: it has no {', '.join(missing)}; give a checkpoint "
                         f"of `doppler train` (DIR/{CHECKPOINT_NAME} or DIR/policy_<stage>.pt)")
    try:
        saved_policy_kwargs(payload)
    except ValueError as exc:
        raise ValueError(f"checkpoint {str(path)!r}: {exc}; give a checkpoint written by `doppler train`") from None
    return payload


def _torch_load(path: Path) -> Any:
    """``torch.load(path, weights_only=True)`` on the CPU; a file torch cannot read gives one ValueError
    (the warnings torch emits while failing are dropped; a file that loads keeps them)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            payload = torch.load(path, map_location="cpu", weights_only=True)
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001  torch raises EOFError, RuntimeError, UnpicklingError, KeyError, ...
            raise ValueError(f"checkpoint {str(path)!r} {_unreadable(path, exc)}; give a checkpoint written by "
                             f"`doppler train` (rerun the training, or restore the file)") from None
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return payload


def _unreadable(path: Path, exc: Exception) -> str:
    """Why torch could not read ``path`` (``exc``), in words."""
    size = path.stat().st_size
    if size == 0:
        return "is empty (0 bytes)"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    blocked = next((line for line in lines if "GLOBAL" in line), None)
    if blocked is not None:  # weights_only refused a pickled object: it would have run code to build it
        return (f"holds objects other than tensors and plain data, which are never loaded (a pickle can run "
                f"code): {blocked.rstrip('.')}")
    return (f"({size:,} bytes) cannot be read ({type(exc).__name__}: {_detail(lines)}): it is truncated, corrupt "
            f"or not a torch file")


def _detail(lines: list[str], limit: int = 120) -> str:
    """The informative part of torch's message ``lines``: the unpickler's own error after the
    ``weights_only`` preamble, else the first sentence; at most ``limit`` characters."""
    after = [k + 1 for k, line in enumerate(lines) if line.endswith("WeightsUnpickler error:")]
    text = lines[after[0]] if after and after[0] < len(lines) else (lines[0] if lines else "no message")
    text = text.split(". ")[0].rstrip(".")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def remove_orphan_tmp(folder: str | os.PathLike) -> list[Path]:
    """Delete the temporary files :func:`save_checkpoint` left in ``folder`` when its process died
    mid-write (``.NAME.PID.tmp`` whose process is gone); returns the paths removed."""
    removed = []
    for tmp in Path(folder).glob(".*.tmp"):
        m = _TMP_PID.match(tmp.name)
        if m is None or pid_alive(int(m["pid"])):
            continue
        tmp.unlink(missing_ok=True)
        removed.append(tmp)
    return removed


def load_policy(
    checkpoint: str | os.PathLike | dict, env: gym.Env, device: str = "cpu", strict: bool = False,
) -> torch.nn.Module:
    """The checkpoint's policy, rebuilt for ``env``'s spaces (any graph or device count).

    The recorded class must be registered (:func:`~agents.training.policies.registered_policy`: the
    project's policies or ones registered with :func:`~agents.training.policies.register_policy`).
    Tensors whose shape differs (a policy whose weights depend on the padding sizes) stay as
    initialised, with a warning; ``strict=True`` raises instead.

    Raises:
        ValueError: an unreadable checkpoint, an unregistered policy class, or bad ``policy_kwargs``."""
    payload = checkpoint if isinstance(checkpoint, dict) else load_checkpoint(checkpoint, POLICY_KEYS)
    try:
        cls, kwargs = policy_spec(payload)
    except ValueError as exc:
        where = "" if isinstance(checkpoint, dict) else f"checkpoint {str(checkpoint)!r}: "
        raise ValueError(f"{where}{exc}") from None
    policy = make_policy(cls, env.observation_space, env.action_space, 1e-4, kwargs, device)
    loaded, skipped = transfer_weights(policy, payload["policy_state"])
    if skipped:
        msg = (f"load_policy: {len(skipped)} of {len(loaded) + len(skipped)} tensors of {cls.__name__} do not match "
               f"this env's shapes and stay untrained ({', '.join(skipped[:4])}{', ...' if len(skipped) > 4 else ''})")
        if strict:
            raise ValueError(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
    policy.set_training_mode(False)
    return policy


def policy_spec(payload: dict[str, Any]) -> tuple[type, dict[str, Any]]:
    """``(class, kwargs)`` of a checkpoint's policy: the class through the registry
    (:func:`~agents.training.policies.registered_policy`), the keyword arguments :func:`saved_policy_kwargs`.

    Raises:
        ValueError: the class is not registered, or ``policy_kwargs`` is malformed."""
    return registered_policy(payload.get("policy_class")), saved_policy_kwargs(payload)


def saved_policy_kwargs(payload: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's ``policy_kwargs`` (``{}`` when absent).

    Raises:
        ValueError: they are not a dict with string keys."""
    kwargs = payload.get("policy_kwargs") or {}
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise ValueError(f"the checkpoint's policy_kwargs must be a dict with string keys, got {kwargs!r}")
    return dict(kwargs)


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
