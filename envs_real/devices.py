"""Which torch devices a real run uses, and how the topology's (logical) devices map onto them.

Accepted device specs (:func:`parse_devices`):

================  =======================================================================
spec              meaning
================  =======================================================================
``"auto"``        every visible CUDA GPU; without one, CPU workers (``"cpu:4"``) and a warning
``"cpu"``         CPU workers, one per logical device of the topology
``"cpu:4"``       CPU workers; 4 is the default device count when no topology is given
``"cuda"``        every visible CUDA GPU
``"cuda:0,1"``    these GPUs (indices as torch sees them, i.e. after ``CUDA_VISIBLE_DEVICES``)
a list            ``["cuda:0", "cuda:1"]``, ``[torch.device("cuda", 0), ...]`` or ``["cpu", "cpu"]``
``"gloo:2"``      torch.distributed: 2 CPU processes (ranks) spawned on this host, Gloo transfers
``"nccl"``        torch.distributed: one process per visible GPU, NCCL transfers
``"nccl:0,1"``    torch.distributed: one process per listed GPU
``"gloo:4@H:P"``  torch.distributed: 4 ranks launched elsewhere (``torchrun ... -m
                  envs_real.distributed.worker --control H:P``) that connect to this process,
                  which listens on ``H:P``; same with ``"nccl:8@H:P"``
================  =======================================================================

With a ``gloo``/``nccl`` spec (:mod:`envs_real.distributed`) logical device ``d`` is rank ``d``:
a topology must have exactly as many devices as there are ranks.

Logical device ``d`` of a topology with ``D`` devices runs on physical device ``d % k`` of the
``k`` listed. Each logical device always gets its own ready queue and its own worker threads
(CPU) or CUDA streams, so with one GPU and several logical devices, streams on that GPU stand in
for the devices: they share its SMs and memory bandwidth, so such runs show ordering and overlap
but not multi-GPU speed-ups. On the CPU path every logical device is a set of worker threads
sharing the machine's cores.

torch is imported only when a spec has to be checked against the visible hardware.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_CPU_WORKERS = 4
"""Logical CPU devices of ``"auto"`` without a GPU and of ``"cpu"`` when no topology is given
(the paper's four GPUs)."""

KINDS = ("cpu", "cuda")
DIST_BACKENDS = ("gloo", "nccl")


@dataclass(frozen=True)
class DeviceSet:
    """The physical devices of a real run.

    Attributes:
        kind: ``"cpu"`` or ``"cuda"``.
        physical: torch device strings, e.g. ``("cuda:0", "cuda:1")``; for ``"cpu"`` one
            ``"cpu"`` entry per default worker device.
        spec: the spec this set was parsed from (for messages).
        dist: ``None`` (threads / streams in this process), or the torch.distributed backend
            (``"gloo"``, ``"nccl"``): one process (rank) per device.
        control: ``"HOST:PORT"`` the controller listens on for ranks launched elsewhere
            (``torchrun``); ``None``: the backend spawns the ranks on this host.
    """

    kind: str
    physical: tuple[str, ...]
    spec: str = ""
    dist: str | None = None
    control: str | None = None

    @property
    def n_default(self) -> int:
        """Logical devices to use when no topology says otherwise."""
        return len(self.physical)

    def mapping(self, n_logical: int) -> tuple[str, ...]:
        """Physical device of each of ``n_logical`` logical devices (``d -> physical[d % k]``)."""
        if n_logical < 1:
            raise ValueError(f"devices {self.spec!r}: need at least one logical device, got {n_logical}")
        if self.dist is not None and n_logical != len(self.physical):
            raise ValueError(
                f"devices {self.spec!r}: {len(self.physical)} rank(s) but the topology has {n_logical} devices; "
                f"with torch.distributed each logical device is one rank, so use a {len(self.physical)}-device "
                f"topology or devices='{self.dist}:{n_logical}'"
            )
        if self.kind == "cpu":
            return ("cpu",) * n_logical
        k = len(self.physical)
        return tuple(self.physical[d % k] for d in range(n_logical))

    def shares_devices(self, n_logical: int) -> bool:
        """Whether several logical devices share one physical GPU (streams stand in for GPUs)."""
        return self.kind == "cuda" and len(set(self.mapping(n_logical))) < n_logical

    def describe(self, n_logical: int) -> str:
        """One line: what runs where."""
        if self.dist is not None:
            where = f"connected to {self.control}" if self.control else "spawned on this host"
            on = "CPU" if self.kind == "cpu" else "GPU"
            return f"{n_logical} {self.dist.upper()} rank(s) ({on} processes, {where})"
        if self.kind == "cpu":
            return (
                f"{n_logical} CPU worker device(s) sharing this machine's cores (timings are not GPU timings)"
            )
        phys = self.mapping(n_logical)
        uniq = sorted(set(phys), key=phys.index)
        if len(uniq) < n_logical:
            on = ", ".join(uniq)
            return f"{n_logical} logical devices as stream groups on {on} (streams stand in for GPUs)"
        return f"{n_logical} GPU(s): {', '.join(phys)}"


def parse_devices(spec: object = "auto") -> DeviceSet:
    """Parse a device spec (see the module docstring) into a :class:`DeviceSet`.

    Raises:
        ValueError: an unknown form, a CUDA spec without a visible GPU, or a GPU index that
            does not exist; the message lists the accepted forms.
        TypeError: a spec that is neither a string nor a sequence of device names.
    """
    if isinstance(spec, DeviceSet):
        return spec
    if spec is None or spec == "auto":
        n_gpu = _cuda_count()
        if n_gpu > 0:
            return DeviceSet("cuda", tuple(f"cuda:{i}" for i in range(n_gpu)), "auto")
        warnings.warn(
            f"devices='auto': no CUDA GPU is visible, using {DEFAULT_CPU_WORKERS} CPU worker devices; "
            f"CPU timings are not GPU timings (pass devices='cpu:N' to silence this)",
            RuntimeWarning,
            stacklevel=2,
        )
        return DeviceSet("cpu", ("cpu",) * DEFAULT_CPU_WORKERS, "auto")
    if isinstance(spec, str):
        return _parse_string(spec.strip())
    if isinstance(spec, Sequence) and not isinstance(spec, (bytes, bytearray)):
        return _parse_list(list(spec))
    if _is_torch_device(spec):
        return _parse_list([spec])
    raise TypeError(
        f"devices must be a string such as 'auto', 'cpu:4', 'cuda:0,1' or a list of devices, got {spec!r}"
    )


_FORMS = (
    "'auto', 'cpu', 'cpu:N', 'cuda', 'cuda:I[,J,...]', 'gloo:N', 'nccl[:I,J,...]', 'gloo:N@HOST:PORT', "
    "'nccl:N@HOST:PORT' or a list such as ['cuda:0', 'cuda:1']"
)


def _parse_string(spec: str) -> DeviceSet:
    kind, _, rest = spec.partition(":")
    kind = kind.lower()
    if kind in DIST_BACKENDS:
        return _parse_dist(kind, rest, spec)
    if kind == "cpu":
        if not rest:
            return DeviceSet("cpu", ("cpu",) * DEFAULT_CPU_WORKERS, spec)
        try:
            n = int(rest)
        except ValueError:
            raise ValueError(
                f"devices={spec!r}: 'cpu:N' needs an integer worker count N >= 1; accepted: {_FORMS}"
            ) from None
        if n < 1:
            raise ValueError(f"devices={spec!r}: the CPU worker count must be >= 1")
        return DeviceSet("cpu", ("cpu",) * n, spec)
    if kind == "cuda":
        n_gpu = _cuda_count()
        if n_gpu == 0:
            raise ValueError(
                f"devices={spec!r}: no CUDA GPU is visible (torch.cuda.is_available() is False); "
                f"use devices='cpu:N' or 'auto'"
            )
        if not rest:
            return DeviceSet("cuda", tuple(f"cuda:{i}" for i in range(n_gpu)), spec)
        try:
            idx = [int(x) for x in rest.split(",") if x.strip()]
        except ValueError:
            raise ValueError(
                f"devices={spec!r}: GPU indices must be integers, e.g. 'cuda:0,1'; accepted: {_FORMS}"
            ) from None
        return DeviceSet("cuda", tuple(_check_gpu(i, n_gpu, spec) for i in idx), spec)
    raise ValueError(f"devices={spec!r} is not understood; accepted: {_FORMS}")


def _parse_dist(backend: str, rest: str, spec: str) -> DeviceSet:
    """``gloo:N``, ``nccl[:I,J]``, ``gloo:N@HOST:PORT`` or ``nccl:N@HOST:PORT``."""
    count, at, control = rest.partition("@")
    kind = "cpu" if backend == "gloo" else "cuda"
    if at:
        host, _, port = control.rpartition(":")
        if not host or not port.isdigit() or not count.strip().isdigit() or int(count) < 1:
            raise ValueError(
                f"devices={spec!r}: ranks launched elsewhere are '{backend}:N@HOST:PORT' (N ranks, the address "
                f"this process listens on), e.g. '{backend}:2@10.0.0.1:29600'"
            )
        n = int(count)
        phys = ("cpu",) * n if kind == "cpu" else tuple(f"cuda:{i}" for i in range(n))
        return DeviceSet(kind, phys, spec, dist=backend, control=f"{host}:{int(port)}")
    if backend == "gloo":
        try:
            n = int(rest) if rest else 2
        except ValueError:
            raise ValueError(f"devices={spec!r}: 'gloo:N' needs an integer rank count N >= 1") from None
        if n < 1:
            raise ValueError(f"devices={spec!r}: the rank count must be >= 1")
        return DeviceSet("cpu", ("cpu",) * n, spec, dist="gloo")
    try:
        parsed = _parse_string("cuda" + (f":{rest}" if rest else ""))
    except ValueError as exc:
        raise ValueError(f"devices={spec!r} (NCCL ranks need GPUs): {exc}; on CPU use 'gloo:N'") from None
    return DeviceSet("cuda", parsed.physical, spec, dist="nccl")


def _parse_list(items: list) -> DeviceSet:
    if not items:
        raise ValueError(f"devices=[]: give at least one device; accepted: {_FORMS}")
    names = []
    for item in items:
        if isinstance(item, str) or _is_torch_device(item):
            names.append(str(item))
        else:
            raise TypeError(f"devices: list items must be device names or torch.device, got {item!r}")
    kinds = {n.partition(":")[0] for n in names}
    if len(kinds) != 1 or not kinds <= set(KINDS):
        raise ValueError(
            f"devices={names}: all entries must be 'cpu' or all 'cuda[:i]'; mixing is not supported"
        )
    if kinds == {"cpu"}:
        return DeviceSet("cpu", ("cpu",) * len(names), str(names))
    n_gpu = _cuda_count()
    if n_gpu == 0:
        raise ValueError(f"devices={names}: no CUDA GPU is visible; use devices='cpu:N' or 'auto'")
    phys = []
    for n in names:
        _, _, rest = n.partition(":")
        phys.append(_check_gpu(int(rest) if rest else 0, n_gpu, str(names)))
    return DeviceSet("cuda", tuple(phys), str(names))


def _check_gpu(i: int, n_gpu: int, spec: str) -> str:
    if not 0 <= i < n_gpu:
        raise ValueError(
            f"devices={spec!r}: GPU index {i} does not exist; torch sees {n_gpu} GPU(s): 0..{n_gpu - 1}"
        )
    return f"cuda:{i}"


def _cuda_count() -> int:
    import torch

    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # a broken driver reports as "no GPU" rather than crashing the parse
        return 0


def _is_torch_device(obj: object) -> bool:
    return type(obj).__name__ == "device" and type(obj).__module__ == "torch"
