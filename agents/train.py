"""DOPPLER's three-stage training: the public names of :mod:`agents.training` (``doppler train``).

The code lives in the :mod:`agents.training` package, one module per job (see its docstring); this
module keeps the historical import path: ``from agents.train import TrainArgs, Trainer, train``.
``python -m agents.train ARGS`` runs ``doppler train ARGS``.
"""

from __future__ import annotations

from agents.training import *
from agents.training import __all__  # noqa: F401

if __name__ == "__main__":  # python -m agents.train: the CLI's `doppler train`
    import sys

    from doppler_gym.cli.main import main

    sys.exit(main(["train", *sys.argv[1:]]))
