"""Structural (positional) op features of a DAG, computed in numpy once per graph.

Random op-identity inputs (:func:`agents.gnn.op_id_features`) tell ops apart on the graph they
were trained on, but op 17 of one graph has nothing to do with op 17 of another, so they do not
transfer. The features here describe an op's *position in its graph* and are equivariant to any
relabelling of the ops (relabel the ops, and the rows are relabelled the same way): what a policy
trained on a mix of graphs can reuse on a graph it never saw. In the spirit of positional
encodings for graph transformers (random-walk return probabilities: Dwivedi et al., ICLR 2022)
and of the level/critical-path features of list schedulers (HEFT, CPOP).

Per op ``v`` (:data:`STRUCTURE_NAMES`, all in ``[0, 1]`` or ``log1p`` of a count):

- ``depth``, ``height``: hop distance from an entry / to an exit over the longest hop path,
  divided by the graph's hop depth (0 for a graph without edges), and ``level`` =
  ``depth / (depth + height)``;
- ``t_frac``, ``b_frac``: the t-level and b-level (DOPPLER's, costs included; the observation's
  ``op_features`` columns 2 and 1) divided by the critical-path length ``L = max b-level``;
  ``slack`` = ``1 - (t + b) / L`` clipped to ``[0, 1]`` and ``on_cp`` = 1 where the op lies on a
  critical path (``slack <= 1e-6``);
- ``in_deg``, ``out_deg``: ``log1p`` of the in- and out-degree;
- ``width``: the share of the ops at the same hop depth (how parallel the op's level is);
- ``comp_share``: the op's compute time over the mean over the graph, ``log1p``;
- ``rw2``: the 2-step return probability of the simple random walk on the undirected graph,
  ``sum_{u ~ v} 1 / (deg v deg u)`` (0 for an isolated op).

Everything is linear in ops plus edges (one topological order, a few ``np.add.at``).
"""

from __future__ import annotations

import numpy as np

STRUCTURE_NAMES = ("depth", "height", "level", "t_frac", "b_frac", "slack", "on_cp", "in_deg", "out_deg",
                   "width", "comp_share", "rw2")
N_STRUCTURE = len(STRUCTURE_NAMES)
_COMP, _B_LEVEL, _T_LEVEL = 0, 1, 2  # op_features columns (see doppler_gym.envs.observation)


def hop_depth(n_ops: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """``(n_ops,) int64`` longest hop path from an entry to each op (Kahn's algorithm frontier by
    frontier: an op joins frontier ``k`` when its last predecessor left frontier ``k - 1``, so ``k``
    is its longest hop distance from an entry). O(ops + edges) plus one numpy step per frontier.

    Raises:
        ValueError: if the edges contain a cycle.
    """
    indeg = np.bincount(dst, minlength=n_ops)
    by_tail = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[by_tail], np.arange(n_ops + 1))
    heads = dst[by_tail]
    depth = np.full(n_ops, -1, np.int64)
    frontier = np.flatnonzero(indeg == 0)
    k = 0
    while frontier.size:
        depth[frontier] = k
        lo, hi = starts[frontier], starts[frontier + 1]
        counts = hi - lo
        total = int(counts.sum())
        if total == 0:
            break
        idx = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(total)
        hit = heads[idx]
        np.subtract.at(indeg, hit, 1)
        cand = np.unique(hit)
        frontier = cand[indeg[cand] == 0]
        k += 1
    if (depth < 0).any():
        raise ValueError(f"structure_features: the graph has a cycle ({int((depth < 0).sum())} ops never become "
                         "ready); give a DAG")
    return depth


def hop_depths(n_ops: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(depth, height)``: longest hop path from an entry to each op, and from each op to an exit."""
    return hop_depth(n_ops, src, dst), hop_depth(n_ops, dst, src)


def structure_features(op_features: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """``(n_ops, N_STRUCTURE) float32`` structural features of one graph (see the module docstring).

    Args:
        op_features: ``(n_ops, >=3)`` the observation's op features (compute, b-level, t-level, ...),
            real rows only.
        src, dst: ``(E,) int`` producer and consumer of each edge (a DAG on ``0..n_ops-1``).
    """
    feats = np.asarray(op_features, np.float64)
    n = feats.shape[0]
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    if src.shape != dst.shape:
        raise ValueError(f"structure_features: src {src.shape} and dst {dst.shape} must have the same shape")
    if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
        raise ValueError(f"structure_features: edge endpoints must lie in [0, {n})")
    out = np.zeros((n, N_STRUCTURE), np.float64)
    if n == 0:
        return out.astype(np.float32)
    depth, height = hop_depths(n, src, dst)
    span = max(int((depth + height).max()), 1)
    out[:, 0] = depth / span
    out[:, 1] = height / span
    out[:, 2] = np.where(depth + height > 0, depth / np.maximum(depth + height, 1), 0.0)
    b, t = feats[:, _B_LEVEL].clip(min=0.0), feats[:, _T_LEVEL].clip(min=0.0)
    length = max(float(b.max()), 1e-12)
    out[:, 3] = t / length
    out[:, 4] = b / length
    slack = np.clip(1.0 - (t + b) / length, 0.0, 1.0)
    out[:, 5] = slack
    out[:, 6] = slack <= 1e-6
    indeg = np.bincount(dst, minlength=n)
    outdeg = np.bincount(src, minlength=n)
    out[:, 7] = np.log1p(indeg)
    out[:, 8] = np.log1p(outdeg)
    out[:, 9] = np.bincount(depth, minlength=int(depth.max()) + 1)[depth] / n
    comp = feats[:, _COMP].clip(min=0.0)
    out[:, 10] = np.log1p(comp / max(float(comp.mean()), 1e-12))
    deg = (indeg + outdeg).astype(np.float64)
    if src.size:
        inv = np.zeros(n)
        np.add.at(inv, src, 1.0 / deg[dst])
        np.add.at(inv, dst, 1.0 / deg[src])
        out[:, 11] = np.where(deg > 0, inv / np.maximum(deg, 1.0), 0.0)
    return out.astype(np.float32)


def structure_from_observation(op_features: np.ndarray, edge_index: np.ndarray, n_ops: int,
                               n_edges: int) -> np.ndarray:
    """:func:`structure_features` of one padded observation, padded back to ``(N, N_STRUCTURE)``
    (zeros on padding rows)."""
    ei = np.asarray(edge_index)[:, :n_edges].astype(np.int64)
    out = np.zeros((np.asarray(op_features).shape[0], N_STRUCTURE), np.float32)
    out[:n_ops] = structure_features(np.asarray(op_features)[:n_ops], ei[0], ei[1])
    return out
