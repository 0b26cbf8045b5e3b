"""Optional dependencies of the core, imported when a call needs them.

``import doppler_gym`` needs numpy, numba and gymnasium only. A function that draws or solves with an
optional package calls :func:`require` first, so a missing package is an ``ImportError`` that names the
extra of ``pyproject.toml`` installing it (``pip install 'doppler-gym[plot]'``) instead of a bare
``ModuleNotFoundError`` from deep inside the call.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# module -> (the extra of pyproject.toml that installs it, its pip package)
EXTRAS: dict[str, tuple[str, str]] = {
    "matplotlib": ("plot", "matplotlib"),
    "highspy": ("solvers", "highspy"),
}


def require(module: str, needed_by: str) -> ModuleType:
    """The module ``module`` (one of :data:`EXTRAS`), imported.

    Args:
        module: the top-level module name (``"matplotlib"``).
        needed_by: what needs it, for the message (``"plot_gantt"``, ``"doppler cluster --plot"``).

    Raises:
        ImportError: the module is not installed; the message names the extra and the package to install.
    """
    if module not in EXTRAS:
        raise ValueError(f"require: {module!r} is not an optional dependency of doppler_gym; "
                         f"known: {', '.join(EXTRAS)} (add it to doppler_gym.extras.EXTRAS and pyproject.toml)")
    extra, package = EXTRAS[module]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{needed_by} needs {package}, which is not installed: pip install 'doppler-gym[{extra}]' "
                          f"(or pip install {package})") from exc
