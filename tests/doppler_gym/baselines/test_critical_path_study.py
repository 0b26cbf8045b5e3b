"""The critical-path heuristic (the envs' reference makespan) against a second implementation and
against published figures.

* ``authors_list_scheduler`` below re-implements DOPPLER's critical-path list scheduler from the
  description of the authors' code, independently of :mod:`doppler_gym.baselines` (no shared
  helper: its own adjacency lists, recursive b-level, ready list and earliest-start formula). Fed
  the same random tie-break draws, it must pick the same op and device at every step, so the two
  agree placement for placement; the makespans then come from the SimPy port of the authors'
  simulator (``doppler_gym/sim/simpy_reference.py``), not from our kernel.
* Published means of this heuristic over 20 tie-break seeds (in the authors' simulator) come from
  another random stream than ours, so they can only agree within the sampling noise of a 20-seed
  mean; the last test checks that they do, over 200 of our seeds.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import doppler_gym as dg
from doppler_gym.baselines.critical_path import critical_path, critical_path_schedule
from doppler_gym.sim.simpy_reference import simpy_makespan

REF = dg.SimConfig.reference()


def authors_list_scheduler(graph: dg.DataflowGraph, n_devices: int, rng: np.random.Generator,
                           time_model: str = "fixed") -> tuple[list[int], list[int]]:
    """DOPPLER's critical-path list scheduler on a paper graph (raw ``comp``/``comm`` costs).

    b-level: ``comp(v)`` for a sink, else ``comp(v) + comm(v) + max over children``. Ready list:
    the sources by id, then each op appended when its last predecessor is placed (children in
    edge order). Each step takes the ready op of highest b-level (ties: ``rng.integers(k)`` over
    the tied ops in ready-list order), then the device of least earliest start
    ``max(avail[d], max over parents (end(u) + comm(u) if dev(u) != d))`` (ties: ``rng.integers``
    over the tied devices in id order). ``time_model="fixed"``: the op starts at that earliest
    start; ``"faithful"``: at the compute already placed on the device (the authors' packed
    bookkeeping). Either way ``end = start + comp`` and ``avail[d] = end``.

    Returns:
        ``(assignment, order)`` as lists.
    """
    n = graph.n_ops
    comp = [float(x) for x in graph.flops]
    comm = [float(x) for x in graph.out_bytes]
    children: list[list[int]] = [[] for _ in range(n)]
    parents: list[list[int]] = [[] for _ in range(n)]
    for u, v in zip(graph.src.tolist(), graph.dst.tolist()):
        children[u].append(v)
        parents[v].append(u)

    @functools.cache
    def blevel(v: int) -> float:
        if not children[v]:
            return comp[v]
        return comp[v] + comm[v] + max(blevel(c) for c in children[v])

    device, end = [-1] * n, [0.0] * n
    avail, placed_compute = [0.0] * n_devices, [0.0] * n_devices
    missing = [len(p) for p in parents]
    ready = [v for v in range(n) if missing[v] == 0]
    order = []
    while ready:
        top = max(blevel(v) for v in ready)
        tied = [v for v in ready if blevel(v) == top]
        v = tied[int(rng.integers(len(tied)))]
        ready.remove(v)
        est = [max([avail[d]] + [end[u] + (comm[u] if device[u] != d else 0.0) for u in parents[v]])
               for d in range(n_devices)]
        best = [d for d in range(n_devices) if est[d] == min(est)]
        d = best[int(rng.integers(len(best)))]
        start = est[d] if time_model == "fixed" else placed_compute[d]
        device[v], end[v] = d, start + comp[v]
        avail[d] = end[v]
        placed_compute[d] += comp[v]
        order.append(v)
        for c in children[v]:
            missing[c] -= 1
            if missing[c] == 0:
                ready.append(c)
    return device, order


@pytest.fixture(scope="module")
def chainmm() -> dg.DataflowGraph:
    return dg.load_graph("paper/chainmm")


@pytest.mark.parametrize("time_model", ["fixed", "faithful"])
def test_same_placements_as_a_second_implementation(chainmm, time_model):
    topo = dg.Topology.uniform(4)
    for seed in range(20):
        assignment, order = authors_list_scheduler(chainmm, 4, np.random.default_rng(seed), time_model)
        ours, our_order, _ = critical_path_schedule(chainmm, topo, REF, rng=np.random.default_rng(seed),
                                                    time_model=time_model)
        assert ours.tolist() == assignment and our_order.tolist() == order, f"seed {seed}"


def test_chainmm_reference_figures(chainmm):
    """The heuristic's chainmm figures (4 devices, seeds 0-19), placed by the second implementation
    and timed by the SimPy port: mean 1770.098 with start = earliest start (the env's reference,
    ``critical_path(..., seed=s)``), 1725.109 with the authors' packed start times."""
    fixed = [simpy_makespan(chainmm, authors_list_scheduler(chainmm, 4, np.random.default_rng(s))[0])
             for s in range(20)]
    packed = [simpy_makespan(chainmm, authors_list_scheduler(chainmm, 4, np.random.default_rng(s), "faithful")[0])
              for s in range(20)]
    assert np.mean(fixed) == pytest.approx(1770.098, abs=1e-6)
    assert min(fixed) == pytest.approx(1500.13, abs=1e-6)
    assert np.mean(packed) == pytest.approx(1725.109, abs=1e-6)
    assert min(packed) == pytest.approx(1600.07, abs=1e-6)
    assert critical_path(chainmm, 4, seed=0).makespan == fixed[0]


@pytest.mark.parametrize(
    ("name", "n_devices", "time_model", "published"),
    [
        ("paper/chainmm", 4, "fixed", 1840.1),
        ("paper/chainmm", 4, "faithful", 1705.1),
        ("paper/chainmm", 8, "fixed", 1320.1),
        ("paper/ffnn", 4, "fixed", 84.34),
    ],
)
def test_published_20_seed_means_are_within_sampling_noise(name, n_devices, time_model, published):
    """A published 20-seed mean (another random stream) lies within 3 standard errors of a 20-seed
    mean around our 200-seed mean. chainmm's makespans are multiples of about 100 with a standard
    deviation near 130, so its 20-seed means spread by about +-60 with the seeds: our seeds 0-19
    give 1770.1 where 1840.1 was published, both draws of the same distribution. A change of the
    definition (e.g. the other start-time model: 1742 against 1779 on chainmm) moves the mean by
    more than the noise allows for some of these rows."""
    g, topo = dg.load_graph(name), dg.Topology.uniform(n_devices)
    rows = [critical_path_schedule(g, topo, REF, rng=np.random.default_rng(s), time_model=time_model)[0]
            for s in range(200)]
    makespans = dg.simulate_batch(g, np.array(rows), topology=topo, config=REF)
    standard_error = makespans.std() / np.sqrt(20)
    assert abs(published - makespans.mean()) < 3 * standard_error, (makespans.mean(), standard_error)
