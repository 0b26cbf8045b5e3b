"""The benchmarks a user runs, one module each (``python -m benchmarks.bench_sim``), sharing ``common``.

Each module's docstring gives its command and what it measures; its results page is in
``docs/results/`` (listed in ``docs/index.md``). Every benchmark takes ``--smoke``: tiny sizes,
the whole path, outputs checked; ``tests/benchmarks/test_smoke.py`` runs them all that way.
"""
