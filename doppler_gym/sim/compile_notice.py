"""One line on stderr while Numba compiles a simulator kernel, instead of a silent minute.

On a fresh install (or after an update of Numba or of a kernel file) the first call of a kernel
compiles it: about a minute per kernel on one CPU core. Numba broadcasts a ``"numba:compile"``
event around each compilation, and only then: a kernel loaded from its cache sends none
(``numba.core.event``). :class:`CompileNotice` listens to them and, when the outermost compilation
of a kernel of this package is still running after ``delay`` seconds, logs one line naming the
kernel, the time to expect and where Numba caches the result, so that later processes load it in
about a second. Short compilations (a helper of a few lines) stay silent.

The line goes to the ``doppler_gym.compile`` logger at ``WARNING``: with no logging set up,
Python's last-resort handler writes the bare message to stderr; an application that configures
logging formats or silences it (``logging.getLogger("doppler_gym.compile").setLevel(logging.ERROR)``);
pytest captures it apart from the test's stderr.

:func:`install` registers the package's listener once per process;
:func:`~doppler_gym.sim.kernel_cache.ensure_fresh_cache` calls it before the first kernel runs.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from numba.core import event

LOGGER = logging.getLogger("doppler_gym.compile")
PACKAGE = "doppler_gym."  # kernels of modules under this prefix are announced
DELAY = 1.0  # a compilation still running after this long is announced [s]
EXPECTED = "about a minute per kernel on one CPU core"  # measured: docs/results or the report of issue 33

_lock = threading.Lock()
_installed: CompileNotice | None = None


def notice_text(kernel: str, cache_dir: str | None) -> str:
    """The announcement of ``kernel`` (its qualified name), compiled into ``cache_dir`` (``None``: not cached)."""
    where = (f"once: later runs load it from Numba's cache in {cache_dir} (NUMBA_CACHE_DIR moves it)" if cache_dir
             else "in every process: Numba cannot cache it here (set NUMBA_CACHE_DIR to a writable folder)")
    return (f"doppler-gym: Numba is compiling the simulator kernel {kernel} ({EXPECTED}; the first run after "
            f"installing or updating), {where}")


class CompileNotice(event.Listener):
    """A ``numba:compile`` listener that announces the long compilations of one package's kernels.

    Args:
        package: module-name prefix of the kernels to announce (``"doppler_gym."``).
        delay: seconds an outermost compilation must run before it is announced; ``0``: at its start.
        logger: where the line goes (``logging.getLogger("doppler_gym.compile")``).

    Attributes:
        announced: qualified names announced so far, in order (one entry per announcement).
    """

    def __init__(self, package: str = PACKAGE, delay: float = DELAY, logger: logging.Logger = LOGGER) -> None:
        if not isinstance(package, str) or not package:
            raise ValueError(f"CompileNotice: package must be a module-name prefix, got {package!r}")
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not delay >= 0:
            raise ValueError(f"CompileNotice: delay must be seconds >= 0, got {delay!r}")
        self.package = package
        self.delay = float(delay)
        self.logger = logger
        self.announced: list[str] = []
        self._state = threading.local()  # per thread: nesting depth and the pending timer

    def on_start(self, ev: Any) -> None:
        depth = getattr(self._state, "depth", 0)
        self._state.depth = depth + 1
        if depth:  # a callee compiled inside the outermost compilation: that one speaks for it
            return
        dispatcher = ev.data["dispatcher"]
        py_func = getattr(dispatcher, "py_func", None)
        module = getattr(py_func, "__module__", "") or ""
        if not module.startswith(self.package):
            return
        kernel = f"{module}.{py_func.__qualname__}"
        stats = getattr(dispatcher, "stats", None)
        cache_dir = getattr(stats, "cache_path", None)
        if self.delay == 0:
            self._announce(kernel, cache_dir)
            return
        timer = threading.Timer(self.delay, self._announce, args=(kernel, cache_dir))
        timer.daemon = True
        self._state.timer = timer
        timer.start()

    def on_end(self, ev: Any) -> None:
        self._state.depth = max(0, getattr(self._state, "depth", 1) - 1)
        if self._state.depth == 0:
            timer = getattr(self._state, "timer", None)
            if timer is not None:
                timer.cancel()  # finished within the delay: nothing to say
                self._state.timer = None

    def _announce(self, kernel: str, cache_dir: str | None) -> None:
        self.announced.append(kernel)
        self.logger.warning(notice_text(kernel, cache_dir))


def install() -> CompileNotice:
    """Register the package's :class:`CompileNotice` with Numba (once per process); returns it."""
    global _installed
    with _lock:
        if _installed is None:
            _installed = CompileNotice()
            event.register("numba:compile", _installed)
        return _installed


def installed() -> CompileNotice | None:
    """The registered listener, or ``None`` before :func:`install`."""
    return _installed
