"""Epoch duration ``tau`` for the time-expanded collective models (TE-CCL ``set_epoch_duration``).

The released TE-CCL code (``teccl/solvers/base_formulation.py``) picks ``tau`` in three ways:

============  ===========================================================================
``"fast"``    ``tau = chunk_bytes / max capacity``: one chunk per epoch on the fastest link
``"slow"``    ``tau = chunk_bytes / min capacity``: one chunk per epoch on the slowest link
seconds       a given ``tau`` [s]
============  ===========================================================================

``fast``/``slow`` are multiplied by an epoch multiplier (coarser epochs: fewer of them, a smaller
model, a coarser schedule). The published experiments used 4 for ``fast`` at output buffers of at
most 4 KB and 2 for ``slow`` at most 1 KB (:func:`default_multiplier`).

Then the alpha guard for ``fast``/``slow``: when the smallest link latency is more than
``alpha_ratio_max`` (200) epochs long, ``tau`` grows to ``min alpha / 200``, since at such sizes
latency dominates the finish time and finer epochs only grow the model. (With a smallest
latency of 0.7 us, 1 KB buffers get ``tau = 0.7 us / 200 = 3.5 ns``.) ``alpha_ratio_max=None``
turns it off. A given duration is kept exactly (no multiplier, no guard): the released code applies the guard to it too,
but whoever names ``tau`` means that ``tau``.

Links with zero latency are ignored by the guard (the smallest *positive* alpha counts).

:func:`epoch_duration` is the one rule for ``tau``: the solvers (:func:`doppler_gym.comm.solve.solve`),
the baselines and the ``doppler collective`` rows all call it, so they share their epochs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: The released code's ``alpha_epoch_duration_ratio_max``.
ALPHA_RATIO_MAX = 200.0

EPOCH_KINDS = ("fast", "slow")


def default_multiplier(epoch: str | float, buffer_bytes: float) -> float:
    """The published experiments' epoch multiplier: 4 for ``"fast"`` at <= 4 KB, 2 for ``"slow"`` at <= 1 KB.

    Args:
        epoch: ``"fast"``, ``"slow"`` or a duration in seconds (then 1: a given ``tau`` is not scaled).
        buffer_bytes: the per-GPU output buffer [B].
    """
    if epoch == "fast" and buffer_bytes <= 4 * 1024:
        return 4.0
    if epoch == "slow" and buffer_bytes <= 1024:
        return 2.0
    return 1.0


def epoch_duration(topology: Any, chunk_bytes: float, epoch: str | float = "fast", multiplier: float = 1.0,
                   alpha_ratio_max: float | None = ALPHA_RATIO_MAX) -> float:
    """Epoch duration ``tau`` [s] for chunks of ``chunk_bytes`` on ``topology``.

    Args:
        topology: a ``CommTopology`` (uses ``capacity`` (n_links,) [B/s] and ``alpha`` (n_links,) [s]).
        chunk_bytes: size of one chunk [B], > 0.
        epoch: ``"fast"`` (fastest link sends one chunk per epoch), ``"slow"`` (slowest link does) or a
            positive duration in seconds (a number, or a string such as ``"1e-6"``; the names are
            read without case or surrounding blanks).
        multiplier: scales ``"fast"``/``"slow"`` (> 0); ignored for a given duration.
        alpha_ratio_max: the alpha guard for ``"fast"``/``"slow"`` (module docstring); ``None`` disables it.

    Returns:
        ``tau`` [s], > 0.
    """
    if not (isinstance(chunk_bytes, (int, float, np.integer, np.floating)) and chunk_bytes > 0
            and math.isfinite(chunk_bytes)):
        raise ValueError(f"epoch_duration: chunk_bytes must be positive and finite (bytes), got {chunk_bytes!r}")
    capacity = np.asarray(topology.capacity, dtype=np.float64)
    if capacity.size == 0:
        raise ValueError(f"epoch_duration: topology {getattr(topology, 'name', '?')!r} has no links")
    if isinstance(epoch, str):
        key = epoch.strip().lower()
        if key not in EPOCH_KINDS:
            try:
                seconds = float(key)
            except ValueError:
                raise ValueError(f"epoch_duration: epoch must be 'fast', 'slow' or a duration in seconds, "
                                 f"got {epoch!r}") from None
            return epoch_duration(topology, chunk_bytes, seconds)
        epoch = key
        if not (multiplier > 0 and math.isfinite(multiplier)):
            raise ValueError(f"epoch_duration: multiplier must be a positive number, got {multiplier!r}")
        rate = capacity.max() if epoch == "fast" else capacity.min()
        tau = float(chunk_bytes) / float(rate) * float(multiplier)
    elif isinstance(epoch, (int, float, np.integer, np.floating)) and not isinstance(epoch, bool):
        if not (epoch > 0 and math.isfinite(epoch)):
            raise ValueError(f"epoch_duration: a given epoch duration must be positive seconds, got {epoch!r}")
        tau = float(epoch)
    else:
        raise TypeError(f"epoch_duration: epoch must be 'fast', 'slow' or seconds (float), got {type(epoch).__name__}")
    if alpha_ratio_max is not None and isinstance(epoch, str):
        alpha = np.asarray(topology.alpha, dtype=np.float64)
        positive = alpha[alpha > 0]
        if positive.size and positive.min() / tau > alpha_ratio_max:
            tau = float(positive.min()) / float(alpha_ratio_max)
    return tau
