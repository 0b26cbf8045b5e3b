"""Operating-system process checks shared by the packages (no third-party imports)."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (this process included).

    A process owned by another user counts as alive (``os.kill(pid, 0)`` raises ``PermissionError``); outside
    POSIX the check cannot be made and every process is assumed alive, so callers that clean up after dead
    processes remove nothing there.
    """
    if pid == os.getpid() or os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
