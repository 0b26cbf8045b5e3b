"""Learned placement agents: the DOPPLER dual policy (SEL + PLC heads on a GNN) and its training.

Names load lazily, so ``import agents`` is cheap; torch is imported on first use:

- ``DopplerPolicy`` (``agents.policy``): an sb3-contrib ``MaskableActorCriticPolicy`` for ``MaskablePPO``;
- ``DopplerExtractor`` (``agents.policy``): the features extractor (GNN, critical-path contexts);
- ``TrainArgs``, ``Trainer`` (``agents.training``): the three-stage training (``doppler train``);
- ``place`` (``agents.placer``): place a graph with the shipped pre-trained policy, its greedy decode
  or a policy-guided search, and by default keep a cheap heuristic's placement where it is better
  (``doppler place``);
- ``train_placeto`` (``agents.placeto``), ``train_gdp`` (``agents.gdp``): the learned baselines
  Placeto (one op at a time in topological order) and GDP (one shot, GraphSAGE + attention), each
  returning a ``LearnedResult`` (``agents.learned_result``).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "DopplerPolicy": "agents.policy",
    "DopplerExtractor": "agents.policy",
    "TrainArgs": "agents.training",
    "Trainer": "agents.training",
    "train_placeto": "agents.placeto",
    "train_gdp": "agents.gdp",
    "LearnedResult": "agents.learned_result",
    "place": "agents.placer",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'agents' has no attribute {name!r}")
