"""One local Ray instance for the whole test session (``ray.init(num_cpus=2)``, about 10 s to start).

Import ``ray_local`` into a test module (``from tests.doppler_gym.parallel.ray_fixture import ray_local``)
and request it; every module shares the one instance (a second import finds Ray initialised and
reuses it) and it shuts down at the end of the session. Skips, with the install command, without Ray.
"""

from __future__ import annotations

import pytest

RAY_ADDRESS = "local"  # the address the code under test is given; it finds the fixture's session


@pytest.fixture(scope="session")
def ray_local():
    """The ``ray`` module, initialised with 2 CPUs on this machine."""
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'doppler-gym[ray]'")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, logging_level="warning", log_to_driver=False)
    yield ray
    ray.shutdown()


def random_dag(rng):
    """A new random DAG of 4..8 ops on 3 levels from ``rng`` (an env's ``graph`` callable). It lives
    in this light module so that a Ray worker unpickling it imports doppler_gym only, not torch."""
    import doppler_gym as dg

    return dg.workloads.make("random", n_ops=int(rng.integers(4, 9)), levels=3, seed=int(rng.integers(2**31)))
