"""Work-conserving runtime simulator: Numba kernels, configuration, traces."""

from doppler_gym.sim import kernels
from doppler_gym.sim.api import simulate, simulate_batch
from doppler_gym.sim.bounds import makespan_lower_bound
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.critical import critical_chain
from doppler_gym.sim.stragglers import Straggler, StragglerModel, whatif
from doppler_gym.sim.trace import Trace
from doppler_gym.sim.warm import warm_up

__all__ = [
    "SimConfig", "Straggler", "StragglerModel", "Trace", "critical_chain", "makespan_lower_bound", "simulate",
    "simulate_batch", "warm_up", "whatif",
]

# Once per process, before any kernel runs: drop machine code that Numba cached from an older list_kernel.py.
kernels.refresh_stale_cache()
