"""Epoch duration: fast/slow, multipliers, the alpha guard and errors."""

from __future__ import annotations

import pytest

from doppler_gym.comm.epochs import default_multiplier, epoch_duration
from tests.doppler_gym.comm.tiny_instances import make


def topo(alpha: float = 0.0):
    return make("two-speed", 3, [(0, 1), (1, 0), (1, 2), (2, 1)], capacity=[100.0, 100.0, 25.0, 25.0], alpha=alpha)


def test_fast_and_slow():
    assert epoch_duration(topo(), 50.0, "fast") == pytest.approx(0.5)  # 50 B over 100 B/s
    assert epoch_duration(topo(), 50.0, "slow") == pytest.approx(2.0)  # over 25 B/s
    assert epoch_duration(topo(), 50.0, "fast", multiplier=4) == pytest.approx(2.0)


def test_alpha_guard_coarsens_fast_and_slow_but_not_a_given_tau():
    t = topo(alpha=1000.0)  # 1000 s latency: far more than 200 epochs of 0.5 s
    assert epoch_duration(t, 50.0, "fast") == pytest.approx(1000.0 / 200)
    assert epoch_duration(t, 50.0, "fast", alpha_ratio_max=None) == pytest.approx(0.5)
    assert epoch_duration(t, 50.0, 0.25) == 0.25


def test_default_multiplier_matches_the_published_runs():
    assert default_multiplier("fast", 4 * 1024) == 4
    assert default_multiplier("fast", 1e6) == 1
    assert default_multiplier("slow", 1024) == 2
    assert default_multiplier("slow", 4096) == 1
    assert default_multiplier(1e-6, 10) == 1


@pytest.mark.parametrize(("args", "error"), [
    ((0.0, "fast"), ValueError), ((50.0, "medium"), ValueError), ((50.0, -1.0), ValueError),
    ((50.0, None), TypeError),
])
def test_errors(args, error):
    with pytest.raises(error):
        epoch_duration(topo(), *args)


def test_epoch_spellings_the_cli_passes():
    t = topo(alpha=1000.0)
    assert epoch_duration(t, 50.0, " FAST ") == epoch_duration(t, 50.0, "fast")  # guard applies alike
    assert epoch_duration(t, 50.0, "Slow") == epoch_duration(t, 50.0, "slow")
    assert epoch_duration(t, 50.0, "0.25") == 0.25  # seconds as text: kept exactly, no guard
    with pytest.raises(ValueError, match="positive seconds"):
        epoch_duration(t, 50.0, "-1")
    with pytest.raises(ValueError, match="'fast', 'slow'"):
        epoch_duration(t, 50.0, "medium")
