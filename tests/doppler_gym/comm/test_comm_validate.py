"""The schedule validator on hand-made schedules with hand-computed epochs, and against a reference replay."""

from __future__ import annotations

import numpy as np
import pytest

from doppler_gym.comm.baselines import direct_schedule, ring_schedule
from doppler_gym.comm.demand import make_demand
from doppler_gym.comm.epochs import epoch_duration
from doppler_gym.comm.schedule import Schedule, arrival_offset, link_timing
from doppler_gym.comm.topology import CommTopology, comm_topology
from doppler_gym.comm.validate import validate
from tests.doppler_gym.comm.comm_validate_reference import reference_check

CHUNK = 1e9  # [B]; with 1e9 B/s links and tau = 1 s: one chunk per epoch


def line3(capacity: float = 1e9, alpha: float = 0.0) -> CommTopology:
    """GPUs a - b - c, both directions; links 0 a->b, 1 b->a, 2 b->c, 3 c->b."""
    return CommTopology(
        name="line3", node_names=("a", "b", "c"), is_switch=np.zeros(3, bool), copy_capable=np.ones(3, bool),
        src=np.array([0, 1, 1, 2]), dst=np.array([1, 0, 2, 1]), capacity=np.full(4, capacity),
        alpha=np.full(4, alpha),
    )


def star(copy: bool) -> CommTopology:
    """Switch s (node 0) joining GPUs a, b, c (nodes 1..3); links 0,1,2 GPU->s, links 3,4,5 s->GPU."""
    return CommTopology(
        name="star", node_names=("s", "a", "b", "c"), is_switch=np.array([True, False, False, False]),
        copy_capable=np.array([copy, True, True, True]), src=np.array([1, 2, 3, 0, 0, 0]),
        dst=np.array([0, 0, 0, 1, 2, 3]), capacity=np.full(6, 1e9), alpha=np.zeros(6),
    )


def sched(topo, demand, sends, epochs, tau=1.0):
    return Schedule(topology=topo, demand=demand, chunk_bytes=CHUNK, tau=tau, epochs=epochs,
                    sends=np.array(sends, dtype=np.int64).reshape(-1, 3), method="hand")


# allgather on the line: commodity 0 from a, 1 from b, 2 from c
GOOD_LINE = [
    (0, 0, 0), (1, 1, 0), (1, 2, 0), (2, 3, 0),  # epoch 0: a->b x0, b->a x1 and b->c x1 (copy), c->b x2
    (0, 2, 1), (2, 1, 1),  # epoch 1: b forwards x0 to c and x2 to a
]


def test_line_allgather_by_hand():
    t = line3()
    d = make_demand("allgather", t)
    rep = validate(sched(t, d, GOOD_LINE, epochs=2))
    assert rep.ok, rep.errors
    assert rep.errors == [] and rep.warnings == []
    assert rep.epochs_needed == 2
    # delivery_epoch[x, v]: v holds x from the end of that epoch; -1 for the source
    assert rep.delivery_epoch.tolist() == [[-1, 0, 1], [0, -1, 0], [1, 0, -1]]
    rep.raise_if_invalid()


def test_over_capacity():
    bad = [r for r in GOOD_LINE if r != (1, 2, 0)] + [(1, 2, 1)]  # b->c carries x0 and x1 in epoch 1
    t = line3()
    rep = validate(sched(t, make_demand("allgather", t), bad, epochs=2))
    assert not rep.ok
    assert any(e.startswith("capacity: link 2 (b -> c) carries 2 sends in epoch 1") for e in rep.errors), rep.errors
    with pytest.raises(ValueError, match="invalid schedule"):
        rep.raise_if_invalid()


def test_sending_an_unheld_chunk():
    bad = [r for r in GOOD_LINE if r != (0, 2, 1)] + [(0, 2, 0)]  # b forwards x0 before it arrives
    t = line3()
    rep = validate(sched(t, make_demand("allgather", t), bad, epochs=2))
    assert [e for e in rep.errors if e.startswith("causality")] == [
        "causality: commodity 0 on link 2 (b -> c) in epoch 0: GPU b holds it only from epoch 1; "
        "send it after it arrives"
    ]


def test_missing_and_late_delivery():
    t = line3()
    d = make_demand("allgather", t)
    missing = validate(sched(t, d, [r for r in GOOD_LINE if r != (2, 1, 1)], epochs=2))
    assert not missing.ok
    assert any("commodity 2" in e and "wanted at a" in e and "never arrives" in e for e in missing.errors)
    assert missing.delivery_epoch[2, 0] == -1
    late = validate(sched(t, d, GOOD_LINE, epochs=1))
    assert any(e.startswith("demand:") and "arrives only at the start of epoch 2" in e for e in late.errors)
    assert any(e.startswith("horizon:") for e in late.errors)


def test_extra_epochs_are_a_warning():
    t = line3()
    rep = validate(sched(t, make_demand("allgather", t), GOOD_LINE, epochs=3))
    assert rep.ok and rep.epochs_needed == 2
    assert rep.warnings == ["epochs: every demand is met after 2 epochs, the schedule claims 3"]


def test_redundant_delivery_is_a_warning():
    t = line3()
    rep = validate(sched(t, make_demand("allgather", t), GOOD_LINE + [(1, 3, 1)], epochs=2))  # x1 back to b
    assert rep.ok
    assert rep.warnings and rep.warnings[0].startswith("redundant: 1 sends")


def test_ids_and_duplicates():
    t = line3()
    d = make_demand("allgather", t)
    rep = validate(sched(t, d, GOOD_LINE + [(7, 0, 0), (0, 9, 0), (0, 0, -1)], epochs=2))
    assert sum(e.startswith("ids: send row") for e in rep.errors) == 3
    dup = validate(sched(t, d, GOOD_LINE + [(0, 0, 0)], epochs=2))
    assert any(
        e.startswith("duplicate: commodity 0 on link 0 (a -> b) in epoch 0 is listed 2 times") for e in dup.errors
    )


def test_demand_from_another_topology():
    rep = validate(sched(line3(), make_demand("allgather", "dgx1"), [], epochs=0))
    assert not rep.ok and "defined on 8 nodes" in rep.errors[0]


def test_slow_link_window_and_latency():
    # kappa = 0.5 -> beta = 1: one chunk per 2-epoch window, lands 2 epochs after it starts
    t = line3(capacity=0.5e9)
    timing = link_timing(t, 1.0, CHUNK)
    assert timing.beta.tolist() == [1] * 4 and timing.window_capacity.tolist() == [1] * 4
    d = make_demand({0: [1]}, t, chunks=2)
    ok = validate(sched(t, d, [(0, 0, 0), (1, 0, 2)], epochs=4))
    assert ok.ok, ok.errors
    assert ok.delivery_epoch[:, 1].tolist() == [1, 3]
    crowded = validate(sched(t, d, [(0, 0, 0), (1, 0, 1)], epochs=3))
    assert any(e.startswith("capacity: link 0 (a -> b) carries 2 sends in epochs 0..1") for e in crowded.errors)
    # latency 1.5 s at tau = 1 s: delta = 2 epochs on top of the transmission
    slow = line3(alpha=1.5)
    assert link_timing(slow, 1.0, CHUNK).delta.tolist() == [2] * 4
    d1 = make_demand({0: [1]}, slow)
    assert validate(sched(slow, d1, [(0, 0, 0)], epochs=3)).ok
    assert not validate(sched(slow, d1, [(0, 0, 0)], epochs=2)).ok


def test_tiny_latency_is_ignored_and_kappa_rounding_is_safe():
    t = line3(alpha=0.05)
    assert link_timing(t, 1.0, CHUNK).delta.tolist() == [0] * 4
    # kappa = 0.1 exactly in decimal, (beta + 1) * kappa = 0.9999999999999999 in floats: still 1 per window
    t2 = line3(capacity=12.5e9)
    timing = link_timing(t2, 1.0, 125e9)
    assert timing.beta.tolist() == [9] * 4 and timing.window_capacity.tolist() == [1] * 4


def test_switch_forwarding_rules():
    d = make_demand("broadcast", star(copy=True), root="a")
    # a -> s in epoch 0; s forwards in epoch 1 and b, c hold it from the start of epoch 1
    multicast = [(0, 0, 1 - 1), (0, 4, 1), (0, 5, 1)]
    rep = validate(sched(star(copy=True), d, multicast, epochs=1))
    assert rep.ok, rep.errors
    assert rep.delivery_epoch[0].tolist() == [-1, -1, 0, 0]
    # a switch without copy cannot multicast one arrival
    plain = validate(sched(star(copy=False), d, multicast, epochs=1))
    assert any(
        e.startswith("switch: switch s cannot copy: it sends commodity 0 on 2 links in epoch 1") for e in plain.errors
    )
    # ... but may forward two separate arrivals
    two = validate(sched(star(copy=False), d, [(0, 0, 0), (0, 0, 1), (0, 4, 1), (0, 5, 2)], epochs=2))
    assert two.ok, two.errors
    # switches have no buffer: forwarding one epoch after the arrival is an error
    stale = validate(sched(star(copy=True), d, [(0, 0, 0), (0, 4, 2), (0, 5, 2)], epochs=2))
    assert any("does not arrive there for that epoch" in e for e in stale.errors)


def test_switch_to_gpu_send_in_the_last_epoch():
    """A switch -> GPU hop lands in its send epoch, so it may be sent in epoch ``epochs``."""
    t = star(copy=True)
    off = arrival_offset(t, link_timing(t, 1.0, CHUNK))
    assert off.tolist() == [1, 1, 1, 0, 0, 0]
    d = make_demand({"a": ["b"]}, t)
    assert validate(sched(t, d, [(0, 0, 0), (0, 4, 1)], epochs=1)).ok


@pytest.mark.parametrize("spec", ["dgx1", "dgx2-1", "star-plain", "line"])
def test_agrees_with_reference_replay_on_mutated_schedules(spec):
    topo = {"star-plain": star(False), "line": line3(0.5e9)}.get(spec) or comm_topology(spec)
    rng = np.random.default_rng(7)
    kinds = ["allgather", "broadcast", "alltoall"]
    chunk = 1e6
    tau = epoch_duration(topo, chunk, "fast")
    bases = {}
    for kind in kinds:
        d = make_demand(kind, topo, chunks=2 if kind == "broadcast" else 1)
        bases[kind] = [ring_schedule(topo, d, chunk, tau), direct_schedule(topo, d, chunk, tau)]
    seen_bad = 0
    for trial in range(60):
        base = bases[kinds[trial % 3]][trial % 2]
        d = base.demand
        sends = base.sends.astype(np.int64).copy()
        epochs = base.epochs
        for _ in range(rng.integers(0, 3)):
            r = rng.integers(0, sends.shape[0])
            op = rng.integers(0, 5)
            if op == 0:
                sends[r, 2] = max(0, sends[r, 2] + rng.choice([-2, -1, 1]))
            elif op == 1:
                sends[r, 1] = rng.integers(0, topo.n_links)
            elif op == 2:
                sends = np.delete(sends, r, axis=0)
            elif op == 3:
                sends = np.vstack([sends, sends[r]])
            else:
                epochs = max(0, epochs + int(rng.choice([-1, 1])))
        s = Schedule(topology=topo, demand=d, chunk_bytes=chunk, tau=tau, epochs=epochs, sends=sends, method="mut")
        rep = validate(s)
        ref_kinds, ref_held = reference_check(s)
        got_kinds = {e.split(":")[0] for e in rep.errors}
        assert got_kinds == ref_kinds, (trial, rep.errors, ref_kinds)
        assert rep.ok == (not ref_kinds)
        for (x, v), h in ref_held.items():
            if v != d.source[x] and not topo.is_switch[v]:
                assert rep.delivery_epoch[x, v] == h - 1
        seen_bad += not rep.ok
    assert seen_bad > 5  # the mutations do break schedules
