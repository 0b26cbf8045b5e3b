"""Left-shift compaction: valid, never later, pulls a deliberately late schedule forward."""

from __future__ import annotations

import numpy as np

from doppler_gym.comm.compact import left_shift
from doppler_gym.comm.demand import make_demand
from doppler_gym.comm.prune import delivery_epochs
from doppler_gym.comm.schedule import Schedule
from doppler_gym.comm.validate import validate
from tests.doppler_gym.comm.tiny_instances import both, line3, make, net_of, pair, star


def check(topo, demand, sends):
    net = net_of(topo)
    holds = np.zeros_like(demand.wants)
    holds[np.arange(demand.n_commodities), demand.source] = True
    before = delivery_epochs(net, sends, demand.wants, holds)
    after_sends = left_shift(net, sends, holds)
    after = delivery_epochs(net, after_sends, demand.wants, holds)
    epochs = int(after.max())
    report = validate(Schedule(topology=topo, demand=demand, chunk_bytes=1.0, tau=1.0, epochs=epochs,
                               sends=after_sends, method="test"))
    assert report.ok, report.errors
    assert np.all(after <= before)
    return after_sends, epochs


def test_late_broadcast_on_a_line_moves_to_epochs_0_and_1():
    topo = line3()
    demand = make_demand("broadcast", topo)  # root 0; links: 0 = 0->1, 2 = 1->2
    sends, epochs = check(topo, demand, np.array([[0, 0, 3], [0, 2, 5]]))
    assert sends.tolist() == [[0, 0, 0], [0, 2, 1]] and epochs == 2


def test_switch_paths_move_as_one_piece():
    topo = star(3, copy=True)  # links (g -> s) are 0, 2, 4 and (s -> g) 1, 3, 5
    demand = make_demand("broadcast", topo)
    # GPU 0 -> switch in epoch 4, the switch copies on to GPUs 1 and 2 in epoch 5
    sends, epochs = check(topo, demand, np.array([[0, 0, 4], [0, 3, 5], [0, 5, 5]]))
    assert sends[:, 2].tolist() == [0, 1, 1] and epochs == 1


def test_capacity_windows_are_respected():
    topo = pair(0.5)  # one send per 2-epoch window each way
    demand = make_demand("allgather", topo, chunks=2)
    # chunk 0 of GPU 0 late at 6, chunk 1 at 2: the shifted pair must stay 2 epochs apart
    sends, epochs = check(topo, demand, np.array([[0, 0, 6], [1, 0, 2], [2, 1, 0], [3, 1, 2]]))
    assert sorted(sends[sends[:, 1] == 0, 2].tolist()) == [0, 2] and epochs == 4


def test_two_sends_of_one_chunk_into_a_switch_never_merge_into_equal_rows():
    # no-copy star whose GPU -> switch links carry 2 chunks per epoch: GPU 0 must feed the switch
    # once per receiver, and the two sends must not collapse into one row at the same epoch
    topo = make("star3-fat", 4, both([(0, 3), (1, 3), (2, 3)]), switches=(3,), copy=False,
                capacity=[2.0, 1.0, 2.0, 1.0, 2.0, 1.0])
    demand = make_demand("broadcast", topo)
    # GPU 0 -> switch in epochs 2 and 5, forwarded to GPU 1 (epoch 3) and GPU 2 (epoch 6)
    sends, epochs = check(topo, demand, np.array([[0, 0, 2], [0, 3, 3], [0, 0, 5], [0, 5, 6]]))
    rows = [tuple(r) for r in sends.tolist()]
    assert len(rows) == len(set(rows))
    assert epochs == 2  # into the switch in epochs 0 and 1
