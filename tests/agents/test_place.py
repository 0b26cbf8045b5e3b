"""agents.place and `doppler place`: decode, policy-guided search, the JSON, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

import doppler_gym as dg
from agents.decode import decode
from agents.placer import place
from doppler_gym import baselines
from doppler_gym.baselines.local_search import default_starts
from doppler_gym.baselines.types import rank_of
from doppler_gym.cli.main import main
from tests.agents.policy_helpers import make_env
from tests.agents.test_decode import sharp_policy

pytestmark = pytest.mark.usefixtures("one_thread")


def resimulate(graph: dg.DataflowGraph, topology: object, assignment, order) -> float:
    """The makespan of a placement under the graph's default config on ``topology``, from scratch."""
    topo = dg.instances.resolve_topology(topology)
    config = dg.instances.default_config(graph, topo)
    prio = rank_of(np.asarray(order)) if config.queue_order == "priority" else None
    return dg.simulate(graph, np.asarray(assignment), topo, priorities=prio, config=config).makespan


@pytest.fixture(scope="module")
def graph():
    return dg.workloads.make("random", n_ops=40, levels=8, seed=3)


@pytest.fixture(scope="module")
def policy(graph):
    return sharp_policy(make_env(graph=graph, topology=3), seed=2, plc_affinity=True)


def test_greedy_place_is_the_direct_decode_and_resimulates_exactly(graph, policy):
    r = place(graph, devices=3, policy=policy, heuristics=False)  # the decode alone
    dec = decode(policy, graph, 3)
    np.testing.assert_array_equal(r.assignment, dec.assignments[0])
    np.testing.assert_array_equal(r.order, dec.orders[0])
    assert r.method == r.chosen == "greedy" and r.policy == "object" and r.n_devices == 3
    assert r.candidates == {"greedy": r.makespan}
    assert r.makespan == resimulate(graph, 3, r.assignment, r.order)
    assert r.baselines["critical_path"] == baselines.critical_path(graph, 3, seed=0).makespan
    assert r.baselines["heft"] == baselines.heft(graph, 3).makespan


def test_guided_search_is_seeded_and_never_worse_than_its_starts(graph, policy):
    kw = dict(topology="p100x4", policy=policy, search_seconds=float("inf"), max_evals=1500, seed=4, samples=5)
    a, b = place(graph, **kw), place(graph, **kw)
    np.testing.assert_array_equal(a.assignment, b.assignment)
    assert a.makespan == b.makespan and a.method == "search"
    topo = dg.Topology.preset("p100x4")
    bound = dg.makespan_lower_bound(graph, topo, dg.SimConfig(cost_model="roofline"))  # a GPU preset's default
    assert a.info["evals"] == 1500 or (a.info["stopped"] == "lower_bound" and a.makespan == pytest.approx(bound))
    starts = [a.info["greedy_makespan"], a.info["best_decode_makespan"], *a.info["heuristic_starts"].values()]
    assert a.makespan <= min(starts)
    assert set(a.info["heuristic_starts"]) == {"critical_path", "heft", "round_robin"}
    assert a.info["heuristic_starts"]["heft"] == baselines.heft(graph, topo).makespan
    assert a.makespan == resimulate(graph, topo, a.assignment, a.order)
    best_heuristic = min(a.info["heuristic_starts"].values())
    assert a.info["raced"] == (a.info["best_decode_makespan"] <= 1.1 * best_heuristic)
    if a.info["raced"]:  # a probe from the best heuristic and one from the best decode
        probes = a.info["probes"]
        assert [p["start_makespan"] for p in probes] == [best_heuristic, a.info["best_decode_makespan"]]
        assert probes[1]["start"] in ("greedy", "sample") and sum(p["evals"] for p in probes) < 1500
        assert a.makespan <= min(p["makespan"] for p in probes)
    else:  # the policy is no guide: plain local_search from the best heuristic, same seed and evaluations
        plain = baselines.local_search(graph, topo, seed=4, max_evals=1500, seconds=None)
        np.testing.assert_array_equal(a.assignment, plain.assignment)
        assert a.makespan == plain.makespan


def test_a_decode_near_the_heuristics_races_them():
    """The shipped policy decodes within 10% of HEFT here: a probe from the best heuristic and one from
    the best decode (a tenth of the evaluations each), then the search from the better probe."""
    graph = dg.workloads.make("random", n_ops=120, levels=12, seed=5)
    kw = dict(topology="p100x4", search_seconds=float("inf"), max_evals=3000, seed=2, samples=3)
    a, b = place(graph, **kw), place(graph, **kw)
    np.testing.assert_array_equal(a.assignment, b.assignment)
    assert a.info["raced"] and a.makespan == b.makespan
    probes = a.info["probes"]
    best_heuristic = min(a.info["heuristic_starts"], key=a.info["heuristic_starts"].get)
    assert [p["start"] for p in probes] == [best_heuristic, probes[1]["start"]]
    assert probes[1]["start"] in ("greedy", "sample")
    assert probes[1]["start_makespan"] == a.info["best_decode_makespan"]
    assert [p["evals"] for p in probes] == [300, 300] and a.info["evals"] == 3000
    winner = min(probes, key=lambda p: p["makespan"])
    assert a.info["start"] == winner["start"] and a.makespan <= winner["makespan"]
    assert a.makespan == resimulate(graph, "p100x4", a.assignment, a.order)


def test_a_decode_far_worse_than_the_heuristics_does_not_race(graph):
    """A random policy (no heuristic prior) decodes over 10% worse than HEFT here: no race, and the
    search is plain local search from the best heuristic."""
    weak = sharp_policy(make_env(graph=graph, topology=3), seed=1)
    r = place(graph, devices=3, policy=weak, search_seconds=float("inf"), max_evals=600, seed=1, samples=0)
    assert r.info["best_decode_makespan"] > 1.1 * min(r.info["heuristic_starts"].values())
    assert not r.info["raced"] and "probes" not in r.info
    plain = baselines.local_search(graph, 3, seed=1, max_evals=600, seconds=None)
    np.testing.assert_array_equal(r.assignment, plain.assignment)
    assert r.makespan == plain.makespan


def test_default_samples_only_when_the_greedy_decode_beats_the_best_heuristic(graph):
    """samples=None: min(16, 40000 // n_ops) sampled decodes under an unbounded time when the greedy
    decode is at most the best heuristic's makespan, none when it is worse."""
    strong = dg.workloads.make("random", n_ops=120, levels=12, seed=5)  # the shipped policy beats HEFT here
    kw = dict(search_seconds=float("inf"), max_evals=300, seed=2, reference=False)
    r = place(strong, topology="p100x4", **kw)
    assert r.info["greedy_makespan"] <= min(r.info["heuristic_starts"].values())
    assert r.info["samples"] == min(16, 40_000 // strong.n_ops)
    weak = place(graph, devices=3, policy=sharp_policy(make_env(graph=graph, topology=3), seed=1), **kw)
    assert weak.info["greedy_makespan"] > min(weak.info["heuristic_starts"].values())
    assert weak.info["samples"] == 0 and weak.info["best_decode_makespan"] == weak.info["greedy_makespan"]
    gap = weak.info["greedy_makespan"] / min(weak.info["heuristic_starts"].values()) * (1 + 1e-9)
    looser = place(graph, devices=3, policy=sharp_policy(make_env(graph=graph, topology=3), seed=1), **kw,
                   sample_gap=gap)  # the greedy decode is just within the gap: samples again
    assert looser.info["samples"] == min(16, 40_000 // graph.n_ops)


def test_a_budget_too_short_for_the_decode_searches_without_the_policy():
    """The greedy decode would take over a quarter of a 1 ms budget: it stops after a few dozen
    steps, and the answer is the best heuristic start (no time is left to search from it)."""
    big = dg.workloads.make("random", n_ops=400, levels=20, seed=1)
    r = place(big, devices=4, search_seconds=1e-3, seed=0, reference=False, heuristics=False)
    assert r.method == "search" and r.info["decode_skipped"]["limit_seconds"] == pytest.approx(0.25e-3)
    assert r.info["decode_skipped"]["projected_seconds"] > 0.25e-3
    assert r.info["greedy_makespan"] is None and r.info["samples"] == 0 and not r.info["raced"]
    heuristics = default_starts(big, dg.Topology.uniform(4), dg.SimConfig(), 0)
    assert r.makespan == min(p.makespan for p in heuristics)
    assert r.makespan == resimulate(big, 4, r.assignment, r.order)
    unbounded = place(big, devices=4, search_seconds=float("inf"), max_evals=256, seed=0, samples=0, reference=False)
    assert "decode_skipped" not in unbounded.info and unbounded.info["greedy_makespan"] is not None
    always = place(big, devices=4, search_seconds=1e-3, seed=0, samples=0, reference=False, decode_share=float("inf"))
    assert "decode_skipped" not in always.info and always.info["greedy_makespan"] is not None


@pytest.mark.parametrize("kwargs, error, match", [
    ({"devices": 2, "topology": "p100x4"}, ValueError, "not both"),
    ({"search_seconds": -1.0}, ValueError, "search_seconds"),
    ({"seed": -3}, ValueError, "seed"),
    ({"probe_share": 0.5}, ValueError, "probe_share"),
    ({"sample_gap": 0.0}, ValueError, "sample_gap"),
    ({"decode_share": 0.0}, ValueError, "decode_share"),
    ({"decode_share": True}, ValueError, "decode_share"),
    ({"policy": 3}, TypeError, "policy must be"),
])
def test_place_argument_errors(graph, policy, kwargs, error, match):
    kwargs = {"policy": policy, **kwargs}
    with pytest.raises(error, match=match):
        place(graph, **kwargs)


# ---------------------------------------------------------------------------- the command
def test_place_command_writes_a_placement_that_resimulates_under_the_default_config(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["place", "paper/chainmm", "--devices", "3", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    for key in ("makespan", "assignment", "order", "seconds", "policy", "search_seconds", "baselines"):
        assert key in data
    g = dg.load_graph("paper/chainmm")
    assert data["policy"] == "pretrained" and data["search_seconds"] == 0.0 and data["time_unit"] == "paper"
    assert data["makespan"] == resimulate(g, 3, data["assignment"], data["order"])
    assert sorted(data["order"]) == list(range(g.n_ops))
    assert "makespan" in capsys.readouterr().out


def test_place_command_search_on_a_workload_with_params(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["place", "random", "--param", "n_ops=25", "--param", "levels=4", "--topology", "p100x4",
                 "--search-seconds", "1", "--samples", "2", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    printed = capsys.readouterr().out
    assert f"search from   {data['info']['start']}" in printed and f"{data['info']['evals']:,} evaluations" in printed
    assert ("raced" in printed) == data["info"]["raced"]
    g = dg.workloads.make("random", n_ops=25, levels=4)
    assert data["method"] == "search" and data["n_devices"] == 4
    assert data["makespan"] == resimulate(g, "p100x4", data["assignment"], data["order"])
    assert data["makespan"] <= min(data["info"]["heuristic_starts"].values())


@pytest.mark.parametrize("argv, match", [
    (["place", "no-such-graph"], "unknown graph"),
    (["place", "paper/chainmm", "--search-seconds", "-1"], "--search-seconds"),
    (["place", "paper/chainmm", "--policy", "/nonexistent/ckpt.pt"], "does not exist"),
    (["place", "paper/chainmm", "--devices", "2", "--topology", "p100x4"], "not allowed with"),
])
def test_place_command_errors_are_one_line_with_exit_2(argv, match, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert match in err[-1] and err[-1].startswith(("doppler: error:", "usage:", "doppler place: error:"))
