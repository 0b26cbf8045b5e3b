"""The notice while a kernel compiles (doppler_gym.sim.compile_notice): said for a compilation, not for a
kernel loaded from Numba's cache; once per outermost compilation; only after its delay; only for the
package's kernels; on stderr by default."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from numba import njit
from numba.core import event

from doppler_gym.sim import compile_notice, kernel_cache
from doppler_gym.sim.compile_notice import CompileNotice, notice_text

LOGGER = logging.getLogger("tests.compile_notice")


class listening:
    """Register ``notice`` for ``numba:compile`` events inside a ``with`` block."""

    def __init__(self, notice: CompileNotice) -> None:
        self.notice = notice

    def __enter__(self) -> CompileNotice:
        event.register("numba:compile", self.notice)
        return self.notice

    def __exit__(self, *exc: object) -> None:
        event.unregister("numba:compile", self.notice)


def fresh_kernels():
    """An outer jitted function calling an inner one, new objects (never compiled) on each call."""
    @njit(cache=False)
    def inner(x):
        return x * 2

    @njit(cache=False)
    def outer(x):
        return inner(x).sum()

    return inner, outer


def test_an_outermost_compilation_is_announced_once_and_a_compiled_signature_not_again(caplog):
    _, outer = fresh_kernels()
    notice = CompileNotice(package=__name__, delay=0, logger=LOGGER)
    with caplog.at_level(logging.WARNING, logger=LOGGER.name), listening(notice):
        assert outer(np.arange(3)) == 6  # compiles outer, and inner inside it: one announcement
        assert outer(np.arange(4)) == 12  # the same signature: nothing compiles
        assert outer(np.arange(3.0)) == 6.0  # a new signature compiles again
    name = f"{__name__}.fresh_kernels.<locals>.outer"
    assert notice.announced == [name, name]
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER.name]
    assert messages == [notice_text(name, outer.stats.cache_path)] * 2
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name == LOGGER.name)


def test_other_packages_are_not_announced():
    _, outer = fresh_kernels()
    with listening(CompileNotice(package="doppler_gym.", delay=0, logger=LOGGER)) as notice:
        outer(np.arange(3))
    assert notice.announced == []


def _compile_event(status: event.EventStatus, dispatcher: object) -> event.Event:
    return event.Event(kind="numba:compile", status=status, data={"dispatcher": dispatcher, "args": (),
                                                                    "return_type": None})


def test_a_compilation_shorter_than_the_delay_is_silent_a_longer_one_is_announced():
    """Events sent by hand, so that the durations are the test's own: a compilation ending before the
    delay cancels its announcement, one running past it is announced while it runs."""
    _, outer = fresh_kernels()
    start, end = event.EventStatus.START, event.EventStatus.END
    short = CompileNotice(package=__name__, delay=0.2, logger=LOGGER)
    short.notify(_compile_event(start, outer))
    short.notify(_compile_event(end, outer))
    time.sleep(0.5)
    assert short.announced == []
    long = CompileNotice(package=__name__, delay=0.05, logger=LOGGER)
    long.notify(_compile_event(start, outer))
    long.notify(_compile_event(start, outer))  # a callee inside it
    deadline = time.monotonic() + 5.0
    while not long.announced and time.monotonic() < deadline:
        time.sleep(0.01)
    assert long.announced == [f"{__name__}.fresh_kernels.<locals>.outer"]  # before the end: while it runs
    long.notify(_compile_event(end, outer))
    long.notify(_compile_event(end, outer))
    assert long.announced == [f"{__name__}.fresh_kernels.<locals>.outer"]


def test_the_text_names_the_kernel_the_time_and_the_cache():
    text = notice_text("doppler_gym.sim.dispatch.run_packed", "/tmp/cache")
    assert "run_packed" in text and "minute" in text and "/tmp/cache" in text and "once" in text
    assert "NUMBA_CACHE_DIR" in notice_text("k", None)


@pytest.mark.parametrize(("kwargs", "match"), [({"package": ""}, "package"), ({"delay": -1}, "delay"),
                                               ({"delay": "1"}, "delay")])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CompileNotice(**kwargs)


def test_the_first_cache_check_installs_the_notice_once():
    kernel_cache.ensure_fresh_cache()
    notice = compile_notice.installed()
    assert isinstance(notice, CompileNotice) and notice.package == "doppler_gym." and notice.delay > 0
    assert compile_notice.install() is notice


CHILD = """
import json, numpy as np
from numba.core import event
from doppler_gym.sim import compile_notice
from doppler_gym.sim.dispatch import value_range
notice = compile_notice.CompileNotice(delay=0)  # value_range compiles in well under the default delay
event.register("numba:compile", notice)
value_range(np.arange(5, dtype=np.int64))
print(json.dumps(notice.announced))
"""


@pytest.mark.slow
def test_a_fresh_cache_announces_on_stderr_and_a_filled_one_loads_silently(tmp_path):
    """Two processes on one new Numba cache: the first compiles the kernel (the line on stderr, by
    Python's last-resort handler: no logging set up), the second loads it from the cache (no line)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300,
                           check=False) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    first, second = (json.loads(run.stdout.strip().splitlines()[-1]) for run in runs)
    assert first == ["doppler_gym.sim.dispatch.value_range"] and second == []
    assert "doppler-gym: Numba is compiling the simulator kernel doppler_gym.sim.dispatch.value_range" in runs[0].stderr
    assert str(tmp_path) in runs[0].stderr
    assert "doppler-gym" not in runs[1].stderr
