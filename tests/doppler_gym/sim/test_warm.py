"""warm_up loads the simulator's kernels before a timed run: a local search's budget then goes to
searching even in a fresh process (the first kernel call of a process loads machine code from
Numba's cache, about a second)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.sim.dispatch import run_many, run_packed

FRESH_SEARCH = """
import json, sys
from numba.core.registry import CPUDispatcher
import doppler_gym as dg

def loaded():  # compiled signatures of every simulator kernel loaded in this process
    return {f"{name}.{attr}": len(obj.signatures) for name, mod in list(sys.modules.items())
            if name.startswith("doppler_gym.sim.") for attr, obj in vars(mod).items()
            if isinstance(obj, CPUDispatcher)}

search_module = sys.modules["doppler_gym.baselines.local_search"]
warm_up, after_warm_up = search_module.warm_up, {}

def recording_warm_up(*args, **kwargs):
    out = warm_up(*args, **kwargs)
    after_warm_up.update(loaded())
    return out

search_module.warm_up = recording_warm_up
g = dg.instances.resolve_graph("random:n_ops=200,levels=20,seed=1")
p = dg.baselines.local_search(g, 4, seed=0, seconds=0.5)
in_budget = {k: n for k, n in loaded().items() if n != after_warm_up.get(k, 0)}
print(json.dumps({"evals": p.info["evals"], "stopped": p.info["stopped"], "warmed": bool(after_warm_up),
                  "loaded_in_budget": in_budget}))
"""


def test_a_fresh_process_searches_within_its_first_budget():
    """The kernels a search runs are all loaded by warm_up, before its clock starts: none loads inside
    the budget (counted by Numba's compiled signatures, not by the clock)."""
    import json

    proc = subprocess.run([sys.executable, "-c", FRESH_SEARCH], check=False, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["warmed"], out  # the search called warm_up
    assert out["stopped"] == "seconds" and out["evals"] >= 256, out  # at least one batch was scored
    assert out["loaded_in_budget"] == {}, out  # no kernel loaded (or compiled) inside the budget


@pytest.mark.parametrize("config", [
    dg.SimConfig(), dg.SimConfig.reference(), dg.SimConfig(queue_order="priority"),
    dg.SimConfig(queue_order="fixed"), dg.SimConfig(memory="enforce"), dg.SimConfig(compute_jitter=0.2),
])
def test_warm_up_runs_under_every_queue_order_and_loads_both_assignment_types(config):
    g = dg.instances.resolve_graph("random:n_ops=40,levels=8,seed=2")
    seconds = dg.sim.warm_up(g, dg.Topology.uniform(3), config)
    assert seconds >= 0.0
    widths = {sig[3].dtype.bitwidth for sig in run_packed.signatures}
    assert widths >= {32, 64}
    assert run_many.signatures


def test_warm_up_of_an_empty_graph_simulates_nothing():
    empty = dg.DataflowGraph(src=[], dst=[], flops=[], out_bytes=[])
    assert dg.sim.warm_up(empty, 2, dg.SimConfig()) >= 0.0
    with pytest.raises(ValueError):  # what warm_up would hit if it simulated: no assignment fits 0 ops
        dg.simulate(empty, np.zeros(1, np.int64), 2)
