"""Work-conserving runtime simulator: Numba kernels, configuration, traces."""

from doppler_gym.sim.api import simulate, simulate_batch
from doppler_gym.sim.config import SimConfig
from doppler_gym.sim.trace import Trace

__all__ = ["SimConfig", "Trace", "simulate", "simulate_batch"]
