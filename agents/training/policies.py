"""Policy classes by name, construction, weight transfer, and batched action scores.

A checkpoint records its policy class as ``module:QualName`` (:func:`policy_class_path`); loading
maps that name through a fixed registry (:func:`registered_policy`), never importing what a file
names: the project's own classes (:data:`DOPPLER_POLICY`, :data:`FALLBACK_POLICY`) and the ones
code registers with :func:`register_policy`.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

DOPPLER_POLICY = "agents.policy:DopplerPolicy"
FALLBACK_POLICY = "sb3_contrib.common.maskable.policies:MaskableMultiInputActorCriticPolicy"
BUILTIN_POLICIES = (DOPPLER_POLICY, FALLBACK_POLICY)  # the project's policy classes a checkpoint may name
NEG = -1e9  # logit of a masked action (finite: keeps 0 * log p = 0 and gradients NaN-free)


_REGISTERED: dict[str, type] = {}  # recorded name -> class, filled by register_policy


# ============================================================================ policies
def resolve_policy_class(spec: str = "auto") -> type:
    """``auto``: ``agents.policy.DopplerPolicy`` when it imports, else sb3-contrib's
    ``MaskableMultiInputActorCriticPolicy``; ``MultiInputPolicy``; or ``module:Class``.

    ``spec`` is the caller's own choice (``TrainArgs.policy``, ``doppler train --policy``): a
    ``module:Class`` is imported and registered (:func:`register_policy`), so this process can load
    the checkpoints it writes. The class a checkpoint names goes through :func:`registered_policy`."""
    if spec == "auto":
        try:
            return import_object(DOPPLER_POLICY)
        except (ImportError, AttributeError):
            return import_object(FALLBACK_POLICY)
    if spec in ("MultiInputPolicy", "fallback"):
        return import_object(FALLBACK_POLICY)
    if spec in ("DopplerPolicy", "doppler"):
        return import_object(DOPPLER_POLICY)
    if ":" not in spec:
        raise ValueError(f"policy {spec!r}: give 'auto', 'MultiInputPolicy', 'DopplerPolicy' or 'module:Class'")
    cls = import_object(spec)
    if not isinstance(cls, type):
        raise TypeError(f"policy {spec!r} is a {type(cls).__name__}, not a class; give 'module:Class'")
    return register_policy(cls)


def register_policy(cls: type, name: str | None = None) -> type:
    """Let checkpoints that record ``cls`` load: a checkpoint naming ``name`` (default
    :func:`policy_class_path` of ``cls``, what :func:`~agents.training.save_checkpoint` payloads of the
    trainer record) builds ``cls``. Returns ``cls`` (usable as a class decorator).

    Call it in your code before loading a checkpoint of your own policy class, e.g.
    ``register_policy(MyPolicy)``; ``name`` maps another recorded name (a class that moved) to ``cls``.

    Raises:
        TypeError: ``cls`` is not a class.
        ValueError: ``name`` is already registered to another class.
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_policy: expected a policy class, got {type(cls).__name__} {cls!r}")
    key = policy_class_path(cls) if name is None else str(name)
    known = _REGISTERED.get(key)
    if known is not None and known is not cls:
        raise ValueError(f"register_policy: {key!r} is already registered to {policy_class_path(known)}; "
                         f"give another name=")
    _REGISTERED[key] = cls
    return cls


def registered_policy(name: object) -> type:
    """The policy class a checkpoint records as ``name``: one of the project's (:data:`BUILTIN_POLICIES`,
    imported by this fixed path) or one registered with :func:`register_policy`. A file never
    chooses what is imported: any other name is refused.

    Raises:
        ValueError: ``name`` is not a registered policy class (the message says how to register it).
    """
    if isinstance(name, str) and name in _REGISTERED:
        return _REGISTERED[name]
    if isinstance(name, str) and name in BUILTIN_POLICIES:
        return import_object(name)
    raise ValueError(f"the checkpoint's policy class {name!r} is not a registered policy; only "
                     f"{', '.join(BUILTIN_POLICIES)} and classes registered in code load. If it is your class, "
                     f"call agents.training.register_policy(YourPolicy) before loading it (or, for `doppler "
                     f"train --resume/--init`, give --policy module:Class)")


def policy_class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def import_object(path: str) -> Any:
    """The object at ``module:attr.attr`` (imports ``module``; for names code or the user gives,
    never for names read from a file)."""
    module, _, name = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def make_policy(
    policy_class: type, observation_space: gym.Space, action_space: gym.Space, lr: float,
    policy_kwargs: dict | None = None, device: str = "auto",
) -> torch.nn.Module:
    """A fresh policy for these spaces (its ``optimizer`` is Adam at ``lr``)."""
    from stable_baselines3.common.utils import get_device

    policy = policy_class(observation_space, action_space, lambda _: lr, **(policy_kwargs or {}))
    return policy.to(get_device(device))


def action_logits(policy: torch.nn.Module, obs: dict[str, torch.Tensor]) -> torch.Tensor:
    """``(B, max_ops + max_devices)`` unmasked action scores of ``policy`` on a batch of observations.

    ``policy.action_logits`` when the policy has it (DopplerPolicy), else the logits of SB3's
    action distribution (normalised log-probabilities: the same softmax)."""
    if hasattr(policy, "action_logits"):
        return policy.action_logits(obs)
    return policy.get_distribution(obs).distribution.logits


def masked_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``logits`` with invalid actions (``mask == 0``) set to a large negative number."""
    return logits.masked_fill(~mask.bool(), NEG)


def transfer_weights(policy: torch.nn.Module, state: dict[str, torch.Tensor]) -> tuple[list[str], list[str]]:
    """Copy the tensors of ``state`` whose name and shape match into ``policy``.

    Returns ``(loaded, skipped)`` parameter names; ``skipped`` are the policy's tensors left as
    initialised (missing from ``state`` or of another shape: e.g. an MLP's input layer on another
    graph size). A policy whose weights do not depend on the graph or device count (DopplerPolicy)
    loads everything."""
    own = policy.state_dict()
    loaded, skipped = [], []
    new_state = {}
    for name, tensor in own.items():
        src = state.get(name)
        if src is not None and tuple(src.shape) == tuple(tensor.shape):
            new_state[name] = src
            loaded.append(name)
        else:
            new_state[name] = tensor
            skipped.append(name)
    policy.load_state_dict(new_state)
    return loaded, skipped


def obs_to_tensors(obs: dict[str, np.ndarray], device: torch.device) -> dict[str, torch.Tensor]:
    """A batched observation dict (leading batch axis) as torch tensors on ``device``."""
    return {k: torch.as_tensor(v, device=device) for k, v in obs.items()}


def stack_obs(obs_list: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.stack([o[k] for o in obs_list]) for k in obs_list[0]}
