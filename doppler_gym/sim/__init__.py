"""Work-conserving runtime simulator: Numba kernels, configuration, traces.

Importing it writes nothing: the kernels' Numba cache is checked on the first pack of a problem
(:mod:`doppler_gym.sim.kernel_cache`).
"""

from doppler_gym.sim.api import simulate, simulate_batch
from doppler_gym.sim.bounds import makespan_lower_bound
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.critical import critical_chain
from doppler_gym.sim.stragglers import Straggler, StragglerModel
from doppler_gym.sim.trace import Trace
from doppler_gym.sim.warm import warm_up
from doppler_gym.sim.whatif_analysis import whatif

__all__ = [
    "SimConfig", "Straggler", "StragglerModel", "Trace", "critical_chain", "makespan_lower_bound", "simulate",
    "simulate_batch", "warm_up", "whatif",
]
