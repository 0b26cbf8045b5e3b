"""The ``doppler`` command line (:func:`doppler_gym.cli.main.main`).

The core registers its own commands directly, one module each with a ``register(subparsers)``
function: ``graph`` (:mod:`~doppler_gym.cli.graph_cmd`), ``simulate`` (:mod:`~doppler_gym.cli.simulate_cmd`)
and ``collective`` (:mod:`~doppler_gym.cli.collective_cmd`); :mod:`doppler_gym.cli.common` resolves
the arguments they share (graph, topology, simulator settings) and is there for plugins to use too.

Every other command is a plugin: an entry point of the group ``doppler_gym.commands`` whose name is
the command and whose value is its ``register(subparsers)`` function, read from the installed
packages' metadata each time ``doppler`` starts. ``agents`` adds ``train``, ``eval`` and ``demo``
this way (``agents.cli``), so the core never imports the layers above it. A third-party package
adds a command the same way, in its ``pyproject.toml``::

    [project.entry-points."doppler_gym.commands"]
    mycmd = "mypackage.cli:register"

where ``register(subparsers)`` calls ``subparsers.add_parser("mycmd", ...)`` and sets
``func=run`` (``run(args) -> int``, the exit status) with ``set_defaults``. A plugin that fails to
import or register does not stop the other commands; running its command prints which plugin failed
and why.
"""
