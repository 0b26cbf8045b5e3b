"""A generated graph together with the full tensors its external operands and outputs are tiles of.

An :class:`~doppler_gym.graph.spec.OpSpec` only says that an operand is external (source ``-1``),
not which tensor it is; two ops that read the same weight tile would get different random arrays.
A :class:`Workload` keeps that binding, so a block-decomposed graph can be run on consistent inputs
and its output tiles reassembled and compared with the untiled computation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from doppler_gym.graph.ops import evaluate_graph_numpy
from doppler_gym.graph.types import DataflowGraph

Index = tuple[slice, ...]
"""A tile of a full tensor, as the index expression ``full[index]``."""


@dataclass(frozen=True, eq=False)
class Workload:
    """A graph plus the tiling of its inputs and outputs.

    Attributes:
        graph: the block-decomposed dataflow graph.
        inputs: full shape of each external input tensor, by name (e.g. ``"W1"``).
        constants: fixed values of inputs that are not random (rotary tables, attention scale).
        bindings: ``(op, operand_index) -> (tensor, index)``: that external operand is
            ``inputs[tensor][index]``.
        outputs: ``tensor -> (full_shape, ((op, index), ...))``: op ``op``'s output is
            ``tensor[index]``; the tiles cover the tensor exactly once.
        assignment: ``(n_ops,) int64`` device of each op when the workload comes with a placement
            (a pipeline's stage to device), else ``None``.
        priorities: ``(n_ops,) float64`` queue priorities (lower first) that go with ``assignment``
            (a pipeline schedule's order on each device), else ``None``.
        config: the :class:`~doppler_gym.sim.config.SimConfig` to run ``assignment`` and
            ``priorities`` with (e.g. ``queue_order="fixed"``), else ``None``. A graph resolved from a
            spec string (:func:`doppler_gym.instances.resolve_graph`) keeps its workload
            (:func:`~doppler_gym.instances.workload_of`), so the CLI and the envs run it with these
            unless the user overrides them.
    """

    graph: DataflowGraph
    inputs: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    constants: Mapping[str, np.ndarray] = field(default_factory=dict)
    bindings: Mapping[tuple[int, int], tuple[str, Index]] = field(default_factory=dict)
    outputs: Mapping[str, tuple[tuple[int, ...], tuple[tuple[int, Index], ...]]] = field(default_factory=dict)
    assignment: np.ndarray | None = None
    priorities: np.ndarray | None = None
    config: object | None = None  # a SimConfig (sim sits above workloads: not imported here)

    def random_inputs(self, seed: int = 0, dtype: type | np.dtype = np.float64) -> dict[str, np.ndarray]:
        """Full input tensors: constants as given, the rest uniform in ``[-0.5, 0.5)``, drawn in
        name order from ``np.random.default_rng(seed)``."""
        rng = np.random.default_rng(seed)
        return {
            name: np.asarray(self.constants[name], dtype=dtype)
            if name in self.constants
            else rng.uniform(-0.5, 0.5, size=shape).astype(dtype)
            for name, shape in sorted(self.inputs.items())
        }

    def externals(self, tensors: Mapping[str, np.ndarray]) -> dict[tuple[int, int], np.ndarray]:
        """``{(op, operand_index): tile}`` for :func:`evaluate_graph_numpy`, cut from full ``tensors``."""
        missing = sorted(set(self.inputs) - set(tensors))
        if missing:
            raise ValueError(f"workload {self.graph.name!r}: no array for inputs {missing}")
        return {key: tensors[name][index] for key, (name, index) in self.bindings.items()}

    def assemble(self, values: Mapping[int, np.ndarray]) -> dict[str, np.ndarray]:
        """Full output tensors from the per-op ``values`` of :func:`evaluate_graph_numpy`."""
        out = {}
        for name, (shape, tiles) in self.outputs.items():
            full = np.zeros(shape, dtype=next(iter(values.values())).dtype)
            covered = np.zeros(shape, dtype=np.int64)
            for op, index in tiles:
                full[index] = values[op]
                covered[index] += 1
            if not np.all(covered == 1):
                raise ValueError(
                    f"workload {self.graph.name!r}: output {name!r} tiles do not cover it exactly once"
                )
            out[name] = full
        return out

    def evaluate(
        self, seed: int = 0, dtype: type | np.dtype = np.float64
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Run the graph on :meth:`random_inputs`; returns ``(inputs, assembled outputs)``."""
        inputs = self.random_inputs(seed, dtype)
        values = evaluate_graph_numpy(self.graph, seed=seed, dtype=dtype, externals=self.externals(inputs))
        return inputs, self.assemble(values)
