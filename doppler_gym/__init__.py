"""doppler-gym: learn where the ops of a dataflow graph run on a work-conserving multi-GPU runtime.

Neither torch nor pynvml is imported here; agents (``agents``) and the real backend
(``envs_real``) load them when used.
"""

from doppler_gym.graph.spec import OpSpec
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.topology.types import Topology

__version__ = "0.1.0"

__all__ = ["DataflowGraph", "OpSpec", "Topology", "__version__"]
