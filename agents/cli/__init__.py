"""The ``doppler`` commands of the agents: ``train`` (:mod:`~agents.cli.train_cmd`), ``eval``
(:mod:`~agents.cli.eval_cmd`) and ``demo`` (:mod:`~agents.cli.demo_cmd`).

Each module has a ``register(subparsers)`` function, declared in ``pyproject.toml`` under the
``doppler_gym.commands`` entry-point group that :mod:`doppler_gym.cli.main` reads. The modules import
no torch: the training code loads when a command runs.
"""
