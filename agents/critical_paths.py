"""Critical-path context of DOPPLER's SEL network: each op's longest path to an exit and from an entry.

For op ``v`` the **b-path** is ``v`` followed by the b-path of its successor of largest b-level (the
longest path from ``v`` to a sink, in DOPPLER's ``comp + comm`` path length) and the **t-path** is
``v`` followed by the t-path of its predecessor of largest t-level (the longest path from a source
to ``v``). Ties go to the first edge in edge order. DOPPLER's SEL adds, for every op, the sum of the
embeddings of the ops on its b-path and on its t-path; with the 0/1 membership matrices

    ``P_b[v, u] = 1`` iff ``u`` is on ``bpath(v)``,   ``P_t[v, u] = 1`` iff ``u`` is on ``tpath(v)``

those sums are ``P_b @ H`` and ``P_t @ H`` for the ``(n, h)`` op embeddings ``H``, **row v = op v**
(the authors' code stacks the rows in DFS-insertion order and then indexes them by op id, which
hands most ops another op's path. Here rows are op ids.)

Everything is computed from the observation's static arrays (the b-level and t-level columns of
``op_features`` and the edge list), in numpy, once per graph; :class:`PathIndex` keeps the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

B_LEVEL_COLUMN = 1  # column of ``op_features`` holding the b-level (see doppler_gym.envs.observation)
T_LEVEL_COLUMN = 2  # column holding the t-level


def best_neighbour(n_ops: int, src: np.ndarray, dst: np.ndarray, level: np.ndarray) -> np.ndarray:
    """For each op, the neighbour ``dst[k]`` over its edges ``k`` with ``src[k] == op`` of largest
    ``level[dst[k]]`` (first edge in edge order on ties), or -1 when the op has no such edge.

    Args:
        n_ops: number of ops.
        src: ``(E,) int`` edge tails (the op whose neighbour is looked for).
        dst: ``(E,) int`` edge heads (the candidate neighbours).
        level: ``(n_ops,) float`` the value to maximise.

    Returns:
        ``(n_ops,) int64`` the chosen neighbour, -1 for ops without an edge.
    """
    out = np.full(n_ops, -1, np.int64)
    if src.size == 0:
        return out
    edge_ids = np.arange(src.size)
    # sort by tail, then by decreasing level of the head, then by edge order; take the first per tail
    order = np.lexsort((edge_ids, -level[dst], src))
    tails = src[order]
    first = np.ones(order.size, bool)
    first[1:] = tails[1:] != tails[:-1]
    out[tails[first]] = dst[order[first]]
    return out


def follow(nxt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """COO entries ``(rows, cols)`` of the path membership matrix of the pointer forest ``nxt``:
    row ``v`` holds ``v, nxt[v], nxt[nxt[v]], ...`` until -1.

    Vectorised pointer chasing: one numpy step per position along the longest path.
    """
    n = nxt.size
    rows = [np.arange(n)]
    cols = [np.arange(n)]
    cur = nxt.copy()
    alive = np.flatnonzero(cur >= 0)
    for _ in range(n):  # a path has at most n ops; nxt comes from a DAG so chains end
        if alive.size == 0:
            break
        rows.append(alive)
        cols.append(cur[alive])
        cur_alive = nxt[cur[alive]]
        cur[alive] = cur_alive
        alive = alive[cur_alive >= 0]
    else:  # pragma: no cover - only reachable with a cyclic pointer array
        raise ValueError("follow: the successor pointers contain a cycle; the graph must be a DAG")
    return np.concatenate(rows), np.concatenate(cols)


@dataclass(frozen=True)
class PathIndex:
    """Longest-path membership of one graph, rows and columns are op ids.

    Attributes:
        n_ops: number of ops ``n``.
        b_next: ``(n,) int64`` successor on the b-path (-1 at exits).
        t_next: ``(n,) int64`` predecessor on the t-path (-1 at entries).
        b_rows, b_cols: ``(nnz_b,) int64`` COO entries of ``P_b`` (``P_b[r, c] = 1``).
        t_rows, t_cols: ``(nnz_t,) int64`` COO entries of ``P_t``.

    The COO entries are built on first access (``nnz`` is the summed path length, up to ``n`` times
    the depth: quadratic on deep graphs); :func:`pointer_sums` needs only ``b_next``/``t_next``.
    """

    n_ops: int
    b_next: np.ndarray
    t_next: np.ndarray

    @cached_property
    def _b_coo(self) -> tuple[np.ndarray, np.ndarray]:
        return follow(self.b_next)

    @cached_property
    def _t_coo(self) -> tuple[np.ndarray, np.ndarray]:
        return follow(self.t_next)

    @property
    def b_rows(self) -> np.ndarray:
        return self._b_coo[0]

    @property
    def b_cols(self) -> np.ndarray:
        return self._b_coo[1]

    @property
    def t_rows(self) -> np.ndarray:
        return self._t_coo[0]

    @property
    def t_cols(self) -> np.ndarray:
        return self._t_coo[1]

    @classmethod
    def from_arrays(
        cls, n_ops: int, src: np.ndarray, dst: np.ndarray, b_level: np.ndarray, t_level: np.ndarray
    ) -> PathIndex:
        """Paths of a graph given by its edges and its b-/t-levels.

        Args:
            n_ops: number of ops.
            src, dst: ``(E,) int`` producer and consumer of each edge (a DAG).
            b_level: ``(n_ops,) float`` b-levels (longest path to an exit, the op included).
            t_level: ``(n_ops,) float`` t-levels (longest path from an entry, the op included).
        """
        src = np.asarray(src, np.int64)
        dst = np.asarray(dst, np.int64)
        b_level = np.asarray(b_level, np.float64)
        t_level = np.asarray(t_level, np.float64)
        if src.shape != dst.shape or b_level.shape != (n_ops,) or t_level.shape != (n_ops,):
            raise ValueError(
                f"PathIndex.from_arrays: src {src.shape} and dst {dst.shape} must match and the levels "
                f"({b_level.shape}, {t_level.shape}) must have n_ops={n_ops} entries"
            )
        if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n_ops):
            raise ValueError(f"PathIndex.from_arrays: edge endpoints must lie in [0, {n_ops})")
        b_next = best_neighbour(n_ops, src, dst, b_level)
        t_next = best_neighbour(n_ops, dst, src, t_level)
        return cls(n_ops, b_next, t_next)

    @classmethod
    def from_observation(
        cls, op_features: np.ndarray, edge_index: np.ndarray, n_ops: int, n_edges: int
    ) -> PathIndex:
        """Paths from one (unbatched, padded) observation's static arrays.

        Args:
            op_features: ``(N, 5)`` the observation's ``op_features`` (b-level in column 1, t-level
                in column 2).
            edge_index: ``(2, E)`` the observation's ``edge_index`` (-1 padded).
            n_ops, n_edges: the real sizes.
        """
        feats = np.asarray(op_features, np.float64)[:n_ops]
        ei = np.asarray(edge_index)[:, :n_edges].astype(np.int64)
        return cls.from_arrays(n_ops, ei[0], ei[1], feats[:, B_LEVEL_COLUMN], feats[:, T_LEVEL_COLUMN])

    def b_path(self, v: int) -> list[int]:
        """The ops of ``bpath(v)`` from ``v`` to an exit."""
        return _chain(self.b_next, v)

    def t_path(self, v: int) -> list[int]:
        """The ops of ``tpath(v)`` from ``v`` back to an entry."""
        return _chain(self.t_next, v)

    def matrices(self, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """``(P_b, P_t)`` as sparse COO ``(n, n)`` float32 tensors (``P @ H`` gives the path sums)."""
        n = self.n_ops
        out = []
        for rows, cols in ((self.b_rows, self.b_cols), (self.t_rows, self.t_cols)):
            idx = torch.as_tensor(np.stack([rows, cols]), device=device)
            val = torch.ones(rows.size, dtype=torch.float32, device=device)
            out.append(torch.sparse_coo_tensor(idx, val, (n, n)).coalesce())
        return out[0], out[1]


def _chain(nxt: np.ndarray, v: int) -> list[int]:
    path = [int(v)]
    while nxt[path[-1]] >= 0:
        path.append(int(nxt[path[-1]]))
    return path


def path_sums(rows: torch.Tensor, cols: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """``P @ h`` for the 0/1 matrix ``P`` with COO entries ``(rows, cols)``: row ``r`` of the result is
    the sum of ``h[c]`` over its entries. Differentiable in ``h``; works on a block-diagonal ``P`` of
    several graphs (offset ids) as well.

    Shapes:
        rows, cols: ``(nnz,) int64``; h: ``(n, F)``; returns ``(n, F)``.
    """
    return torch.zeros_like(h).index_add_(0, rows, h.index_select(0, cols))


def pointer_sums(nxt: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """``P @ h`` for the path membership matrix ``P`` of the pointer forest ``nxt`` (row ``v`` sums
    ``h`` over ``v, nxt[v], nxt[nxt[v]], ...``), by pointer doubling (Wyllie's list ranking): after
    round ``r`` row ``v`` holds the sum over the first ``2**r`` ops of its path. ``O(n log depth)``
    time and ``O(n F)`` memory, never the ``n * depth`` COO entries; differentiable in ``h``; works
    on a block-diagonal forest of several graphs (offset ids) as well. Sums in another order than
    :func:`path_sums` (equal up to float rounding).

    Shapes:
        nxt: ``(n,) int64``, -1 ends a path; h: ``(n, F)``; returns ``(n, F)``.
    """
    out = h
    ptr = nxt.to(h.device)
    alive = ptr >= 0
    for _ in range(max(int(nxt.numel()), 1).bit_length() + 1):  # a path has at most n ops
        if not bool(alive.any()):
            break
        safe = ptr.clamp_min(0)
        out = out + out.index_select(0, safe) * alive.unsqueeze(-1).to(h.dtype)
        ptr = torch.where(alive, ptr.index_select(0, safe), ptr)
        alive = ptr >= 0
    else:
        if bool(alive.any()):
            raise ValueError("pointer_sums: the pointers contain a cycle; they must come from a DAG")
    return out
