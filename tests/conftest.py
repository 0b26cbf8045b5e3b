"""Settings shared by the whole suite.

Hypothesis runs under a registered profile so that every property test draws the same examples on
every run and machine:

* ``"repro"`` (the default): ``derandomize=True`` (examples come from a fixed seed derived from the
  test, so a failure reproduces as it is) and ``deadline=None`` (a slow example on a loaded CI runner
  is not a failure; the tests bound their work through ``max_examples`` and instance sizes instead).
* ``"explore"``: random examples (1000 for a test that names no ``max_examples``), to hunt for new
  counterexamples by hand: ``HYPOTHESIS_PROFILE=explore python -m pytest tests/...``.

A test's own ``@settings(...)`` overrides only the fields it names; the rest come from the loaded
profile, so the profile must be loaded here, before any test module is imported.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("repro", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", derandomize=False, deadline=None, max_examples=1000, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repro"))
