"""torch.distributed mode of the real backend: one process (rank) per device, point-to-point transfers.

``RealBackend(devices="gloo:2")`` (or ``gym.make("Doppler-Real-v0", devices="gloo:2")``) runs every
placement on 2 CPU processes spawned on this host, Gloo moving the tensors; ``"nccl"`` /
``"nccl:0,1"`` runs one process per GPU with NCCL; ``"gloo:N@HOST:PORT"`` / ``"nccl:N@HOST:PORT"``
uses N ranks launched elsewhere by ``torchrun`` (any number of hosts) that connect to this
process (:mod:`.worker`). Same spaces, info keys and trace as the threaded backend.

- :mod:`.rank`: one rank's work-conserving execution (its ops, ``isend``/``irecv`` per cross-rank
  edge, overlapped with compute) and the merge of the ranks' timelines.
- :mod:`.group`: the controller: spawns or awaits the ranks, hands out jobs through a
  ``TCPStore``, collects replies, detects dead ranks, hung ranks (their heartbeat stopped) and
  timeouts, closes the group after a failure; catches a main script without a ``__main__`` guard.
- :mod:`.worker`: the rank process (``python -m envs_real.distributed.worker`` under torchrun).
- :mod:`.protocol`: the messages.

Every rank process exits when the controller closes the group (:func:`shutdown`, also at
interpreter exit), when its parent dies, or after a failed run.
"""

from __future__ import annotations

from envs_real.distributed.group import GroupError, RankGroup, get_group, shutdown

__all__ = ["GroupError", "RankGroup", "get_group", "shutdown"]
