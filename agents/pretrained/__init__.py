"""A DopplerPolicy pre-trained on a broad mix of graphs, shipped with the package.

``load_policy()`` returns it ready to decode (any graph, any device count: no parameter depends on
them); ``WEIGHTS_PATH`` is the file, a ``doppler train`` checkpoint (policy weights in float16, no
optimizer state), so ``doppler train GRAPH --init WEIGHTS_PATH`` fine-tunes it and ``doppler eval
--policy WEIGHTS_PATH`` decodes with it. ``INFO_PATH`` (``pretrained.json``, shown in
``pretrained.md``) records how it was trained: the command, seed, commit, the training families and
the held-out ones.

Usage::

    import gymnasium as gym
    from agents.pretrained import load_policy
    env = gym.make("Doppler-Sim-v0", graph="paper/llama-layer", topology=4)
    policy = load_policy(env)                       # DopplerPolicy on env's spaces, eval mode, CPU
    logits = policy.action_logits(env.reset(seed=0)[0])
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from gymnasium import spaces

WEIGHTS_PATH = Path(__file__).with_name("doppler_policy.pt")
INFO_PATH = Path(__file__).with_name("pretrained.json")
DEFAULT_PADDING = {"max_ops": 64, "max_edges": 128, "max_devices": 8}  # spaces when no env is given
_SHARED_PREFIXES = ("pi_features_extractor.", "vf_features_extractor.")  # SB3 aliases of features_extractor.


def info() -> dict[str, Any]:
    """The training record next to the weights (``pretrained.json``)."""
    return json.loads(INFO_PATH.read_text())


def load_payload(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The weights file (a ``doppler train`` checkpoint), loaded with ``torch.load(weights_only=True)``.

    Raises:
        ValueError: the file is missing, unreadable, or no ``doppler train`` checkpoint with a policy."""
    from agents.training.checkpoint import POLICY_KEYS, load_checkpoint

    return load_checkpoint(WEIGHTS_PATH if path is None else path, POLICY_KEYS)


def default_spaces(max_ops: int = 64, max_edges: int = 128,
                   max_devices: int = 8) -> tuple[spaces.Dict, spaces.Discrete]:
    """``Doppler-Sim-v0``'s observation and action spaces for these padding sizes."""
    from doppler_gym.envs.observation import ObservationBuilder

    obs = ObservationBuilder(max_ops, max_edges, max_devices).space
    return obs, spaces.Discrete(max_ops + max_devices)


def load_policy(env: gym.Env | spaces.Dict | None = None, device: str = "cpu",
                path: str | os.PathLike | None = None) -> Any:
    """The pre-trained :class:`~agents.policy.DopplerPolicy`, float32, in eval mode, on ``device``.

    Args:
        env: the env (or its observation space) whose spaces the policy is built for; None = small
            default spaces (:data:`DEFAULT_PADDING`; ``policy.transfer_to(env)`` moves it to any
            other env with the same weights).
        device: torch device.
        path: another weights file of the same format (default :data:`WEIGHTS_PATH`); whatever class it
            records, a DopplerPolicy is built (nothing the file names is imported).

    Raises:
        ValueError: the file is unreadable or its ``policy_kwargs`` malformed.
    """
    from agents.policy import DopplerPolicy
    from agents.training.checkpoint import saved_policy_kwargs

    payload = load_payload(path)
    if env is None:
        obs_space, act_space = default_spaces(**DEFAULT_PADDING)
    elif isinstance(env, spaces.Dict):
        obs_space = env
        act_space = spaces.Discrete(env["op_features"].shape[0] + env["device_features"].shape[0])
    else:
        obs_space, act_space = env.observation_space, env.action_space
    policy = DopplerPolicy(obs_space, act_space, lambda _: 1e-4, **saved_policy_kwargs(payload))
    state = {k: v.float() if v.is_floating_point() else v for k, v in payload["policy_state"].items()}
    policy.load_state_dict(state, strict=True)
    policy.set_training_mode(False)
    return policy.to(device)


def export_checkpoint(src: str | os.PathLike, dst: str | os.PathLike = WEIGHTS_PATH,
                      meta: dict[str, Any] | None = None) -> Path:
    """Write the policy of training checkpoint ``src`` as a shippable weights file ``dst``.

    Floating tensors become float16 (about 150k parameters: ~300 KB), the features extractor's SB3
    aliases share one tensor (saved once), the optimizer and buffers are dropped; ``meta`` goes to
    the payload's ``pretrained`` entry. The result is still a ``doppler train`` checkpoint."""
    from agents.training.checkpoint import load_checkpoint, save_checkpoint

    payload = load_checkpoint(src)
    state = payload["policy_state"]
    half: dict[str, torch.Tensor] = {}
    for k, v in state.items():
        if not k.startswith(_SHARED_PREFIXES):
            half[k] = v.half() if v.is_floating_point() else v
    for k in state:
        if k.startswith(_SHARED_PREFIXES):
            base = "features_extractor." + k.split(".", 1)[1]
            half[k] = half[base]
    keep = ("format", "version", "stage", "args", "policy_class", "policy_kwargs", "progress", "instance")
    out = {k: payload[k] for k in keep if k in payload}
    out["policy_state"] = half
    out["pretrained"] = dict(meta or {})
    save_checkpoint(dst, out)
    return Path(dst)
