"""The device mask of the learned baselines' networks (Placeto, GDP): outputs past the instance's devices.

A network is built with ``max_devices`` outputs and may place an instance with fewer devices; the
logits of devices ``>= n_devices`` are set to :data:`NEG_LOGIT`, so a softmax gives them
probability 0 and they are never sampled nor chosen by argmax.
"""

from __future__ import annotations

import torch

NEG_LOGIT = -1e9
"""Logit of an unusable device (finite, not ``-inf``: ``0 * log p`` stays 0 in the entropy)."""


def device_mask(n_devices: int, max_devices: int, who: str) -> torch.Tensor:
    """``(max_devices,) bool``: True for the usable devices ``0 .. n_devices - 1``.

    Args:
        n_devices: the instance's device count.
        max_devices: the network's output width.
        who: the network's class name, for the error message.

    Raises:
        ValueError: the instance has more devices than the network has outputs.
    """
    if n_devices > max_devices:
        raise ValueError(f"{who}: the instance has {n_devices} devices but the network places on at most "
                         f"max_devices={max_devices}; build it with max_devices >= {n_devices}")
    return torch.arange(max_devices) < n_devices
