"""Which GPUs of the cluster a job gets: the GPU-choice rules the engine and the env share.

GPU ids run node by node (``Cluster.nodes`` order). Every function is deterministic (ties by the
lowest node or GPU id) and returns ``None`` when the job does not fit.

- :func:`pack`: consolidate on as few nodes as possible: the fullest node that holds the whole job
  (best fit), else the nodes with the most free GPUs first.
- :func:`spread`: one GPU per node in turn, over the nodes with the most free GPUs first (a job
  spread for bandwidth or failure isolation; it crosses more node uplinks).
- :func:`shared`: GPUs holding exactly one job that the interference model lets the new job share with.
  Only single-GPU jobs share, and only with single-GPU jobs: Gavel measured co-location at one GPU
  only (every one of its 1,083 entries for larger scale factors is zero), so sharing a multi-GPU job,
  or a pair of different sizes, would use fractions no one measured.
- :func:`of_types`: the free GPUs restricted to the nodes of some GPU types (a job's GPUs are of one
  type: the engine packs it within the type it picked).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence

import numpy as np

GPU_CHOICES = ("pack", "spread")


def free_by_node(occupants: Sequence[Sequence[int]], gpu_node: np.ndarray) -> dict[int, list[int]]:
    """``{node: [free GPU ids, ascending]}`` over the nodes with a free GPU (``occupants[g]``: jobs on GPU g)."""
    out: dict[int, list[int]] = {}
    for g, occ in enumerate(occupants):
        if not occ:
            out.setdefault(int(gpu_node[g]), []).append(g)
    return out


def pack(free: dict[int, list[int]], k: int) -> list[int] | None:
    """``k`` free GPUs on as few nodes as possible (best fit on one node when it can)."""
    if sum(len(v) for v in free.values()) < k:
        return None
    fitting = [nd for nd, v in free.items() if len(v) >= k]
    if fitting:  # the fullest node that holds the whole job
        nd = min(fitting, key=lambda x: (len(free[x]), x))
        return free[nd][:k]
    chosen: list[int] = []
    for nd in sorted(free, key=lambda x: (-len(free[x]), x)):
        chosen += free[nd][: k - len(chosen)]
        if len(chosen) == k:
            break
    return chosen


def spread(free: dict[int, list[int]], k: int) -> list[int] | None:
    """``k`` free GPUs taken one per node in turn (nodes with the most free GPUs first)."""
    if sum(len(v) for v in free.values()) < k:
        return None
    nodes = sorted(free, key=lambda x: (-len(free[x]), x))
    chosen: list[int] = []
    depth = 0
    while len(chosen) < k:
        for nd in nodes:
            if depth < len(free[nd]):
                chosen.append(free[nd][depth])
                if len(chosen) == k:
                    break
        depth += 1
    return sorted(chosen)


def choose(rule: str, free: dict[int, list[int]], k: int) -> list[int] | None:
    """:func:`pack` or :func:`spread` by name."""
    if rule == "pack":
        return pack(free, k)
    if rule == "spread":
        return spread(free, k)
    raise ValueError(f"unknown GPU choice {rule!r}; valid: {', '.join(GPU_CHOICES)}")


def of_types(free: dict[int, list[int]], node_type: Sequence[str], types: Container[str]) -> dict[int, list[int]]:
    """The entries of ``free`` (``{node: free GPU ids}``) on nodes whose type (``node_type[node]``) is in ``types``."""
    return {nd: v for nd, v in free.items() if node_type[nd] in types}


def shared(job_type: str, k: int, occupants: Sequence[Sequence[int]], types: Sequence[str],
           gpu_type: Sequence[str], interference: Callable,
           gpus_held: Sequence[int] | None = None, gpu_types: Container[str] | None = None,
           candidates: Iterable[int] | None = None) -> list[int] | None:
    """The GPU (lowest id) holding exactly one single-GPU job whose pair with ``job_type`` can share, as a
    one-element list; ``None`` when there is none or ``k > 1`` (only single-GPU jobs share: module docstring).

    Args:
        job_type: the new job's interference label.
        k: GPUs it needs.
        occupants: ``occupants[g]`` the jobs on GPU ``g``.
        types: ``types[j]`` job ``j``'s interference label.
        gpu_type: ``gpu_type[g]`` GPU ``g``'s type.
        interference: ``(type_a, type_b, gpu_type) -> (f_a, f_b) | None``.
        gpus_held: ``gpus_held[j]`` GPUs job ``j`` holds (``None``: every occupant counts as single-GPU).
        gpu_types: only GPUs of these types (``None``: any).
        candidates: the GPU ids to look at, ascending (``None``: every GPU); the engine passes its index of
            GPUs holding one single-GPU job instead of scanning the cluster.
    """
    if k != 1:
        return None
    ok: list[int] = []
    for g in range(len(occupants)) if candidates is None else candidates:
        occ = occupants[g]
        if len(occ) == 1 and (gpus_held is None or gpus_held[occ[0]] == 1) and \
                (gpu_types is None or gpu_type[g] in gpu_types):
            pair = interference(job_type, types[occ[0]], gpu_type[g])
            if pair is not None and pair[0] > 0 and pair[1] > 0:
                ok.append(g)
                if len(ok) == k:
                    return ok
    return None
