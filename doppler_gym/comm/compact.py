"""Early delivery by left-shifting: move every send to its earliest valid epoch, keeping routes.

A feasibility solve at the minimum horizon places sends anywhere that still meets the horizon.
This pass pulls them forward, in order of their epoch, without ever breaking the schedule:

* a *unit* is a send from a GPU together with the switch sends it feeds (a switch forwards in the
  epoch a chunk lands, so a GPU -> switch -> GPU path moves as one piece; sends that share a
  switch landing are one unit);
* a unit may shift by ``d <= 0`` epochs when every GPU that sends in it already holds the chunk
  then (its own chunk, or the landing of the send that feeds it, as shifted so far), every
  capacity window of every link it uses still has room, and no send of it would coincide with an
  equal (commodity, link, epoch) send (a GPU may feed a switch the same chunk at two epochs);
* units are taken by their first epoch (ties by link and commodity), each shifted as far as it
  goes. The schedule stays valid after every move, so the result is valid, needs at most as
  many epochs, and delivers every chunk no later than before. Deterministic.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from doppler_gym.comm.expanded import Network


def left_shift(net: Network, sends: np.ndarray, holds: np.ndarray) -> np.ndarray:
    """Shift the sends of a valid, pruned schedule as early as capacity and causality allow.

    Args:
        net: link timing.
        sends: (n, 3) int (commodity, link, epoch), valid and pruned (each GPU receives each chunk
            at most once, as :func:`doppler_gym.comm.prune.prune_sends` leaves it).
        holds: (n_commodities, n_nodes) bool chunks held at epoch 0.

    Returns:
        (n, 3) int32 shifted sends, sorted by (epoch, link, commodity).
    """
    sends = np.asarray(sends, dtype=np.int64).reshape(-1, 3).copy()
    n = sends.shape[0]
    if n == 0:
        return sends.astype(np.int32)
    src = net.src[sends[:, 1]]
    dst = net.dst[sends[:, 1]]
    land = sends[:, 2] + net.lag[sends[:, 1]]
    # units: union sends landing at a switch (c, w, t) with the switch's sends (c, w, t)
    parent = list(range(n))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    at_switch: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for i in range(n):
        if net.is_switch[dst[i]]:
            at_switch[(int(sends[i, 0]), int(dst[i]), int(land[i]))].append(i)
        if net.is_switch[src[i]]:
            at_switch[(int(sends[i, 0]), int(src[i]), int(sends[i, 2]))].append(i)
    for members in at_switch.values():
        for m in members[1:]:
            parent[find(m)] = find(members[0])
    units: dict[int, list[int]] = defaultdict(list)
    for i in range(n):
        units[find(i)].append(i)
    # the send feeding each (commodity, GPU)
    feeder: dict[tuple[int, int], int] = {}
    for i in range(n):
        if not net.is_switch[dst[i]]:
            key = (int(sends[i, 0]), int(dst[i]))
            if key in feeder:
                raise ValueError("left_shift: a GPU receives a chunk twice; prune the schedule first")
            feeder[key] = i
    horizon = int(sends[:, 2].max()) + int(net.window.max()) + 2
    count = np.zeros((net.n_links, horizon), dtype=np.int64)
    np.add.at(count, (sends[:, 1], sends[:, 2]), 1)

    taken = {(int(c), int(l), int(k)) for c, l, k in sends}

    def fits(members: list[int], shift: int) -> bool:
        for i in members:
            l, e = int(sends[i, 1]), int(sends[i, 2]) + shift
            if e < 0 or (int(sends[i, 0]), l, e) in taken:  # never two equal rows (c, l, e)
                return False
            w, cap = int(net.window[l]), int(net.cap[l])
            for end in range(max(e, w - 1), e + w):
                lo = max(0, end - w + 1)
                if count[l, lo:end + 1].sum() > cap:
                    return False
        return True

    order = sorted(units.values(), key=lambda m: min((int(sends[i, 2]), int(sends[i, 1]), int(sends[i, 0]))
                                                     for i in m))
    for members in order:
        # earliest shift allowed by causality at the GPUs that send in this unit
        lo = None
        for i in members:
            g = int(src[i])
            if net.is_switch[g]:
                continue
            c = int(sends[i, 0])
            if holds[c, g]:
                ready = 0
            else:
                f = feeder[(c, g)]
                ready = int(sends[f, 2] + net.lag[sends[f, 1]])
            d = ready - int(sends[i, 2])
            lo = d if lo is None else max(lo, d)
        if lo is None or lo >= 0:
            continue
        idx = np.asarray(members)
        np.add.at(count, (sends[idx, 1], sends[idx, 2]), -1)
        for i in members:
            taken.discard((int(sends[i, 0]), int(sends[i, 1]), int(sends[i, 2])))
        chosen = 0
        for shift in range(lo, 0):
            np.add.at(count, (sends[idx, 1], sends[idx, 2] + shift), 1)
            if fits(members, shift):
                chosen = shift
                break
            np.add.at(count, (sends[idx, 1], sends[idx, 2] + shift), -1)
        if chosen == 0:
            np.add.at(count, (sends[idx, 1], sends[idx, 2]), 1)
        else:
            sends[idx, 2] += chosen
        for i in members:
            taken.add((int(sends[i, 0]), int(sends[i, 1]), int(sends[i, 2])))
    sends = sends[np.lexsort((sends[:, 0], sends[:, 1], sends[:, 2]))]
    return sends.astype(np.int32)
