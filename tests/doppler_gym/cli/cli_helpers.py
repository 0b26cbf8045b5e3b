"""Helpers of the ``doppler`` command-line tests: run in-process, read the error line, PNG sizes."""

from __future__ import annotations

import struct

import pytest

from doppler_gym.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``doppler ARGV`` in-process: (exit status, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def png_size(path) -> tuple[int, int]:
    """(width, height) of a PNG file."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    return struct.unpack(">II", data[16:24])


def error_line(err: str) -> str:
    """The one ``doppler: error: ...`` line of ``err`` (and no traceback)."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one error line, got:\n{err}"
    assert lines[0].startswith("doppler: error: ")
    assert "Traceback" not in err
    return lines[0]
