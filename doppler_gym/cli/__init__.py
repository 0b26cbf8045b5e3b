"""The ``doppler`` command line: ``doppler graph ...``, ``doppler simulate ...``, ``doppler demo``.

Each subcommand lives in its own module (``graph_cmd``, ``simulate_cmd``, ``demo_cmd``) with a
``register(subparsers)`` function; :mod:`doppler_gym.cli.common` resolves the shared arguments
(graph, topology, simulator settings). Entry point: :func:`doppler_gym.cli.main.main`.
"""
