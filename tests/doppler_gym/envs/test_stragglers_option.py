"""The placement env's ``stragglers`` option (``doppler_gym.envs.stragglers_option``): parsed, then drawn."""

from __future__ import annotations

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.envs.stragglers_option import as_straggler_option, draw_stragglers
from doppler_gym.sim.stragglers import Straggler, StragglerModel


def test_the_option_forms():
    assert as_straggler_option(None) is None
    model = StragglerModel(device_rate=1.0)
    assert as_straggler_option(model) is model
    assert as_straggler_option({"device_rate": 2.0, "horizon": 5.0}) == StragglerModel(device_rate=2.0, horizon=5.0)
    fixed = [Straggler("device", 0, 0.0, 1.0, 0.5)]
    assert as_straggler_option(fixed) == (fixed[0],)


@pytest.mark.parametrize(("value", "needle"), [
    ({"rate": 1.0}, "unknown StragglerModel field(s) ['rate']"),
    ("device:0", "must be a sequence of Straggler"),
    ([1], "stragglers[0] must be a Straggler"),
])
def test_a_bad_option_says_what_is_wrong(value, needle):
    with pytest.raises((TypeError, ValueError)) as err:
        as_straggler_option(value)
    assert needle in str(err.value)


def test_each_episode_draws_from_the_model_and_a_fixed_tuple_stays():
    topo = dg.Topology.uniform(3)
    model = StragglerModel(device_rate=2.0)
    drawn = draw_stragglers(model, topo, np.random.default_rng(4), horizon=10.0)
    assert drawn == model.draw(topo, np.random.default_rng(4), horizon=10.0) and drawn
    fixed = (Straggler("link", (0, 1), 1.0, 2.0, 0.25),)
    assert draw_stragglers(fixed, topo, np.random.default_rng(4), horizon=10.0) is fixed
    assert draw_stragglers(None, topo, np.random.default_rng(4), horizon=10.0) == ()
