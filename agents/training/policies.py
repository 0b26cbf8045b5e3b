"""Policy classes by name, construction, weight transfer, and batched action scores."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

DOPPLER_POLICY = "agents.policy:DopplerPolicy"
FALLBACK_POLICY = "sb3_contrib.common.maskable.policies:MaskableMultiInputActorCriticPolicy"
NEG = -1e9  # logit of a masked action (finite: keeps 0 * log p = 0 and gradients NaN-free)


# ============================================================================ policies
def resolve_policy_class(spec: str = "auto") -> type:
    """``auto``: ``agents.policy.DopplerPolicy`` when it imports, else sb3-contrib's
    ``MaskableMultiInputActorCriticPolicy``; ``MultiInputPolicy``; or ``module:Class``."""
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
    return import_object(spec)


def policy_class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def import_object(path: str) -> Any:
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
