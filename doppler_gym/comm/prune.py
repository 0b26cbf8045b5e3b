"""Keep only the sends that feed a demand (TE-CCL ``dfs_remove_unnecessary_flows``), and replay deliveries.

The solvers do not penalise useless sends (doing so slows them down); this module removes them
afterwards by walking back from every met demand to the chunk's holder: a GPU is fed by its earliest
arrival of the chunk, a switch forwarding in epoch ``k`` by a send landing there in epoch ``k`` (one
per forwarded copy for a switch that cannot copy). Every kept send has a kept reason, so the result
has no duplicate receptions and no sends into dead ends.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from doppler_gym.comm.expanded import Network


def prune_sends(net: Network, sends: np.ndarray, wants: np.ndarray, holds: np.ndarray,
                pending: dict[tuple[int, int], int] | None = None) -> np.ndarray:
    """The sends that some met demand needs.

    Args:
        net: the time-expanded network the sends were planned on.
        sends: (n, 3) int (commodity, link, epoch) as solved (valid, possibly with useless sends).
        wants: (n_commodities, n_nodes) bool demands to serve.
        holds: (n_commodities, n_nodes) bool chunks held at epoch 0 (sources, earlier rounds).
        pending: ``{(commodity, node): epoch}`` chunks already in flight: usable at that node from that
            epoch (GPU: held; switch: forwarded in exactly that epoch). Used by the rounds solver.

    Returns:
        (m, 3) int32 kept sends, sorted by (epoch, link, commodity).

    Raises:
        ValueError: a wanted chunk never reaches its destination in ``sends`` (a solver bug).
    """
    sends = np.asarray(sends, dtype=np.int64).reshape(-1, 3)
    pending = pending or {}
    gpu_in: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    sw_in: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for idx, (c, l, k) in enumerate(sends):
        j = int(net.dst[l])
        land = int(k + net.lag[l])
        if net.is_switch[j]:
            sw_in[(int(c), j, land)].append(idx)
        else:
            gpu_in[(int(c), j)].append((land, idx))
    for lst in gpu_in.values():
        lst.sort()
    for lst in sw_in.values():
        lst.sort()
    keep: set[int] = set()
    used_sw: dict[tuple[int, int, int], int] = defaultdict(int)

    def feed(c: int, node: int, by: int, stack: list[int]) -> None:
        """Make ``node`` able to use chunk ``c`` at epoch ``by`` (GPU: held by then; switch: lands then)."""
        if net.is_switch[node]:
            if pending.get((c, node)) == by:
                return
            key = (c, node, by)
            cands = sw_in.get(key, [])
            if net.copy_capable[node]:
                if not cands:
                    raise ValueError(f"prune_sends: switch {node} forwards chunk {c} in epoch {by} but receives it "
                                     "then from nowhere: the solved sends are inconsistent (solver bug)")
                idx = cands[0]
            else:
                n = used_sw[key]
                if n >= len(cands):
                    raise ValueError(f"prune_sends: no-copy switch {node} forwards chunk {c} in epoch {by} more "
                                     "often than it receives it (solver bug)")
                used_sw[key] = n + 1
                idx = cands[n]
            if idx not in keep:
                keep.add(idx)
                stack.append(idx)
            return
        if holds[c, node]:
            return
        p = pending.get((c, node))
        if p is not None and p <= by:
            return
        arr = gpu_in.get((c, node))
        if not arr or arr[0][0] > by:
            raise ValueError(f"prune_sends: GPU {node} needs chunk {c} by epoch {by} but no send lands it "
                             "by then (solver bug)")
        idx = arr[0][1]
        if idx not in keep:
            keep.add(idx)
            stack.append(idx)

    big = np.iinfo(np.int64).max
    for c, d in zip(*np.nonzero(wants)):
        c, d = int(c), int(d)
        if holds[c, d]:
            continue
        stack: list[int] = []
        feed(c, d, big, stack)
        while stack:
            idx = stack.pop()
            cc, l, k = (int(v) for v in sends[idx])
            feed(cc, int(net.src[l]), k, stack)
    kept = sends[sorted(keep)] if keep else np.zeros((0, 3), dtype=np.int64)
    if len(kept):
        kept = kept[np.lexsort((kept[:, 0], kept[:, 1], kept[:, 2]))]
    return kept.astype(np.int32)


def delivery_epochs(net: Network, sends: np.ndarray, wants: np.ndarray, holds: np.ndarray,
                    pending: dict[tuple[int, int], int] | None = None) -> np.ndarray:
    """Epoch at whose start each wanted chunk is first held at its destination.

    Returns:
        (n_commodities, n_nodes) int64: the landing epoch ``t`` (the demand is met at the end of epoch
        ``t - 1``; the schedule needs ``max t`` epochs); 0 where held at the start or not wanted; -1
        where wanted and never delivered.
    """
    sends = np.asarray(sends, dtype=np.int64).reshape(-1, 3)
    wants = np.asarray(wants, dtype=bool)
    out = np.where(wants & ~holds, -1, 0).astype(np.int64)
    for (c, node), t in (pending or {}).items():
        if wants[c, node] and not net.is_switch[node] and (out[c, node] < 0 or t < out[c, node]):
            out[c, node] = t
    for c, l, k in sends:
        j = int(net.dst[l])
        if wants[c, j] and not holds[c, j]:
            land = int(k + net.lag[l])
            if out[c, j] < 0 or land < out[c, j]:
                out[c, j] = land
    return out
